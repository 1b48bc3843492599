"""A token run's Data map in a real browser (`streamlit run app.py` + headless Debian chromium, Selenium;
see test_browser.py): the word map is drawn, a click on a word's point opens its sentence word by word
with the gold and predicted tags, and "Map of: Sentences" draws the sentence map.

The run is tests/token_fixture.py's (3 CoNLL sentences, 11 words, hand-set logits, no training): every
word sits at confidence p but "Berlin", read as a person in both recordings, alone at (1 - p) / 3; x is the
map's axis, the default one (the same for every word: each spreads its probabilities over the tags alike)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_browser import ARTIFACTS, CHROMIUM, _page_errors, _wait, browser, serve  # noqa: F401 - the fixture
from test_browser_views import _body, _points, _px
from token_fixture import make_token_run

from cartomap.analysis import datamap as dm
from cartomap.analysis import tokens
from cartomap.scores.metrics import RegionRule

pytestmark = [
    pytest.mark.slow,  # a Streamlit server and chromium on a token run: with -m slow (the default suite's 10 minutes)
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium chromium-driver"
    ),
]

# the first chart's viewport geometry (test_browser_views._px converts data to pixels with it)
_GEOMETRY_JS = """
const gd = document.querySelector('[data-testid=stPlotlyChart] .js-plotly-plot');
if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis) return null;
gd.scrollIntoView({block: 'center'});
const fl = gd._fullLayout, r = gd.getBoundingClientRect();
return {left: r.left, top: r.top, xo: fl.xaxis._offset, xl: fl.xaxis._length, xr: fl.xaxis.range,
        yo: fl.yaxis._offset, yl: fl.yaxis._length, yr: fl.yaxis.range};
"""

_DRAGMODE_JS = """
const gd = document.querySelector('[data-testid=stPlotlyChart] .js-plotly-plot');
return gd && gd._fullLayout ? gd._fullLayout.dragmode : null;
"""

# the rows of the table whose header has ``arguments[0]`` (glide-data-grid's accessible table), as
# {header: cell text}
_TABLE_JS = """
const grid = [...document.querySelectorAll('[data-testid=stDataFrame]')]
    .find(g => [...g.querySelectorAll('thead th')].some(th => th.innerText.trim() === arguments[0]));
if (!grid) return null;
const heads = [...grid.querySelectorAll('thead th')].map(th => th.innerText.trim());
return [...grid.querySelectorAll('tbody tr')].map(tr => [...tr.children])
    .filter(cells => cells.length === heads.length)
    .map(cells => Object.fromEntries(heads.map((h, i) => [h, cells[i].innerText.trim()])));
"""


def _click_point(driver, x: float, y: float) -> None:
    """A click on the map's point at (x, y), as a user makes it: with the lasso or box tool on a click
    selects nothing (Streamlit's clickmode), so first the modebar's "Pan" (found by its title), then the
    pointer onto the point (plotly picks the hovered point) and a click."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.by import By

    chart = driver.find_element(By.CSS_SELECTOR, "[data-testid=stPlotlyChart] .js-plotly-plot")
    ActionChains(driver).move_to_element(chart).perform()  # the modebar shows on hover
    pan = '[data-testid=stPlotlyChart] .modebar-btn[data-title="Pan"]'
    _wait(lambda: driver.find_elements(By.CSS_SELECTOR, pan), what="the modebar's Pan")[0].click()
    _wait(lambda: driver.execute_script(_DRAGMODE_JS) == "pan", what="the map in pan mode")
    geo = _wait(lambda: driver.execute_script(_GEOMETRY_JS), what="the map's axes")
    px, py = _px(geo, x, y)
    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(px, py)
    actions.pointer_action.pause(0.3)  # plotly's hover finds the point under the pointer
    actions.pointer_action.click()
    actions.perform()


def _pick_radio(driver, group: str, option: str) -> None:
    """Click ``option`` of the radio group labelled ``group`` (found by their labels, not by position)."""
    from selenium.webdriver.common.by import By

    xpath = (
        f"//div[@data-testid='stRadio'][.//*[normalize-space(text())='{group}']]"
        f"//label[.//*[normalize-space(text())='{option}']]"
    )
    _wait(lambda: driver.find_elements(By.XPATH, xpath), what=f"the option {option} of {group}")[0].click()


# about 15 s on 2 shared cores: in the default suite, as test_browser.py's tests are
def test_a_token_runs_word_map_opens_a_words_sentence_and_maps_sentences_in_the_browser(tmp_path, browser):  # noqa: F811 - the imported fixture
    cache = tmp_path / "cache"
    run = make_token_run(cache, tmp_path)
    words = dm.map_frame(run)
    sentences = tokens.sentence_map_frame(run)
    x = dm.axis_of(words)  # the maps' x: the axis of their regions, the default one
    assert x == dm.axis_of(sentences) == RegionRule().axis
    words, sentences = words.set_index("id"), sentences.set_index("id")
    with serve(cache, tmp_path) as url:
        browser.get(f"{url}/data_map?run={run.id}")
        drawn = _wait(lambda: len(p := _points(browser)) == 11 and p, what="the word map's 11 points")
        for unit_id, point in drawn.items():  # a point per word, where the word map puts it
            assert np.allclose(point, words.loc[unit_id, [x, "confidence"]], atol=1e-6)
        assert "11 examples" in _body(browser)

        berlin = drawn["sent-1#2"]  # alone at the bottom of the map
        _click_point(browser, *berlin)
        _wait(lambda: "1 selected · " in _body(browser), what="the click to select Berlin")
        _wait(lambda: "Mary visited Berlin" in _body(browser), what="the word's sentence")
        assert "sentence sent-1 (3 words)" in _body(browser)
        rows = _wait(lambda: browser.execute_script(_TABLE_JS, "p(predicted)"), what="the sentence's words")
        assert [r["token"] for r in rows] == ["Mary", "visited", "Berlin"]
        assert [r["gold"] for r in rows] == ["B-PER", "O", "B-LOC"]
        assert [r["predicted"] for r in rows] == ["B-PER", "O", "B-PER"]  # Berlin read as a person
        assert "1 word predicted wrong" in _body(browser)
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "browser_token_word.png"))

        _pick_radio(browser, "Map of", "Sentences")
        drawn = _wait(
            lambda: (p := _points(browser)) and set(p) == {"sent-0", "sent-1", "sent-2"} and p,
            what="the sentence map's 3 points",
        )
        for sentence, point in drawn.items():  # each sentence at its worst word
            assert np.allclose(point, sentences.loc[sentence, [x, "confidence"]], atol=1e-6)
        assert np.allclose(drawn["sent-1"], berlin, atol=1e-6)
        assert "3 sentences" in _body(browser)
        browser.save_screenshot(str(ARTIFACTS / "browser_token_sentences.png"))
        assert not _page_errors(browser)
