"""The run store: one folder per run under ``<cache>/runs/``, every write atomic.

The folder's file names live in :mod:`cartomap.runs.layout` (printed in docs/architecture.md);
:class:`Run` hands out their paths. A run holds its own copy of the data it was trained on, so
nothing depends on the folder a command ran from.

The run id is a hash of the config's identity and of the data fingerprints, so the same
config on the same data is the same run ("train or load").
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import MAIN_METRICS, DataConfig, RunConfig, package_versions
from cartomap.errors import RunError
from cartomap.io import atomic_write_json, atomic_write_parquet, read_json
from cartomap.runs import layout
from cartomap.runs.folders import FolderStore
from cartomap.runs.paths import RunPaths
from cartomap.runs.recorded import RunRecords
from cartomap.runs.state import DAMAGED, State, StatusFolder
from cartomap.runs.tables import (
    one_line,
    parquet_columns,
    read_arrow_copy,
    read_columns,
    write_arrow_copy,
)
from cartomap.runs.units import own_copy
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TaskKind

DEFAULT_ROOT = Path(os.environ.get("CARTOMAP_CACHE", "cache"))
#: How a command or a form names a run's own copy of a data set: ``run:RUN`` (its training set),
#: ``run:RUN:dev``, ``run:RUN:test_0`` (RUN: an id, an id prefix or a run name).
RUN_REF = "run:"
#: The set name of a run's training set corrected by a review queue: ``run:RUN:corrected/<queue>``.
CORRECTED_REF = "corrected/"


def run_id_for(
    config: RunConfig,
    train_fingerprint: str,
    dev_fingerprint: str | None,
    test_fingerprints: tuple[str, ...] = (),
    portable: bool = True,
) -> str:
    """Stable id: sha256 of the config identity and the data fingerprints (first 12 hex digits); the
    same wherever the store is (``portable=False``: the id a config naming a run folder's files had
    before, :meth:`RunConfig.identity`)."""
    content = {"config": config.identity(portable), "train": train_fingerprint, "dev": dev_fingerprint}
    if test_fingerprints:  # absent for runs without test sets, so their ids did not change
        content["tests"] = list(test_fingerprints)
    payload = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Run(RunPaths, RunRecords, StatusFolder):
    """A handle on one run folder. Reading is cheap: nothing is loaded until asked for."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    # -- config and status -------------------------------------------------
    @functools.cached_property
    def info(self) -> dict[str, Any]:
        """config.json, read once per handle: it never changes after the run is created.

        RunError (the run is damaged, with what is wrong) when it is missing or cannot be read."""
        try:
            info = read_json(self.config_path)
        except FileNotFoundError:
            raise RunError(f"run {self.id} is damaged: {layout.CONFIG} is missing{self.REMEDY}") from None
        except (OSError, ValueError) as err:
            raise RunError(
                f"run {self.id} is damaged: {layout.CONFIG} cannot be read ({one_line(err)}){self.REMEDY}"
            ) from None
        if not isinstance(info, dict) or not isinstance(info.get("config"), dict):
            raise RunError(f"run {self.id} is damaged: {layout.CONFIG} holds no run config{self.REMEDY}")
        return info

    #: What a message about a damaged run suggests.
    REMEDY = " (see `cartomap repair RUN`, or remove it with `cartomap delete RUN`)"

    @property
    def config(self) -> RunConfig:
        return RunConfig.from_dict(self.info["config"])

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(self.info["label_names"])

    @property
    def task_kind(self) -> TaskKind:
        """The run's task kind (:mod:`cartomap.tasks`), saved with the run; a run saved before it was
        has a pair or a single text, as its saved ``is_pair`` says (its examples' kind: an imported run's
        config may name a pair where the examples hold empty single texts)."""
        name = self.info.get("task_kind")
        if not name and isinstance(self.info.get("is_pair"), bool):
            name = task_kinds.BY_COLUMN_COUNT[2 if self.info["is_pair"] else 1]
        return task_kinds.kind(name) if name else self.config.task_kind

    def region_rule(self, **overrides):
        """The rule this run's map draws its regions by unless told otherwise: its task kind's
        (:meth:`cartomap.scores.metrics.RegionRule.for_kind`; a token run's is by threshold), with
        ``overrides`` (None values ignored)."""
        from cartomap.scores.metrics import RegionRule

        return RegionRule.for_kind(self.task_kind, **overrides)

    @property
    def warnings(self) -> list[str]:
        """What was suspicious about the data when the run was made (a class far smaller than the others,
        dev or test classes that differ from training's): :func:`cartomap.data.checks.label_warnings`."""
        return list(self.info.get("warnings", []))

    @property
    def provenance(self) -> dict[str, Any]:
        """Where the data came from, for the record only: the folder the run was made from (``cwd``) and
        the absolute path of every file given (``data``, ``dev``, ``tests``). Nothing reads these files
        again: a run works from its own copy (:meth:`data_config`)."""
        return dict(self.info.get("provenance", {}))

    @property
    def made_for(self) -> str:
        """The id of the experiment whose runner made this run ("" for a run made any other way: by a
        user's command, a page, a Trainer callback, or before runs recorded it)."""
        return str(self.provenance.get("experiment") or "")

    def resolve_path(self, path: str) -> str:
        """A path of the config (a model folder, a scores file) as a process in any folder can open it:
        as given when it exists from here (or is absolute, or is no file path at all), else relative to
        the folder the run was made from, when it exists there."""
        if not path or Path(path).is_absolute() or Path(path).exists():
            return path
        cwd = self.provenance.get("cwd")
        if cwd and (Path(cwd) / path).exists():
            return str(Path(cwd) / path)
        return path

    LOCK_NAME = layout.LOCK
    BUSY = "is already being trained by another process"

    def describe(self) -> str:
        return f"run {self.id}"

    # -- data -------------------------------------------------------------
    def data_sets(self) -> list[str]:
        """The data sets the run holds a copy of: "train", then "dev" and "test_<k>" when it has them, then
        "corrected/<queue>" for every review queue whose corrected training set was written."""
        names = ["train"] + (["dev"] if self.dev_examples_path.exists() else [])
        names += [f"test_{k}" for k in range(len(self.test_names))]
        if self.review_dir.is_dir():
            queues = sorted(p.name for p in self.review_dir.iterdir() if self.corrected_path(p.name).exists())
            names += [f"{CORRECTED_REF}{q}" for q in queues]
        return names

    def data_path(self, which: str = "train") -> Path:
        """The run's own copy of data set ``which``: "train", "dev", "test_<k>" (or "test" for test_0), or
        "corrected/<queue>" (the training set corrected by a review queue, :mod:`cartomap.curation`)."""
        if which == "train":
            return self.examples_path
        if which.startswith(CORRECTED_REF):
            queue = which[len(CORRECTED_REF) :]
            if not queue or "/" in queue or queue.startswith("."):
                raise RunError(f"unknown data set {which!r} of run {self.id}; expected corrected/<queue>")
            return self.corrected_path(queue)
        if which == "dev":
            return self.dev_examples_path
        if which == "test":
            which = "test_0"
        k = which.removeprefix("test_")
        if which.startswith("test_") and k.isdigit():
            return self.test_examples_path(int(k))
        raise RunError(f"unknown data set {which!r} of run {self.id}; expected train, dev or test_<k>")

    def data_config(self, which: str = "train") -> DataConfig:
        """A DataConfig that reads the run's own copy of data set ``which`` (:meth:`data_path`), so later
        work on "the run's data" never depends on the original files, where they were or whether they
        still exist."""
        path = self.data_path(which)
        if not path.exists() and which.startswith(CORRECTED_REF):
            raise RunError(
                f"run {self.id} has no {which} set: write it with `cartomap review-queue export {self.id} "
                f"{which[len(CORRECTED_REF) :]}`"
            )
        if not path.exists():
            raise RunError(
                f"run {self.id} has no {which} examples (its data sets: {', '.join(self.data_sets())})"
            )
        columns = parquet_columns(path)
        kind = self.task_kind
        return DataConfig(
            path=str(path.resolve()),
            format="parquet",
            text_columns=kind.text_fields,
            task=kind.name,
            label_column=kind.label_field,
            id_column="id",
            label_names=self.label_names,
            genre_column="genre" if "genre" in columns else None,
            name=self._data_name(which),
        )

    def _data_name(self, which: str) -> str:
        config = self.config
        if which == "train":
            return config.data.name or f"run {self.id} train"
        if which == "dev":
            return (config.dev.name if config.dev is not None else "") or f"run {self.id} dev"
        if which.startswith(CORRECTED_REF):
            return f"{config.data.name or f'run {self.id} train'} ({which})"
        k = int(self.data_path(which).stem.rsplit("_", 1)[1])
        names = self.test_names
        return names[k] if k < len(names) else f"run {self.id} test {k}"

    def own_config(self) -> RunConfig:
        """The run's config with its training, dev and test sets read from the run's own copies: what
        "the selected run's data" means for everything built on a run (experiments, baselines)."""
        config = self.config
        dev = self.data_config("dev") if config.dev is not None and self.dev_examples_path.exists() else None
        tests = tuple(self.data_config(f"test_{k}") for k in range(len(self.test_names)))
        return config.replace(data=self.data_config("train"), dev=dev, tests=tests)

    def damaged(self, what: str) -> RunError:
        """The error of a run whose file is lost or unreadable: what is damaged, and the way out."""
        return RunError(f"run {self.id} is damaged: {what}{self.REMEDY}")

    def _read_copy(self, path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """One of the run's data copies; RunError (damaged, with the way out) when it is lost or unreadable."""
        try:
            return read_columns(path, columns)
        except FileNotFoundError:
            raise self.damaged(f"{path.name} is missing") from None
        except Exception as err:  # pyarrow raises many kinds for a damaged file
            raise self.damaged(f"{path.name} cannot be read ({one_line(err)})") from None

    def examples(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The run's training examples; ``columns`` reads only those of them the file has (a column
        read of the Parquet file: the texts of 550k pairs are not read when only ids are wanted).
        RunError (the run is damaged) when the file is lost or cannot be read.

        Read from the memory-mapped Arrow copy (:data:`layout.EXAMPLES_ARROW`) when it is there and not
        older than the Parquet file: no decoding, the texts of 2M pairs in milliseconds. A run made
        before it existed gets it on the first read that wants texts, where the store can be written."""
        fast = read_arrow_copy(self.examples_arrow_path, self.examples_path, columns)
        if fast is not None:
            return fast
        wants_texts = columns is None or bool(set(columns) & set(self.task_kind.text_fields))
        if not wants_texts or not self.examples_path.exists():
            return self._read_copy(self.examples_path, columns)
        table = self._read_copy(self.examples_path)
        with contextlib.suppress(OSError):  # best effort: a read-only store reads the Parquet file each time
            write_arrow_copy(self.examples_arrow_path, table)
        return table if columns is None else table[[c for c in columns if c in table.columns]]

    def dev_examples(self) -> pd.DataFrame | None:
        path = self.dev_examples_path
        return self._read_copy(path) if path.exists() else None

    # -- test sets: evaluated after every epoch -----------------------------
    @property
    def test_names(self) -> list[str]:
        return [t["name"] for t in self.info.get("tests", [])]

    def test_examples(self, k: int) -> pd.DataFrame:
        return self._read_copy(self.test_examples_path(k))

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
        """One record per completed epoch ([] before the first). RunError (the run is damaged) when the
        file cannot be read as a list of records."""
        path = self.history_path
        try:
            history = read_json(path)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as err:
            raise self.damaged(f"{layout.HISTORY} cannot be read ({one_line(err)})") from None
        if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
            raise self.damaged(f"{layout.HISTORY} holds no list of epoch records")
        return history

    def step_losses(self) -> list[dict[str, Any]]:
        """The training loss every k steps, in order ([] for a run that has none): the records of
        :func:`cartomap.runs.steps.read`."""
        from cartomap.runs.steps import read

        try:
            return read(self.steps_path)
        except (OSError, UnicodeDecodeError):  # being replaced right now, or damaged: no step curve
            return []

    @property
    def model_dir(self) -> Path:
        return self.path / layout.MODEL

    def checkpoint_dirs(self) -> list[Path]:
        folder = self.checkpoints_dir
        if not folder.exists():
            return []
        return sorted(folder.glob("epoch_*"), key=lambda p: int(p.name.split("_")[1]))

    def problems(self) -> list[str]:
        """What is wrong with the run folder, cheaply (config and status files): [] for a healthy run.
        :meth:`check` also reads the data, dynamics and metrics files."""
        out = []
        try:
            _ = self.info
        except RunError as err:
            out.append(str(err).split(": ", 1)[1].replace(self.REMEDY, ""))
        try:
            status = self.saved_status()
        except FileNotFoundError:
            out.append(f"{layout.STATUS} is missing")
        else:
            if status.get("state") == DAMAGED:
                out.append(status["error"])
        try:
            self.history()
        except RunError as err:
            out.append(str(err).split(": ", 1)[1].replace(self.REMEDY, ""))
        if not any(p.startswith(layout.CONFIG) for p in out):
            for which in ["train"] + (["dev"] if self.info.get("n_dev") else []):
                if not self.data_path(which).exists():
                    out.append(f"{self.data_path(which).name} is missing")
            for k in range(len(self.test_names)):
                if not self.test_examples_path(k).exists():
                    out.append(f"{self.test_examples_path(k).name} is missing")
        return out

    def check(self) -> list[str]:
        """Every problem of the run folder: :meth:`problems`, then each data copy, each dynamics file and
        each metrics file that cannot be read (a metrics file the dynamics can rebuild says so)."""
        out = self.problems()
        if any(p.startswith(layout.CONFIG) for p in out):
            return out
        for which in self.data_sets():
            if not self.data_path(which).exists():
                continue  # said by problems()
            try:
                parquet_columns(self.data_path(which))
            except Exception as err:
                out.append(f"{self.data_path(which).name} cannot be read ({type(err).__name__})")
        sources = sorted(p.name for p in (self.path / layout.DYNAMICS).glob("*") if p.is_dir())
        broken_sources = set()
        for source in sources:
            for epoch in self.dynamics_epochs(source):
                try:
                    parquet_columns(self.epoch_path(source, epoch))
                except Exception as err:
                    broken_sources.add(source)
                    out.append(
                        f"{self.epoch_path(source, epoch).relative_to(self.path)} cannot be read ({type(err).__name__})"
                    )
        for path in sorted(self.path.glob(layout.METRICS_OF_SOURCE.format(source="*"))) + [
            self.metrics_path()
        ]:
            if not path.exists():
                continue
            try:
                parquet_columns(path)
            except Exception as err:
                source = MAIN_METRICS if path == self.metrics_path() else path.stem.split("_", 1)[1]
                fixable = self.recorded_source(source) not in broken_sources and self.dynamics_epochs(
                    self.recorded_source(source)
                )
                out.append(
                    f"{path.name} cannot be read ({type(err).__name__})"
                    + ("; it can be recomputed from the dynamics" if fixable else "")
                )
        return out

    def summary(self) -> dict[str, Any]:
        """One row of ``cartomap runs``; a damaged run gets state "damaged" and what is wrong in ``problem``."""
        problems = self.problems()
        try:
            info = self.info
            config = info["config"]
            status = self.status()
            history = self.history()
        except (RunError, OSError, ValueError, KeyError, TypeError):
            return {
                "id": self.id,
                "name": "",
                "state": DAMAGED,
                "data": "",
                "model": "",
                "examples": None,
                "epochs": "",
                "dev_accuracy": None,
                "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created_at())),
                "problem": "; ".join(problems) or "cannot be read",
            }
        last = history[-1] if history else {}
        return {
            "id": self.id,
            "name": config.get("name", ""),
            "state": DAMAGED if problems else status.get("state"),
            "data": config["data"]["path"],
            "model": config["model"]["name_or_path"],
            "examples": info.get("n_train"),
            "epochs": f"{len(history)}/{config['train']['epochs']}",
            "dev_accuracy": last.get("dev_accuracy"),
            "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(info.get("created_at", 0))),
            "problem": "; ".join(problems),
        }

    def created_at(self) -> float:
        """When the run was made (config.json), else the folder's modification time (a damaged run)."""
        try:
            return float(self.info.get("created_at", 0))
        except (RunError, TypeError, ValueError):
            try:
                return self.path.stat().st_mtime
            except OSError:
                return 0.0


def _absolute(path: str) -> str:
    """``path`` made absolute when it names a file or folder here; demo, hub and other names as given."""
    if not path or path.startswith(("demo:", "hf:")):
        return path
    candidate = Path(path).expanduser()
    return str(candidate.resolve()) if candidate.exists() else path


def provenance(config: RunConfig) -> dict[str, Any]:
    """Where a run's data and model came from, for the record (config.json "provenance"): the folder the
    command ran from and the absolute path of each data file. Not part of the run's identity, which
    keeps the paths as given, so the same command in the same folder finds the same run as before."""
    return {
        "cwd": os.getcwd(),
        "data": _absolute(config.data.path),
        "dev": _absolute(config.dev.path) if config.dev is not None else None,
        "tests": [_absolute(t.path) for t in config.tests],
        "model": _absolute(config.model.name_or_path),
        "scores": _absolute(config.order.scores) if config.order.scores else "",
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

    @staticmethod
    def root_of(run: Run) -> Path:
        """The store folder ``run`` lives in (runs are ``<root>/runs/<id>``)."""
        return run.path.parent.parent

    def open(self, path: Path) -> Run:
        return Run(path)

    def name_of(self, run: Run) -> str:
        try:
            return run.info["config"].get("name", "")
        except RunError:
            return ""

    def created_at(self, run: Run) -> float:
        return run.created_at()

    def is_item(self, path: Path) -> bool:
        """A run folder: one with config.json, or a damaged one that lost it but holds other run files
        (it is listed as damaged, so it can be repaired or removed instead of vanishing)."""
        if (path / layout.CONFIG).exists():
            return True
        return path.is_dir() and any(
            (path / name).exists()
            for name in (layout.STATUS, layout.EXAMPLES, layout.DYNAMICS, layout.HISTORY)
        )

    def create(self, config: RunConfig, train, dev=None, tests=(), warnings=(), made_for: str = "") -> Run:
        """Create the run folder for ``config`` on the loaded datasets; return the existing run if any.

        The folder is assembled under a temporary name and renamed into place, so a failure
        leaves nothing behind and a reader never sees a half-made run. A run of this config and data
        that lost its config.json (damaged) gets it back, with any data copy it lost. ``warnings``:
        what was suspicious about the data (kept with the run, :attr:`Run.warnings`). ``made_for``: the
        experiment whose runner makes the run (its provenance, :attr:`Run.made_for`): deleting that
        experiment deletes the run when nothing else uses it. An existing run keeps its provenance.
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
                "task_kind": train.task_kind.name,
                "tests": [
                    {"name": name, "n": len(t), "fingerprint": t.fingerprint()}
                    for name, t in zip(dataset_names(config.tests), tests, strict=True)
                ],
                "provenance": provenance(config) | ({"experiment": made_for} if made_for else {}),
                "warnings": list(warnings),
                "versions": package_versions(),
                "created_at": time.time(),
            }
            copy = own_copy(train)
            atomic_write_parquet(tmp / layout.EXAMPLES, copy, texts=True)
            write_arrow_copy(tmp / layout.EXAMPLES_ARROW, copy)
            if dev is not None:
                atomic_write_parquet(tmp / layout.DEV_EXAMPLES, own_copy(dev), texts=True)
            for k, t in enumerate(tests):
                atomic_write_parquet(tmp / layout.TEST_EXAMPLES.format(k=k), own_copy(t), texts=True)
            atomic_write_json(tmp / layout.STATUS, {"state": State.QUEUED, "updated_at": time.time()})
            atomic_write_json(tmp / layout.CONFIG, info)  # last: the marker of a complete run

        run_id = self._id(config, train, dev, tests)
        legacy = self._legacy(config, train, dev, tests, run_id)
        if legacy is not None:
            return legacy
        final = self.path_for(run_id)
        if final.is_dir() and not (final / layout.CONFIG).exists() and self.is_item(final):
            return self._restore(final, write)
        return self.create_folder(run_id, write)

    def _restore(self, final: Path, write) -> Run:
        """Give a damaged run folder back the files of ``write`` it lacks (config.json last)."""
        tmp = self.dir / f".restore-{final.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            write(tmp)
            for item in sorted(tmp.iterdir(), key=lambda p: p.name == layout.CONFIG):
                target = final / item.name
                if not target.exists():
                    os.replace(item, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        run = self.open(final)
        run.log(f"restored missing files ({layout.CONFIG}) from the same config and data")
        return run

    @staticmethod
    def _id(config: RunConfig, train, dev=None, tests=(), portable: bool = True) -> str:
        dev_fp = dev.fingerprint() if dev is not None else None
        tests_fp = tuple(t.fingerprint() for t in tests)
        return run_id_for(config, train.fingerprint(), dev_fp, tests_fp, portable=portable)

    def _legacy(self, config: RunConfig, train, dev, tests, run_id: str) -> Run | None:
        """The run of this config made before paths into a store were portable (its id hashed the run
        folder's path as given), when there is one and none under the new id: it keeps its id."""
        if self.find_id(run_id) is not None:
            return None
        old = self._id(config, train, dev, tests, portable=False)
        return self.find_id(old) if old != run_id else None

    def data_ref(self, ref: str) -> DataConfig:
        """The DataConfig of ``run:RUN[:SET]`` (:data:`RUN_REF`): the run's own copy of
        data set SET ("train" by default, "dev", "test_<k>"), wherever the original files went."""
        if not ref.startswith(RUN_REF):
            raise RunError(
                f"{ref!r} is not a run's data set; expected run:RUN, run:RUN:dev, run:RUN:test_<k> or "
                "run:RUN:corrected/<queue>"
            )
        key, _, which = ref[len(RUN_REF) :].partition(":")
        return self.get(key).data_config(which or "train")

    def find(self, config: RunConfig, train, dev=None, tests=()) -> Run | None:
        run_id = self._id(config, train, dev, tests)
        return self.find_id(run_id) or self._legacy(config, train, dev, tests, run_id)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([r.summary() for r in self.list()])
