"""The experiment runner: train every run an experiment plans, then let its kind finalize.

The runner asks the kind for every run it can define now, hands the ones not done yet to an
executor (:mod:`cartomap.executors`: one after another here, Ray tasks, or SLURM jobs), waits for
that batch, and asks the kind again (a later run may depend on earlier results, like Model 1 on the
pruned set) until nothing is left; then it finalizes. Each run is an ordinary resumable run, so a
killed experiment resumes where it stopped, and a run another process is training is skipped and
waited for, so extra workers can share the grid. Kinds: :mod:`cartomap.experiments.registry`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

from cartomap.config import ExecutorConfig, RunConfig
from cartomap.executors.base import Watch
from cartomap.executors.registry import open_executor
from cartomap.experiments.registry import kind_of
from cartomap.experiments.store import Experiment, ExperimentStore, check_run_count
from cartomap.runs.progress import Phase
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore

WAIT_S = 5.0  # poll interval while every remaining run is trained by another process


def run_experiment(
    exp: Experiment,
    store: ExperimentStore,
    *,
    as_job: bool = False,
    echo=None,
    executor: ExecutorConfig | None = None,
) -> Experiment:
    """Train every run the experiment plans (resuming finished and interrupted ones), then finalize.

    ``executor``: where the runs train; saved with the experiment, so a resume uses it again. None =
    the one saved with the experiment, else the local executor."""
    echo = echo or (lambda _msg: None)
    with exp.work(), interrupt_on_sigterm():
        if not as_job:
            exp.clear_cancel()
        if executor is not None:
            exp.save_executor(executor)
        config = executor or exp.executor() or ExecutorConfig()
        try:
            _run_locked(exp, store, echo, config)
        except KeyboardInterrupt:
            line = f"interrupted; resume with: cartomap experiment run {exp.id}"
            exp.log(f"{line} (runs in flight resume from their last completed epoch)")
            raise Interrupted(line) from None
        finally:
            with contextlib.suppress(OSError, ValueError):
                if exp.saved_status().get("state") != State.DONE:
                    stop_unstarted(exp, store.runs)
    return exp


def stop_unstarted(exp: Experiment, runs: RunStore) -> list[str]:
    """Save the experiment's runs that never started as ``cancelled`` (saved ``queued``, no process holds
    them, no training job of their own was started for them): an experiment that stopped (cancelled, failed,
    interrupted) leaves no run ``queued`` that nothing will train. Resuming the experiment trains them.
    Best effort: a status that cannot be written (a full disk) leaves that run as it was. Returns the
    ids of the runs it stopped."""
    stopped = []
    for run_id in dict.fromkeys(exp.run_ids().values()):
        run = runs.find_id(run_id)
        try:
            if run is None or run.is_locked():
                continue
            status = run.saved_status()
            if (
                status.get("state") != State.QUEUED or status.get("pid") is not None
            ):  # a job of its own has it
                continue
            run.set_status(
                state=State.CANCELLED,
                phase=State.CANCELLED,
                error=f"experiment {exp.id} stopped before it started",
            )
        except (OSError, ValueError):
            continue
        stopped.append(run.id)
    if stopped:
        exp.log(f"runs not started, saved as cancelled: {', '.join(stopped)}")
    return stopped


class Interrupted(KeyboardInterrupt):
    """The experiment's driver was interrupted (Ctrl-C, SIGTERM); the message says how to resume."""


@contextlib.contextmanager
def interrupt_on_sigterm():
    """SIGTERM (a job's kill, a scheduler's stop) raises KeyboardInterrupt in the runner, so it stops
    the way Ctrl-C does (executor closed, the line to resume printed). Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_locked(exp: Experiment, store: ExperimentStore, echo, config: ExecutorConfig) -> None:
    from cartomap.training.prepare import prepare_run

    kind = kind_of(exp.kind)
    exp.set_status(state=State.RUNNING, error=None, phase=Phase.STARTING, executor=config.kind, running=[])
    if exp.cancel_requested():
        exp.set_status(state=State.CANCELLED, phase=State.CANCELLED)
        exp.log("cancelled")
        return
    executor = open_executor(config, store.root, exp.executor_log_dir)
    used = getattr(executor, "config", config)
    if used != config:  # e.g. the RAY_ADDRESS it joined: a resume goes to the same place
        exp.save_executor(used)
    describe = getattr(executor, "describe", "")
    exp.log(f"executor {config.kind}" + (f": {describe}" if describe else ""))
    echo(f"[{exp.id}] executor {config.kind}" + (f": {describe}" if describe else ""))

    def started(role: str, run: Run) -> None:
        exp.set_status(role=role, run_id=run.id, running=[run.id], phase=Phase.TRAINING)
        exp.log(f"training {role} ({run.id})")
        echo(f"[{exp.id}] {role}: run {run.id}")

    watch = Watch(cancelled=exp.cancel_requested, started=started, echo=lambda msg: echo(f"[{exp.id}] {msg}"))
    try:
        while True:
            if exp.cancel_requested():
                exp.set_status(state=State.CANCELLED, phase=State.CANCELLED, running=[])
                exp.log("cancelled")
                return
            planned = kind.planned_runs(exp, store.runs)
            check_run_count(len(planned), f"the plan of experiment {exp.id}")  # a plug-in kind's too
            todo = []
            for role, run_config in planned:
                run = _recorded_done(exp, role, run_config, store.runs) or prepare_run(
                    run_config, store.runs, made_for=exp.id
                )
                exp.record_run(role, run.id)
                if run.state != State.DONE:
                    todo.append((role, run))
            exp.set_status(runs_planned=len(planned), runs_done=len(planned) - len(todo))
            if not todo:
                break
            free = [(role, run) for role, run in todo if not run.is_locked()]
            if not free:  # every remaining run is being trained by another process: wait for one
                exp.set_status(role=todo[0][0], run_id=todo[0][1].id, phase=Phase.WAITING)
                time.sleep(WAIT_S)
                continue
            if config.kind != "local":
                roles = ", ".join(role for role, _ in free)
                exp.set_status(
                    role=roles,
                    run_id=None,
                    running=[run.id for _, run in free],
                    phase=Phase.TRAINING_IN_PARALLEL,
                )
                exp.log(f"training {roles} on {config.kind}")
            errors = executor.train(free, watch)
            if exp.cancel_requested():
                continue  # the top of the loop saves the cancel
            stopped = [(role, run) for role, run in free if run.state != State.DONE and not run.is_locked()]
            if stopped:
                role, run = next(((r, x) for r, x in stopped if x.id in errors), stopped[0])
                state = State.CANCELLED if run.state == State.CANCELLED else State.FAILED
                own = run.status().get("error") if run.state == State.FAILED else None  # the run's own words
                error = own or errors.get(run.id) or f"run {run.id} ({role}) ended {run.state}"
                exp.set_status(state=state, phase=state, error=error, running=[])
                exp.log(f"{state}: {error}")
                return
    finally:
        executor.close()
    exp.set_status(phase=Phase.FINALIZING, role=None, run_id=None, running=[])
    kind.finalize(exp, store.runs)
    exp.set_status(state=State.DONE, phase=State.DONE)
    exp.log("done")


def _recorded_done(exp: Experiment, role: str, config: RunConfig, runs: RunStore) -> Run | None:
    """The finished run already recorded for ``role`` with this very config: reused without loading
    (and fingerprinting) its datasets again on every pass of the runner."""
    run_id = exp.run_ids().get(role)
    run = runs.find_id(run_id) if run_id is not None else None
    if run is None:
        return None
    return run if run.state == State.DONE and run.config == config else None
