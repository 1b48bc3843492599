"""The Data map's epoch slider and the selection linked between the Data map and the Neighbours page's 2-D
view, in a real browser (`cartomap dashboard` + headless Debian chromium, Selenium; see test_browser.py).

1. Keyboard arrows on the focused "Map after recording" slider redraw the map: the plotted points move
   to the map of the first k recordings, and moving back restores them.
2. A box dragged on the Data map rings those examples there, draws their histograms over the whole ones
   in the map's margins, and rings them on the Neighbours 2-D view; a box dragged on the
   2-D view, then "Show on the data map", lists them in the Data map's selection table.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    _nav,
    _page_errors,
    _visible_table_ids,
    _wait,
    browser,  # noqa: F401 - the fixture
    serve,
)

from cartomap.analysis import datamap as dm
from cartomap.analysis import epochs, projection
from cartomap.analysis.map_points import axis_title
from cartomap.scores.metrics import RegionRule

pytestmark = [
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium chromium-driver"
    ),
]

# every trace of the chart'th plotly figure on the page: name, ids (customdata) and coordinates
_TRACES_JS = """
const charts = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')];
const gd = arguments[0] < 0 ? charts[charts.length + arguments[0]] : charts[arguments[0]];
if (!gd || !gd._fullData || !gd._fullLayout || !gd._fullLayout.xaxis) return null;
const arr = v => v == null ? [] : Array.from(v);
return gd._fullData.map(t => ({name: String(t.name || ''), ids: arr(t.customdata).map(c => String(c)),
                          x: arr(t.x), y: arr(t.y), type: String(t.type), hover: arr(t.hovertext)}));
"""

# the chart'th figure's viewport geometry; its dragmode set to box selection; its plotly_selected range
_BOX_GEOMETRY_JS = """
const charts = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')];
const gd = arguments[0] < 0 ? charts[charts.length + arguments[0]] : charts[arguments[0]];
if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis) return null;
if (gd._fullLayout.dragmode !== 'select') { Plotly.relayout(gd, {dragmode: 'select'}); return null; }
gd.scrollIntoView({block: 'center'});
window.__box = null;
gd.on('plotly_selected', ev => { if (ev && ev.range) window.__box = ev.range; });
const fl = gd._fullLayout, r = gd.getBoundingClientRect();
return {left: r.left, top: r.top, xo: fl.xaxis._offset, xl: fl.xaxis._length, xr: fl.xaxis.range,
        yo: fl.yaxis._offset, yl: fl.yaxis._length, yr: fl.yaxis.range};
"""


def _traces(driver, chart: int = 0) -> list[dict] | None:
    return driver.execute_script(_TRACES_JS, chart)


def _points(driver, chart: int = 0, skip: str = "selected") -> dict[str, tuple[float, float]]:
    """{id: (x, y)} of the example points drawn (rings and overlays left out)."""
    out: dict[str, tuple[float, float]] = {}
    for t in _traces(driver, chart) or []:
        if t["name"].startswith(skip) or len(t["ids"]) != len(t["x"]):
            continue
        out.update({i: (x, y) for i, x, y in zip(t["ids"], t["x"], t["y"], strict=True)})
    return out


def _ringed(driver, chart: int, prefix: str) -> set[str] | None:
    traces = _traces(driver, chart)
    if traces is None:
        return None
    return {i for t in traces if t["name"].startswith(prefix) for i in t["ids"]}


def _px(geo: dict, x: float, y: float) -> tuple[int, int]:
    px = geo["left"] + geo["xo"] + (x - geo["xr"][0]) / (geo["xr"][1] - geo["xr"][0]) * geo["xl"]
    py = geo["top"] + geo["yo"] + (1 - (y - geo["yr"][0]) / (geo["yr"][1] - geo["yr"][0])) * geo["yl"]
    return round(px), round(py)


def _drag_box(driver, chart: int, corner_a: tuple[float, float], corner_b: tuple[float, float]) -> dict:
    """Drag a box selection (data coordinates) over the chart'th figure with real mouse events; returns the
    box plotly reports (``{"x": [lo, hi], "y": [lo, hi]}``)."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    geo = _wait(lambda: driver.execute_script(_BOX_GEOMETRY_JS, chart), what="the chart in box mode")
    (ax, ay), (bx, by) = _px(geo, *corner_a), _px(geo, *corner_b)
    actions = ActionBuilder(driver, duration=20)
    actions.pointer_action.move_to_location(ax, ay)
    actions.pointer_action.pointer_down()
    for k in range(1, 11):
        actions.pointer_action.move_to_location(
            round(ax + (bx - ax) * k / 10), round(ay + (by - ay) * k / 10)
        )
    actions.pointer_action.pointer_up()
    actions.perform()
    box = _wait(lambda: driver.execute_script("return window.__box"), what="plotly's selection event")
    box["geo"] = geo
    return box


