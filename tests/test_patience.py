"""The tests' own waiting (tests/patience.py): it outlasts a slow job that makes progress and still fails
on one that is stuck."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import patience
import pytest

TICKING = "import sys, time\nfor k in range(20):\n    print(k, flush=True)\n    time.sleep(0.3)\n"


def test_a_job_that_keeps_making_progress_is_waited_for_past_the_stall_limit():
    started = time.monotonic()
    done = patience.run([sys.executable, "-c", TICKING], stall_s=5)  # 6 s, a line every 0.3 s
    assert done.returncode == 0 and done.stdout.split() == [str(k) for k in range(20)]
    assert time.monotonic() - started > 5


PARENT = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time\\nend = time.time() + 8\\nwhile time.time() < end: pass"])
"""


def test_the_work_of_a_jobs_own_processes_counts_as_its_progress():
    """A driver that only waits for the process it started (a bench, a launcher) is not stuck."""
    done = patience.run([sys.executable, "-c", PARENT], stall_s=4)  # the child computes for 8 s
    assert done.returncode == 0, done.stderr


def test_a_stuck_job_fails_and_is_stopped(tmp_path):
    with pytest.raises(AssertionError, match="made no progress for 1 s"):
        patience.run(
            [sys.executable, "-c", "import sys, time; print('up', file=sys.stderr); time.sleep(600)"],
            stall_s=1,
        )
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with pytest.raises(AssertionError, match="the sleeper made no progress"):
        patience.wait_progressing(proc, [tmp_path], stall_s=1, what="the sleeper")
    assert proc.poll() is not None  # killed


def test_files_changing_count_as_progress_and_until_ends_the_wait(tmp_path):
    def writer():
        for k in range(15):
            (tmp_path / "status.json").write_text(str(k))
            time.sleep(0.4)

    thread = threading.Thread(target=writer)
    thread.start()
    patience.wait_progressing(thread, [tmp_path], stall_s=5, what="the writer")  # 6 s in all
    assert (tmp_path / "status.json").read_text() == "14"
    assert patience.wait_progressing([], [tmp_path], until=lambda: "found", stall_s=1) == "found"
    with pytest.raises(AssertionError, match="no progress"):
        patience.wait_progressing([], [tmp_path], until=lambda: None, stall_s=1)


def test_processes_that_need_each_other_are_stopped_when_one_fails():
    failing = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    patience.wait_progressing([failing, waiting], stall_s=60, together=True)
    assert failing.returncode == 3 and waiting.returncode is not None


#: Wall-clock limits written into a test: each must come from patience.py (or say why it is harmless with a
#: "# patience: <why>" comment on its line, e.g. a per-attempt limit inside a loop that retries).
TIGHT = {
    "a page's script-run limit": re.compile(r"default_timeout=\d"),
    "a subprocess or wait limit": re.compile(r"\btimeout=\d"),
    "a thread or process joined for a while": re.compile(r"\.(join|wait)\(\d"),
    "a deadline": re.compile(r"(time\(\)|monotonic\(\)|perf_counter\(\)) \+ \d"),
    "a duration asserted": re.compile(r"assert .*(time\(\)|monotonic\(\)|perf_counter\(\)) - \w+ <"),
}


def test_no_test_sets_a_tight_wall_clock_limit():
    """A busy machine makes everything 5-30x slower: limits come from tests/patience.py, never a number of
    seconds of one's own (pytest-timeout's marks may only raise the suite's limit)."""
    found = []
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.name in ("patience.py", "test_patience.py"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "# patience:" in line:
                continue
            found += [
                f"{path.name}:{number}: {what}: {line.strip()}"
                for what, rx in TIGHT.items()
                if rx.search(line)
            ]
            mark = re.search(r"mark\.timeout\(([\d *]+)\)", line)
            if mark and eval(mark.group(1)) < 3600:  # noqa: S307 - digits and '*' only
                found.append(f"{path.name}:{number}: a per-test limit under the suite's: {line.strip()}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # _wait(predicate, 30, ...)
            name = getattr(node, "func", None)
            name = getattr(name, "id", getattr(name, "attr", None))
            waits = isinstance(node, ast.Call) and name in ("_wait", "wait_for") and len(node.args) > 1
            if waits and isinstance(node.args[1], ast.Constant):
                found.append(f"{path.name}:{node.lineno}: a wait's own limit ({name})")
    assert not found, "wall-clock limits a busy machine can hit (use tests/patience.py):\n" + "\n".join(found)
