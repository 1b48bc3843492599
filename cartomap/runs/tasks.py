"""Tasks: background work on a finished run (embeddings, projections, similarity, filtering, ...).

A task is named (``embeddings``, ``projection_umap``, ``filter-b1``) and keeps its state in the
run folder, built like a run's own state (:class:`cartomap.runs.state.StatusFolder`): a status
file, a lock held while it runs, a log of its job. :func:`task` runs a block of code as a task:
running while inside, then done or failed.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cartomap.errors import RunError
from cartomap.io import atomic_write_json, read_json
from cartomap.runs import layout
from cartomap.runs.state import State, StatusFolder, Throttle


@dataclass(frozen=True)
class Task(StatusFolder):
    """Task ``name`` of the run in ``run_path``: ``tasks/<name>.json``, ``.lock`` and ``.log``."""

    run_path: Path
    name: str
    BUSY = "is already running"

    @property
    def path(self) -> Path:  # the folder of the status, lock and log files
        return self.run_path / layout.TASKS

    @property
    def status_path(self) -> Path:
        return self.path / layout.TASK_STATUS.format(name=self.name)

    @property
    def lock_path(self) -> Path:
        return self.path / layout.TASK_LOCK.format(name=self.name)

    @property
    def log_path(self) -> Path:
        """The task's job output and its log lines, in one file."""
        return self.path / layout.TASK_LOG.format(name=self.name)

    @property
    def job_log_path(self) -> Path:
        return self.log_path

    @property
    def cancel_path(self) -> Path:
        return self.path / f"{self.name}.{layout.CANCEL}"

    def describe(self) -> str:
        return f"task {self.name} of run {self.run_path.name}"

    def status_or_none(self) -> dict[str, Any] | None:
        """The task's status with the derived state; None when it never started."""
        return self.status() if self.status_path.exists() else None

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into the status (no state check: progress fields only)."""
        self.path.mkdir(parents=True, exist_ok=True)
        status = read_json(self.status_path) if self.status_path.exists() else {}
        status.update(fields, updated_at=time.time())
        atomic_write_json(self.status_path, status)


def task_of(run, name: str) -> Task:
    """The task ``name`` of ``run`` (a Run or its folder)."""
    return Task(Path(getattr(run, "path", run)), name)


def task_status(run, name: str) -> dict[str, Any] | None:
    """The task's last status with its derived state (``interrupted`` when its process is gone)."""
    return task_of(run, name).status_or_none()


def task_update(run, name: str, **fields: Any) -> None:
    task_of(run, name).update(**fields)


@contextlib.contextmanager
def task(run, name: str, **fields: Any):
    """Run a block as task ``name``: running while inside (lock held), then done or failed.

    Yields ``update(**fields)`` for progress fields. Raises RunError when the task already runs.
    """
    record = task_of(run, name)
    handle = record.acquire_lock()
    try:
        record.update(state=State.RUNNING, progress=0.0, error=None, pid=os.getpid(), **fields)
        yield record.update
        record.update(state=State.DONE, progress=1.0)
    except BaseException as err:
        try:
            record.update(state=State.FAILED, error=f"{type(err).__name__}: {err}")
        except OSError as status_err:
            raise RunError(
                f"task {name} failed ({type(err).__name__}: {err}), and its status could not be saved "
                f"({status_err.strerror or status_err}); it reads 'interrupted'"
            ) from err
        if hasattr(run, "log"):
            run.log(f"task {name} failed:\n" + traceback.format_exc())
        raise
    finally:
        handle.close()


def throttled_reporter(update, progress=None, fields=None, every_s: float = 1.0):
    """A ``report(done, total)`` callback: passes every call on to ``progress`` (a CLI bar) and writes
    the task status through ``update`` at most every ``every_s`` seconds and at the end.

    ``fields(done, total)`` gives the status fields; default: progress, done, total.
    """
    fields = fields or (
        lambda done, total: {"progress": round(done / max(total, 1), 4), "done": done, "total": total}
    )
    throttle = Throttle(every_s)

    def report(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        if throttle.ready(force=done == total):
            update(**fields(done, total))

    return report
