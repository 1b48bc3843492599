"""The Data map page in a real browser: `streamlit run app.py` + headless Debian chromium (Selenium).

A lasso is dragged over the map with real mouse events; the page must list exactly the examples
inside it. First with every point drawn (plotly picks the points, ids come back as customdata),
then with the map sampled to 100 of 400 points (the page resolves the lasso polygon on the server
against every example). The polygon plotly reports is captured in the page with a
``plotly_selected`` listener and checked against matplotlib's point-in-polygon as the oracle.
Screenshots go to tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import patience
import pytest
from matplotlib.path import Path as MplPath

from cartomap.analysis import datamap as dm

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1700",
)

pytestmark = [
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium chromium-driver"
    ),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve(cache: Path, tmp_path: Path, *, cli: bool = False, args: tuple[str, ...] = (), port: int = 0):
    """`streamlit run app.py` (``cli``: `cartomap dashboard`, as a user starts it, with ``args`` added) on
    ``cache`` (on ``port``, else a free one); yields its URL once healthy, stops it afterwards."""
    port = port or _free_port()
    env = dict(os.environ, CARTOMAP_CACHE=str(cache), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    if cli:
        env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        command = [sys.executable, "-m", "cartomap.cli", "--cache", str(cache), "dashboard"]
        command += ["--port", str(port), "--headless", *args]
    log = open(tmp_path / "streamlit.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        command
        if cli
        else [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + patience.WAIT_S  # seconds alone; far more on a busy machine
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as resp:  # patience: retried
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(
                    "streamlit did not start:\n" + (tmp_path / "streamlit.log").read_text(errors="replace")
                )
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)  # patience: cleanup, killed after
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture()
def server(tmp_path):
    """A finished synthetic run and `streamlit run app.py` serving it; yields (url, run)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    run = make_run(cache)
    with serve(cache, tmp_path) as url:
        yield url, run


def new_browser():
    """A headless chromium driven by Selenium (quit it when done): one person's browser."""
    from selenium import webdriver  # in the [test] extras
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    driver_path = CHROMEDRIVER if Path(CHROMEDRIVER).exists() else shutil.which("chromedriver")
    return webdriver.Chrome(service=Service(driver_path), options=options)


@pytest.fixture()
def browser():
    driver = new_browser()
    try:
        yield driver
    finally:
        driver.quit()


#: Wait for something the page shows within seconds alone: generously, the machine may be busy.
_wait = patience.wait_for


def _selected_caption(driver) -> str:
    return driver.execute_script(
        "return [...document.querySelectorAll('[data-testid=stMarkdownContainer]')]"
        ".map(e => e.innerText).find(t => / selected · /.test(t)) || ''"
    )


def _map_geometry(driver) -> dict:
    """Viewport position and axis ranges of the main subplot; installs the plotly_selected listener."""
    return driver.execute_script(
        """
        // the data map: the figure whose meta has n_total (the page's training curves come after it)
        const gd = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')].find(
            g => g._fullLayout && g._fullLayout.meta && g._fullLayout.meta.n_total !== undefined);
        if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis) return null;
        window.__lasso = null;
        gd.on('plotly_selected', ev => {
            if (ev && ev.selections) window.__lasso = ev.selections.map(s => s.path || null);
        });
        const fl = gd._fullLayout, r = gd.getBoundingClientRect();
        return {left: r.left, top: r.top, xo: fl.xaxis._offset, xl: fl.xaxis._length, xr: fl.xaxis.range,
                yo: fl.yaxis._offset, yl: fl.yaxis._length, yr: fl.yaxis.range,
                title: (fl.title && fl.title.text) || ''};
        """
    )


def _to_pixels(geo: dict, x: float, y: float) -> tuple[int, int]:
    px = geo["left"] + geo["xo"] + (x - geo["xr"][0]) / (geo["xr"][1] - geo["xr"][0]) * geo["xl"]
    py = geo["top"] + geo["yo"] + (1 - (y - geo["yr"][0]) / (geo["yr"][1] - geo["yr"][0])) * geo["yl"]
    return round(px), round(py)


