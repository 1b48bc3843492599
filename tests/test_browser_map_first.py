"""The Data map comes first: on a laptop's screen (a 1366 x 768 browser window) the map of a run is whole
on screen, right under the page's title, without scrolling; the controls and captions are under it or in the
sidebar (`streamlit run app.py` + headless Debian chromium, Selenium; see test_browser.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    _idle,
    _page_errors,
    _wait,
    browser,  # noqa: F401 - the fixture
    serve,
)

pytestmark = [
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium chromium-driver"
    ),
    pytest.mark.slow,  # a Streamlit server and chromium: with -m slow (the default suite keeps its 10 minutes)
]

#: A laptop's browser window.
WINDOW = (1366, 768)

# the data map's chart (the figure whose meta has n_total) in the viewport, once plotly has drawn it
_MAP_RECT_JS = """
const gd = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')].find(
    g => g._fullLayout && g._fullLayout.meta && g._fullLayout.meta.n_total !== undefined);
if (!gd || !gd.querySelector('.main-svg')) return null;
const r = gd.closest('[data-testid=stPlotlyChart]').getBoundingClientRect();
const title = document.querySelector('h1');
return {top: r.top, bottom: r.bottom, height: r.height, inner: window.innerHeight, scrolled: window.scrollY,
        scroller: (document.querySelector('[data-testid=stMain]') || document.body).scrollTop,
        title_bottom: title ? title.getBoundingClientRect().bottom : null};
"""


def test_the_map_is_whole_on_a_laptop_screen_without_scrolling(tmp_path, browser):  # noqa: F811
    """A 1366 x 768 window opens a run's Data map (with a slider over its 3 recordings, text search, captions
    and run summary): the plotly chart's top and bottom are both on screen before any scrolling, and the
    chart is the first thing under the title."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    run = make_run(cache, dev=True)
    browser.set_window_size(*WINDOW)
    with serve(cache, tmp_path) as url:
        browser.get(f"{url}/data_map?run={run.id}")
        _wait(lambda: browser.execute_script(_MAP_RECT_JS), what="the data map drawn")
        _wait(
            lambda: browser.find_elements("css selector", 'input[aria-label="Search the texts"]'),
            what="search",
        )
        _wait(lambda: _idle(browser), what="the page's script run to end")
        time.sleep(1.0)  # the last elements laid out
        rect = browser.execute_script(_MAP_RECT_JS)
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "browser_map_first_1366x768.png"))
        assert not _page_errors(browser)
        assert rect["scrolled"] == 0 and rect["scroller"] == 0, rect
        assert rect["height"] > 300, rect  # a map, not a strip
        assert rect["top"] >= 0 and rect["bottom"] <= rect["inner"], rect
        assert rect["title_bottom"] is not None and rect["top"] - rect["title_bottom"] < 80, (
            rect
        )  # right under it
