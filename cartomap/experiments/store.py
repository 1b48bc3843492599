"""The experiment store: one folder per experiment under ``<cache>/experiments/``.

An experiment folder holds ``spec.json`` (kind, name, parameters; never changes), the shared
state files of long work (:class:`cartomap.runs.state.StatusFolder`: status, lock, cancel flag),
``runs.json`` (role -> run id), ``results/``, and where its runs train: ``executor.json`` (the
executor it last ran with, so a resume uses it again) and ``jobs/`` (SLURM job scripts and logs).
Its id is a hash of kind and parameters, so
starting the same experiment twice finds the first one. Its runs stay in the run store, shared
between experiments.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.config import ExecutorConfig
from cartomap.errors import DataError, RunError
from cartomap.io import atomic_write_json, atomic_write_parquet, file_stamp, read_json
from cartomap.runs import layout
from cartomap.runs.folders import FolderStore
from cartomap.runs.state import State, StatusFolder
from cartomap.runs.store import Run, RunStore

SPEC = "spec.json"
RUNS = "runs.json"
RESULTS = "results"
EXECUTOR = "executor.json"
JOBS = "jobs"
SEED_SEPARATOR = "@seed"
#: The most runs one experiment (or one label-noise benchmark) may make. Each run is a fine-tuning with
#: its own folder and its own copy of the data, made before anything trains: a mistyped count
#: (``--seeds 100000``) would fill the store with queued runs. The largest grids of the papers are far
#: below it (11 training orders x 5 seeds + the data-map baseline = 56; 10 folds + Models 0 and 1 = 12).
MAX_RUNS = 200


def check_run_count(n: int, what: str, field: str | None = None) -> None:
    """DataError (naming ``field``, the option or form field that set the count) when ``what`` ("3
    methods x 500 seeds + the data-map baseline") would make more than :data:`MAX_RUNS` runs; called
    before anything is written."""
    if n > MAX_RUNS:
        raise DataError(
            f"{what} would make {n:,} runs; an experiment makes at most {MAX_RUNS} (each run is a "
            "fine-tuning with its own folder and copy of the data, all made before training starts): "
            "use fewer, or split the grid into several experiments",
            field=field,
        )


def grid_role(method: str, seed: int) -> str:
    """The role of one cell of a method x seed grid: "cart-stra++@seed3"."""
    return f"{method}{SEED_SEPARATOR}{seed}"


def method_of(role: str) -> str | None:
    """The method (or training set) of a grid role "method@seed3"; None for other roles."""
    method, sep, seed = role.rpartition(SEED_SEPARATOR)
    return method if sep and seed.lstrip("-").isdigit() else None


@dataclass(frozen=True)
class Experiment(StatusFolder):
    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def spec(self) -> dict[str, Any]:
        return read_json(self.path / SPEC)

    @property
    def kind(self) -> str:
        return self.spec["kind"]

    @property
    def params(self) -> dict[str, Any]:
        return self.spec["params"]

    @property
    def name(self) -> str:
        return self.spec.get("name") or self.id

    @property
    def label(self) -> str:
        """One line naming the experiment: "name · kind · id"."""
        return " · ".join(str(p) for p in (self.spec.get("name", ""), self.kind, self.id) if p)

    @property
    def results_dir(self) -> Path:
        return self.path / RESULTS

    LOCK_NAME = "experiment.lock"
    BUSY = "is already running in another process"

    # -- runs and results ---------------------------------------------------
    def run_ids(self) -> dict[str, str]:
        path = self.path / RUNS
        return read_json(path) if path.exists() else {}

    def record_run(self, role: str, run_id: str) -> None:
        runs = self.run_ids()
        runs[role] = run_id
        atomic_write_json(self.path / RUNS, runs)

    # -- where its runs train --------------------------------------------------------------------------
    def executor(self) -> ExecutorConfig | None:
        """The executor the experiment last ran (or was started) with; None before that."""
        path = self.path / EXECUTOR
        return ExecutorConfig.from_dict(read_json(path)) if path.exists() else None

    def save_executor(self, config: ExecutorConfig) -> None:
        atomic_write_json(self.path / EXECUTOR, config.to_dict())

    @property
    def executor_log_dir(self) -> Path:
        """SLURM job scripts and logs (submitit's folder)."""
        return self.path / JOBS

    def run(self, role: str, store: RunStore) -> Run | None:
        run_id = self.run_ids().get(role)
        return store.get(run_id) if run_id else None

    def write_result(self, name: str, value: pd.DataFrame | dict | list) -> Path:
        if isinstance(value, pd.DataFrame):
            return atomic_write_parquet(self.results_dir / f"{name}.parquet", value)
        return atomic_write_json(self.results_dir / f"{name}.json", value)

    def result_stamp(self, name: str) -> tuple:
        """Cache key of a saved result: changes when it is written again (() while there is none)."""
        parquet, js = self.results_dir / f"{name}.parquet", self.results_dir / f"{name}.json"
        return file_stamp(parquet) or file_stamp(js)

    def result(self, name: str) -> pd.DataFrame | dict | list | None:
        parquet, js = self.results_dir / f"{name}.parquet", self.results_dir / f"{name}.json"
        if parquet.exists():
            return pd.read_parquet(parquet)
        if js.exists():
            return read_json(js)
        return None

    def run_states(self, store: RunStore) -> dict[str, int]:
        """How many of its runs are done, running (a process trains it), queued (waiting for a worker,
        submitted to Ray or SLURM, or not started yet), cancelled and failed (failed, interrupted,
        exited, damaged or lost), from the runs' own states: right even when the experiment's job
        stopped before it counted them."""
        counted = (State.DONE, State.RUNNING, State.QUEUED, State.CANCELLED)
        counts = {str(s): 0 for s in (*counted, State.FAILED)}
        for run_id in self.run_ids().values():
            try:
                run = store.find_id(run_id)
                state = run.status()["state"] if run is not None else State.FAILED  # lost: its folder is gone
            except (OSError, ValueError, RunError):
                state = State.DAMAGED
            counts[str(state if state in counted else State.FAILED)] += 1
        return counts

    def summary(self, store: RunStore | None = None) -> dict[str, Any]:
        """One row of ``cartomap experiment list``; with the run ``store``, the runs done, running,
        queued, cancelled and failed come from the runs' own states."""
        status = self.status()
        planned = status.get("runs_planned", "?")
        row = {
            "id": self.id,
            "name": self.spec.get("name", ""),
            "kind": self.kind,
            "state": status.get("state"),
            "runs": f"{status.get('runs_done', 0)}/{planned}",
        }
        if store is not None:
            counts = self.run_states(store)
            total = max(planned, len(self.run_ids())) if isinstance(planned, int) else len(self.run_ids())
            row["runs"] = f"{counts['done']}/{total or '?'} done"
            row.update({column: counts[column] for column in ("running", "queued", "cancelled", "failed")})
        row["created"] = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.spec.get("created_at", 0)))
        return row


