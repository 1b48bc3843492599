"""The local executor: the runs of a batch one after another, in the experiment's own process.

The default: nothing to install, nothing to start. A cancel of the experiment is passed on to the
run being trained between its steps; a run another process is training now is skipped (the runner
waits for it).
"""

from __future__ import annotations

from cartomap.executors.base import Watch
from cartomap.runs.state import State
from cartomap.runs.store import Run


class LocalExecutor:
    name = "local"

    def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]:
        from cartomap.training.loop import train_run

        for role, run in batch:
            if watch.cancelled():
                break
            if run.is_locked():  # another worker took it: the runner waits for it
                continue
            watch.started(role, run)
            run.clear_cancel()

            def on_step(_fields, run=run):
                if watch.cancelled() and not run.cancel_requested():
                    run.request_cancel()

            train_run(run, on_step=on_step)
            if run.state != State.DONE:
                break
        return {}

    def close(self) -> None:
        pass
