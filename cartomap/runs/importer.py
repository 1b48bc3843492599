"""Bring runs of the reference Cartography implementation into the run store."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.errors import DataError
from cartomap.io import atomic_write_json, atomic_write_parquet
from cartomap.runs.store import Run, RunStore


@dataclass(frozen=True, eq=False)
class _ImportedExamples:
    """What RunStore.create needs of a dataset, for examples known only by id and gold label."""

    frame: pd.DataFrame
    label_names: tuple[str, ...]
    digest: str
    is_pair: bool

    def fingerprint(self) -> str:
        return self.digest

    def __len__(self) -> int:
        return len(self.frame)


def _examples_frame(ids, gold, label_names, data: DataConfig | None, folder: Path):
    if data is None:
        return pd.DataFrame({"id": ids, "text": [""] * len(ids), "label": gold.astype(np.int64)}), False
    from cartomap.data.loading import load_dataset

    dataset = load_dataset(data, label_names=label_names)
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
            f"{frame['label'].iloc[wrong[0]]} in {data.path}",
            location=str(folder),
            field="gold",
        )
    return frame, dataset.is_pair


def import_reference_run(
    folder,
    store: RunStore,
    data: DataConfig | None = None,
    label_names: tuple[str, ...] | None = None,
    name: str = "",
) -> Run:
    """Create (or return) a finished run from ``dynamics_epoch_*.jsonl`` files; texts come from ``data``."""
    from cartomap.runs.interop import read_reference_dynamics
    from cartomap.scores.metrics import compute_metrics

    folder = Path(folder)
    ref = read_reference_dynamics(folder)
    n_classes = ref.logits.shape[2]
    if data is not None and label_names is None and data.label_names:
        label_names = data.label_names
    if label_names is None:
        label_names = tuple(f"class_{c}" for c in range(n_classes))
    if len(label_names) != n_classes:
        raise DataError(
            f"{len(label_names)} label names given but the logits have {n_classes} classes",
            location=str(folder),
            field="label_names",
        )
    frame, is_pair = _examples_frame(ref.ids, ref.gold, tuple(label_names), data, folder)
    digest = hashlib.sha256()
    digest.update("\n".join(ref.ids).encode())
    digest.update(ref.gold.astype(np.int64).tobytes())
    digest.update(np.ascontiguousarray(ref.logits, dtype=np.float32).tobytes())
    examples = _ImportedExamples(frame, tuple(label_names), digest.hexdigest(), is_pair)

    config = RunConfig(
        data=data or DataConfig(path=str(folder.resolve()), format="reference-dynamics"),
        dev=None,
        model=ModelConfig(name_or_path="imported"),
        train=TrainConfig(epochs=len(ref.epochs)),
        name=name or f"imported {folder.name}",
    )
    run = store.create(config, examples)
    if run.state == "done":
        return run
    for e in range(len(ref.epochs)):
        run.write_epoch("train", e, ref.ids, ref.logits[e])
    atomic_write_parquet(run.path / "metrics.parquet", compute_metrics(ref.logits, ref.gold, ref.ids))
    atomic_write_json(
        run.path / "history.json", [{"epoch": e + 1, "reference_epoch": r} for e, r in enumerate(ref.epochs)]
    )
    run.set_status(
        state="done", phase="done", epochs_done=len(ref.epochs), imported_from=str(folder.resolve())
    )
    run.log(f"imported {len(ref.epochs)} epochs of reference dynamics from {folder}")
    return run