def _drag_lasso(driver, geo: dict, polygon: list[tuple[float, float]]) -> None:
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    corners = [_to_pixels(geo, x, y) for x, y in polygon]
    path = []
    for (ax, ay), (bx, by) in zip(corners, corners[1:] + corners[:1], strict=True):
        path += [(round(ax + (bx - ax) * k / 10), round(ay + (by - ay) * k / 10)) for k in range(10)]
    path.append(corners[0])
    actions = ActionBuilder(driver, duration=20)
    actions.pointer_action.move_to_location(*path[0])
    actions.pointer_action.pointer_down()
    for point in path[1:]:
        actions.pointer_action.move_to_location(*point)
    actions.pointer_action.pointer_up()
    actions.perform()


def _parse_path(path: str) -> np.ndarray:
    """plotly's selection path "Mx,yLx,y...Z" in data coordinates, as Streamlit parses it."""
    pairs = path.replace("M", "").replace("Z", "").split("L")
    return np.array([[float(v) for v in pair.split(",")] for pair in pairs])


def _visible_table_ids(driver) -> list[str]:
    """The id column of the rows the table draws (glide-data-grid's accessible table)."""
    return driver.execute_script(
        """
        const grid = [...document.querySelectorAll('[data-testid=stDataFrame]')]
            .find(g => [...g.querySelectorAll('th')].some(th => th.innerText.trim() === 'premise'));
        if (!grid) return [];
        const heads = [...grid.querySelectorAll('thead th')].map(th => th.innerText.trim());
        const col = heads.indexOf('id');
        return [...grid.querySelectorAll('tbody tr')].map(tr => {
            const cells = [...tr.children];  // th/td, aligned with the header cells
            return cells.length === heads.length ? cells[col] : null;
        }).filter(c => c).map(c => c.innerText.trim()).filter(t => t);
        """
    )


def _lasso_and_check(driver, frame, polygon, *, sampled: bool, shot: str) -> list[str]:
    geo = _wait(lambda: _map_geometry(driver), what="the plotly map")
    before = _selected_caption(driver)
    _drag_lasso(driver, geo, polygon)
    lasso = _wait(lambda: driver.execute_script("return window.__lasso"), what="plotly's selection event")
    caption = _wait(
        lambda: (c := _selected_caption(driver)) != before and c, what="the page to take the lasso"
    )
    time.sleep(1.0)  # let the table and map finish drawing
    caption = _selected_caption(driver)
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / shot))

    polygon_data = _parse_path(lasso[0])
    xy = np.c_[frame[dm.axis_of(frame)].to_numpy(), frame["confidence"].to_numpy()]  # x is the map's axis
    inside = MplPath(polygon_data).contains_points(xy)
    expected = set(frame.loc[inside, "id"])
    n_selected = int(caption.split(" selected")[0].replace(",", ""))
    if sampled:
        assert n_selected == len(expected), (caption, len(expected))  # exact, server-side geometry
    else:
        # plotly decides in pixels: allow only points within half a pixel of the lasso's edge to differ
        near = _near_edge(geo, polygon_data, xy, tolerance_px=0.5)
        sure = set(frame.loc[inside & ~near, "id"])
        possible = set(frame.loc[inside | near, "id"])
        assert len(sure) <= n_selected <= len(possible), (caption, len(sure), len(possible))
    rows = _wait(lambda: _visible_table_ids(driver), what="table rows")
    assert rows and set(rows) <= set(frame["id"]), rows[:5]
    if sampled:
        assert set(rows) <= expected
    else:
        assert len(set(rows) - expected) <= 1
    return rows


def _near_edge(geo, polygon, xy, tolerance_px: float) -> np.ndarray:
    """Points within ``tolerance_px`` pixels of the polygon's boundary."""
    sx = geo["xl"] / (geo["xr"][1] - geo["xr"][0])
    sy = geo["yl"] / (geo["yr"][1] - geo["yr"][0])
    p = xy * [sx, sy]
    poly = polygon * [sx, sy]
    a, b = poly, np.roll(poly, -1, axis=0)
    d = np.full(len(p), np.inf)
    for (ax, ay), (bx, by) in zip(a, b, strict=True):
        ab = np.array([bx - ax, by - ay])
        t = np.clip(((p - [ax, ay]) @ ab) / max(ab @ ab, 1e-12), 0, 1)
        closest = np.array([ax, ay]) + t[:, None] * ab
        d = np.minimum(d, np.linalg.norm(p - closest, axis=1))
    return d <= tolerance_px


