"""The local executor: the runs of a batch one after another, in the experiment's own process.

The default: nothing to install, nothing to start. A cancel of the experiment is passed on to the
run being trained between its steps; a run another process is training now is skipped (the runner
waits for it).
"""

from __future__ import annotations

from cartomap.executors.base import Watch, train_here
from cartomap.runs.state import State
from cartomap.runs.store import Run


class LocalExecutor:
    name = "local"

    def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]:
        for role, run in batch:
            if watch.cancelled():
                break
            if run.is_locked():  # another worker took it: the runner waits for it
                continue
            train_here(role, run, watch)
            if run.state != State.DONE:
                break
        return {}

    def close(self) -> None:
        pass
