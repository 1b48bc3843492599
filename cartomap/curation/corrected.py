"""The corrected training set of a review queue, and its decisions file (the provenance).

:func:`write_corrected` aggregates a queue's decisions (:mod:`cartomap.curation.aggregate`) and writes,
in the run folder's ``review/<queue>/``:

* ``corrected.parquet``: the run's training examples (its own copy, same columns) with every
  ``relabel`` applied and every ``remove`` dropped; keep, unsure and unreviewed rows unchanged (a token
  run's queue holds words: a relabel changes that word's tag in its sentence, a removed word drops its
  sentence; a multi-label run's holds (example, label) units: a relabel to present or absent toggles
  that label in the example's label set, a removed unit drops its example). It is
  the data set ``run:RUN:corrected/<queue>`` wherever a command takes data
  (``cartomap train --data run:RUN:corrected/<queue>``);
* ``decisions.parquet``: one row per queued example, columns
  :data:`cartomap.curation.aggregate.DECISION_COLUMNS` (id, decision, label, original_label,
  decided_by, n_annotators, queued_by, score).

:func:`export_corrected` writes both to a user's paths as JSON Lines, CSV or Parquet (labels as
names, plus ``review_decision`` and ``original_label`` columns in the corrected set), never replacing
a file unless told to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.tokens import split_unit_id
from cartomap.curation.aggregate import aggregate
from cartomap.curation.queue import load_queue, open_queue
from cartomap.data.annotations import DERIVED_COLUMNS
from cartomap.errors import CartomapError
from cartomap.io import atomic_save, atomic_write_bytes, atomic_write_parquet, refuse_overwrite
from cartomap.runs import layout
from cartomap.runs.store import CORRECTED_REF, RUN_REF, Run

FORMATS = ("jsonl", "csv", "parquet")
SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def decisions(run: Run, queue: str) -> pd.DataFrame:
    """The decisions table of ``queue`` (one row per queued example, queue order)."""
    items = load_queue(run, queue)
    return aggregate(items, open_queue(run, queue).latest())


def _relabels(table: pd.DataFrame, label_names) -> tuple[dict[str, int], set[str]]:
    """({id: new label code} of the relabels, ids removed) of a decisions table."""
    names = [str(n) for n in label_names]
    index = {n: k for k, n in enumerate(names)}
    relabel = table[table["decision"] == "relabel"]
    unknown = sorted(set(relabel["label"]) - set(index))
    if unknown:
        raise CartomapError(f"decisions relabel to unknown labels {unknown}: expected one of {names}")
    new = dict(zip(relabel["id"].astype(str), (index[x] for x in relabel["label"]), strict=True))
    return new, set(table.loc[table["decision"] == "remove", "id"].astype(str))


def corrected_sentences(examples: pd.DataFrame, table: pd.DataFrame, label_names, kind) -> pd.DataFrame:
    """A token run's ``examples`` (sentences, tag codes per word) with the relabels of ``table`` (its
    items are words, ``<sentence id>#<k>``) applied to those words' tags; a sentence holding a word
    decided ``remove`` is dropped (a sentence is trained whole)."""
    new, removed = _relabels(table, label_names)
    by_sentence: dict[str, dict[int, int]] = {}
    for unit, code in new.items():
        sentence, k = split_unit_id(unit)
        by_sentence.setdefault(sentence, {})[k] = code
    gone = {split_unit_id(unit)[0] for unit in removed}
    out = examples.copy()
    field = kind.label_field
    ids = out["id"].astype(str)
    tags = []
    for sid, row in zip(ids, out[field], strict=True):
        changes = by_sentence.get(sid)
        if changes:
            row = np.asarray(row).copy()
            for k, code in changes.items():
                if not 0 <= k < len(row):
                    raise CartomapError(
                        f"decision on word {k} of sentence {sid!r}, which has {len(row)} words"
                    )
                row[k] = code
        tags.append(row)
    out[field] = tags
    return out[~ids.isin(gone).to_numpy()].reset_index(drop=True)


def corrected_label_sets(examples: pd.DataFrame, table: pd.DataFrame, label_names, kind) -> pd.DataFrame:
    """A multi-label run's ``examples`` (label sets as name lists) with the relabels of ``table`` (its items
    are (example, label) units, ``<example id>#<j>``, relabelled to present or absent) applied: label j of
    ``label_names`` added to or taken from the example's set (kept in label-space order); an example
    holding a unit decided ``remove`` is dropped."""
    names = [str(n) for n in label_names]
    new, removed = _relabels(table, kind.unit_classes(names))  # {unit: 1 present / 0 absent}
    by_example: dict[str, dict[int, int]] = {}
    for unit, state in new.items():
        eid, j = split_unit_id(unit)
        if not 0 <= j < len(names):
            raise CartomapError(f"decision on label {j} of example {eid!r}; the run has {len(names)} labels")
        by_example.setdefault(eid, {})[j] = state
    gone = {split_unit_id(unit)[0] for unit in removed}
    out = examples.copy()
    ids = out["id"].astype(str)
    sets = []
    for eid, labels in zip(ids, out[kind.label_field], strict=True):
        present = {str(n) for n in labels}
        for j, state in by_example.get(eid, {}).items():
            (present.add if state else present.discard)(names[j])
        sets.append([n for n in names if n in present])
    out[kind.label_field] = sets
    return out[~ids.isin(gone).to_numpy()].reset_index(drop=True)


def corrected_examples(examples: pd.DataFrame, table: pd.DataFrame, label_names) -> pd.DataFrame:
    """``examples`` (integer labels) with the relabels of ``table`` applied and its removals dropped; the
    columns derived from the votes (human majority, gold disagrees, ...) are left out, since they depend on
    the label and every load computes them again."""
    ids = examples["id"].astype(str)
    new, removed = _relabels(table, label_names)
    out = examples.drop(
        columns=[c for c in DERIVED_COLUMNS if c in examples.columns]
    )  # stale: recomputed on load
    labels = out["label"].to_numpy().copy()
    hit = ids.isin(new).to_numpy()
    labels[hit] = [new[i] for i in ids[hit]]
    out["label"] = labels.astype(examples["label"].dtype)
    return out[~ids.isin(removed).to_numpy()].reset_index(drop=True)


def corrected_ref(run: Run, queue: str) -> str:
    """The reference of ``queue``'s corrected set, for ``--data``: ``run:ID:corrected/<queue>``."""
    return f"{RUN_REF}{run.id}:{CORRECTED_REF}{queue}"


