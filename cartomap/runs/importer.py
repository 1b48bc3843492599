"""Runs whose dynamics were recorded outside cartomap's training loop, written into the run store.

Three kinds of work end here: the reference Cartography code's ``dynamics_epoch_*.jsonl`` files
(:func:`import_reference_run`), and the integrations of :mod:`cartomap.integrations` (a
``transformers`` Trainer callback, a recorder for any PyTorch loop, scored checkpoints). They all
write the same files as cartomap's own loop (per-epoch dynamics by id, metrics of the first
recorded source in the main metrics file, history, state ``done``), through
:func:`write_epochs`, :func:`write_metrics` and :func:`finish_run`, so the dashboard and every
command open such a run like any other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import (
    MAIN_METRICS,
    DataConfig,
    ModelConfig,
    Origin,
    OriginConfig,
    RunConfig,
    Source,
    TrainConfig,
)
from cartomap.errors import DataError
from cartomap.io import atomic_write_json
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.runs.units import keyed_metrics
from cartomap.tasks import support
from cartomap.tasks.base import TaskKind
from cartomap.tasks.sequence import SINGLE


@dataclass(frozen=True, eq=False)
class RecordedExamples:
    """What RunStore.create needs of a dataset, for examples known by id and gold label (texts optional).

    ``digest`` is the fingerprint the run id is made of."""

    frame: pd.DataFrame
    label_names: tuple[str, ...]
    digest: str
    task_kind: TaskKind  # the task kind of the rows (their text fields are the frame's)

    def fingerprint(self) -> str:
        return self.digest

    @property
    def is_pair(self) -> bool:
        return self.task_kind.is_pair

    @property
    def text_columns(self) -> tuple[str, ...]:
        return self.task_kind.text_fields

    def __len__(self) -> int:
        return len(self.frame)


def examples_without_texts(ids: Sequence[str], labels: np.ndarray, label_names: Sequence[str], digest: str):
    """Examples of one empty text each (the single-text kind): the data map shows ids and labels only."""
    return RecordedExamples(_textless_frame(ids, labels), tuple(label_names), digest, SINGLE)


def _textless_frame(ids: Sequence[str], labels: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": pd.Series([str(i) for i in ids], dtype=str),
            **SINGLE.texts_frame([""] * len(ids)),
            SINGLE.label_field: np.asarray(labels, dtype=np.int64),
        }
    )


def dynamics_digest(ids: Sequence[str], labels: np.ndarray, logits: np.ndarray) -> str:
    """sha256 of ids, gold labels and float32 logits [E, N, C]: identical dynamics, identical digest."""
    digest = hashlib.sha256()
    digest.update("\n".join(str(i) for i in ids).encode())
    digest.update(np.asarray(labels).astype(np.int64).tobytes())
    digest.update(np.ascontiguousarray(logits, dtype=np.float32).tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- writing a run
def write_epochs(run: Run, source: str, ids: Sequence[str], logits: np.ndarray, first: int = 0) -> None:
    """Write logits [E, N, C] as epochs ``first`` .. ``first + E - 1`` of ``source``."""
    for e in range(len(logits)):
        run.write_epoch(source, first + e, ids, logits[e])


def write_metrics(
    run: Run, dynamics: Mapping[str, np.ndarray], labels: np.ndarray, ids: Sequence[str]
) -> str:
    """Data-map metrics of every source of ``dynamics`` ({source: logits [E, N, C]}), leaving out the
    recordings of the run's ``skip_epochs``; the first source goes to the main metrics file (as in
    cartomap's loop). Returns that first source."""
    from cartomap.scores.metrics import compute_metrics

    sources = list(dynamics)
    train = run.config.train
    for source in sources:
        logits = dynamics[source]
        frame = compute_metrics(
            logits, labels, ids, regions=run.region_rule(), burn_in=train.map_burn_in(source, len(logits))
        )
        name = MAIN_METRICS if source == sources[0] else source
        run.save_metrics(name, *keyed_metrics(run.task_kind, frame, ids, run.example_ids(), run.label_names))
    return sources[0]


