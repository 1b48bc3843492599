"""Starting an experiment as a background job (``cartomap experiment run ID --job``)."""

from __future__ import annotations

import time

from cartomap.experiments.store import Experiment, ExperimentStore
from cartomap.runs import jobs


def start_experiment(exp: Experiment, store: ExperimentStore) -> Experiment:
    """Run ``exp`` as a background job (unless done or already running)."""
    if exp.state == "done" or exp.is_locked():
        return exp
    exp.clear_cancel()
    pid = jobs.spawn(["experiment", "run", exp.id, "--job"], exp.job_log_path, store.root)
    exp.set_status(state="queued", pid=pid, error=None, queued_at=time.time())
    return exp