def test_lasso_selects_points_in_browser(server, browser):
    url, run = server
    frame = dm.map_frame(run)
    browser.get(url + "/")
    _wait(lambda: _map_geometry(browser), what="the data map to load")
    assert "Data map" in browser.title or browser.find_elements("css selector", "h1")

    # 1. every point drawn: plotly's own selection, ids from customdata; a concave lasso
    x = frame[dm.axis_of(frame)]  # the map's x axis (its scale is the score's): the shapes in its span
    lo, span = float(x.min()), float(x.max() - x.min())

    def at(f: float) -> float:
        return lo + f * span

    concave = [(at(-0.01), -0.02), (at(0.6), -0.02), (at(0.6), 1.02), (at(0.3), 0.5), (at(-0.01), 1.02)]
    rows = _lasso_and_check(browser, frame, concave, sampled=False, shot="browser_datamap_lasso.png")
    assert len(rows) > 3

    # 2. draw at most 100 of the 400 points: the lasso is resolved against all 400 on the server
    box = browser.find_element("css selector", 'input[aria-label="Points drawn (at most)"]')
    box.click()
    box.send_keys("\ue009a")  # ctrl+a
    box.send_keys("100\ue007")  # enter
    _wait(lambda: (g := _map_geometry(browser)) and "100 of 400" in g["title"], what="the sampled map")
    time.sleep(0.5)
    band = [(at(0.1), 0.3), (at(0.9), 0.3), (at(0.9), 0.9), (at(0.1), 0.9)]
    _lasso_and_check(browser, frame, band, sampled=True, shot="browser_datamap_sampled.png")


_PICTURE_JS = """
const img = document.querySelector(".st-key-dm_map_slot img[alt='picture of the data map']");
if (!img) return null;
return {loaded: img.complete && img.naturalWidth > 0, width: img.naturalWidth, shown: img.offsetParent !== null,
        drawn: !!document.querySelector('.st-key-dm_map_slot .js-plotly-plot .main-svg')};
"""


def test_the_map_is_a_picture_until_plotly_draws_the_chart(server, browser):
    """A session's first map is shown as a picture (``cartomap.analysis.preview``) while the browser has no
    plotly.js: with plotly's code blocked it stays on screen; once plotly drew the chart it is hidden."""
    url, run = server
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*PlotlyChart*"]})
    browser.get(url + f"/data_map?run={run.id}")
    state = _wait(
        lambda: (p := browser.execute_script(_PICTURE_JS)) and p["loaded"] and p, what="the picture"
    )
    assert state["shown"] and not state["drawn"] and state["width"] == 1100
    time.sleep(2)  # nothing replaces it: the chart cannot be drawn
    state = browser.execute_script(_PICTURE_JS)
    assert state["shown"] and not state["drawn"]
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "browser_map_picture.png"))

    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    browser.get(url + f"/data_map?run={run.id}")  # a new session, plotly.js allowed
    _wait(lambda: _map_geometry(browser), what="the chart")
    state = _wait(
        lambda: (p := browser.execute_script(_PICTURE_JS)) and p["drawn"] and p, what="the chart drawn"
    )
    assert not state["shown"]  # hidden under the drawn chart's slot


