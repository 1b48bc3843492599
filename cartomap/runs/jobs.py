"""Starting long work as a job: a ``python -m cartomap.cli ...`` process in a session of its own.

A job survives a closed browser tab, a page switch or a restart of the Streamlit server; it
reports through the run store (a run's, an experiment's or a task's status file), which pages
poll. Training jobs are started by :func:`cartomap.training.launch.start_training`, experiments by
:func:`cartomap.experiments.launch.start_experiment`, tasks of a run by :func:`start_task`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cartomap.runs import cpu
from cartomap.runs.state import State
from cartomap.runs.tasks import task_of
from cartomap.team.roles import USER_ENV


def spawn(
    cli_args: list[str],
    log_path: Path,
    cache: Path | None = None,
    env: dict[str, str] | None = None,
    by: str | None = None,
) -> int:
    """Start ``cartomap <cli_args>`` detached from this process; output goes to ``log_path``. Returns the pid.
    ``by``: the person who started it (team mode): the job acts as them (env ``CARTOMAP_USER``). The job
    computes with cartomap's thread policy (:mod:`cartomap.runs.cpu`) unless this process's environment or
    ``env`` chose otherwise."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "cartomap.cli"]
    if cache is not None:
        args += ["--cache", str(cache)]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1", **(env or {}))
    if by:
        env[USER_ENV] = by
    env = cpu.with_policy(env)
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


def as_person(by: str | None) -> dict[str, str]:
    """:func:`spawn`'s keyword for the person who starts a job: none without one (one person, no team)."""
    return {"by": by} if by else {}


def started_by(by: str | None) -> dict[str, str]:
    """The status fields that keep who started a job (``started_by``): none without one."""
    return {"started_by": by} if by else {}


def start_task(
    run, name: str, cli_args: list[str], store, env: dict[str, str] | None = None, by: str | None = None
) -> int:
    """Start a CLI job that reports as task ``name`` of ``run``; a task already running is not started twice.
    ``env``: extra environment of the job (what must reach it without being written anywhere); ``by``:
    the person who started it (kept in the task's status as ``started_by``)."""
    record = task_of(run, name)
    status = record.status_or_none()
    if status and status.get("state") == State.RUNNING:
        return status.get("pid", -1)
    record.update(state=State.QUEUED, progress=0.0, error=None, pid=None, **started_by(by))
    pid = spawn(cli_args, record.log_path, store.root, **({"env": env} if env else {}), **as_person(by))
    record.update(pid=pid)
    return pid


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