def experiment_id(kind: str, params: dict[str, Any]) -> str:
    payload = json.dumps({"kind": kind, "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


class ExperimentStore(FolderStore[Experiment]):
    """All experiments under ``root/experiments``; runs stay in the shared run store."""

    MARKER = SPEC
    WHAT = "experiment"
    LIST_COMMAND = "cartomap experiment list"

    def __init__(self, root: str | Path | None = None):
        self.runs = RunStore(root)
        self.root = self.runs.root
        self.dir = self.root / "experiments"

    def open(self, path: Path) -> Experiment:
        return Experiment(path)

    def name_of(self, exp: Experiment) -> str:
        return exp.spec.get("name", "")

    def created_at(self, exp: Experiment) -> float:
        return exp.spec.get("created_at", 0)

    def create(
        self, kind: str, params: dict[str, Any], name: str = "", files: dict[str, pd.DataFrame] | None = None
    ) -> Experiment:
        """The experiment for (kind, params): the existing one, or a new queued one (made atomically).

        ``files``: Parquet files the experiment keeps of its inputs (file name -> frame), written into
        the new folder before it appears, so an experiment never exists without them.
        The kind is not checked here: :func:`cartomap.experiments.registry.create` checks it."""
        params = json.loads(json.dumps(params, default=str))  # what will be saved is what is hashed

        def write(tmp: Path) -> None:
            for file_name, frame in (files or {}).items():
                atomic_write_parquet(tmp / file_name, frame)
            spec = {"kind": kind, "name": name, "params": params, "created_at": time.time()}
            atomic_write_json(tmp / SPEC, spec)
            atomic_write_json(tmp / layout.STATUS, {"state": State.QUEUED, "updated_at": time.time()})

        return self.create_folder(experiment_id(kind, params), write)

    def delete(self, key: str) -> dict[str, Any]:
        """Delete an experiment (refused while its job runs) and the runs its runner made that nothing
        else uses; returns ``{"experiment": id, "deleted": [run ids], "kept": {run id: why}}``.

        A run of the experiment is kept when another experiment records it (a role, or its base run),
        when it was not made for this experiment (a run of yours it reused: a seeds experiment's base
        run, an identical run trained before; runs made before runs recorded their experiment), when it
        holds work of yours (review queues, saved groups, WaNLI batches), or while a process trains it. A
        run made for an experiment deleted before is deleted with the last experiment that used it."""
        exp = self.get(key)
        if exp.is_locked():
            raise RunError(f"experiment {exp.id} is busy right now: cancel it first")
        others = [e for e in self.list() if e.id != exp.id]
        used = set()
        for other in others:
            try:
                used |= set(other.run_ids().values()) | {other.params.get("base_run")}
            except (OSError, ValueError, KeyError):  # a damaged experiment keeps what it may use
                used |= _ids_in(other.path)
        existing = {e.id for e in others}
        mine = list(dict.fromkeys(exp.run_ids().values()))
        super().delete(exp.id)
        deleted: list[str] = []
        kept: dict[str, str] = {}
        for run_id in mine:
            run = self.runs.find_id(run_id)
            if run is None:
                continue
            why = _why_kept(run, exp.id, used, existing)
            if why:
                kept[run_id] = why
                continue
            try:
                self.runs.delete(run_id)
            except (RunError, OSError) as err:
                kept[run_id] = f"it could not be deleted ({err})"
            else:
                deleted.append(run_id)
        return {"experiment": exp.id, "deleted": deleted, "kept": kept}

    def list(self, kind: str | None = None) -> list[Experiment]:
        """Every experiment (of ``kind``), newest first."""
        found = super().list()
        return [e for e in found if kind is None or e.kind == kind]

    def table(self, kind: str | None = None) -> pd.DataFrame:
        return pd.DataFrame([e.summary(self.runs) for e in self.list(kind)])


@dataclass(frozen=True)
class Section:
    """A titled result table of an experiment; ``best_columns`` are marked best-per-column in bold."""

    title: str
    table: pd.DataFrame
    best_columns: tuple[str, ...] | None = None
    formats: dict[str, str] = field(default_factory=dict)  # column -> printf format for display


def _ids_in(folder: Path) -> set[str]:
    """Every run id a damaged experiment's files may name (any 12-hex word of its runs.json and spec)."""
    import re

    words: set[str] = set()
    for name in (RUNS, SPEC):
        try:
            words |= set(re.findall(r"\b[0-9a-f]{12}\b", (folder / name).read_text(errors="replace")))
        except OSError:
            continue
    return words


def _why_kept(run: Run, exp_id: str, used: set, existing: set) -> str:
    """Why deleting experiment ``exp_id`` keeps ``run`` ("" when it goes with it)."""
    if run.id in used:
        return "another experiment uses it"
    try:
        made_for = run.made_for
    except (RunError, OSError, ValueError):
        return f"it is damaged (its {layout.CONFIG} cannot be read): delete it with `cartomap delete`"
    if made_for != exp_id and (not made_for or made_for in existing):
        return (
            "the experiment did not make it (a run of yours, or made before runs recorded their experiment)"
        )
    work = [
        what
        for what, folder in (
            ("review queues", run.review_dir),
            ("saved groups", run.groups_dir),
            ("WaNLI batches", run.wanli_dir),
        )
        if folder.is_dir() and any(folder.iterdir())
    ]
    if work:
        return f"it holds your {' and '.join(work)}"
    if run.is_locked():
        return "a process is training it"
    return ""


def base_run(exp: Experiment, runs) -> Any:
    """The run ``exp`` started from (``params["base_run"]``: the seeds and retrain-after-review kinds);
    RunError when it is no longer in the run store ``runs``."""
    run = runs.find_id(exp.params["base_run"])
    if run is None:
        raise RunError(
            f"the base run {exp.params['base_run']} of experiment {exp.id} is no longer in the store"
        )
    return run
