"""What the scale benchmarks share: the child stages' memory readings, the rows they report, the state
they pass on through the work folder, and the timed page scripts.

``bench/bench_scale.py`` (the pair stages and the driver) and ``bench/scale_token.py`` (the token
stages) both import this module, which imports neither: the bench has no import cycle.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- memory
def _status(field: str) -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field):
                return int(line.split()[1]) / 1024  # MiB
    return float("nan")


def peak_mib() -> float:
    return _status("VmHWM")


def rss_mib() -> float:
    return _status("VmRSS")


def reset_peak() -> None:
    """Start a new high-water mark at the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


class Rows:
    """The rows a child stage reports (printed as JSON lines the parent collects)."""

    def __init__(self, stage: str):
        self.stage = stage
        self.last: dict = {}

    def add(
        self, what: str, seconds=None, peak=None, note: str = "", goal: str = "", ok=None, cpu=None, **extra
    ):
        row = {
            "stage": self.stage,
            "what": what,
            "seconds": None if seconds is None else round(float(seconds), 3),
            "cpu_seconds": None if cpu is None else round(float(cpu), 3),
            "peak_mib": None if peak is None else round(float(peak)),
            "note": note,
            "goal": goal,
            "ok": ok,
            **extra,
        }
        print("@@ROW " + json.dumps(row), flush=True)
        self.last = row
        return row

    def measure(self, what: str, fn, *args, note="", goal="", limit=None, **extra):
        """Run ``fn(*args)``, report its time and peak; returns its result."""
        reset_peak()
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn(*args)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        note = note(result) if callable(note) else note
        ok = None if limit is None else seconds <= limit
        self.add(what, seconds, peak_mib(), note, goal, ok, cpu=cpu, **extra)
        return result


def rows_seconds(rows: Rows) -> float:
    """The seconds of the row ``rows`` reported last."""
    return float(rows.last.get("seconds") or 0.0)


# --------------------------------------------------------------------------- shared state
def state_path(work: Path) -> Path:
    return work / "state.json"


def load_state(work: Path) -> dict:
    return json.loads(state_path(work).read_text()) if state_path(work).exists() else {}


def save_state(work: Path, **changes) -> None:
    state = load_state(work)
    state.update(changes)
    state_path(work).write_text(json.dumps(state, indent=2))


def store_of(work: Path):
    from cartomap.runs.store import RunStore

    return RunStore(work / "store")


def main_run(work: Path, key: str = "run"):
    return store_of(work).get(load_state(work)[key])


# --------------------------------------------------------------------------- page scripts
PAGE_TIMER = """import runpy, time
import streamlit as st
_t0, _c0 = time.perf_counter(), time.thread_time()
try:
    runpy.run_path({page!r}, run_name="__main__")
finally:
    st.session_state["_bench_script_s"] = (time.perf_counter() - _t0, time.thread_time() - _c0)
"""


def app_test(page: str, work: Path, timeout: int = 600):
    """An AppTest of ``pages/<page>`` wrapped in a timer of the page script alone: AppTest itself
    scans every installed package for components on each run (seconds that a server does not spend)."""
    from streamlit.testing.v1 import AppTest

    timer = work / f"timed_{page}"
    timer.write_text(PAGE_TIMER.format(page=str(ROOT / "pages" / page)))
    return AppTest.from_file(str(timer), default_timeout=timeout)


def timed_run(rows: Rows, what: str, app, **extra) -> None:
    """Run ``app`` and report the page script's wall and CPU time (its thread) and the peak RSS."""
    reset_peak()
    app.run()
    if app.exception:
        raise RuntimeError(app.exception[0].message)
    seconds, cpu = app.session_state["_bench_script_s"]
    ok = None if "limit" not in extra else seconds <= extra.pop("limit")
    rows.add(what, seconds, peak_mib(), cpu=cpu, ok=ok, **extra)


def prepare_pages(work: Path) -> None:
    """As under `streamlit run app.py`: the store in the environment, pages importable, modules loaded."""
    os.environ["CARTOMAP_CACHE"] = str(work / "store")
    sys.path.insert(0, str(ROOT))
    import plotly.graph_objects  # noqa: F401
    import streamlit  # noqa: F401

    import cartomap.analysis.datamap  # noqa: F401
    import cartomap.analysis.figures  # noqa: F401
    import pages.common  # noqa: F401
    import pages.components.jobs  # noqa: F401