# --------------------------------------------------------------------------- a deep link as the first visit
def test_a_deep_link_is_the_servers_first_visit(tmp_path, browser):
    """`cartomap dashboard` just started, and the first thing it serves is /data_map?run=ID: the Data
    map of that run with the dashboard's own navigation and run picker, no "Page not found" dialog and
    no page list made from the pages/ folder (no "common"). Then / opens the Data map at its address."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(Path(__file__).parent))
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    run = make_run(cache)
    body = lambda: browser.find_element(By.TAG_NAME, "body").text  # noqa: E731

    def nav() -> list[str]:  # each link's title (its first line is the icon's name)
        try:
            links = browser.find_elements(By.CSS_SELECTOR, "[data-testid=stSidebarNavLink]")
            return [a.text.splitlines()[-1] for a in links if a.text]
        except StaleElementReferenceException:  # the navigation was drawn again meanwhile
            return []

    picker = "//*[@data-testid='stSelectbox'][.//label[contains(., 'Run')]]"
    with serve(cache, tmp_path, cli=True) as url:
        browser.get(f"{url}/data_map?run={run.id}")
        seen: set[str] = set()

        def loaded() -> bool:  # every navigation drawn on the way is looked at, the first one too
            seen.update(nav())
            return bool(browser.find_elements(By.XPATH, picker) and _map_geometry(browser))

        _wait(loaded, what="the run picker and the data map")
        for _ in range(8):  # a dialog or a second navigation would come within the first seconds
            seen.update(nav())
            assert "Page not found" not in body()
            time.sleep(0.25)
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "browser_deep_link.png"))
        assert not browser.find_elements(By.CSS_SELECTOR, '[role="dialog"]')
        assert "Data map" in seen and "Compare" in seen and not any("common" in t.lower() for t in seen), seen
        assert run.id in browser.find_element(By.XPATH, picker).get_attribute("innerHTML")  # the picked run
        assert browser.current_url.startswith(f"{url}/data_map?") and f"run={run.id}" in browser.current_url

        browser.get(f"{url}/?run={run.id}")  # the root address: the Data map at its own address
        _wait(lambda: "/data_map?" in browser.current_url, what="the Data map's address")
        _wait(lambda: _map_geometry(browser), what="the data map")
        assert f"run={run.id}" in browser.current_url and "Page not found" not in body()


def test_page_addresses_follow_titles_and_old_ones_still_open_the_page(tmp_path, browser):
    """/prune_labels opens "Prune labels"; /pruning, its address before, opens it at /prune_labels with
    the query kept; the same for "Curricula & combinations" (/experiments)."""
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(Path(__file__).parent))
    from test_app_datamap import make_run

    cache = tmp_path / "cache"
    run = make_run(cache)
    body = lambda: browser.find_element(By.TAG_NAME, "body").text  # noqa: E731

    def heading() -> str:
        found = browser.find_elements(By.CSS_SELECTOR, "h1")
        return found[0].text if found else ""

    with serve(cache, tmp_path, cli=True) as url:
        for old, new, title in (
            ("prune_labels", "prune_labels", "Prune labels"),
            ("pruning", "prune_labels", "Prune labels"),
            ("experiments", "curricula_combinations", "Curricula & combinations"),
        ):
            browser.get(f"{url}/{old}?run={run.id}")
            _wait(lambda new=new: f"/{new}?" in browser.current_url, what=f"the address /{new}")
            _wait(lambda title=title: title in heading(), what=f"the page {title!r}")
            assert f"run={run.id}" in browser.current_url and "Page not found" not in body()


# --------------------------------------------------------------------------- compare two experiments
def test_two_finished_experiments_compared_in_the_browser(tmp_path, browser):
    """Open the Compare page from the sidebar and pick two finished experiments in its multiselect:
    the page shows their runs side by side and each experiment's own results, without a terminal."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_compare import make_combination, make_curriculum

    cache = tmp_path / "cache"
    make_curriculum(cache)
    make_combination(cache)
    with serve(cache, tmp_path) as url:
        browser.get(url)
        # app.py's navigation (page titles), not Streamlit's file list of pages/ shown before it runs;
        # then the Compare page's own "Experiments" box: the Data map it came from has multiselects too
        # (Gold label, Region), so counting multiselects can pick one of those before Compare renders
        experiments = "//div[@data-testid='stMultiSelect'][.//*[contains(., 'Experiments')]]//input"
        _nav(browser, "Compare", lambda: browser.find_elements(By.XPATH, experiments))
        for name in ("tiny curricula", "tiny combination"):
            box = browser.find_element(By.XPATH, experiments)
            box.click()
            box.send_keys(name)
            time.sleep(0.5)
            box.send_keys(Keys.ENTER)
            _wait(lambda n=name: n in browser.find_element(By.TAG_NAME, "body").text, what=name)
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        body = lambda: browser.find_element(By.TAG_NAME, "body").text  # noqa: E731
        _wait(lambda: "Significance" in body() and "Accuracy per training set" in body(), what="results")
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "compare_two_experiments.png"))
        text = body()
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
        assert "tiny curricula: cart-stra++@seed1" in text and "tiny combination: A + B@seed0" in text
        assert "Learning curves" in text and "Example by example" in text
        assert browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")


