"""The run store: one folder per run under ``<cache>/runs/``, every write atomic.

The folder's file names live in :mod:`cartomap.runs.layout` (printed in docs/architecture.md);
:class:`Run` hands out their paths. A run holds its own copy of the data it was trained on, so
nothing depends on the folder a command ran from.

The run id is a hash of the config's identity and of the data fingerprints, so the same
config on the same data is the same run ("train or load").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import DataConfig, RunConfig, package_versions
from cartomap.errors import RunError
from cartomap.io import atomic_save, atomic_write_json, atomic_write_parquet, read_json
from cartomap.runs import layout
from cartomap.runs.folders import FolderStore
from cartomap.runs.state import StatusFolder
from cartomap.runs.tasks import Task

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


def _parquet_columns(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def _read_columns(path: Path, columns: Sequence[str] | None) -> pd.DataFrame:
    if columns is None:
        return pd.read_parquet(path)
    present = set(_parquet_columns(path))
    return pd.read_parquet(path, columns=[c for c in columns if c in present])


def logits_frame(ids, logits: np.ndarray) -> pd.DataFrame:
    """One row per example: id and one float32 column per class (logit_0, logit_1, ...)."""
    frame = pd.DataFrame(
        np.asarray(logits, dtype=np.float32), columns=[f"logit_{c}" for c in range(logits.shape[1])]
    )
    frame.insert(0, "id", pd.Series(list(ids), dtype=str))
    return frame


def arrow_ids(ids):
    """The example ids as an Arrow string array (as pandas' str columns are stored), for :func:`logits_table`."""
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if isinstance(ids, pa.Array):
        return ids.cast(pa.large_string())
    ids = list(ids)
    try:
        return pa.array(ids, type=pa.large_string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):  # not all str (ints, numpy strings)
        return pa.array([str(i) for i in ids], type=pa.large_string())


def logits_table(ids, logits: np.ndarray):
    """:func:`logits_frame` as an Arrow table, built column by column without pandas: id (string) and
    logit_0, logit_1, ... (float32)."""
    import pyarrow as pa

    logits = np.asarray(logits, dtype=np.float32)
    ids = arrow_ids(ids)
    if len(ids) != logits.shape[0]:
        raise ValueError(f"{len(ids)} ids for {logits.shape[0]} rows of logits")
    columns = {"id": ids}
    for c in range(logits.shape[1]):
        columns[f"logit_{c}"] = pa.array(np.ascontiguousarray(logits[:, c]))
    return pa.table(columns)


@dataclass(frozen=True)
class Run(StatusFolder):
    """A handle on one run folder. Reading is cheap: nothing is loaded until asked for."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    # -- config and status -------------------------------------------------
    @functools.cached_property
    def info(self) -> dict[str, Any]:
        """config.json, read once per handle: it never changes after the run is created."""
        return read_json(self.config_path)

    @property
    def config(self) -> RunConfig:
        return RunConfig.from_dict(self.info["config"])

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(self.info["label_names"])

    LOCK_NAME = layout.LOCK
    BUSY = "is already being trained by another process"

    def describe(self) -> str:
        return f"run {self.id}"

    # -- paths: every file of the run folder (names in cartomap.runs.layout) ---
    @property
    def config_path(self) -> Path:
        return self.path / layout.CONFIG

    @property
    def examples_path(self) -> Path:
        return self.path / layout.EXAMPLES

    @property
    def dev_examples_path(self) -> Path:
        return self.path / layout.DEV_EXAMPLES

    def test_examples_path(self, k: int) -> Path:
        return self.path / layout.TEST_EXAMPLES.format(k=k)

    def dynamics_dir(self, source: str = "train") -> Path:
        return self.path / layout.DYNAMICS / source

    def epoch_path(self, source: str, epoch: int) -> Path:
        """Logits of 0-based ``epoch`` of ``source`` (train, eval, dev, test_<k>)."""
        return self.dynamics_dir(source) / layout.EPOCH_FILE.format(epoch=epoch)

    @property
    def history_path(self) -> Path:
        return self.path / layout.HISTORY

    def metrics_path(self, source: str = "train") -> Path:
        """Data-map metrics of ``source``: the first recorded source has the plain name."""
        if source == "train":
            return self.path / layout.METRICS
        return self.path / layout.METRICS_OF_SOURCE.format(source=source)

    def has_metrics(self, source: str = "train") -> bool:
        return self.metrics_path(source).exists()

    @property
    def plan_path(self) -> Path:
        return self.path / layout.PLAN

    @property
    def job_config_path(self) -> Path:
        return self.path / layout.JOB_CONFIG

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / layout.CHECKPOINTS

    def checkpoint_dir(self, epoch: int) -> Path:
        """End-of-epoch weights of 1-based ``epoch``."""
        return self.checkpoints_dir / layout.CHECKPOINT.format(epoch=epoch)

    @property
    def state_dir(self) -> Path:
        """Resume point: ``epoch_<e>/`` of the last completed epoch and ``latest.json``."""
        return self.path / layout.STATE

    def state_epoch_dir(self, epoch: int) -> Path:
        return self.state_dir / layout.STATE_EPOCH.format(epoch=epoch)

    @property
    def state_latest_path(self) -> Path:
        return self.state_dir / layout.STATE_LATEST

    @property
    def embeddings_path(self) -> Path:
        return self.path / layout.EMBEDDINGS

    @property
    def embedding_ids_path(self) -> Path:
        return self.path / layout.EMBEDDING_IDS

    def projection_path(self, method: str) -> Path:
        return self.path / layout.PROJECTION.format(method=method)

    @property
    def similarity_path(self) -> Path:
        return self.path / layout.SIMILARITY

    @property
    def groups_dir(self) -> Path:
        return self.path / layout.GROUPS

    @property
    def wanli_dir(self) -> Path:
        return self.path / layout.WANLI

    @staticmethod
    def stamp(*paths: Path) -> tuple[int | None, ...]:
        """Modification times (ns) of ``paths``, None for a missing one: the cache key of a view that
        reads them, so a rewritten file is read again."""
        out = []
        for path in paths:
            try:
                out.append(os.stat(path).st_mtime_ns)
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def task(self, name: str) -> Task:
        """Background task ``name`` of this run (its status, lock and log under ``tasks/``)."""
        return Task(self.path, name)

    # -- data -------------------------------------------------------------
    def data_config(self, which: str = "train") -> DataConfig:
        """A DataConfig that reads the run's own copy of its training (``"train"``) or dev (``"dev"``)
        examples, so later work on "the run's data" never depends on the original files."""
        path = {"train": self.examples_path, "dev": self.dev_examples_path}[which]
        if not path.exists():
            raise RunError(f"run {self.id} has no {which} examples")
        original = self.config.data if which == "train" else self.config.dev
        columns = _parquet_columns(path)
        return DataConfig(
            path=str(path.resolve()),
            format="parquet",
            text_columns=("premise", "hypothesis") if "premise" in columns else ("text",),
            label_column="label",
            id_column="id",
            label_names=self.label_names,
            genre_column="genre" if "genre" in columns else None,
            name=(original.name if original is not None else "") or f"run {self.id} {which}",
        )

    def examples(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The run's training examples; ``columns`` reads only those of them the file has (a column
        read of the Parquet file: the texts of 550k pairs are not read when only ids are wanted)."""
        return _read_columns(self.examples_path, columns)

    def dev_examples(self) -> pd.DataFrame | None:
        path = self.dev_examples_path
        return pd.read_parquet(path) if path.exists() else None

    # -- test sets: evaluated after every epoch -----------------------------
    @property
    def test_names(self) -> list[str]:
        return [t["name"] for t in self.info.get("tests", [])]

    def test_examples(self, k: int) -> pd.DataFrame:
        return pd.read_parquet(self.test_examples_path(k))

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
        path = self.history_path
        return read_json(path) if path.exists() else []

    def metrics(self, source: str = "train", columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Data-map metrics of ``source``; ``columns`` reads only those of them the file has."""
        path = self.metrics_path(source)
        if not path.exists():
            raise RunError(f"run {self.id} has no {source} metrics yet (state: {self.state})")
        return _read_columns(path, columns)

    def dynamics_epochs(self, source: str = "train") -> list[int]:
        folder = self.dynamics_dir(source)
        if not folder.exists():
            return []
        return sorted(int(p.stem.split("_")[1]) for p in folder.glob("epoch_*.parquet"))

    def dynamics(self, source: str = "train") -> tuple[list[str], np.ndarray]:
        """Example ids (in examples.parquet order) and logits [E, N, C] for the completed epochs."""
        ids = (
            self.examples(columns=["id"])["id"].astype(str).tolist()
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
        frame = pd.read_parquet(self.epoch_path(source, epoch))
        frame = frame.set_index("id").reindex(ids)
        if frame.isna().any().any():
            raise RunError(f"run {self.id}: epoch {epoch} of {source} dynamics is missing examples")
        return frame.to_numpy(dtype=np.float32)

    def write_epoch(self, source: str, epoch: int, ids, logits: np.ndarray) -> Path:
        """Write :func:`logits_table` as Parquet without dictionary encoding (unique ids and float logits
        gain nothing from it: a third of the CPU time and a smaller file at 550k rows). ``ids`` may be
        an Arrow string array (:func:`arrow_ids`), made once for every epoch: converting 550k Python
        strings costs more than writing the file."""
        import pyarrow.parquet as pq

        table = logits_table(ids, logits)
        return atomic_save(
            self.epoch_path(source, epoch), lambda p: pq.write_table(table, p, use_dictionary=False)
        )

    @property
    def model_dir(self) -> Path:
        return self.path / layout.MODEL

    def checkpoint_dirs(self) -> list[Path]:
        folder = self.checkpoints_dir
        if not folder.exists():
            return []
        return sorted(folder.glob("epoch_*"), key=lambda p: int(p.name.split("_")[1]))

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


class RunStore(FolderStore[Run]):
    """All runs under ``root/runs``."""

    MARKER = layout.CONFIG
    WHAT = "run"
    LIST_COMMAND = "cartomap runs"

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else DEFAULT_ROOT
        self.runs_dir = self.dir = self.root / "runs"

    def open(self, path: Path) -> Run:
        return Run(path)

    def name_of(self, run: Run) -> str:
        return run.info["config"].get("name", "")

    def created_at(self, run: Run) -> float:
        return run.info.get("created_at", 0)

    def create(self, config: RunConfig, train, dev=None, tests=()) -> Run:
        """Create the run folder for ``config`` on the loaded datasets; return the existing run if any.

        The folder is assembled under a temporary name and renamed into place, so a failure
        leaves nothing behind and a reader never sees a half-made run.
        """

        def write(tmp: Path) -> None:
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
            atomic_write_json(tmp / layout.CONFIG, info)
            atomic_write_parquet(tmp / layout.EXAMPLES, train.frame)
            if dev is not None:
                atomic_write_parquet(tmp / layout.DEV_EXAMPLES, dev.frame)
            for k, t in enumerate(tests):
                atomic_write_parquet(tmp / layout.TEST_EXAMPLES.format(k=k), t.frame)
            atomic_write_json(tmp / layout.STATUS, {"state": "queued", "updated_at": time.time()})

        return self.create_folder(self._id(config, train, dev, tests), write)

    @staticmethod
    def _id(config: RunConfig, train, dev=None, tests=()) -> str:
        dev_fp = dev.fingerprint() if dev is not None else None
        return run_id_for(config, train.fingerprint(), dev_fp, tuple(t.fingerprint() for t in tests))

    def find(self, config: RunConfig, train, dev=None, tests=()) -> Run | None:
        return self.find_id(self._id(config, train, dev, tests))

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.summary() for r in self.list()])
