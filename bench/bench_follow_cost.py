"""What following a training job in the dashboard costs the CPU: the Streamlit server's and the browser's
CPU seconds per minute while a page follows a running job, against the same job with no browser open.

One run does both, one after the other, each on a fresh store with its own ``cartomap dashboard`` (tagged:
:mod:`processes` stops the server and the job it started): (a) headless Debian chromium on the Data map
of the running run (the page a click on **Train the demo** leads to: its live job panel), (b) no browser
at all. The job is a small run of the bundled demo pairs with the default encoder (``--examples``,
``--epochs``), started the way the dashboard starts one (``cartomap.training.launch.start_training``).
While the job trains, each process's CPU seconds (utime + stime of /proc/<pid>/stat, every process of the
tree: the server with its children, chromium with every renderer and helper, the job) are sampled each
second for ``--seconds`` (from ``--settle`` seconds after the job's first step: the page's first load is
not counted); printed per minute of following and as a share of the machine's CPUs. Linux
(/proc), chromium + chromium-driver (Debian), no network (``HF_HUB_OFFLINE=1``).

    python bench/bench_follow_cost.py [--seconds 60] [--examples 960] [--epochs 2] [--tries 1]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from processes import TAG, chromium_options, new_tag, start_dashboard, stop

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds so far: utime + stime) of every live process (Linux /proc)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # gone
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
        table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS)
    return table


def tree(table: dict[int, tuple[int, float]], root: int | None) -> set[int]:
    """``root`` and every process below it in ``table``."""
    if root is None or root not in table:
        return set()
    found, todo = {root}, [root]
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class Meter:
    """CPU seconds of process trees over a window: each process from its first sample (0 for one born
    inside the window) to its last, summed per tree; sampled every ``every`` seconds."""

    def __init__(self, roots: dict[str, int | None]):
        self.roots = roots
        self.first: dict[str, dict[int, float]] = {name: {} for name in roots}
        self.last: dict[str, dict[int, float]] = {name: {} for name in roots}
        self.t0 = self.t1 = 0.0
        self.sample(start=True)

    def sample(self, start: bool = False) -> None:
        table = proc_table()
        now = time.time()
        for name, root in self.roots.items():
            for pid in tree(table, root):
                cpu = table[pid][1]
                self.first[name].setdefault(pid, cpu if start else 0.0)
                self.last[name][pid] = cpu
        if start:
            self.t0 = now
        self.t1 = now

    def seconds(self, name: str) -> float:
        return sum(self.last[name][pid] - self.first[name][pid] for pid in self.last[name])


def demo_subset(folder: Path, n: int) -> Path:
    """The first ``n`` pairs of the bundled demo's training set, as a JSONL file in ``folder``."""
    source = ROOT / "cartomap" / "data" / "demo" / "nli_train.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        rows = [line for _, line in zip(range(n), lines, strict=False)]
    path = folder / f"demo_{n}.jsonl"
    path.write_text("".join(rows), encoding="utf-8")
    return path


def start_job(cache: str, data: Path, epochs: int, tag: str):
    """Start training a small run of ``data`` in ``cache`` as the dashboard does; the job carries ``tag``."""
    sys.path.insert(0, str(ROOT))
    from cartomap.config import DataConfig, RunConfig, TrainConfig
    from cartomap.runs.store import RunStore
    from cartomap.training.launch import start_training

    config = RunConfig(name="follow-cost", data=DataConfig(path=str(data)), train=TrainConfig(epochs=epochs))
    os.environ[TAG] = tag  # the job's environment is this process's: stop() finds it by the tag
    try:
        return start_training(config, RunStore(cache))
    finally:
        del os.environ[TAG]


def wait_running(run, timeout: float = 600) -> int:
    """The job's pid once the run trains (its status says running)."""
    end = time.time() + timeout
    while time.time() < end:
        status = run.status()
        if status.get("state") == "running" and status.get("step"):
            return int(status["pid"])
        if status.get("state") not in ("queued", "running"):
            raise SystemExit(f"the job did not train: {status}")
        time.sleep(0.5)
    raise SystemExit("the job did not start training in time")


