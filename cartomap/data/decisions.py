"""Review decisions on suspected label errors: reading, checking and applying a decisions file.

A decisions file (Parquet, JSON Lines or CSV, told by its extension) has one row per example that was
queued for review: ``id`` (an example id of the training set), ``decision`` (keep, relabel, remove,
unsure or unreviewed), ``label`` (the final label name: the new one for relabel, else the original),
``original_label``, ``decided_by``, ``n_annotators``, ``queued_by`` and ``score``. Only ``id`` and
``decision`` are required; ``label`` is required on relabel rows. The other columns are kept as given.

:func:`read_decisions` reads and checks a file against a training set (its ids, labels and classes) and
returns the normalised frame; :func:`apply_decisions` makes the three training sets of a retrain:
original, pruned (every queued id dropped, what blind pruning would do) and corrected (relabel applied,
remove dropped, keep / unsure / unreviewed unchanged). A relabel to the example's own label counts as
keep. Pure: no run, no experiment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from cartomap.data.dataset import TextDataset
from cartomap.data.readers import read_table
from cartomap.errors import DataError

DECISIONS = ("keep", "relabel", "remove", "unsure", "unreviewed")
REQUIRED = ("id", "decision")
OPTIONAL = ("label", "original_label", "decided_by", "n_annotators", "queued_by", "score")
#: What a decision does to the corrected training set, after a relabel to the same label became keep.
EFFECT_RELABEL, EFFECT_REMOVE, EFFECT_NONE = "relabelled", "removed", "unchanged"
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def decisions_format(path: str | Path) -> str:
    """parquet, jsonl or csv from the file name; DataError naming the file otherwise."""
    name = Path(path).name.lower()
    for suffix, fmt in _SUFFIXES.items():
        if name.endswith(suffix) or name.endswith(suffix + ".gz"):
            return fmt
    raise DataError(
        "cannot tell the format of a decisions file from its name: expected .parquet, .jsonl or .csv",
        location=str(path),
    )


def _missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _text(value) -> str:
    """A cell as text: ints stay ints (7, not 7.0), strings are stripped."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def _checked_id(row: dict, i: int, label_of: dict, seen: dict[str, int], where, dataset_source: str) -> str:
    """Row ``i``'s example id as text; DataError when it is missing, not in the training set
    (``label_of``) or already ``seen``."""
    if _missing(row["id"]):
        raise DataError("no id; expected an example id of the training set", location=where(i), field="id")
    ex = _text(row["id"])
    if ex not in label_of:
        raise DataError(
            f"unknown id {ex!r}: no example of the training set ({dataset_source}) has it",
            location=where(i),
            field="id",
        )
    if ex in seen:
        raise DataError(
            f"duplicate id {ex!r} (also on {where(seen[ex]).rsplit(': ', 1)[-1]}); expected one row per example",
            location=where(i),
            field="id",
        )
    return ex


def _checked_label(
    row: dict, i: int, ex: str, decision: str, own: str, names: list[str], where
) -> tuple[str, str]:
    """(label, effect) of row ``i`` (example ``ex``, labelled ``own``): a relabel's label (relabelled, or
    unchanged when it is ``own``), else ``own`` (removed for remove, else unchanged). DataError for an
    original_label other than ``own``, an unknown label name or a relabel without a label."""
    original = row.get("original_label")
    if not _missing(original) and _text(original) != own:
        if _text(original) not in names:
            raise DataError(
                f"unknown label name {_text(original)!r}; the classes are {names}",
                location=where(i),
                field="original_label",
            )
        raise DataError(
            f"original_label {_text(original)!r}, but example {ex!r} has label {own!r} in the training "
            "set: were the decisions made on another run's data?",
            location=where(i),
            field="original_label",
        )
    label = row.get("label")
    if _missing(label):
        if decision == "relabel":
            raise DataError(
                "a relabel without a label; expected the new label name", location=where(i), field="label"
            )
        label = own
    label = _text(label)
    if label not in names:
        raise DataError(
            f"unknown label name {label!r}; the classes are {names}", location=where(i), field="label"
        )
    if decision == "relabel":
        effect = EFFECT_RELABEL if label != own else EFFECT_NONE
    else:
        effect = EFFECT_REMOVE if decision == "remove" else EFFECT_NONE
        label = own  # only a relabel changes the label
    return label, effect


