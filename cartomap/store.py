"""The run store: one folder per run under ``cache/runs/``.

Layout of a run folder (every file written atomically)::

    config.json          RunConfig, package versions, data fingerprints, label names
    status.json          state (queued, running, done, failed, cancelled), progress, error
    examples.parquet     the training examples as loaded (id, texts, label, genre, ...)
    dev_examples.parquet the dev examples, when a dev set was given
    dynamics/<source>/epoch_<e>.parquet   per-epoch logits keyed by example id
                          (source "train": training forward pass, "eval": eval-mode pass, "dev")
    history.json         per-epoch summary: loss, dev accuracy, seconds
    metrics.parquet      data-map metrics of every training example (metrics_eval.parquet for "eval")
    model/               final weights (safetensors) and tokenizer
    checkpoints/epoch_<e>/  end-of-epoch weights when asked for
    state/               resume point: weights, optimizer and scheduler of the last completed epoch
    groups/              saved selections (dashboard)
    log.txt              human-readable log

The run id is a hash of the config's identity and of the data fingerprints, so the same
config on the same data is the same run ("train or load").
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .config import RunConfig, package_versions
from .errors import RunError
from .io import atomic_write_json, atomic_write_parquet, is_locked, read_json

STATES = ("queued", "running", "done", "failed", "cancelled")
DEFAULT_ROOT = Path(os.environ.get("CARTOMAP_CACHE", "cache"))


def run_id_for(
    config: RunConfig,
    train_fingerprint: str,
    dev_fingerprint: str | None,
    test_fingerprints: tuple[str, ...] = (),
) -> str:
    """Stable id: sha256 of the config identity and the data fingerprints (first 12 hex digits)."""
    content = {"config": config.identity(), "train": train_fingerprint, "dev": dev_fingerprint}
    if test_fingerprints:  # absent for runs without test sets, so their ids did not change
        content["tests"] = list(test_fingerprints)
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def logits_frame(ids, logits: np.ndarray) -> pd.DataFrame:
    """One row per example: id and one float32 column per class (logit_0, logit_1, ...)."""
    frame = pd.DataFrame(
        np.asarray(logits, dtype=np.float32), columns=[f"logit_{c}" for c in range(logits.shape[1])]
    )
    frame.insert(0, "id", pd.Series(list(ids), dtype=str))
    return frame


class FolderState:
    """status.json, a lock file and a cancel flag in ``self.path``: shared by runs and experiments.

    The saved state "running" reads as "interrupted" when no process holds the lock any more.
    """

    path: Path
    LOCK_NAME = "state.lock"
    BUSY = "is busy in another process"

    def status(self) -> dict[str, Any]:
        status = read_json(self.path / "status.json")
        if status.get("state") == "running" and not self.is_locked():
            status["state"] = "interrupted"
        return status

    def set_status(self, **fields: Any) -> dict[str, Any]:
        path = self.path / "status.json"
        status = read_json(path) if path.exists() else {}
        status.update(fields, updated_at=time.time())
        if status.get("state") not in STATES:
            raise ValueError(f"unknown state {status.get('state')!r}; expected one of {STATES}")
        atomic_write_json(path, status)
        return status

    @property
    def state(self) -> str:
        return self.status()["state"]

    def is_locked(self) -> bool:
        return is_locked(self.path / self.LOCK_NAME)

    def acquire_lock(self):
        """Hold an exclusive lock for as long as the returned handle is open (released if the process dies)."""
        handle = open(self.path / self.LOCK_NAME, "a")  # noqa: SIM115 - kept open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            handle.close()
            raise RunError(f"{type(self).__name__.lower()} {self.path.name} {self.BUSY}") from err
        return handle

    def request_cancel(self) -> None:
        (self.path / "cancel").touch()

    def cancel_requested(self) -> bool:
        return (self.path / "cancel").exists()

    def clear_cancel(self) -> None:
        (self.path / "cancel").unlink(missing_ok=True)


@dataclass(frozen=True)
class Run(FolderState):
    """A handle on one run folder. Reading is cheap: nothing is loaded until asked for."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    # -- config and status -------------------------------------------------
    @functools.cached_property
    def info(self) -> dict[str, Any]:
        """config.json, read once per handle: it never changes after the run is created."""
        return read_json(self.path / "config.json")

    @property
    def config(self) -> RunConfig:
        return RunConfig.from_dict(self.info["config"])

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(self.info["label_names"])

    LOCK_NAME = "run.lock"
    BUSY = "is already being trained by another process"

    # -- data -------------------------------------------------------------
    def examples(self) -> pd.DataFrame:
        return pd.read_parquet(self.path / "examples.parquet")

    def dev_examples(self) -> pd.DataFrame | None:
        path = self.path / "dev_examples.parquet"
        return pd.read_parquet(path) if path.exists() else None

    # -- test sets: evaluated after every epoch -----------------------------
    @property
    def test_names(self) -> list[str]:
        return [t["name"] for t in self.info.get("tests", [])]

    def test_examples(self, k: int) -> pd.DataFrame:
        return pd.read_parquet(self.path / f"test_examples_{k}.parquet")

    def best_epoch(self) -> int | None:
        """0-based epoch with the best dev accuracy (first of ties); the last epoch without a dev set."""
        history = self.history()
        if not history:
            return None
        scores = [h.get("dev_accuracy") for h in history]
        if any(s is None for s in scores):
            return len(history) - 1
        return int(np.argmax(scores))

    def test_logits(self, k: int, epoch: int | None = None) -> tuple[pd.DataFrame, np.ndarray]:
        """Test set ``k``'s examples and logits [N, C] at ``epoch`` (default: :meth:`best_epoch`)."""
        frame = self.test_examples(k)
        epoch = self.best_epoch() if epoch is None else epoch
        if epoch is None:
            raise RunError(f"run {self.id} has not finished an epoch yet")
        return frame, self.read_epoch(f"test_{k}", epoch, frame["id"].astype(str).tolist())

    def history(self) -> list[dict[str, Any]]:
        path = self.path / "history.json"
        return read_json(path) if path.exists() else []

    def metrics(self, source: str = "train") -> pd.DataFrame:
        name = "metrics.parquet" if source == "train" else f"metrics_{source}.parquet"
        path = self.path / name
        if not path.exists():
            raise RunError(f"run {self.id} has no {source} metrics yet (state: {self.state})")
        return pd.read_parquet(path)

    def dynamics_epochs(self, source: str = "train") -> list[int]:
        folder = self.path / "dynamics" / source
        if not folder.exists():
            return []
        return sorted(int(p.stem.split("_")[1]) for p in folder.glob("epoch_*.parquet"))

    def dynamics(self, source: str = "train") -> tuple[list[str], np.ndarray]:
        """Example ids (in examples.parquet order) and logits [E, N, C] for the completed epochs."""
        ids = (
            self.examples()["id"].astype(str).tolist()
            if source not in ("dev",) and not source.startswith("test_")
            else self._source_frame(source)["id"].astype(str).tolist()
        )
        epochs = self.dynamics_epochs(source)
        if not epochs:
            raise RunError(f"run {self.id} has no recorded {source} dynamics")
        arrays = [self.read_epoch(source, e, ids) for e in epochs]
        return ids, np.stack(arrays)

    def _source_frame(self, source: str) -> pd.DataFrame:
        if source == "dev":
            return self.dev_examples()
        return self.test_examples(int(source.split("_", 1)[1]))

    def read_epoch(self, source: str, epoch: int, ids: list[str]) -> np.ndarray:
        frame = pd.read_parquet(self.path / "dynamics" / source / f"epoch_{epoch}.parquet")
        frame = frame.set_index("id").reindex(ids)
        if frame.isna().any().any():
            raise RunError(f"run {self.id}: epoch {epoch} of {source} dynamics is missing examples")
        return frame.to_numpy(dtype=np.float32)

    def write_epoch(self, source: str, epoch: int, ids, logits: np.ndarray) -> Path:
        path = self.path / "dynamics" / source / f"epoch_{epoch}.parquet"
        return atomic_write_parquet(path, logits_frame(ids, logits))

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    def checkpoint_dirs(self) -> list[Path]:
        folder = self.path / "checkpoints"
        if not folder.exists():
            return []
        return sorted(folder.glob("epoch_*"), key=lambda p: int(p.name.split("_")[1]))

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.path / "log.txt", "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {message}\n")

    def summary(self) -> dict[str, Any]:
        info, status = self.info, self.status()
        history = self.history()
        last = history[-1] if history else {}
        return {
            "id": self.id,
            "name": info["config"].get("name", ""),
            "state": status.get("state"),
            "data": info["config"]["data"]["path"],
            "model": info["config"]["model"]["name_or_path"],
            "examples": info.get("n_train"),
            "epochs": f"{len(history)}/{info['config']['train']['epochs']}",
            "dev_accuracy": last.get("dev_accuracy"),
            "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(info.get("created_at", 0))),
        }


