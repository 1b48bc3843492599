"""Text search and saved views on the Data map, in a real browser (`cartomap dashboard` + headless Debian
chromium, Selenium; see test_browser.py).

A search typed in the page's search field selects its matches: the map rings exactly them and the selection
table lists them. The map is then set (the map after 2 recordings, 100 points drawn), saved as a view; the
page reloaded from the address the save left (``?run=ID&view=NAME``, a new session) shows the same map
settings and the same selection.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    _map_geometry,
    _page_errors,
    _visible_table_ids,
    _wait,
    browser,  # noqa: F401 - the fixture
    serve,
)
from test_browser_views import _body, _points, _ringed

from cartomap.analysis import datamap as dm

pytestmark = [
    pytest.mark.slow,  # a real browser: with -m slow (the default suite keeps its 10 minutes)
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium chromium-driver"
    ),
]

SLIDER = '[data-testid=stSlider] input[type=range][aria-label="Map after recording"]'


def _css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def _type(driver, selector: str, text: str, enter: bool = True) -> None:
    """Type ``text`` into the input found by ``selector`` (replacing what it holds), then Enter."""
    # found and shown (an expander just opened draws its fields a moment later: not yet interactable)
    field = _wait(lambda: _shown(driver, selector), what=selector)[0]
    _wait(lambda: _clicked(field), what=f"{selector} to take a click")
    field.send_keys("\ue009a")  # ctrl+a: what was there goes
    field.send_keys(text + ("\ue007" if enter else ""))


def _shown(driver, selector: str) -> list:
    """The elements of ``selector`` shown and enabled ([] while Streamlit redraws them)."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        return [f for f in _css(driver, selector) if f.is_displayed() and f.is_enabled()]
    except StaleElementReferenceException:
        return []


def _clicked(field) -> bool:
    """Click ``field``; False while the browser says it cannot be clicked yet (covered, still animating)."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
        StaleElementReferenceException,
    )

    try:
        field.click()
    except (
        ElementNotInteractableException,
        ElementClickInterceptedException,
        StaleElementReferenceException,
    ):
        return False
    return True


def _slider_value(driver) -> str | None:
    found = _css(driver, SLIDER)
    return found[0].get_property("value") if found else None


def test_search_selects_and_a_saved_view_survives_a_reload(tmp_path, browser):  # noqa: F811 - the fixture
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    run = make_run(cache, epochs=3)
    frame = dm.map_frame(run)
    query = "woman"
    hit = frame["premise"].str.lower().str.contains(query) | frame["hypothesis"].str.lower().str.contains(
        query
    )
    expected = set(frame.loc[hit.to_numpy(dtype=bool), "id"])
    assert 5 < len(expected) < 150
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(cache, tmp_path, cli=True) as url:
        browser.get(f"{url}/data_map?run={run.id}")
        _wait(lambda: len(_points(browser)) == 400, what="the map's 400 points")

        # 1. search: the matches become the selection, ringed on the map and listed under it
        _type(browser, 'input[aria-label="Search the texts"]', query.upper())
        ringed = _wait(lambda: (r := _ringed(browser, 0, "selected")) and r, what="the matches ringed")
        assert ringed == expected
        _wait(lambda: f"{len(expected)} selected · " in _body(browser), what="the selection caption")
        rows = _wait(lambda: _visible_table_ids(browser), what="the selection table's rows")
        assert set(rows) <= expected and len(rows) >= min(len(expected), 5)
        assert f"{len(expected)} examples of 400 hold “{query.upper()}”" in _body(browser)
        browser.save_screenshot(str(ARTIFACTS / "browser_search.png"))

        # a regular expression that cannot be read: one line, the selection stays
        browser.find_element(By.XPATH, "//label[.//*[contains(., 'Regular expression')]]").click()
        _type(browser, 'input[aria-label="Search the texts"]', "(unclosed")
        _wait(lambda: "not a regular expression" in _body(browser), what="the error line")
        assert _ringed(browser, 0, "selected") == expected and not _page_errors(browser)

        # 2. the map after 2 recordings, 100 of its points drawn
        _wait(lambda: _css(browser, SLIDER), what="the epoch slider")
        browser.execute_script("arguments[0].focus()", _css(browser, SLIDER)[0])
        ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()
        _wait(lambda: _slider_value(browser) == "2", what="the slider at 2")
        _type(browser, 'input[aria-label="Points drawn (at most)"]', "100")
        _wait(lambda: (g := _map_geometry(browser)) and "100 of 400" in g["title"], what="the sampled map")
        drawn = _wait(lambda: (p := _points(browser)) and len(p) == 100 and p, what="100 points")

        # 3. saved as a view (the sidebar's "Saved views")
        summary = "//details[.//summary[contains(., 'Saved views')]]/summary"
        _wait(lambda: browser.find_elements(By.XPATH, summary), what="Saved views")[0].click()
        _type(browser, 'input[aria-label="View name"]', "women, two recordings", enter=False)
        button = "//button[.//*[starts-with(normalize-space(.), 'Save this view')]]"
        _wait(lambda: browser.find_elements(By.XPATH, button), what="the save button")[0].click()
        _wait(lambda: "view=" in browser.current_url, what="the view in the address")
        address = browser.current_url
        assert f"run={run.id}" in address and "view=women" in address
        _wait(lambda: "Saved the view" in _body(browser), what="the save's message")

        # 4. the page reloaded from that address: a new session with the same map and selection
        browser.get("about:blank")
        browser.get(address)
        _wait(lambda: _slider_value(browser) == "2", what="the slider at 2 after the reload")
        _wait(lambda: (g := _map_geometry(browser)) and "100 of 400" in g["title"], what="100 points drawn")
        again = _wait(lambda: (p := _points(browser)) and len(p) == 100 and p, what="the points")
        assert again == drawn  # the same map: after 2 recordings, the same sample
        _wait(lambda: _ringed(browser, 0, "selected") == expected, what="the same selection ringed")
        _wait(lambda: f"{len(expected)} selected · " in _body(browser), what="the selection caption")
        assert "The view 'women, two recordings'" in _body(browser)
        time.sleep(0.5)
        browser.save_screenshot(str(ARTIFACTS / "browser_saved_view.png"))
        assert not _page_errors(browser)
