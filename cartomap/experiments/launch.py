"""Starting an experiment as a background job (``cartomap experiment run ID --job``)."""

from __future__ import annotations

import time

from cartomap.config import ExecutorConfig
from cartomap.executors.registry import check_available
from cartomap.experiments.store import Experiment, ExperimentStore
from cartomap.runs import jobs
from cartomap.runs.state import State


def start_experiment(
    exp: Experiment, store: ExperimentStore, executor: ExecutorConfig | None = None, by: str | None = None
) -> Experiment:
    """Run ``exp`` as a background job (unless done or already running).

    ``executor``: where its runs train, saved with the experiment before the job starts (None: the
    one saved before, else local). CartomapError when its package is not installed. ``by``: the person
    who started it (the status's ``started_by``; the job acts as them)."""
    if exp.state == State.DONE or exp.is_locked():
        return exp
    if executor is not None:
        check_available(executor)
        exp.save_executor(executor)
    exp.clear_cancel()
    pid = jobs.spawn(
        ["experiment", "run", exp.id, "--job"], exp.job_log_path, store.root, **jobs.as_person(by)
    )
    exp.set_status(state=State.QUEUED, pid=pid, error=None, queued_at=time.time(), **jobs.started_by(by))
    return exp
