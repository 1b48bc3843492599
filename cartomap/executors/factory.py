"""Opening the executor of an :class:`cartomap.config.ExecutorConfig` (its package imported only then)."""

from __future__ import annotations

from pathlib import Path

from cartomap.config import ExecutorConfig
from cartomap.executors.base import Executor, check_available


def open_executor(config: ExecutorConfig, store_root: Path, log_dir: Path) -> Executor:
    """The executor of ``config`` for the run store at ``store_root``; ``log_dir`` takes the job files
    of SLURM. Ray is started or joined here, and the workers' view of the store checked."""
    check_available(config)
    root = Path(store_root).resolve()
    if config.kind == "ray":
        from cartomap.executors.ray_tasks import RayExecutor

        return RayExecutor(config, root)
    if config.kind == "slurm":
        from cartomap.executors.slurm import SlurmExecutor

        return SlurmExecutor(config, root, Path(log_dir).resolve())
    from cartomap.executors.local import LocalExecutor

    return LocalExecutor()
