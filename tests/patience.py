"""How long the tests wait, in one place: generous limits, and waits that last while a job makes progress.

The suite often runs on a busy machine (other jobs on the same 2 cores: at a load of 4-8, work that takes
a second alone takes 5-30), so no test may fail because the machine is slow:

* a wait for something that comes within seconds alone (a server up, a page drawn, a browser event, one
  script run of a page) gives up after :data:`WAIT_S`;
* a wait for a job (a training, a CLI command that trains, a process tree) lasts while the job makes
  progress (:func:`run`, :func:`wait_progressing`): it fails only when the job died, or when nothing it
  shows changed for :data:`STALL_S` (its output, its CPU time, the files of the folders it reports in);
* the last resort against a hang is pytest-timeout's limit per test (``timeout`` in pyproject.toml).

A test still fails when the behaviour is wrong: a page that never draws, a job that stops, a process that
hangs; only later than a tight limit would.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: How long to wait for what takes seconds alone (a server's start, a page drawn, a browser event).
WAIT_S = 300.0
#: How long a job may show no progress at all (output, CPU time, files) before a test calls it stuck.
STALL_S = 600.0
POLL_S = 0.25
#: How often a wait looks for progress (the files of a folder walked, a process's CPU time read).
PROGRESS_EVERY_S = 1.0


def wait_for(
    predicate: Callable[[], Any], timeout: float = WAIT_S, what: str = "condition", poll_s: float = POLL_S
):
    """Poll ``predicate`` until it returns something true (returned); AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll_s)


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, CPU ticks: utime + stime + the waited-for children's) of process ``pid``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def cpu_ticks(pid: int) -> int:
    """CPU time of process ``pid`` and of every process below it (a job's own workers, a bench's
    trainings), in clock ticks; 0 once it is gone."""
    stats = {int(p): st for p in os.listdir("/proc") if p.isdigit() and (st := _stat(p)) is not None}
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        if current in stats:
            total += stats[current][1]
            todo += children.get(current, [])
    return total


def files_state(folders: Iterable[Path | str]) -> tuple:
    """(path, size, mtime) of every file under ``folders``: changes when a job writes its status,
    progress, logs or results."""
    state = []
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except OSError:  # replaced meanwhile (an atomic write)
                    continue
                state.append((path, st.st_size, st.st_mtime_ns))
    return tuple(sorted(state))


def alive(worker: subprocess.Popen | threading.Thread) -> bool:
    return worker.is_alive() if isinstance(worker, threading.Thread) else worker.poll() is None


def stop(workers: list) -> None:
    """Kill the processes among ``workers`` that still run (threads cannot be stopped: left alone)."""
    for w in workers:
        if isinstance(w, subprocess.Popen) and alive(w):
            w.kill()
            w.wait()


def wait_progressing(
    workers: subprocess.Popen | threading.Thread | list,
    watch: Iterable[Path | str] = (),
    stall_s: float = STALL_S,
    progress: Callable[[], Any] | None = None,
    until: Callable[[], Any] | None = None,
    what: str = "the job",
    poll_s: float = POLL_S,
    together: bool = False,
):
    """Wait, however long it takes while they make progress, until every one of ``workers`` (processes or
    threads) has ended; with ``until``, until ``until()`` returns something true (returned; None when the
    workers ended first; with no workers, a job elsewhere, only ``until`` ends the wait).

    Progress: a process's CPU time grows, the files under ``watch`` change, or ``progress()`` returns
    something new. When none of that moved for ``stall_s`` seconds, the processes are killed and
    AssertionError raised. ``together``: processes that wait for each other (the ranks of one training):
    once one of them failed, the others are stopped (they would wait for it for good)."""
    workers = workers if isinstance(workers, list) else [workers]
    watch = [Path(w) for w in watch]

    def now() -> tuple:
        ticks = tuple(cpu_ticks(w.pid) for w in workers if isinstance(w, subprocess.Popen) and alive(w))
        return ticks, files_state(watch), progress() if progress else None

    seen, since = now(), time.monotonic()
    checked = since
    while True:
        if until is not None and (value := until()):
            return value
        if together and any(isinstance(w, subprocess.Popen) and w.poll() not in (None, 0) for w in workers):
            stop(workers)
        if workers and not any(alive(w) for w in workers):
            return until() if until is not None else None
        time.sleep(poll_s)
        if time.monotonic() - checked < PROGRESS_EVERY_S:  # ``until`` may be polled often, progress not
            continue
        checked = time.monotonic()
        state = now()
        if state != seen:
            seen, since = state, checked
        elif checked - since > stall_s:
            stop(workers)
            raise AssertionError(f"{what} made no progress for {stall_s:.0f} s (stopped)")


def run(
    cmd: list[str],
    watch: Iterable[Path | str] = (),
    stall_s: float = STALL_S,
    input: str | None = None,
    **popen_kwargs,
) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` without a time limit: it waits while the
    command makes progress (its output grows, its CPU time grows, or the files under ``watch`` change) and
    fails (AssertionError, the command killed) only when none of that moved for ``stall_s`` seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin = subprocess.PIPE if input is not None else popen_kwargs.pop("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=stdin, **popen_kwargs)
        if input is not None:
            proc.stdin.write(input.encode())
            proc.stdin.close()
        sizes = lambda: (os.fstat(out.fileno()).st_size, os.fstat(err.fileno()).st_size)  # noqa: E731
        try:
            wait_progressing(
                proc, watch, stall_s, progress=sizes, what=f"`{' '.join(map(str, cmd[:6]))} ...`"
            )
        except AssertionError as stuck:
            err.seek(0)
            raise AssertionError(
                f"{stuck}; its stderr ends:\n{err.read().decode(errors='replace')[-2000:]}"
            ) from None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            cmd, proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace")
        )