def check_decisions(
    frame: pd.DataFrame,
    dataset: TextDataset,
    source: str = "<decisions>",
    lines: Sequence[int] | None = None,
) -> pd.DataFrame:
    """The decisions of ``frame`` checked against ``dataset`` (the training set they were made on).

    Returns id, decision, label, original_label (label names, as text), the optional columns as given,
    and ``effect`` (relabelled, removed or unchanged: a relabel to the example's own label is
    unchanged, i.e. keep). DataError naming the file, the row (or line) and the column for a missing
    column, an unknown decision, an id not in the training set, a duplicate id, an unknown label name,
    a relabel without a label, or an original_label that is not the example's label.
    """

    def where(i: int) -> str:
        return f"{source}: line {lines[i]}" if lines is not None else f"{source}: row {i + 1}"

    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise DataError(
            f"missing column {missing[0]!r}; the file has columns {[str(c) for c in frame.columns]}; "
            f"expected {', '.join(REQUIRED)} (and label, original_label, ...)",
            location=source,
            field=missing[0],
        )
    if len(frame) == 0:
        raise DataError("no rows; expected one row per queued example", location=source)
    frame = frame.reset_index(drop=True)
    names = [str(n) for n in dataset.label_names]
    label_of = dict(zip(dataset.frame["id"].astype(str), dataset.labels.tolist(), strict=True))
    seen: dict[str, int] = {}
    rows = []
    for i, row in enumerate(frame.to_dict(orient="records")):
        ex = _checked_id(row, i, label_of, seen, where, dataset.source)
        seen[ex] = i
        decision = "" if _missing(row["decision"]) else _text(row["decision"]).lower()
        if decision not in DECISIONS:
            raise DataError(
                f"unknown decision {row['decision']!r}; expected one of {', '.join(DECISIONS)}",
                location=where(i),
                field="decision",
            )
        own = names[label_of[ex]]
        label, effect = _checked_label(row, i, ex, decision, own, names, where)
        out = {"id": ex, "decision": decision, "label": label, "original_label": own}
        for column in OPTIONAL[2:]:
            if column in frame.columns:
                out[column] = row[column]
        out["effect"] = effect
        rows.append(out)
    columns = ["id", "decision", "label", "original_label"]
    columns += [c for c in OPTIONAL[2:] if c in frame.columns] + ["effect"]
    out = pd.DataFrame(rows, columns=columns)
    for column in ("decided_by", "queued_by"):
        if column in out.columns:
            out[column] = [None if _missing(v) else str(v) for v in out[column]]
    for column in ("n_annotators", "score"):
        if column in out.columns:
            out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


def read_decisions(path: str | Path, dataset: TextDataset) -> pd.DataFrame:
    """Read a decisions file (format by extension) and :func:`check_decisions` it against ``dataset``."""
    fmt = decisions_format(path)
    if fmt == "csv":
        frame, lines = read_table(path, "csv")
    else:
        frame, lines = read_table(path, fmt)
    return check_decisions(frame, dataset, source=str(path), lines=lines)


class TrainingSets(NamedTuple):
    original: TextDataset
    pruned: TextDataset
    corrected: TextDataset


def apply_decisions(dataset: TextDataset, decisions: pd.DataFrame) -> TrainingSets:
    """The three training sets of a retrain from checked ``decisions`` (:func:`check_decisions`):
    ``original`` (``dataset`` itself), ``pruned`` (every id of the decisions dropped) and ``corrected``
    (relabelled examples with their new label, removed ones dropped, the rest unchanged). File order
    kept."""
    ids = dataset.frame["id"].astype(str)
    pruned = dataset.subset(~ids.isin(set(decisions["id"])).to_numpy())
    removed = set(decisions.loc[decisions["effect"] == EFFECT_REMOVE, "id"])
    relabel = decisions[decisions["effect"] == EFFECT_RELABEL]
    index = {name: k for k, name in enumerate(dataset.label_names)}
    new_label = dict(zip(relabel["id"], (index[n] for n in relabel["label"]), strict=True))
    frame = dataset.frame.copy()
    frame["label"] = [new_label.get(i, old) for i, old in zip(ids, frame["label"].tolist(), strict=True)]
    frame = frame[~ids.isin(removed).to_numpy()].reset_index(drop=True)
    corrected = TextDataset(
        frame=frame, label_names=dataset.label_names, source=f"{dataset.source} corrected"
    )
    return TrainingSets(dataset, pruned, corrected)


def decision_counts(decisions: pd.DataFrame) -> dict[str, int]:
    """queued, per decision, relabelled (to another label), relabel_same (counted as keep), removed."""
    counts = {"queued": len(decisions)}
    counts.update({d: int((decisions["decision"] == d).sum()) for d in DECISIONS})
    counts["relabelled"] = int((decisions["effect"] == EFFECT_RELABEL).sum())
    counts["relabel_same"] = counts["relabel"] - counts["relabelled"]
    counts["removed"] = int((decisions["effect"] == EFFECT_REMOVE).sum())
    return counts
