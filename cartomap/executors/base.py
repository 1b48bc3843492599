"""The executor contract (:mod:`.registry` lists the executors, checks their packages and opens one).

An executor trains a batch of runs and returns when every one of them has stopped::

    class MyExecutor:
        name = "my-executor"
        def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]:
            "train every (role, run); return {run id: why it did not finish} for failures of the
             executor itself (a worker that died too often, a store the workers cannot see)"
        def close(self) -> None: ...

A run's own failure is in its status (``run.state``, ``run.status()["error"]``); the runner reads it.

What it needs of isolation: a run's random state is the process's (the training loop reseeds Python's,
NumPy's and torch's generators from (seed, epoch) at every epoch, and draws from them at every step), so
two runs trained at once in one process share one stream and neither gets the dynamics it would get alone.
An executor trains runs in parallel only in separate processes (``ray``: a task each; ``slurm``: a job
each); in its own process it trains one run at a time, each through :func:`train_here` (the step every
in-process executor shares: the run started, the experiment's cancel passed on between its steps). The
conformance test (``tests/test_executors.py``) compares every executor's runs with ``local``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cartomap.errors import CartomapError
from cartomap.runs.state import State
from cartomap.runs.store import Run

POLL_S = 1.0  # how often a parallel executor looks at its runs and at the experiment's cancel flag


class ExecutorUnavailable(CartomapError):
    """An executor could not be opened (a cluster that cannot be joined): nothing was submitted, so an
    experiment created for this attempt may be removed (`cartomap prune ...` leaves none behind)."""


@dataclass(frozen=True)
class Watch:
    """What the runner lets an executor see: the experiment's cancel flag, a hook for a run that starts
    (the local executor names the run it trains), and the runner's echo (printed by the CLI)."""

    cancelled: Callable[[], bool]
    started: Callable[[str, Run], None] = lambda _role, _run: None
    echo: Callable[[str], None] = lambda _msg: None


class Executor(Protocol):
    name: str

    def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]: ...

    def close(self) -> None: ...


def unfinished(run: Run) -> bool:
    """A run a worker left behind without an outcome (killed mid-run, never started): it may be
    started again, and resumes from its last completed epoch."""
    return run.state in (State.INTERRUPTED, State.QUEUED, State.EXITED)


def train_here(role: str, run: Run, watch: Watch) -> None:
    """Train ``run`` in this process, as an in-process executor does with each run of a batch in turn: the
    runner told it started, an old cancel request of the run cleared, and the experiment's cancel passed
    on to the run between its steps (the run then stops at its next step and resumes from its last
    completed epoch). One run at a time per process: a run's random state is the process's."""
    from cartomap.training.loop import train_run

    watch.started(role, run)
    run.clear_cancel()

    def on_step(_fields) -> None:
        if watch.cancelled() and not run.cancel_requested():
            run.request_cancel()

    train_run(run, on_step=on_step)
