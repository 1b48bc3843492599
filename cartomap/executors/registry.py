"""The executors by name: how each is opened, what it is in one line, and the package it needs.

One table read by everything that lists or opens executors: :func:`open_executor` (the runner),
:func:`check_available` (the CLI, the dashboard's forms and :func:`cartomap.experiments.launch`
before anything is created), the CLI's ``--executor`` choices and help, and the dashboard's executor
form, which offers every registered executor by its name and description and asks for the settings
its entry declares (:class:`ExecutorOption`, in order, with its note below them). A new executor is
a module with a class following :class:`cartomap.executors.base.Executor` and one :func:`register`
call here (an executor of another package: an entry point, :mod:`cartomap.plugins`); a built-in one's
name must also join :data:`cartomap.config.EXECUTORS` (the config layer validates the kind without
importing executors, a plug-in's by its entry point's name; a test keeps the two equal), and it must pass the conformance
test (``tests/test_executors.py``: the same experiment through it gives the same runs and results
as ``local``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cartomap import plugins
from cartomap.config import ExecutorConfig
from cartomap.errors import CartomapError
from cartomap.executors.base import Executor

#: The values an executor's setting takes in a form: a whole number, a line of text, yes / no.
OPTION_TYPES = (int, str, bool)


@dataclass(frozen=True)
class ExecutorOption:
    """One setting an executor's form asks for.

    ``name`` is its keyword of :func:`cartomap.experiments.forms.build_executor_config`; ``key`` the
    short name a form keeps its value under (``<prefix>_<key>``); ``type`` one of :data:`OPTION_TYPES`,
    ``low`` / ``high`` / ``step`` the bounds of an ``int``; ``wide`` takes a row of its own (else two
    settings share a row)."""

    name: str
    key: str
    label: str
    type: type  # int, str or bool
    default: Any
    low: int | None = None
    high: int | None = None
    step: int = 1
    help: str | None = None
    placeholder: str | None = None
    wide: bool = False

    def __post_init__(self) -> None:
        if self.type not in OPTION_TYPES:
            name = getattr(self.type, "__name__", self.type)
            raise ValueError(f"option {self.name}: type {name!r} is not int, str or bool")


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
    options: tuple[ExecutorOption, ...] = ()  # the settings its form asks for, in order
    note: str = ""  # one line the form shows below its settings


REGISTRY: dict[str, ExecutorEntry] = plugins.Registry(plugins.EXECUTORS, ExecutorEntry)  # + plug-ins


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


_DEFAULT = ExecutorConfig()

#: The settings every executor that trains runs in parallel asks for.
PER_RUN_OPTIONS = (
    ExecutorOption(
        "cpus_per_run",
        "cpus",
        "CPUs per run",
        int,
        _DEFAULT.cpus_per_run,
        low=1,
        high=256,
        help="CPU threads of one run",
    ),
    ExecutorOption(
        "gpus_per_run",
        "gpus",
        "GPUs per run (-1 = automatic)",
        int,
        -1,
        low=-1,
        high=16,
        help="automatic: one GPU per run where the Ray cluster has GPUs, else none",
    ),
)
SHARED_STORE_NOTE = (
    "Every worker must see the run store: on a cluster set CARTOMAP_CACHE to a folder on a shared "
    "filesystem, the same path on every node (checked when the experiment starts)."
)

register(
    ExecutorEntry(
        "local",
        "one run after another in this process (the default)",
        _open_local,
        note="The experiment's job trains its runs one after another (nothing to install).",
    )
)
register(
    ExecutorEntry(
        "ray",
        "one Ray task per run, on a local Ray or a cluster",
        _open_ray,
        package="ray",
        extra="ray",
        check=_check_ray,
        options=(
            *PER_RUN_OPTIONS,
            ExecutorOption(
                "ray_address",
                "ray_address",
                "Ray address",
                str,
                "",
                placeholder="blank: start a local Ray (all GPUs of this machine); auto; ray://host:10001",
                wide=True,
            ),
        ),
        note=SHARED_STORE_NOTE,
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
        options=(
            *PER_RUN_OPTIONS,
            ExecutorOption(
                "slurm_partition", "partition", "Partition", str, "", placeholder="the cluster's default"
            ),
            ExecutorOption(
                "slurm_time_min",
                "time",
                "Time limit per run (minutes)",
                int,
                _DEFAULT.slurm_time_min,
                low=1,
                high=60 * 24 * 14,
                step=30,
            ),
            ExecutorOption(
                "sbatch",
                "sbatch",
                "Extra sbatch options",
                str,
                "",
                placeholder="account=nlp, qos=high",
                wide=True,
            ),
            ExecutorOption(
                "slurm_mem_gb",
                "mem",
                "Memory per run (GB; 0 = the partition's default)",
                int,
                _DEFAULT.slurm_mem_gb,
                low=0,
                high=4096,
                step=4,
            ),
            ExecutorOption(
                "slurm_local",
                "slurm_local",
                "No SLURM here: run the jobs on this machine (local stand-in)",
                bool,
                False,
                help="submitit's local executor, for trying it out; partition, sbatch options and GPUs "
                "must be left empty",
            ),
        ),
        note=SHARED_STORE_NOTE,
    )
)
REGISTRY.register = register
