"""A job as fast from the dashboard as from the command line: the demo trained by ``cartomap demo --train``
against the same run trained from the dashboard's **Train the demo yourself**, followed by the page in a
real browser, and their ratio (goal: dashboard / CLI <= 1.1).

Each try, one after the other, on fresh stores:

* CLI: ``cartomap --cache FRESH demo --train`` (the recording installed by nothing: it trains), wall time
  of the whole command (libraries, training, the map's PNG and HTML written);
* dashboard: ``cartomap dashboard`` on a fresh store (it installs the demo's recording), headless Debian
  chromium opens it, clicks **Train the demo yourself**, and waits for the data map of the trained run
  (the recording's map gone first, then the map's picture or chart back with every point): seconds from
  the click to the map on screen. While the job trains the bench reads its status file once a second and
  leaves the browser alone (the page follows the job as a user's would); once the job has ended it asks
  the browser every 50 ms until the map is there.

``--quick`` proves the bench in about a minute: both sides train the same small run instead (the first
``--examples`` demo pairs, 1 epoch): ``cartomap train --config`` on the CLI; on the dashboard the job
started as its pages start one (``start_training``) and the Data map page opened on it (no click: the
demo has no smaller size), timed from the start to its map on screen. Medians of ``--tries``; everything
the bench started is stopped. Linux (/proc), chromium + chromium-driver, ``HF_HUB_OFFLINE=1``.

    python bench/bench_dashboard_job.py [--tries 3] [--port 8631]
    python bench/bench_dashboard_job.py --quick --tries 1
    python bench/bench_dashboard_job.py --check-click --tries 1   # the click starts the demo (no training)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_first_map import CHART_JS, load, open_map, script, wait_for
from bench_follow_cost import TAG, demo_subset
from processes import chromium_options, new_tag, start_dashboard, stop

ROOT = Path(__file__).resolve().parent.parent


def quick_config(data: Path):
    sys.path.insert(0, str(ROOT))
    from cartomap.config import DataConfig, RunConfig, TrainConfig

    return RunConfig(name="quick", data=DataConfig(path=str(data)), train=TrainConfig(epochs=1))


def describe(cache: str) -> dict:
    """What the trained run says of itself: how its threads waited (its log), the seconds its epoch loops
    and recording passes took (its history), and any restart as the CPUs' load changed."""
    from cartomap.runs.store import RunStore
    from cartomap.training.loop import RESTARTED

    runs = [r for r in RunStore(cache).list() if r.history()]
    if not runs:
        return {}
    run = runs[0]
    log = run.log_path.read_text(encoding="utf-8", errors="replace") if run.log_path.exists() else ""
    waits = [line.split("CPU threads, ", 1)[1] for line in log.splitlines() if "CPU threads, " in line]
    history = run.history()
    return {
        "wait": waits,
        "train_s": round(sum(h.get("train_seconds", 0) for h in history), 1),
        "record_s": round(sum(h.get("record_seconds", 0) for h in history), 1),
        "restarts": log.count(RESTARTED),
    }