def finish_run(
    run: Run,
    dynamics: Mapping[str, np.ndarray],
    labels: np.ndarray,
    ids: Sequence[str],
    history: list[dict[str, Any]],
    *,
    write_dynamics: bool = True,
    **status: Any,
) -> Run:
    """Write a recorded run's dynamics (unless already written epoch by epoch), metrics and history,
    then mark it done; ``status`` adds fields to its status (e.g. where it came from)."""
    if write_dynamics:
        for source, logits in dynamics.items():
            write_epochs(run, source, ids, logits)
    first = write_metrics(run, dynamics, labels, ids)
    atomic_write_json(run.history_path, history)
    epochs = len(next(iter(dynamics.values())))
    run.set_status(
        state=State.DONE, phase=State.DONE, epochs_done=epochs, metrics_source=first, eta_s=0, **status
    )
    return run


# --------------------------------------------------------------------------- the reference code
def _examples_frame(ids, gold, label_names, data: DataConfig | None, folder: Path, loaded=None):
    """The examples of the dynamics' guids from ``data`` (``loaded``: the data set read already, in its
    own label order), their gold checked against the dynamics'."""
    if data is None:
        return _textless_frame(ids, gold), SINGLE
    from cartomap.data.loading import load_dataset

    dataset = loaded if loaded is not None else load_dataset(data, label_names=label_names)
    frame = dataset.frame.set_index("id")
    missing = [i for i in ids if i not in frame.index]
    if missing:
        raise DataError(
            f"{len(missing)} guids of the dynamics are not ids of the dataset, e.g. {missing[:3]}",
            location=str(folder),
            field="guid",
        )
    frame = frame.loc[ids].reset_index()
    wrong = np.flatnonzero(frame["label"].to_numpy() != gold)
    if len(wrong):
        raise DataError(
            f"gold label of guid {ids[wrong[0]]!r} is {gold[wrong[0]]} in the dynamics but "
            f"{frame['label'].iloc[wrong[0]]} ({label_names[frame['label'].iloc[wrong[0]]]}) in {data.path}; "
            "give --label-names in the order of the reference's classes",
            location=str(folder),
            field="gold",
        )
    return frame, dataset.task_kind


def import_reference_run(
    folder,
    store: RunStore,
    data: DataConfig | None = None,
    label_names: tuple[str, ...] | None = None,
    name: str = "",
) -> Run:
    """Create (or return) a finished run from ``dynamics_epoch_*.jsonl`` files; texts come from ``data``,
    whose kind has one label per example (the reference files hold one row of logits per example: a
    multi-label set's or a sentence's units are not theirs), asked before the files are read."""
    from cartomap.runs.interop import read_reference_dynamics

    if data is not None:
        support.REFERENCE_IMPORT.require(data.task_kind, location=data.path)
    folder = Path(folder)
    ref = read_reference_dynamics(folder)
    n_classes = ref.logits.shape[2]
    loaded = None
    if data is not None and label_names is None:
        if data.label_names:
            label_names = data.label_names
        else:  # the data's own names, in the order loading gives them (its codes); read once
            from cartomap.data.loading import load_dataset

            loaded = load_dataset(data)
            label_names = tuple(loaded.label_names)
    if label_names is None:
        label_names = tuple(f"class_{c}" for c in range(n_classes))
    if len(label_names) != n_classes:
        raise DataError(
            f"{len(label_names)} label names given but the logits have {n_classes} classes",
            location=str(folder),
            field="label_names",
        )
    frame, task = _examples_frame(ref.ids, ref.gold, tuple(label_names), data, folder, loaded)
    digest = dynamics_digest(ref.ids, ref.gold, ref.logits)
    examples = RecordedExamples(frame, tuple(label_names), digest, task)

    config = RunConfig(
        data=data or DataConfig(path=str(folder.resolve()), format="reference-dynamics"),
        dev=None,
        model=ModelConfig(name_or_path="imported"),
        train=TrainConfig(epochs=len(ref.epochs)),
        name=name or f"imported {folder.name}",
        origin=OriginConfig(kind=Origin.REFERENCE),  # not part of the identity: imported runs keep their ids
    )
    run = store.create(config, examples)
    if run.state == State.DONE:
        return run
    history = [{"epoch": e + 1, "reference_epoch": r} for e, r in enumerate(ref.epochs)]
    finish_run(
        run, {Source.TRAIN: ref.logits}, ref.gold, ref.ids, history, imported_from=str(folder.resolve())
    )
    run.log(f"imported {len(ref.epochs)} epochs of reference dynamics from {folder}")
    return run