def opened(driver, url: str) -> None:
    """Open ``url``; on a starved machine selenium may give up waiting for the load, the browser goes on."""
    import urllib3.exceptions
    from selenium.common.exceptions import TimeoutException

    try:
        driver.get(url)
    except (TimeoutException, urllib3.exceptions.ReadTimeoutError):
        print(f"(the browser took over 120 s to load {url}; measuring all the same)", flush=True)


def follow(args, mode: str, driver, data: Path) -> dict:
    """One measurement: a fresh store and server, the job, the page open on it (``mode == "page"``) or not."""
    cache, logs = tempfile.mkdtemp(prefix="follow-cost-"), Path(tempfile.mkdtemp(prefix="follow-logs-"))
    tag, url = new_tag(), f"http://127.0.0.1:{args.port}"
    server, out = None, {"mode": mode, "load_before": load()}
    try:
        server = start_dashboard(cache, args.port, logs / "server.log", tag)
        run = start_job(cache, data, args.epochs, tag)
        if driver is not None:
            opened(driver, f"{url}/data_map?run={run.id}")
        job = wait_running(run)
        time.sleep(args.settle)  # the page's first load (scripts, first draw) is not following
        browser = driver.service.process.pid if driver is not None else None
        meter = Meter({"server": server.pid, "browser": browser, "job": job})
        end = time.time() + args.seconds
        while time.time() < end and Path(f"/proc/{job}").exists():  # until the job's process ends
            time.sleep(1.0)
            meter.sample()
        wall = meter.t1 - meter.t0
        out.update(wall_s=wall, load_after=load())
        for name in ("server", "browser", "job"):
            out[name] = meter.seconds(name)
    finally:
        stop(server, tag)
        if driver is not None:
            driver.get("about:blank")
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    return out


def per_minute(rows: list[dict], name: str) -> float:
    return statistics.median(r[name] / r["wall_s"] * 60 for r in rows)


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8621)
    parser.add_argument("--seconds", type=float, default=60, help="how long each mode follows the job")
    parser.add_argument("--settle", type=float, default=10, help="seconds after the job starts not measured")
    parser.add_argument("--examples", type=int, default=960, help="demo training pairs the job trains on")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tries", type=int, default=1, help="rotations of (page, no browser); medians")
    args = parser.parse_args()
    options = chromium_options()
    folder = Path(tempfile.mkdtemp(prefix="follow-data-"))
    data = demo_subset(folder, args.examples)
    rows: dict[str, list[dict]] = {"page": [], "none": []}
    try:
        for _ in range(args.tries):
            driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
            driver.set_script_timeout(120)
            driver.set_page_load_timeout(600)
            try:
                rows["page"].append(follow(args, "page", driver, data))
            finally:
                driver.quit()
            print(rows["page"][-1], flush=True)
            rows["none"].append(follow(args, "none", None, data))
            print(rows["none"][-1], flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cpus = os.cpu_count() or 1
    print(f"\nCPU seconds per minute of following ({cpus} CPUs; medians of {args.tries} tries)\n")
    print("| | (a) page open on the job | (b) no browser |")
    print("|---|---:|---:|")
    for name in ("server", "browser", "job"):
        a, b = per_minute(rows["page"], name), per_minute(rows["none"], name)
        print(f"| {name} | {a:.1f} s | {b:.1f} s |")
    a = per_minute(rows["page"], "server") + per_minute(rows["page"], "browser")
    b = per_minute(rows["none"], "server") + per_minute(rows["none"], "browser")
    print(
        f"| server + browser | {a:.1f} s ({a / 60 / cpus:.1%} of {cpus} CPUs) | {b:.1f} s ({b / 60 / cpus:.1%}) |"
    )
    print(
        f"| followed for | {statistics.median(r['wall_s'] for r in rows['page']):.0f} s "
        f"| {statistics.median(r['wall_s'] for r in rows['none']):.0f} s |"
    )
    print(
        f"| load before (1, 5, 15 min) | {rows['page'][0]['load_before']} | {rows['none'][0]['load_before']} |"
    )


if __name__ == "__main__":
    main()