def _in_box(xy: np.ndarray, box: dict, slack_px: float) -> np.ndarray:
    """Points inside the box grown by ``slack_px`` pixels (negative: shrunk)."""
    geo = box["geo"]
    sx = slack_px * (geo["xr"][1] - geo["xr"][0]) / geo["xl"]
    sy = slack_px * (geo["yr"][1] - geo["yr"][0]) / geo["yl"]
    (x0, x1), (y0, y1) = sorted(box["x"]), sorted(box["y"])
    return (xy[:, 0] >= x0 - sx) & (xy[:, 0] <= x1 + sx) & (xy[:, 1] >= y0 - sy) & (xy[:, 1] <= y1 + sy)


def _body(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


# --------------------------------------------------------------------------- 1. the epoch slider
# about 16 s on 2 shared cores: in the default suite, as test_browser.py's tests are
def test_the_epoch_slider_redraws_the_map_in_the_browser(tmp_path, browser):  # noqa: F811 - the imported fixture
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    run = make_run(cache, epochs=3)
    ids, logits = run.dynamics()
    labels = run.examples()["label"].to_numpy()
    expected = {k: epochs.map_at(logits, labels, k, ids).set_index("id") for k in (1, 2, 3)}
    xy = [RegionRule().axis, "confidence"]  # the map's x: the default axis
    with serve(cache, tmp_path, cli=True) as url:
        browser.get(f"{url}/data_map?run={run.id}")
        full = _wait(lambda: len(p := _points(browser)) == 400 and p, what="the map's 400 points")
        for i in ids[:20]:  # every recording: the run's own map
            assert np.allclose(full[i], expected[3].loc[i, xy], atol=1e-6)

        css = '[data-testid=stSlider] input[type=range][aria-label="Map after recording"]'
        slider = lambda: browser.find_elements(By.CSS_SELECTOR, css)  # noqa: E731 - drawn anew on a rerun
        _wait(slider, what="the epoch slider")
        value = lambda: (s := slider()) and s[0].get_property("value")  # noqa: E731
        assert value() == "3"

        def move(key: str, k: int) -> dict:
            before = _points(browser)
            browser.execute_script("arguments[0].focus()", slider()[0])  # the thumb, as a Tab would
            ActionChains(browser).send_keys(key).perform()  # to the focused element
            _wait(lambda: value() == str(k), what=f"the slider at {k}")
            return _wait(
                lambda: (p := _points(browser)) and len(p) == 400 and p != before and p,
                what=f"the map at {k}",
            )

        two = move(Keys.ARROW_LEFT, 2)
        assert set(two) == set(full)
        moved = [i for i in ids if not np.allclose(two[i], full[i], atol=1e-9)]
        assert len(moved) > 300, len(moved)  # the map of the first 2 recordings, not the run's
        for i in ids[:20]:
            assert np.allclose(two[i], expected[2].loc[i, xy], atol=1e-6)
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "browser_epoch_slider_2.png"))

        one = move(Keys.ARROW_LEFT, 1)  # the map of the first recording alone
        for i in ids[:20]:
            assert np.allclose(one[i], expected[1].loc[i, xy], atol=1e-6)

        move(Keys.ARROW_RIGHT, 2)
        back = move(Keys.ARROW_RIGHT, 3)
        assert set(back) == set(full)
        assert all(np.allclose(back[i], full[i], atol=1e-9) for i in ids)  # the run's own map again
        assert not _page_errors(browser)


