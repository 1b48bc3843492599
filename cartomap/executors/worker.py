"""What a worker runs: train one run of the shared store by its path, or check that it sees the store.

A Ray task or a SLURM job calls :func:`train_in_worker` with the run folder's absolute path. The
worker opens the run (a clear error when the folder is not there: the store is not shared), gives
torch the CPUs the run asked for, notes its host and pid in the run's status (the dashboard shows
them; a test kills that pid), and trains or resumes the run. Killed mid-run, it leaves a run that
the next attempt resumes from its last completed epoch.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path
from typing import Any

from cartomap.errors import RunError
from cartomap.io import atomic_write_bytes
from cartomap.runs import cpu
from cartomap.runs.state import State
from cartomap.runs.store import Run

PROBE_PREFIX = ".probe-"  # a file in the store's root that every worker must see


def not_shared(path: Path) -> RunError:
    return RunError(
        f"worker on {socket.gethostname()} does not see {path}: the run store is not shared with it. "
        "On a cluster, CARTOMAP_CACHE (or --cache) must be a folder on a filesystem every node mounts "
        "at the same path (NFS, Lustre, GPFS, ...)"
    )


def train_in_worker(run_path: str, threads: int = 1, cwd: str | None = None) -> dict[str, Any]:
    """Train (or resume) the run at ``run_path`` here; returns its id, final state, host and pid.

    ``cwd``: the experiment's working folder, entered when it exists here, so that relative paths in a
    run's config (a relative ``--cache`` puts one in a curriculum's scores file) mean what they meant
    there. A cancel asked for while the task waited stops it at once; a run another process holds is
    left to it (state ``busy``)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cpu.apply()  # before torch is imported in this worker process (cartomap.runs.cpu)
    if cwd and os.path.isdir(cwd):
        os.chdir(cwd)
    path = Path(run_path)
    run = Run(path)
    if not run.config_path.exists():
        raise not_shared(path)
    import torch

    from cartomap.training.loop import continue_run

    torch.set_num_threads(max(1, int(threads)))
    host, pid = socket.gethostname(), os.getpid()
    outcome = {"run_id": run.id, "host": host, "pid": pid}
    if run.state == State.DONE:
        return dict(outcome, state=State.DONE)
    if run.is_locked():
        return dict(outcome, state="busy")
    run.set_status(state=run.saved_status().get("state", State.QUEUED), worker_host=host, worker_pid=pid)
    try:
        continue_run(run, as_job=True)
    except RunError:
        if run.is_locked():  # taken by another process between the check and the lock
            return dict(outcome, state="busy")
        raise
    except KeyboardInterrupt:  # Ray's cancel of a task that had just started
        # Ray delivers the cancel late at times: by then a resume may have handed the run to another
        # task, which holds its lock; its status is that task's to write
        if run.cancel_requested() and run.state != State.DONE and not run.is_locked():
            run.set_status(state=State.CANCELLED)
        raise
    return dict(outcome, state=run.state)


def write_probe(root: Path) -> tuple[Path, str]:
    """A file with a random token in the store's root, for :func:`probe_store` on every worker."""
    token = uuid.uuid4().hex
    path = Path(root) / f"{PROBE_PREFIX}{token}"
    atomic_write_bytes(path, token.encode())
    return path, token


def probe_store(probe: str, token: str) -> tuple[str, bool]:
    """(this worker's host, whether it reads ``token`` in ``probe``)."""
    try:
        seen = Path(probe).read_text() == token
    except OSError:
        seen = False
    return socket.gethostname(), seen
