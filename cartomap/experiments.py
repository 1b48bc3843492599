"""Experiments: several runs that together answer one question (k-fold pruning, curricula, ...).

An experiment lives in ``<cache>/experiments/<id>/``: ``spec.json`` (kind, name, parameters; never
changes), ``status.json``, ``runs.json`` (role -> run id) and ``results/``. Its id is a hash of
kind and parameters, so starting the same experiment twice finds the first one.

A *kind* is a small plug-in (in the spirit of Hugging Face ``evaluate``'s modules)::

    class MyKind:
        name = "my-kind"
        def planned_runs(self, exp, store) -> list[tuple[str, RunConfig]]:
            "every run that can be defined now, given the finished ones (role, config)"
        def finalize(self, exp, store) -> None:
            "write results/ once every planned run is done"

The runner trains the planned runs one after another (each an ordinary resumable run, so a
killed experiment resumes where it stopped; a run another process is training is skipped and
waited for, so extra workers can share the grid), asks the kind again (a later run may depend on
earlier results, like Model 1 on the pruned set), and finalizes. With several GPUs it trains
independent runs in parallel, one process per GPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from .config import RunConfig
from .errors import RunError
from .io import atomic_write_json, atomic_write_parquet, read_json
from .store import FolderState, Run, RunStore

WAIT_S = 5.0  # poll interval while every remaining run is trained by another process


class ExperimentKind(Protocol):
    name: str

    def planned_runs(self, exp: Experiment, store: RunStore) -> list[tuple[str, RunConfig]]: ...

    def finalize(self, exp: Experiment, store: RunStore) -> None: ...


KINDS: dict[str, ExperimentKind] = {}


def register(kind: ExperimentKind) -> ExperimentKind:
    KINDS[kind.name] = kind
    return kind


def kind_of(name: str) -> ExperimentKind:
    _load_builtin_kinds()
    if name not in KINDS:
        raise RunError(f"unknown experiment kind {name!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[name]


def _load_builtin_kinds() -> None:
    import importlib

    for module in ("cartomap.pruning", "cartomap.curriculum_experiment"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise


@dataclass(frozen=True)
class Experiment(FolderState):
    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def spec(self) -> dict[str, Any]:
        return read_json(self.path / "spec.json")

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
    def results_dir(self) -> Path:
        return self.path / "results"

    LOCK_NAME = "experiment.lock"
    BUSY = "is already running in another process"

    # -- runs and results ---------------------------------------------------
    def run_ids(self) -> dict[str, str]:
        path = self.path / "runs.json"
        return read_json(path) if path.exists() else {}

    def record_run(self, role: str, run_id: str) -> None:
        runs = self.run_ids()
        runs[role] = run_id
        atomic_write_json(self.path / "runs.json", runs)

    def run(self, role: str, store: RunStore) -> Run | None:
        run_id = self.run_ids().get(role)
        return store.get(run_id) if run_id else None

    def write_result(self, name: str, value: pd.DataFrame | dict | list) -> Path:
        if isinstance(value, pd.DataFrame):
            return atomic_write_parquet(self.results_dir / f"{name}.parquet", value)
        return atomic_write_json(self.results_dir / f"{name}.json", value)

    def result(self, name: str) -> pd.DataFrame | dict | list | None:
        parquet, js = self.results_dir / f"{name}.parquet", self.results_dir / f"{name}.json"
        if parquet.exists():
            return pd.read_parquet(parquet)
        if js.exists():
            return read_json(js)
        return None

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.path / "log.txt", "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {message}\n")

    def summary(self) -> dict[str, Any]:
        status = self.status()
        return {
            "id": self.id,
            "name": self.spec.get("name", ""),
            "kind": self.kind,
            "state": status.get("state"),
            "runs": f"{status.get('runs_done', 0)}/{status.get('runs_planned', '?')}",
            "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(self.spec.get("created_at", 0))),
        }


def experiment_id(kind: str, params: dict[str, Any]) -> str:
    payload = json.dumps({"kind": kind, "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


class ExperimentStore:
    """All experiments under ``root/experiments``; runs stay in the shared run store."""

    def __init__(self, root: str | Path | None = None):
        self.runs = RunStore(root)
        self.root = self.runs.root
        self.dir = self.root / "experiments"

    def create(self, kind: str, params: dict[str, Any], name: str = "") -> Experiment:
        """The experiment for (kind, params): the existing one, or a new queued one (made atomically)."""
        kind_of(kind)
        params = json.loads(json.dumps(params, default=str))  # what will be saved is what is hashed
        final = self.dir / experiment_id(kind, params)
        if (final / "spec.json").exists():
            return Experiment(final)
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".tmp-{final.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        spec = {"kind": kind, "name": name, "params": params, "created_at": time.time()}
        atomic_write_json(tmp / "spec.json", spec)
        atomic_write_json(tmp / "status.json", {"state": "queued", "updated_at": time.time()})
        try:
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not final.exists():
                raise
        return Experiment(final)

    def get(self, key: str) -> Experiment:
        exact = self.dir / key
        if (exact / "spec.json").exists():
            return Experiment(exact)
        found = [e for e in self.list() if e.id.startswith(key)] or [
            e for e in self.list() if e.spec.get("name") == key
        ]
        if len(found) == 1:
            return found[0]
        if not found:
            raise RunError(f"no experiment {key!r} in {self.dir} (see `cartomap experiment list`)")
        raise RunError(f"{key!r} matches several experiments: {', '.join(e.id for e in found)}")

    def list(self, kind: str | None = None) -> list[Experiment]:
        if not self.dir.exists():
            return []
        found = [
            Experiment(p)
            for p in self.dir.iterdir()
            if not p.name.startswith(".") and (p / "spec.json").exists()
        ]
        if kind is not None:
            found = [e for e in found if e.kind == kind]
        return sorted(found, key=lambda e: e.spec.get("created_at", 0), reverse=True)

    def table(self, kind: str | None = None) -> pd.DataFrame:
        return pd.DataFrame([e.summary() for e in self.list(kind)])

    def delete(self, key: str) -> None:
        exp = self.get(key)
        if exp.is_locked():
            raise RunError(f"experiment {exp.id} is running: cancel it first")
        trash = self.dir / f".deleting-{exp.id}-{os.getpid()}"
        os.rename(exp.path, trash)
        shutil.rmtree(trash, ignore_errors=True)


# --------------------------------------------------------------------------- the runner
def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no usable torch/cuda means no GPUs
        return 0


def run_experiment(exp: Experiment, store: ExperimentStore, *, as_job: bool = False, echo=None) -> Experiment:
    """Train every run the experiment plans (resuming finished and interrupted ones), then finalize."""
    handle = exp.acquire_lock()
    try:
        if not as_job:
            exp.clear_cancel()
        _run_locked(exp, store, echo or (lambda _msg: None))
    except Exception as err:
        exp.log("failed:\n" + traceback.format_exc())
        exp.set_status(state="failed", error=f"{type(err).__name__}: {err}")
        raise
    finally:
        handle.close()
    return exp


def _run_locked(exp: Experiment, store: ExperimentStore, echo) -> None:
    from .train import prepare_run, train_run

    kind = kind_of(exp.kind)
    exp.set_status(state="running", error=None, phase="training")
    gpus = gpu_count()
    while True:
        if exp.cancel_requested():
            exp.set_status(state="cancelled", phase="cancelled")
            exp.log("cancelled")
            return
        planned = kind.planned_runs(exp, store.runs)
        todo = []
        for role, config in planned:
            run = _recorded_done(exp, role, config, store.runs) or prepare_run(config, store.runs)
            exp.record_run(role, run.id)
            if run.state != "done":
                todo.append((role, run))
        exp.set_status(runs_planned=len(planned), runs_done=len(planned) - len(todo))
        if not todo:
            break
        if gpus > 1 and len(todo) > 1:
            free = [(role, run) for role, run in todo if not run.is_locked()]
            if len(free) > 1:
                _train_parallel(exp, free[:gpus], store, echo)
                continue
        free = [(role, run) for role, run in todo if not run.is_locked()]
        if not free:  # every remaining run is being trained by another process: wait for one
            exp.set_status(role=todo[0][0], run_id=todo[0][1].id, phase="waiting")
            time.sleep(WAIT_S)
            continue
        role, run = free[0]
        exp.set_status(role=role, run_id=run.id, phase="training")
        exp.log(f"training {role} ({run.id})")
        echo(f"[{exp.id}] {role}: run {run.id}")
        run.clear_cancel()
        _train_watching_cancel(exp, run, train_run)
        if run.state != "done":
            state = "cancelled" if exp.cancel_requested() or run.state == "cancelled" else "failed"
            exp.set_status(state=state, phase=state, error=run.status().get("error"))
            return
    exp.set_status(phase="finalizing", role=None, run_id=None)
    kind.finalize(exp, store.runs)
    exp.set_status(state="done", phase="done")
    exp.log("done")


def _recorded_done(exp: Experiment, role: str, config: RunConfig, runs: RunStore) -> Run | None:
    """The finished run already recorded for ``role`` with this very config: reused without loading
    (and fingerprinting) its datasets again on every pass of the runner."""
    run_id = exp.run_ids().get(role)
    if run_id is None or not (runs.path_for(run_id) / "config.json").exists():
        return None
    run = Run(runs.path_for(run_id))
    return run if run.state == "done" and run.config == config else None


def _train_watching_cancel(exp: Experiment, run: Run, train_run) -> None:
    """Train ``run``; a cancel of the experiment is passed on to the run between steps."""

    def on_step(_fields):
        if exp.cancel_requested() and not run.cancel_requested():
            run.request_cancel()

    train_run(run, on_step=on_step)


def _train_parallel(exp: Experiment, todo: list[tuple[str, Run]], store: ExperimentStore, echo) -> None:
    """One training process per GPU (CUDA_VISIBLE_DEVICES), waited for until every process has exited."""
    from .jobs import spawn

    pids = []
    for gpu, (role, run) in enumerate(todo):
        request = run.path / "job_config.json"
        atomic_write_json(request, run.config.to_dict())
        echo(f"[{exp.id}] {role}: run {run.id} on GPU {gpu}")
        exp.log(f"training {role} ({run.id}) on GPU {gpu}")
        pids.append(
            spawn(
                ["train", "--config", str(request), "--quiet", "--job"],
                run.path / "job.log",
                store.root,
                env={"CUDA_VISIBLE_DEVICES": str(gpu)},
            )
        )
    exp.set_status(role=", ".join(role for role, _ in todo), run_id=None, phase="training in parallel")
    while pids:
        if exp.cancel_requested():
            for _, r in todo:
                r.request_cancel()
        pids = [pid for pid in pids if os.waitpid(pid, os.WNOHANG) == (0, 0)]
        time.sleep(WAIT_S)
    failed = [(role, r) for role, r in todo if r.state != "done"]
    if failed and not exp.cancel_requested():
        role, r = failed[0]
        raise RunError(f"run {r.id} ({role}) ended {r.state}: {r.status().get('error')}")


def start_experiment(exp: Experiment, store: ExperimentStore) -> Experiment:
    """Run ``exp`` as a background job (unless done or already running)."""
    from .jobs import spawn

    if exp.state == "done" or exp.is_locked():
        return exp
    exp.clear_cancel()
    pid = spawn(["experiment", "run", exp.id, "--job"], exp.path / "job.log", store.root)
    exp.set_status(state="queued", pid=pid, error=None, queued_at=time.time())
    return exp