# --------------------------------------------------------------------------- a full-size run (slow)
SCALE_N = int(os.environ.get("CARTOMAP_SCALE_N", "550000"))
SCALE_STAGES = "setup,load,train,recorder,embeddings"


def _scale_runs() -> tuple[Path, dict]:
    """The runs of ``bench/bench_scale.py --examples 550000``: a tiny model trained one epoch on the
    550k synthetic pairs, the first tenth trained alike (for Compare), and the same pairs with 10
    recorded epochs and 384-dim embeddings. Made by the bench first when absent (about an hour and a
    half on 2 cores); kept in cache/scale/work-550000 (or env CARTOMAP_SCALE_WORK) for the next time."""
    work = Path(os.environ.get("CARTOMAP_SCALE_WORK", ROOT / "cache" / "scale" / f"work-{SCALE_N}"))
    state_path = work / "state.json"

    def ready() -> dict | None:
        if not state_path.exists():
            return None
        state = json.loads(state_path.read_text())
        runs = work / "store" / "runs"
        if not all(k in state for k in ("run", "small_run", "recorded")):
            return None
        done = all(
            json.loads((runs / state[k] / "status.json").read_text())["state"] == "done"
            for k in ("run", "small_run", "recorded")
        )
        return state if done and (runs / state["recorded"] / "embeddings.npy").exists() else None

    if ready() is None:
        cmd = [
            sys.executable,
            "bench/bench_scale.py",
            "--examples",
            str(SCALE_N),
            "--work",
            str(work),
            "--keep",
            "--stages",
            SCALE_STAGES,
        ]
        subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    state = ready()
    assert state is not None, f"the bench did not leave its runs in {work}"
    return work / "store", state


