"""The executor contract (:mod:`.registry` lists the executors, checks their packages and opens one).

An executor trains a batch of runs and returns when every one of them has stopped::

    class MyExecutor:
        name = "my-executor"
        def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]:
            "train every (role, run); return {run id: why it did not finish} for failures of the
             executor itself (a worker that died too often, a store the workers cannot see)"
        def close(self) -> None: ...

A run's own failure is in its status (``run.state``, ``run.status()["error"]``); the runner reads it.
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
