"""Time from launching the dashboard on an empty run store to the first data map, in a real browser.

Starts ``cartomap dashboard`` on a fresh cache, opens it in headless Debian chromium (selenium), times the
map of the demo's recorded run the dashboard installs on a fresh store (a new user's first picture: no
training), then clicks "Train the demo yourself" and waits for the data map of the run trained live: its picture drawn on the server (the map on screen,
``cartomap.analysis.preview``) and the interactive chart with every point of the run (the map's own
figure, the one whose ``layout.meta`` counts the examples; the live training curves before it are a
plotly chart too, and do not count). Then restarts the server on the same cache and times the map of
the existing run. Everything the bench started is stopped at the end, the demo's training job (a
process of its own session) included, and the cache removed (``--keep`` keeps it). Needs chromium +
chromium-driver (Debian) and Linux (/proc).

    python bench/bench_first_map.py [--port 8611] [--repeats 3] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from processes import (  # bench/processes.py: what the bench starts and stops
    CHROMIUM_FLAGS,
    new_tag,
    start_dashboard,
    stop,
)

ROOT = Path(__file__).resolve().parent.parent

# The map's picture (sent before the chart on a session's first map) decoded and displayed.
PICTURE_JS = """
return [...document.querySelectorAll(".st-key-dm_map_slot img[alt='picture of the data map']")].some(img =>
    img.complete && img.naturalWidth > 0 && img.offsetParent !== null);
"""
# The data map's chart (its figure's meta counts the examples; the training curves' has none), drawn, with
# the number of points its scatter traces hold (those with example ids; no neighbour or selection
# overlay on a first map) and the count the figure says it shows.
CHART_JS = """
const gd = [...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')].find(g =>
    g._fullLayout && g._fullLayout.meta && g._fullLayout.meta.n_total !== undefined);
if (!gd || !gd.querySelector('.scatterlayer, canvas') || !gd._fullData) return null;
const points = gd._fullData.filter(t => t.type === 'scattergl' && t.customdata && t.visible !== false)
    .reduce((n, t) => n + t.customdata.length, 0);
const meta = gd._fullLayout.meta;
return {points: points, n_shown: meta.n_shown, n_total: meta.n_total};
"""


def load() -> str:
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def wait_for(predicate, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")


def script(driver, js: str):
    """``js`` run in the page; None when the browser did not answer in time (a starved machine)."""
    from selenium.common.exceptions import TimeoutException

    try:
        return driver.execute_script(js)
    except TimeoutException:
        return None


def open_map(driver, url: str, timeout: float, t0: float) -> dict:
    """Wait until the data map is on screen (its picture, or the chart if that comes first) and until
    its chart holds every point it says it shows; the seconds since ``t0`` of each."""
    shown = None
    while True:
        chart = script(driver, CHART_JS)
        now = time.time()
        if shown is None and (chart or script(driver, PICTURE_JS)):
            shown = now - t0
        if chart and chart["points"] and chart["points"] == chart["n_shown"]:
            return {"on_screen": shown, "chart": now - t0, **chart}
        if now - t0 > timeout:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for the data map ({chart})")
        time.sleep(0.05)


def demo_run_state(cache: str) -> tuple[str, int]:
    """The demo run's state and number of training examples, from the store itself."""
    sys.path.insert(0, str(ROOT))
    from cartomap.runs.store import RunStore

    (run,) = RunStore(cache).list()
    return run.state, int(run.info["n_train"])


def one(args, driver, repeat: int) -> dict:
    cache, logs = tempfile.mkdtemp(prefix="first-map-"), Path(tempfile.mkdtemp(prefix="first-map-logs-"))
    tag, url = new_tag(), f"http://127.0.0.1:{args.port}"
    out = {"repeat": repeat, "load_before": load()}
    server = None
    try:
        t0 = time.time()
        server = start_dashboard(cache, args.port, logs / "server.log", tag)
        driver.get(url)
        # a fresh store: the dashboard installs the demo's recorded run and opens on its map
        recorded = open_map(driver, url, 300, t0)
        out.update(
            recorded_on_screen_s=round(recorded["on_screen"], 1), recorded_chart_s=round(recorded["chart"], 1)
        )
        if args.recorded_only:
            return out
        button = wait_for(
            lambda: [b for b in driver.find_elements("tag name", "button") if "Train the demo" in b.text],
            120,
            "the Train the demo button",
        )[0]
        button.click()
        clicked = time.time()
        wait_for(
            lambda: not script(driver, CHART_JS), 300, "the recorded run's map to give way to the training"
        )
        first = open_map(driver, url, args.timeout, clicked)
        state, n_train = demo_run_state(cache)
        if state != "done" or first["n_total"] != n_train:
            raise SystemExit(f"the map came before the run was done ({state}) or is not its map ({first})")
        out.update(
            click_s=round(clicked - t0, 1),
            on_screen_s=round(first["on_screen"], 1),
            chart_s=round(first["chart"], 1),
            points=first["points"],
            load_after_training=load(),
        )
        stop(server, tag)
        driver.get("about:blank")
        t1 = time.time()
        server = start_dashboard(cache, args.port, logs / "server2.log", tag)
        driver.get(url)
        again = open_map(driver, url, 300, t1)
        out.update(again_on_screen_s=round(again["on_screen"], 1), again_chart_s=round(again["chart"], 1))
    finally:
        out["stopped"] = stop(server, tag)
        out["load_after"] = load()
        if args.keep:
            out["cache"] = cache
        else:
            shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    return out


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8611)
    parser.add_argument("--repeats", type=int, default=1, help="fresh stores, one after another")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds the demo's training may take")
    parser.add_argument("--keep", action="store_true", help="keep each run store (its path is printed)")
    parser.add_argument(
        "--recorded-only",
        action="store_true",
        help="time the recorded run's map on a fresh store only (no training)",
    )
    args = parser.parse_args()
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    rows = []
    for repeat in range(args.repeats):
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        driver.set_script_timeout(120)  # a busy machine's browser may take long to answer
        driver.set_page_load_timeout(600)
        try:
            row = one(args, driver, repeat)
        finally:
            driver.quit()
        rows.append(row)
        print(row, flush=True)
    if args.recorded_only:
        print(
            "\n| try | load (1, 5, 15 min) before | fresh install: launch to the recorded map on screen | chart |"
        )
        print("|---|---|---:|---:|")
        for r in rows:
            print(
                f"| {r['repeat'] + 1} | {r['load_before']} | {r['recorded_on_screen_s']:.1f} s | {r['recorded_chart_s']:.1f} s |"
            )
        return
    print(
        "\n| try | load (1, 5, 15 min) before | fresh install: launch to the recorded map on screen (chart) "
        "| after the click on Train the demo yourself: map on screen | chart with all points "
        "| launch to map on screen | existing run: launch to map on screen (chart) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['repeat'] + 1} | {r['load_before']} | {r['recorded_on_screen_s']:.1f} s ({r['recorded_chart_s']:.1f} s) "
            f"| {r['on_screen_s']:.0f} s | {r['chart_s']:.0f} s "
            f"({r['points']:,} points) | {r['click_s'] + r['on_screen_s']:.0f} s | {r['again_on_screen_s']:.1f} s "
            f"({r['again_chart_s']:.1f} s) |"
        )
    if len(rows) > 1:
        median = statistics.median(r["on_screen_s"] for r in rows)
        print(f"\nmedian after the click: {median:.0f} s (map on screen)")


if __name__ == "__main__":
    main()
