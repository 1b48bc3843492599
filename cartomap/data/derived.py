"""Datasets derived from others: folds, pruned sets, combinations, balanced samples.

A derived dataset is saved once as Parquet under ``<cache>/datasets/<fingerprint>.parquet`` and
named by a :class:`DataConfig` like any user file, so a run trained on it is an ordinary run:
its identity follows from the content ("train or load"), and it reloads without recomputation.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.config import DERIVED_FOLDER, DataConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.io import atomic_write_parquet
from cartomap.tasks import registry as task_kinds


def to_frame(dataset: TextDataset) -> pd.DataFrame:
    """The rows of ``dataset`` with string labels: what :func:`save_dataset` writes. The gold column is the
    kind's (``label``; a sentence's ``tags``, a multi-label set's ``labels``), each row's gold by name
    (:meth:`cartomap.tasks.base.TaskKind.gold_names`)."""
    frame = dataset.frame.copy()
    kind, names = dataset.task_kind, dataset.label_names
    frame[kind.label_field] = [kind.gold_names(v, names) for v in frame[kind.label_field].tolist()]
    return frame


def save_dataset(dataset: TextDataset, cache: str | Path, name: str = "") -> DataConfig:
    """Write ``dataset`` to ``<cache>/datasets/<fingerprint[:16]>.parquet`` (once) and return its DataConfig."""
    folder = Path(cache) / DERIVED_FOLDER
    path = folder / f"{dataset.fingerprint()[:16]}.parquet"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(path, to_frame(dataset), texts=True)
    genre = "genre" if "genre" in dataset.frame.columns else None
    kind = dataset.task_kind
    return DataConfig(
        path=str(path),
        format="parquet",
        text_columns=dataset.text_columns,
        task=task_kinds.config_name(kind, dataset.text_columns),  # "" for a pair or a single text, as before
        label_column=kind.label_field,
        id_column="id",
        label_names=tuple(dataset.label_names),
        genre_column=genre,
        name=name,
    )


def load(config: DataConfig, label_names: tuple[str, ...] | None = None) -> TextDataset:
    return load_dataset(config, label_names=label_names)


def _same_schema(a: TextDataset, b: TextDataset, what: str) -> None:
    if tuple(a.label_names) != tuple(b.label_names):
        raise DataError(
            f"{what}: the datasets have different classes ({list(a.label_names)} vs {list(b.label_names)}); "
            "load the second with the first one's label names"
        )
    if a.text_columns != b.text_columns:
        raise DataError(f"{what}: one dataset has pairs, the other single texts")


def _concat(parts: Iterable[TextDataset], source: str) -> TextDataset:
    parts = list(parts)
    frame = pd.concat([p.frame for p in parts], ignore_index=True)
    dup = frame["id"][frame["id"].duplicated()]
    if len(dup):
        raise DataError(f"{source}: id {dup.iloc[0]!r} occurs in both datasets; ids must be unique")
    return TextDataset(frame=frame, label_names=parts[0].label_names, source=source)


def augment(a: TextDataset, b: TextDataset) -> TextDataset:
    """A + B: all of A followed by all of B (the augmentation setting of WaNLI's Table 3)."""
    _same_schema(a, b, "A + B")
    return _concat([a, b], f"{a.source} + {b.source}")


def replace_random(a: TextDataset, b: TextDataset, seed: int = 0) -> TextDataset:
    """A ◇ B: |B| random examples of A are swapped for all of B; the size stays |A|."""
    _same_schema(a, b, "A ◇ B")
    if len(b) > len(a):
        raise DataError(f"A ◇ B: B has {len(b)} examples, more than A's {len(a)}; nothing left of A to keep")
    rng = np.random.default_rng(seed)
    drop = rng.choice(len(a), size=len(b), replace=False)
    keep = np.setdiff1d(np.arange(len(a)), drop)
    return _concat([a.subset(keep), b], f"{a.source} ◇ {b.source}")


def without_ids(dataset: TextDataset, ids: Iterable[str]) -> TextDataset:
    """``dataset`` minus the rows whose id is in ``ids`` (order kept)."""
    drop = set(map(str, ids))
    mask = ~dataset.frame["id"].astype(str).isin(drop).to_numpy()
    return dataset.subset(mask)


def balanced_sample(dataset: TextDataset, per_label: int | None = None, seed: int = 0) -> TextDataset:
    """The same number of examples of every class (default: the size of the smallest class), order kept."""
    labels = dataset.labels
    counts = np.bincount(labels, minlength=dataset.num_labels)
    present = counts[counts > 0]
    n = int(present.min()) if per_label is None else int(per_label)
    if n > present.min():
        raise DataError(f"balanced sample of {n} per label: the smallest class has only {present.min()}")
    rng = np.random.default_rng(seed)
    picked = [rng.choice(np.flatnonzero(labels == c), size=n, replace=False) for c in np.flatnonzero(counts)]
    return dataset.subset(np.sort(np.concatenate(picked)))


def stratified_sample(dataset: TextDataset, n: int, seed: int = 0) -> tuple[TextDataset, TextDataset]:
    """(sample, rest): ``n`` rows drawn with the class proportions of ``dataset``; both keep file order. A
    kind without one label per example (a multi-label set, a sentence's tags) has no class to stratify
    by: its rows are drawn uniformly at random (:meth:`TextDataset.labels` are its units')."""
    from sklearn.model_selection import train_test_split

    if not 0 < n < len(dataset):
        raise DataError(
            f"sample size {n}: expected between 1 and {len(dataset) - 1} (the dataset has {len(dataset)})"
        )
    positions = np.arange(len(dataset))
    by_class = dataset.labels if dataset.task_kind.unit.per_example else None
    try:
        rest, picked = train_test_split(positions, test_size=n, stratify=by_class, random_state=seed)
    except ValueError as err:  # a class too small to be split in proportion
        raise DataError(f"stratified sample of {n} from {dataset.source}: {err}") from err
    return dataset.subset(np.sort(picked)), dataset.subset(np.sort(rest))


def write_jsonl(dataset: TextDataset, path: str | Path, overwrite: bool = False) -> Path:
    """Write ``dataset`` as JSON Lines with string labels (atomically; an existing file needs ``overwrite``)."""
    from cartomap.io import atomic_write_text

    path = Path(path)
    if path.exists() and not overwrite:
        raise DataError(f"{path} exists; choose another name or allow overwriting")
    text = to_frame(dataset).to_json(orient="records", lines=True, force_ascii=False)
    return atomic_write_text(path, text if text.endswith("\n") else text + "\n")