def write_corrected(run: Run, queue: str, by: str | None = None) -> dict[str, Any]:
    """Write ``corrected.parquet`` and ``decisions.parquet`` of ``queue`` in the run folder (decisions
    last). Returns counts and the reference of the corrected set (``run:ID:corrected/<queue>``). ``by``:
    the person who wrote it (noted in the queue's store as a ``corrected`` write)."""
    table = decisions(run, queue)
    examples = run.examples()
    kind = run.task_kind
    if kind.unit.sentences:  # the queue's items are words: their tags corrected in their sentences
        corrected = corrected_sentences(examples, table, run.label_names, kind)
    elif kind.unit.label_sets:  # (example, label) units: each label toggled in its example's set
        corrected = corrected_label_sets(examples, table, run.label_names, kind)
    else:
        corrected = corrected_examples(examples, table, run.label_names)
    folder = run.review_queue_dir(queue)
    atomic_write_parquet(folder / layout.CORRECTED, corrected)
    atomic_write_parquet(folder / layout.DECISIONS, table)
    found = table["decision"].value_counts()
    open_queue(run, queue).log_write(
        "corrected", by, relabelled=int(found.get("relabel", 0)), removed=int(found.get("remove", 0))
    )
    return {
        "ref": corrected_ref(run, queue),
        "examples": int(len(examples)),
        "corrected": int(len(corrected)),
        "relabelled": int(found.get("relabel", 0)),
        "removed": int(found.get("remove", 0)),
        "decisions": table,
        "decisions_path": folder / layout.DECISIONS,
        "frame": corrected,
    }


