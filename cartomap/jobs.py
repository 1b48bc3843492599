"""Long work runs as a job in its own process; pages start jobs and poll the run store.

A job is ``python -m cartomap.cli ...`` started in a new session, so it survives a closed
browser tab, a page switch or a restart of the Streamlit server. Training jobs report through
the run's ``status.json``; other jobs (embeddings, projections, ...) through
``tasks/<name>.json`` in the run folder, written with :func:`task`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .config import RunConfig
from .io import atomic_write_json, is_locked, read_json
from .store import Run, RunStore


def spawn(
    cli_args: list[str], log_path: Path, cache: Path | None = None, env: dict[str, str] | None = None
) -> int:
    """Start ``cartomap <cli_args>`` detached from this process; output goes to ``log_path``. Returns the pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "cartomap.cli"]
    if cache is not None:
        args += ["--cache", str(cache)]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1", **(env or {}))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            args + cli_args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
            close_fds=True,
        )
    return proc.pid


def start_training(config: RunConfig, store: RunStore) -> Run:
    """Validate the data, create the run and start training it in the background (unless done or running).

    Raises DataError for bad input before anything is created.
    """
    from .train import prepare_run

    run = prepare_run(config, store)
    if run.state == "done" or run.is_locked():
        return run
    request = run.path / "job_config.json"
    atomic_write_json(request, config.to_dict())
    run.clear_cancel()
    pid = spawn(["train", "--config", str(request), "--quiet", "--job"], run.path / "job.log", store.root)
    run.set_status(state="queued", pid=pid, error=None, queued_at=time.time())
    return run


# --------------------------------------------------------------------------- generic tasks
def _task_path(run: Run, name: str) -> Path:
    return run.path / "tasks" / f"{name}.json"


def task_status(run: Run, name: str) -> dict[str, Any] | None:
    """The task's last written status, state 'interrupted' when it says running and its process is gone."""
    path = _task_path(run, name)
    if not path.exists():
        return None
    status = read_json(path)
    if status.get("state") == "running" and not is_locked(path.with_suffix(".lock")):
        status["state"] = "interrupted"
    return status


def task_update(run: Run, name: str, **fields: Any) -> None:
    path = _task_path(run, name)
    status = read_json(path) if path.exists() else {}
    status.update(fields, updated_at=time.time())
    atomic_write_json(path, status)


@contextlib.contextmanager
def task(run: Run, name: str, **fields: Any):
    """Run a block as task ``name``: running while inside (lock held), then done or failed."""
    path = _task_path(run, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held for the block
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        from .errors import RunError

        raise RunError(f"task {name} of run {run.id} is already running") from None
    try:
        task_update(run, name, state="running", progress=0.0, error=None, pid=os.getpid(), **fields)
        yield lambda **f: task_update(run, name, **f)
        task_update(run, name, state="done", progress=1.0)
    except BaseException as err:
        task_update(run, name, state="failed", error=f"{type(err).__name__}: {err}")
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
    last = [0.0]

    def report(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        now = time.time()
        if now - last[0] >= every_s or done == total:
            update(**fields(done, total))
            last[0] = now

    return report


def start_task(run: Run, name: str, cli_args: list[str], store: RunStore) -> int:
    """Start a CLI job that reports as task ``name``; a task already running is not started twice."""
    status = task_status(run, name)
    if status and status.get("state") == "running":
        return status.get("pid", -1)
    task_update(run, name, state="queued", progress=0.0, error=None)
    return spawn(cli_args, run.path / "tasks" / f"{name}.log", store.root)


def tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def describe(status: dict[str, Any] | None) -> str:
    return json.dumps(status or {}, sort_keys=True)
