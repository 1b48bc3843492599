"""Starting training as a background job: validate and create the run here, train it in a process of its own.

The data is loaded and fingerprinted once, here, to find (or create) the run; the job then opens
that run by id and trains from the run's own copy of the examples.
"""

from __future__ import annotations

import time

from cartomap.config import RunConfig, demo_run_config
from cartomap.io import atomic_write_json
from cartomap.runs import jobs, shipped
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.training.prepare import prepare_run


def start_training(config: RunConfig, store: RunStore, by: str | None = None) -> Run:
    """Validate the data, create the run and start training it in the background (unless done or running).
    ``by``: the person who started it (kept in the run's status as ``started_by``).

    Raises DataError for bad input before anything is created.
    """
    return start_run_job(prepare_run(config, store), store, by=by)


def prepare_demo_to_train(store: RunStore, task: str) -> tuple[Run, Run | None]:
    """The bundled demo of ``task`` made ready to train here (``cartomap demo --train``, the dashboard's
    **Train the demo yourself**): its installed recording removed first (ours, without weights: the trained
    run takes its id; a run trained here is kept), then the demo's run prepared. (The run, the recording
    removed or None.)"""
    there = shipped.installed(store, task)
    removed = there if there is not None and shipped.remove_recording(store, there) else None
    return prepare_run(demo_run_config(task), store), removed


def start_run_job(run: Run, store: RunStore, by: str | None = None) -> Run:
    """Train (or resume) an existing run in the background from its own copy of the data: the original
    files are not read again, so a run made in another folder, or whose files moved, resumes. ``by``: the
    person who started it (the status's ``started_by``; the job acts as them)."""
    if run.state == State.DONE or run.is_locked():
        return run
    atomic_write_json(run.job_config_path, run.info["config"])  # the parameters, saved before the job starts
    run.clear_cancel()
    pid = jobs.spawn(train_job_args(run), run.job_log_path, store.root, **jobs.as_person(by))
    run.set_status(state=State.QUEUED, pid=pid, error=None, queued_at=time.time(), **jobs.started_by(by))
    return run


def train_job_args(run: Run) -> list[str]:
    """The command line of a job that trains (or resumes) an existing run."""
    return ["train", "--run", run.id, "--quiet", "--job"]
