"""The experiment runner: train every run an experiment plans, then let its kind finalize.

The runner trains the planned runs one after another (each an ordinary resumable run, so a
killed experiment resumes where it stopped; a run another process is training is skipped and
waited for, so extra workers can share the grid), asks the kind again (a later run may depend on
earlier results, like Model 1 on the pruned set), and finalizes. With several GPUs it trains
independent runs in parallel, one process per GPU. Kinds: :mod:`cartomap.experiments.registry`.
"""

from __future__ import annotations

import os
import time

from cartomap.config import RunConfig
from cartomap.errors import RunError
from cartomap.experiments.registry import kind_of
from cartomap.experiments.store import Experiment, ExperimentStore
from cartomap.io import atomic_write_json
from cartomap.runs.store import Run, RunStore

WAIT_S = 5.0  # poll interval while every remaining run is trained by another process


# --------------------------------------------------------------------------- the runner
def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no usable torch/cuda means no GPUs
        return 0


def run_experiment(exp: Experiment, store: ExperimentStore, *, as_job: bool = False, echo=None) -> Experiment:
    """Train every run the experiment plans (resuming finished and interrupted ones), then finalize."""
    with exp.work():
        if not as_job:
            exp.clear_cancel()
        _run_locked(exp, store, echo or (lambda _msg: None))
    return exp


def _run_locked(exp: Experiment, store: ExperimentStore, echo) -> None:
    from cartomap.training.loop import train_run
    from cartomap.training.prepare import prepare_run

    kind = kind_of(exp.kind)
    exp.set_status(state="running", error=None, phase="training")
    gpus = gpu_count()
    while True:
        if exp.cancel_requested():
            exp.set_status(state="cancelled", phase="cancelled")
            exp.log("cancelled")
            return
        planned = kind.planned_runs(exp, store.runs)
        todo = []
        for role, config in planned:
            run = _recorded_done(exp, role, config, store.runs) or prepare_run(config, store.runs)
            exp.record_run(role, run.id)
            if run.state != "done":
                todo.append((role, run))
        exp.set_status(runs_planned=len(planned), runs_done=len(planned) - len(todo))
        if not todo:
            break
        if gpus > 1 and len(todo) > 1:
            free = [(role, run) for role, run in todo if not run.is_locked()]
            if len(free) > 1:
                _train_parallel(exp, free[:gpus], store, echo)
                continue
        free = [(role, run) for role, run in todo if not run.is_locked()]
        if not free:  # every remaining run is being trained by another process: wait for one
            exp.set_status(role=todo[0][0], run_id=todo[0][1].id, phase="waiting")
            time.sleep(WAIT_S)
            continue
        role, run = free[0]
        exp.set_status(role=role, run_id=run.id, phase="training")
        exp.log(f"training {role} ({run.id})")
        echo(f"[{exp.id}] {role}: run {run.id}")
        run.clear_cancel()
        _train_watching_cancel(exp, run, train_run)
        if run.state != "done":
            state = "cancelled" if exp.cancel_requested() or run.state == "cancelled" else "failed"
            exp.set_status(state=state, phase=state, error=run.status().get("error"))
            return
    exp.set_status(phase="finalizing", role=None, run_id=None)
    kind.finalize(exp, store.runs)
    exp.set_status(state="done", phase="done")
    exp.log("done")


def _recorded_done(exp: Experiment, role: str, config: RunConfig, runs: RunStore) -> Run | None:
    """The finished run already recorded for ``role`` with this very config: reused without loading
    (and fingerprinting) its datasets again on every pass of the runner."""
    run_id = exp.run_ids().get(role)
    run = runs.find_id(run_id) if run_id is not None else None
    if run is None:
        return None
    return run if run.state == "done" and run.config == config else None


def _train_watching_cancel(exp: Experiment, run: Run, train_run) -> None:
    """Train ``run``; a cancel of the experiment is passed on to the run between steps."""

    def on_step(_fields):
        if exp.cancel_requested() and not run.cancel_requested():
            run.request_cancel()

    train_run(run, on_step=on_step)


def _train_parallel(exp: Experiment, todo: list[tuple[str, Run]], store: ExperimentStore, echo) -> None:
    """One training process per GPU (CUDA_VISIBLE_DEVICES), waited for until every process has exited."""
    from cartomap.runs import jobs
    from cartomap.training.launch import train_job_args

    pids = []
    for gpu, (role, run) in enumerate(todo):
        atomic_write_json(run.job_config_path, run.config.to_dict())
        echo(f"[{exp.id}] {role}: run {run.id} on GPU {gpu}")
        exp.log(f"training {role} ({run.id}) on GPU {gpu}")
        pids.append(
            jobs.spawn(
                train_job_args(run),
                run.job_log_path,
                store.root,
                env={"CUDA_VISIBLE_DEVICES": str(gpu)},
            )
        )
    exp.set_status(role=", ".join(role for role, _ in todo), run_id=None, phase="training in parallel")
    while pids:
        if exp.cancel_requested():
            for _, r in todo:
                r.request_cancel()
        pids = [pid for pid in pids if os.waitpid(pid, os.WNOHANG) == (0, 0)]
        time.sleep(WAIT_S)
    failed = [(role, r) for role, r in todo if r.state != "done"]
    if failed and not exp.cancel_requested():
        role, r = failed[0]
        raise RunError(f"run {r.id} ({role}) ended {r.state}: {r.status().get('error')}")