def _page_errors(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')]


def _idle(driver) -> bool:
    """Whether no script run is in flight: Streamlit shows its status widget while one is."""
    return not driver.execute_script("return document.querySelector('[data-testid=stStatusWidget]') !== null")


def _nav(driver, title: str, arrived=None, *, tries: int = 3) -> None:
    """Open the page ``title`` from the sidebar as a person does, and wait until ``arrived()`` (default: the
    browser is at the link's address). A click landing while the app is still busy with its first run can
    be dropped by the frontend, and a person would click again: so the link is clicked once the app is
    idle, and again when the app has then sat idle for 8 s without the page coming (at most ``tries``
    clicks). Waits while the app works, however long a busy machine makes that; the failure names the
    address and what the page showed."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    link = f"//a[@data-testid='stSidebarNavLink'][contains(., '{title}')]"
    _wait(lambda: driver.find_elements(By.XPATH, link), what=f"the {title} link")
    if arrived is None:  # the page's own address (the link's), whatever its heading says
        address = (driver.find_element(By.XPATH, link).get_attribute("href") or "").split("?")[0].rstrip("/")
        arrived = lambda: driver.current_url.split("?")[0].rstrip("/") == address  # noqa: E731
    _wait(lambda: _idle(driver), what="the app idle before the click")
    deadline = time.monotonic() + patience.WAIT_S
    for _ in range(tries):
        with contextlib.suppress(StaleElementReferenceException):  # drawn again meanwhile: click anew
            driver.find_element(By.XPATH, link).click()
        idle_since = None
        while time.monotonic() < deadline:
            with contextlib.suppress(StaleElementReferenceException):
                if arrived():
                    return
            if not _idle(driver):
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > 8:
                break  # the app sits idle on the old page: the click was not taken
            time.sleep(0.25)
    body = driver.find_element(By.TAG_NAME, "body").text
    raise AssertionError(
        f"the {title} page did not come: at {driver.current_url}, the page shows {body[:600]!r}"
    )


@pytest.mark.fullsize  # not in CI's `-m slow`: building the 550k runs takes hours on 2 cores
@pytest.mark.timeout(3 * 3600)  # the bench's runs are made first when absent
def test_full_size_run_in_the_browser(tmp_path, browser):
    """The dashboard on the bench's 550k-example runs: map, a filter, a lasso resolved exactly on the
    server, the selection table, the Neighbours page and Compare, in a real browser, without an error."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from cartomap.runs.store import RunStore

    store_root, state = _scale_runs()
    store = RunStore(store_root)
    recorded, trained, small = (store.get(state[k]) for k in ("recorded", "run", "small_run"))
    frame = dm.map_frame(recorded)
    assert len(frame) == SCALE_N
    body = lambda: browser.find_element(By.TAG_NAME, "body").text  # noqa: E731
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(store_root, tmp_path) as url:
        # 1. the map of 550k points: a sample drawn over the density of all of them
        browser.get(f"{url}/?run={recorded.id}")
        geo = _wait(lambda: (g := _map_geometry(browser)) and "of" in g["title"] and g, what="the 550k map")
        assert f"of {SCALE_N:,} examples drawn" in geo["title"], geo["title"]
        assert f"{SCALE_N:,} examples · {SCALE_N:,} match the filters" in body()

        # 2. a filter: leave out one gold label (its chip's delete button in the sidebar)
        label = frame.attrs["label_names"][0]
        chip = _wait(
            lambda: browser.find_elements(
                By.XPATH,
                f"//*[@data-testid='stMultiSelect'][.//*[contains(., 'Gold label')]]//span[.='{label}']/..",
            ),
            what="the gold-label chip",
        )[0]
        chip.find_element(By.XPATH, ".//*[@role='presentation' or @title='Delete' or name()='svg']").click()
        kept = dm.filter_frame(frame, labels=[n for n in frame.attrs["label_names"] if n != label])
        _wait(lambda: f"{len(kept):,} match the filters" in body(), what="the filtered map")
        _wait(lambda: _map_geometry(browser), what="the filtered map's axes")
        time.sleep(1.0)

        # 3. a lasso over the sampled map, resolved on the server against every filtered example
        band = [(0.02, 0.3), (0.25, 0.3), (0.25, 0.8), (0.02, 0.8)]
        rows = _lasso_and_check(browser, kept, band, sampled=True, shot="browser_full_size_lasso.png")
        assert rows  # 4. the selection table lists selected examples
        assert not _page_errors(browser)

        # 5. Neighbours: the seeds, a seed's group and the 2-D view
        _nav(browser, "Neighbours", lambda: "Nearest neighbours" in body())
        _wait(
            lambda: "Nearest neighbours" in body() and "The whole dataset in 2-D" in body(), what="Neighbours"
        )
        _wait(
            lambda: browser.find_elements(By.CSS_SELECTOR, "[data-testid=stPlotlyChart] .js-plotly-plot"),
            what="the 2-D view",
        )
        _wait(lambda: "similarity" in body() and "seed" in body(), what="the group table")
        browser.save_screenshot(str(ARTIFACTS / "browser_full_size_neighbours.png"))
        assert not _page_errors(browser)

        # 6. Compare: the trained 550k run and the trained first tenth side by side
        runs_box = "//div[@data-testid='stMultiSelect'][.//*[contains(., 'Runs')]]//input"
        _nav(browser, "Compare", lambda: browser.find_elements(By.XPATH, runs_box))
        for run in (trained, small):
            box = browser.find_element(By.XPATH, runs_box)
            box.click()
            box.send_keys(run.id)
            time.sleep(0.5)
            box.send_keys(Keys.ENTER)
            _wait(lambda r=run: r.id in body(), what=f"run {run.id} picked")
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        _wait(lambda: "Example by example" in body() and "Data maps" in body(), what="the comparison")
        _wait(
            lambda: len(browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")) >= 3,
            what="the maps side by side",
        )
        browser.save_screenshot(str(ARTIFACTS / "browser_full_size_compare.png"))
        assert not _page_errors(browser)

        # 7. the trained run's own map (one epoch: every variability 0)
        browser.get(f"{url}/?run={trained.id}")
        _wait(
            lambda: (g := _map_geometry(browser)) and f"of {SCALE_N:,}" in g["title"],
            what="the trained run's map",
        )
        assert not _page_errors(browser)