def written_named(run: Run, queue: str, table: pd.DataFrame) -> pd.DataFrame | None:
    """The corrected set :func:`write_corrected` wrote for ``queue``, as :func:`named` gives it for a user's
    file; None before it was written."""
    path = run.corrected_path(queue)
    return named(run, pd.read_parquet(path), table) if path.exists() else None


def named(run: Run, corrected: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The corrected set for a user's file: labels as names, its review decision and original label (a token
    run's: its sentences with tag names, ``reviewed_words``: how many of its words the queue held)."""
    names = np.asarray(run.label_names, dtype=object)
    kind = run.task_kind
    if kind.unit.sentences:
        field = kind.label_field
        out = corrected.assign(
            **{field: [list(names[np.asarray(t, dtype=np.int64)]) for t in corrected[field]]}
        )
        queued = pd.Series([split_unit_id(u)[0] for u in table["id"].astype(str)]).value_counts()
        out["reviewed_words"] = out["id"].astype(str).map(queued).fillna(0).astype(int).to_numpy()
        return out
    if kind.unit.label_sets:  # label sets are names already; how many of its labels the queue asked about
        queued = pd.Series([split_unit_id(u)[0] for u in table["id"].astype(str)]).value_counts()
        out = corrected.copy()
        out["reviewed_labels"] = out["id"].astype(str).map(queued).fillna(0).astype(int).to_numpy()
        return out
    out = corrected.assign(label=names[corrected["label"].to_numpy(dtype=np.int64)])
    by_id = table.set_index(table["id"].astype(str))
    ids = out["id"].astype(str)
    decided = by_id["decision"].reindex(ids).to_numpy(dtype=object)
    original = by_id["original_label"].reindex(ids).to_numpy(dtype=object)
    queued = ids.isin(by_id.index).to_numpy()
    out["review_decision"] = np.where(queued, decided, "not queued")
    out["original_label"] = np.where(queued, original, out["label"].to_numpy(dtype=object))
    return out


def table_format(path: str | Path, format: str = "auto") -> str:
    if format != "auto":
        if format not in FORMATS:
            raise CartomapError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")
        return format
    fmt = SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise CartomapError(
            f"cannot tell the format of {Path(path).name!r}: name it .jsonl, .csv or .parquet (or pass a format)"
        )
    return fmt


def table_bytes(frame: pd.DataFrame, format: str) -> bytes:
    """A frame as JSON Lines (one object per row, NaN as null), CSV, or Parquet bytes."""
    if format == "jsonl":
        plain = frame.astype(object).where(frame.notna(), None)
        lines = [json.dumps(r, ensure_ascii=False, default=_plain) for r in plain.to_dict("records")]
        return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
    if format == "csv":
        return frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    if format == "parquet":
        import io

        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return buffer.getvalue()
    raise CartomapError(f"unknown format {format!r}: expected one of {', '.join(FORMATS)}")


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def write_table(frame: pd.DataFrame, path: str | Path, format: str = "auto") -> Path:
    fmt = table_format(path, format)
    if fmt == "parquet":
        return atomic_save(Path(path), lambda p: frame.to_parquet(p, index=False))
    return atomic_write_bytes(Path(path), table_bytes(frame, fmt))


def export_corrected(
    run: Run,
    queue: str,
    out: str | Path | None = None,
    decisions_out: str | Path | None = None,
    format: str = "auto",
    overwrite: bool = False,
    by: str | None = None,
) -> dict[str, Any]:
    """Write the corrected set in the run folder (:func:`write_corrected`) and, when given, to ``out``
    (labels as names) and the decisions file to ``decisions_out``. Existing files are replaced only with
    ``overwrite`` (checked before anything is written)."""
    targets = [p for p in (out, decisions_out) if p is not None]
    for path in targets:
        table_format(path, format)
    refuse_overwrite(targets, overwrite)
    result = write_corrected(run, queue, by=by)
    if out is not None:
        write_table(named(run, result["frame"], result["decisions"]), out, format)
    if decisions_out is not None:
        write_table(result["decisions"], decisions_out, format)
    return result
