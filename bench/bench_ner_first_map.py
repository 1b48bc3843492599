"""Time from the click on "Train the NER demo" to the NER demo's first word map, in a real browser, with the
machine's load beside it.

Starts ``cartomap dashboard`` (of this checkout) on a fresh run store, opens it in headless Debian chromium (selenium), clicks
**Train the NER demo** and waits for the map itself (not the training curves the page shows while the run
trains): the server-drawn picture of the map (``img`` "picture of the data map") and the plotly chart
whose points are the run's words (point ids ``<sentence id>#<word>``). The stages in between come from
the run's own files: the job starts training (``log.txt``), each epoch ends (``history.json``: training,
the eval-mode recording pass and the dev evaluation), the run is done (``status.json``). The 1-minute
load average is sampled every 5 s (``os.getloadavg``) and printed with the CPU count, and the training
job's CPU time (user + system, psutil) is read while it runs: on a shared machine the wall-clock figures
are only comparable at a similar load, and the CPU seconds say how much work the job itself did. The
server and the training job are stopped at the end, also when the bench stops early. Needs chromium +
chromium-driver and Linux (/proc).

    python bench/bench_ner_first_map.py [--port 8612] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from processes import (  # bench/processes.py: what the bench starts and stops
    CHROMIUM_FLAGS,
    new_tag,
    start_dashboard,
    stop,
)

ROOT = Path(__file__).resolve().parent.parent
BUTTON = "Train the NER demo"
PICTURE_ALT = "picture of the data map"  # pages/data_map.py's PICTURE_ALT
# The word map's chart (its figure's meta counts the points; the training curves' has none): the word points
# its traces hold and the count the figure says it shows (null while it is not drawn).
_WORD_POINTS_JS = """
for (const gd of document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')) {
  const meta = gd._fullLayout && gd._fullLayout.meta;
  if (!meta || meta.n_total === undefined || !gd._fullData) continue;
  let words = 0;
  for (const t of gd._fullData) {
    const ids = t.customdata ? Array.from(t.customdata) : [];
    words += ids.filter(c => String(c).includes('#')).length;
  }
  return {points: words, n_shown: meta.n_shown};
}
return null;
"""
# the picture decoded and displayed (it is hidden once the chart is drawn)
_PICTURE_JS = f"""return [...document.querySelectorAll('img')].some(i => i.alt === '{PICTURE_ALT}'
    && i.complete && i.naturalWidth > 0 && i.offsetParent !== null);"""


class LoadSampler(threading.Thread):
    """The 1-minute load average every ``every`` seconds until stopped."""

    def __init__(self, every: float = 5.0):
        super().__init__(daemon=True)
        self.every, self.samples, self.done = every, [], threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append(os.getloadavg()[0])
            self.done.wait(self.every)


def job_cpu(pid: int, seen: dict) -> dict:
    """The training job's CPU seconds (user + system) and when they were read, or ``seen`` when the process
    is gone (the last reading stands)."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return seen
    out = {"cpu_s": times.user + times.system, "at": time.time()}
    if "first_at" not in seen:
        out["first_at"] = out["at"]
    return out