def cli_once(args, data: Path | None) -> float:
    """Wall seconds of the CLI's training on a fresh store: ``demo --train``, or (quick) ``train --config``."""
    cache, out = tempfile.mkdtemp(prefix="job-cli-"), tempfile.mkdtemp(prefix="job-cli-out-")
    try:
        if data is None:
            command = ["demo", "--train", "--out-dir", out]
        else:
            config = Path(out) / "config.json"
            config.write_text(json.dumps(quick_config(data).to_dict()), encoding="utf-8")
            command = ["train", "--config", str(config), "--quiet"]
        t0 = time.time()
        subprocess.run(
            [sys.executable, "-m", "cartomap.cli", "--cache", cache, *command],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        seconds = time.time() - t0
        print(f"  CLI run: {describe(cache)}", flush=True)
        return seconds
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def click_demo(driver, url: str, cache: str, timeout: float, check=None) -> float:
    """Open the dashboard on the recording, click Train the demo yourself, wait for the recording's map to
    go and the trained run's to come; the seconds from the click to the map on screen."""
    driver.get(url)
    wait_for(lambda: script(driver, CHART_JS), 300, "the recorded demo's map")
    button = wait_for(
        lambda: [
            b for b in driver.find_elements("tag name", "button") if "Train the demo yourself" in b.text
        ],
        120,
        "the Train the demo yourself button",
    )[0]
    button.click()
    clicked = time.time()
    wait_for(lambda: not script(driver, CHART_JS), 300, "the recording's map to go")
    if check is not None:
        return check(clicked)
    trained(lambda: demo_run(cache), timeout)
    return open_map(driver, url, timeout, clicked)["on_screen"]


def demo_run(cache: str):
    """The demo's run in ``cache`` once it is no longer the recording (None before)."""
    from cartomap.runs import shipped
    from cartomap.runs.store import RunStore

    run = shipped.installed(RunStore(cache))
    return None if run is None or shipped.is_recording(run) else run


def trained(run_of, timeout: float) -> None:
    """Wait, reading the run's status file once a second and asking the browser nothing, until the job
    has ended. The page follows the job on its own; a bench that asked the browser for the map every
    50 ms meanwhile (two scripts run in the page, through chromedriver, 40 times a second) took a fifth
    of the training's speed itself (docs/benchmarks.md). ``run_of``: the run, or None while not there."""
    from cartomap.runs.state import is_active

    end = time.time() + timeout
    while time.time() < end:
        run = run_of()
        if run is not None and not is_active(run.state):
            return
        time.sleep(1.0)
    raise SystemExit(f"the job did not end in {timeout:.0f} s")


def training_started(cache: str):
    """For ``--check-click``: the seconds from the click until the demo's run, no longer the recording, is
    queued or running in ``cache`` (then the bench stops it: no training)."""

    def check(clicked: float) -> float:
        def started():
            from cartomap.runs.state import is_active

            run = demo_run(cache)
            return run is not None and is_active(run.state)

        wait_for(started, 120, "the demo's training job")
        return time.time() - clicked

    return check


def start_quick(driver, url: str, cache: str, data: Path, tag: str, timeout: float) -> float:
    """Start the quick run as the dashboard does and open the Data map on it; seconds to its map."""
    from cartomap.runs.store import RunStore
    from cartomap.training.launch import start_training

    os.environ[TAG] = tag  # the job inherits it: stop() finds it
    try:
        t0 = time.time()
        run = start_training(quick_config(data), RunStore(cache))
    finally:
        del os.environ[TAG]
    driver.get(f"{url}/data_map?run={run.id}")
    trained(lambda: RunStore(cache).get(run.id), timeout)
    return open_map(driver, url, timeout, t0)["on_screen"]


def dashboard_once(args, driver, data: Path | None) -> float:
    cache, logs = tempfile.mkdtemp(prefix="job-dash-"), Path(tempfile.mkdtemp(prefix="job-dash-logs-"))
    tag, url = new_tag(), f"http://127.0.0.1:{args.port}"
    server = None
    try:
        server = start_dashboard(cache, args.port, logs / "server.log", tag)
        if data is None:
            seconds = click_demo(
                driver, url, cache, args.timeout, training_started(cache) if args.check_click else None
            )
        else:
            seconds = start_quick(driver, url, cache, data, tag, args.timeout)
        print(f"  dashboard run: {describe(cache)}", flush=True)
        return seconds
    finally:
        stop(server, tag)
        driver.get("about:blank")
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3, help="fresh stores per side, interleaved; medians")
    parser.add_argument("--port", type=int, default=8631)
    parser.add_argument("--quick", action="store_true", help="a small run instead of the demo (a smoke test)")
    parser.add_argument("--examples", type=int, default=160, help="--quick: demo training pairs")
    parser.add_argument(
        "--check-click",
        action="store_true",
        help="the dashboard side only up to its job's start (no training)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one training may take")
    args = parser.parse_args()
    options = chromium_options()
    folder = Path(tempfile.mkdtemp(prefix="job-data-"))
    data = demo_subset(folder, args.examples) if args.quick else None
    cli, dash = [], []
    try:
        for attempt in range(args.tries):
            print(f"try {attempt + 1}: load {load()}", flush=True)
            if not args.check_click:
                cli.append(cli_once(args, data))
                print(f"  CLI {cli[-1]:.1f} s (load after {load()})", flush=True)
            driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
            driver.set_script_timeout(120)
            driver.set_page_load_timeout(600)
            try:
                dash.append(dashboard_once(args, driver, data))
            finally:
                driver.quit()
            print(f"  dashboard {dash[-1]:.1f} s (load after {load()})", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.check_click:
        print(f"the click started the demo's training job {statistics.median(dash):.1f} s after it")
        return
    what = (
        f"quick: {args.examples} demo pairs, 1 epoch"
        if args.quick
        else "the NLI demo (cartomap demo --train)"
    )
    timed = "start to map on screen" if args.quick else "click to map on screen"
    c, d = statistics.median(cli), statistics.median(dash)
    print(f"\n| {what} | CLI | dashboard ({timed}) | dashboard / CLI |")
    print("|---|---:|---:|---:|")
    print(f"| median of {args.tries} | {c:.1f} s | {d:.1f} s | {d / c:.2f} |")
    print(f"| tries | {', '.join(f'{x:.0f}' for x in cli)} s | {', '.join(f'{x:.0f}' for x in dash)} s | |")


if __name__ == "__main__":
    main()