def dataset_names(configs) -> list[str]:
    """Short unique names for test sets: "snli/test" for shared/data/snli/test.jsonl.gz, "demo:dev" ..."""
    names = []
    for config in configs:
        path = str(config.path)
        if config.name:
            name = config.name
        elif ":" in path and not Path(path).exists():
            name = path
        else:
            p = Path(path)
            stem = p.name.split(".")[0] or p.name
            name = f"{p.parent.name}/{stem}" if p.parent.name else stem
        if config.split:
            name += f"[{config.split}]"
        base, i = name, 2
        while name in names:
            name, i = f"{base} ({i})", i + 1
        names.append(name)
    return names


class RunStore:
    """All runs under ``root/runs``."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else DEFAULT_ROOT
        self.runs_dir = self.root / "runs"

    def path_for(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def create(self, config: RunConfig, train, dev=None, tests=()) -> Run:
        """Create the run folder for ``config`` on the loaded datasets; return the existing run if any.

        The folder is assembled under a temporary name and renamed into place, so a failure
        leaves nothing behind and a reader never sees a half-made run.
        """
        run_id = self._id(config, train, dev, tests)
        final = self.path_for(run_id)
        if final.exists():
            return Run(final)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.runs_dir / f".tmp-{run_id}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            info = {
                "config": config.to_dict(),
                "label_names": list(train.label_names),
                "train_fingerprint": train.fingerprint(),
                "dev_fingerprint": dev.fingerprint() if dev is not None else None,
                "n_train": len(train),
                "n_dev": len(dev) if dev is not None else 0,
                "is_pair": train.is_pair,
                "tests": [
                    {"name": name, "n": len(t), "fingerprint": t.fingerprint()}
                    for name, t in zip(dataset_names(config.tests), tests, strict=True)
                ],
                "versions": package_versions(),
                "created_at": time.time(),
            }
            atomic_write_json(tmp / "config.json", info)
            atomic_write_parquet(tmp / "examples.parquet", train.frame)
            if dev is not None:
                atomic_write_parquet(tmp / "dev_examples.parquet", dev.frame)
            for k, t in enumerate(tests):
                atomic_write_parquet(tmp / f"test_examples_{k}.parquet", t.frame)
            atomic_write_json(tmp / "status.json", {"state": "queued", "updated_at": time.time()})
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process created it first
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return Run(final)

    @staticmethod
    def _id(config: RunConfig, train, dev=None, tests=()) -> str:
        dev_fp = dev.fingerprint() if dev is not None else None
        return run_id_for(config, train.fingerprint(), dev_fp, tuple(t.fingerprint() for t in tests))

    def find(self, config: RunConfig, train, dev=None, tests=()) -> Run | None:
        run_id = self._id(config, train, dev, tests)
        path = self.path_for(run_id)
        return Run(path) if (path / "config.json").exists() else None

    def get(self, run_id: str) -> Run:
        """A run by id, or by a unique prefix of its id, or by its name."""
        exact = self.path_for(run_id)
        if (exact / "config.json").exists():
            return Run(exact)
        runs = self.list()
        matches = [r for r in runs if r.id.startswith(run_id)] or [
            r for r in runs if r.info["config"].get("name") == run_id
        ]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RunError(f"no run {run_id!r} in {self.runs_dir} (see `cartomap runs`)")
        raise RunError(f"{run_id!r} matches several runs: {', '.join(r.id for r in matches)}")

    def list(self) -> list[Run]:
        if not self.runs_dir.exists():
            return []
        runs = [
            Run(p)
            for p in self.runs_dir.iterdir()
            if not p.name.startswith(".") and (p / "config.json").exists()
        ]
        return sorted(runs, key=lambda r: r.info.get("created_at", 0), reverse=True)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.summary() for r in self.list()])

    def delete(self, run_id: str) -> None:
        run = self.get(run_id)
        if run.is_locked():
            raise RunError(f"run {run.id} is being trained right now: cancel it first")
        trash = self.runs_dir / f".deleting-{run.id}-{os.getpid()}"
        os.rename(run.path, trash)  # disappears from listings at once
        shutil.rmtree(trash, ignore_errors=True)