def run_folder(cache: str) -> Path | None:
    runs = [p for p in (Path(cache) / "runs").glob("*") if (p / "config.json").exists()]
    return runs[0] if runs else None


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8612)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the map")
    args = parser.parse_args()
    cache, logs = tempfile.mkdtemp(prefix="ner-first-map-"), Path(tempfile.mkdtemp())
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    load = LoadSampler()
    load.start()
    load_before = os.getloadavg()
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    tag = new_tag()  # the server and the training job it starts: all stopped at the end
    server = start_dashboard(cache, args.port, logs / "server.log", tag)
    marks: dict[str, float] = {}
    epochs: list[float] = []
    cpu: dict = {}  # the training job's CPU time
    try:
        driver.get(f"http://127.0.0.1:{args.port}")
        end = time.time() + 120
        while True:
            found = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == BUTTON]
            if found:
                break
            if time.time() > end:
                raise SystemExit(f"no {BUTTON!r} button after 120 s")
            time.sleep(0.5)
        found[0].click()
        clicked = time.time()
        end = clicked + args.timeout
        while "chart" not in marks:
            if time.time() > end:
                raise SystemExit(f"timed out after {args.timeout:.0f} s: reached {sorted(marks)}")
            now = time.time() - clicked
            folder = run_folder(cache)
            if folder is not None:
                log = folder / "log.txt"
                if "training" not in marks and log.exists() and "training on" in log.read_text():
                    marks["training"] = now
                history = folder / "history.json"
                try:
                    done_epochs = len(json.loads(history.read_text())) if history.exists() else 0
                except ValueError:  # being replaced right now
                    done_epochs = len(epochs)
                while len(epochs) < done_epochs:
                    epochs.append(now)
                try:
                    status = json.loads((folder / "status.json").read_text())
                except (OSError, ValueError):
                    status = {}
                state = status.get("state")
                if state == "running" and status.get("pid"):
                    cpu.update(job_cpu(int(status["pid"]), cpu))
                if state == "done" and "done" not in marks:
                    marks["done"] = now
                if state in ("failed", "cancelled"):
                    raise SystemExit(f"the NER demo's run {folder.name} is {state}: see {folder}/log.txt")
            if "picture" not in marks and driver.execute_script(_PICTURE_JS):
                marks["picture"] = now
            chart = driver.execute_script(_WORD_POINTS_JS)
            if chart and chart["points"] and chart["points"] == chart["n_shown"]:
                marks["chart"] = now
                marks["points"] = chart["points"]
            time.sleep(0.5)
    finally:
        load.done.set()
        driver.quit()
        stop(server, tag)  # the server, and the training job when the bench stopped before it ended
    folder = run_folder(cache)
    history = json.loads((folder / "history.json").read_text())
    config = json.loads((folder / "config.json").read_text())["config"]
    samples = load.samples or [load_before[0]]
    print(
        f"NER demo, run {folder.name}: {config['train']['epochs']} epochs, lr {config['train']['learning_rate']}, "
        f"max length {config['model']['max_length']}; {os.cpu_count()} CPUs"
    )
    print(
        f"load average (1 min): {load_before[0]:.1f} before the start; during the run min "
        f"{min(samples):.1f}, median {sorted(samples)[len(samples) // 2]:.1f}, max {max(samples):.1f}"
    )
    if cpu:
        wall = cpu["at"] - cpu["first_at"]
        print(
            f"training job: {cpu['cpu_s']:.0f} CPU seconds in the {wall:.0f} s it was read while running "
            f"({cpu['cpu_s'] / max(wall, 1e-9):.2f} cores on average)"
        )
    print("| stage | seconds after the click |")
    print("|---|---|")
    if "training" in marks:
        print(f"| the job starts training (libraries, data, tokenizer loaded) | {marks['training']:.0f} |")
    for k, (at, record) in enumerate(zip(epochs, history, strict=False), start=1):
        parts = [f"train {record.get('train_seconds', 0):.0f} s"]
        if record.get("record_seconds") is not None:
            parts.append(f"recording pass {record['record_seconds']:.0f} s")
        parts.append(f"dev accuracy {record.get('dev_accuracy', float('nan')):.3f}")
        if record.get("dev_entity_f1") is not None:
            parts.append(f"dev entity F1 {record['dev_entity_f1']:.3f}")
        print(f"| epoch {k} done ({', '.join(parts)}) | {at:.0f} |")
    if "done" in marks:
        print(f"| run done (metrics written) | {marks['done']:.0f} |")
    if "picture" in marks:
        print(f"| **the map's picture shown** | **{marks['picture']:.0f}** |")
    print(f"| **the word map drawn** ({marks['points']:,} points) | **{marks['chart']:.0f}** |")
    print(f"cache left in {cache}")


if __name__ == "__main__":
    main()
