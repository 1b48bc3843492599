"""The executors by name: how each is opened, what it is in one line, and the package it needs.

One table read by everything that lists or opens executors: :func:`open_executor` (the runner),
:func:`check_available` (the CLI, the dashboard's forms and :func:`cartomap.experiments.launch`
before anything is created), the CLI's ``--executor`` choices and help, and the dashboard's executor
form. A new executor is a module with a class following :class:`cartomap.executors.base.Executor`
and one :func:`register` call here; its name must also join :data:`cartomap.config.EXECUTORS` (the
config layer validates the kind without importing executors; a test keeps the two equal), and it
must pass the conformance test (``tests/test_executors.py``: the same experiment through it gives
the same runs and results as ``local``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cartomap.config import ExecutorConfig
from cartomap.errors import CartomapError
from cartomap.executors.base import Executor


@dataclass(frozen=True)
class ExecutorEntry:
    """One registered executor."""

    name: str
    description: str  # one line: forms and --help
    open: Callable[[ExecutorConfig, Path, Path], Executor]  # (config, store root, job folder)
    package: str | None = None  # the module it imports (None: nothing to install)
    extra: str | None = None  # the pip extra of cartomap that installs it
    check: Callable[[ExecutorConfig], None] | None = None  # more checks before anything is created
    stand_in: tuple[str, ...] = ()  # CLI options running it on this machine (the conformance test)


REGISTRY: dict[str, ExecutorEntry] = {}


def register(entry: ExecutorEntry) -> ExecutorEntry:
    REGISTRY[entry.name] = entry
    return entry


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def entry(name: str) -> ExecutorEntry:
    try:
        return REGISTRY[name]
    except KeyError:
        raise CartomapError(f"unknown executor {name!r}; expected one of {', '.join(REGISTRY)}") from None


def descriptions() -> dict[str, str]:
    return {name: e.description for name, e in REGISTRY.items()}


def help_text() -> str:
    """The executors in one paragraph, with what to install (the CLI's --executor help)."""
    parts = []
    for e in REGISTRY.values():
        install = f" (pip install 'cartomap[{e.extra}]')" if e.extra else ""
        parts.append(f"{e.name}: {e.description}{install}")
    return "; ".join(parts)


def check_available(config: ExecutorConfig) -> None:
    """CartomapError saying how to install the package an executor needs, when it is missing, or what
    else is wrong before anything is created (SLURM without srun, Ray Client without its extra)."""
    e = entry(config.kind)
    if e.package is not None and importlib.util.find_spec(e.package) is None:
        raise CartomapError(
            f"--executor {config.kind} needs {e.package}, an optional extra: "
            f"pip install 'cartomap[{e.extra}]' (or pip install {e.package})"
        )
    if e.check is not None:
        e.check(config)


def open_executor(config: ExecutorConfig, store_root: Path, log_dir: Path) -> Executor:
    """The executor of ``config`` for the run store at ``store_root``; ``log_dir`` takes the job files
    of SLURM. Ray is started or joined here, and the workers' view of the store checked."""
    check_available(config)
    return entry(config.kind).open(config, Path(store_root).resolve(), Path(log_dir).resolve())


# --------------------------------------------------------------------------- the built-in executors
def _open_local(config: ExecutorConfig, root: Path, log_dir: Path) -> Executor:
    from cartomap.executors.local import LocalExecutor

    return LocalExecutor()


def _open_ray(config: ExecutorConfig, root: Path, log_dir: Path) -> Executor:
    from cartomap.executors.ray_tasks import RayExecutor

    return RayExecutor(config, root)


def _open_slurm(config: ExecutorConfig, root: Path, log_dir: Path) -> Executor:
    from cartomap.executors.slurm import SlurmExecutor

    return SlurmExecutor(config, root, log_dir)


def _check_ray(config: ExecutorConfig) -> None:
    from cartomap.executors.ray_tasks import check_ray

    check_ray(config)


def _check_slurm(config: ExecutorConfig) -> None:
    from cartomap.executors.slurm import check_slurm

    check_slurm(config)


register(ExecutorEntry("local", "one run after another in this process (the default)", _open_local))
register(
    ExecutorEntry(
        "ray",
        "one Ray task per run, on a local Ray or a cluster",
        _open_ray,
        package="ray",
        extra="ray",
        check=_check_ray,
    )
)
register(
    ExecutorEntry(
        "slurm",
        "one SLURM job per run (submitit)",
        _open_slurm,
        package="submitit",
        extra="slurm",
        check=_check_slurm,
        stand_in=("--slurm-local",),
    )
)