# --------------------------------------------------------------------------- 2. the linked selection
@pytest.mark.slow  # about 23 s on 2 shared cores
def test_the_selection_is_linked_both_ways_in_the_browser(tmp_path, browser):  # noqa: F811 - the imported fixture
    from selenium.webdriver.common.by import By
    from test_app_neighbours import make_run

    cache = tmp_path / "cache"
    run = make_run(cache)  # metrics and embeddings; the page makes the PCA projection
    frame = dm.map_frame(run)
    xy = np.c_[frame[dm.axis_of(frame)].to_numpy(), frame["confidence"].to_numpy()]  # x is the map's axis
    with serve(cache, tmp_path, cli=True) as url:
        # a box on the Data map: the examples inside it are selected there
        browser.get(f"{url}/data_map?run={run.id}")
        _wait(lambda: len(_points(browser)) == 400, what="the data map")
        time.sleep(0.5)
        lo, hi = np.quantile(xy, 0.3, axis=0), np.quantile(xy, 0.7, axis=0)
        box = _drag_box(browser, 0, (lo[0], hi[1]), (hi[0], lo[1]))
        sure = set(frame.loc[_in_box(xy, box, -0.5), "id"].astype(str))
        possible = set(frame.loc[_in_box(xy, box, 0.5), "id"].astype(str))
        assert 3 < len(sure) < 200, len(sure)
        picked = _wait(
            lambda: (r := _ringed(browser, 0, "selected")) and sure <= r and r, what="the map's selection"
        )
        assert picked <= possible
        _wait(lambda: f"{len(picked)} selected · " in _body(browser), what="the selection caption")
        # the marginal histograms show the selection over the whole: as many examples as selected
        bars = {t["name"]: t["hover"] for t in _traces(browser, 0) or [] if t["type"] == "bar"}
        for column in (axis_title(dm.axis_of(frame)), "confidence"):  # the map's x axis by its name, and y
            hover = bars[f"{column}: selected ({len(picked)})"]
            assert sum(int(h.split(" ")[0].replace(",", "")) for h in hover) == len(picked)
            assert len(bars[f"{column}: all examples"]) == len(hover)  # the same bins
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "browser_linked_datamap.png"))

        # ... is ringed on the Neighbours page's 2-D view (the last chart there)
        _nav(browser, "Neighbours")
        _wait(lambda: "The whole dataset in 2-D" in _body(browser), what="the Neighbours page")
        rings = _wait(
            lambda: _ringed(browser, -1, projection.SELECTED_TRACE), what="the rings on the 2-D view"
        )
        assert rings == picked
        assert f"{len(picked)} examples selected" in _body(browser)
        browser.save_screenshot(str(ARTIFACTS / "browser_linked_neighbours.png"))

        # a box on the 2-D view: its examples become the selection (the rings follow)
        view = _points(browser, -1, skip=projection.SELECTED_TRACE)
        assert len(view) == 400
        ids = list(view)
        coords = np.array([view[i] for i in ids])
        lo, hi = np.quantile(coords, 0.35, axis=0), np.quantile(coords, 0.65, axis=0)
        box = _drag_box(browser, -1, (lo[0], hi[1]), (hi[0], lo[1]))
        sure = {i for i, ok in zip(ids, _in_box(coords, box, -0.5), strict=True) if ok}
        possible = {i for i, ok in zip(ids, _in_box(coords, box, 0.5), strict=True) if ok}
        assert 3 < len(sure) < 200 and sure != picked, len(sure)
        chosen = _wait(
            lambda: (r := _ringed(browser, -1, projection.SELECTED_TRACE)) and r != picked and r,
            what="the 2-D view's selection",
        )
        assert sure <= chosen <= possible
        _wait(lambda: f"{len(chosen)} examples selected" in _body(browser), what="the selection caption")

        # "Show on the data map": the Data map lists them in its selection table
        button = "//button[.//*[contains(., 'Show on the data map')]]"
        _wait(lambda: browser.find_elements(By.XPATH, button), what="the button")[0].click()
        _wait(lambda: "/data_map" in browser.current_url, what="the Data map")
        _wait(lambda: f"{len(chosen)} selected · " in _body(browser), what="the Data map's selection")
        _wait(lambda: _ringed(browser, 0, "selected") == chosen, what="the selection ringed on the map")
        rows = _wait(lambda: _visible_table_ids(browser), what="the selection table's rows")
        assert set(rows) <= chosen and len(rows) >= min(len(chosen), 5), (rows, sorted(chosen))
        browser.save_screenshot(str(ARTIFACTS / "browser_linked_back.png"))
        assert not _page_errors(browser)
