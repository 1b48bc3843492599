"""The corrected training set of a review queue, and its decisions file (the provenance).

:func:`write_corrected` aggregates a queue's decisions (:mod:`cartomap.curation.aggregate`) and writes,
in the run folder's ``review/<queue>/``:

* ``corrected.parquet``: the run's training examples (its own copy, same columns) with every
  ``relabel`` applied and every ``remove`` dropped; keep, unsure and unreviewed rows unchanged (a token
  run's queue of words: a relabel changes that word's tag in its sentence, a removed word drops its
  sentence; a queue of sentences or spans: a relabel sets the words its tag list changes, the changes of
  a sentence's items merged, refused when two set one word differently or the result breaks the file's
  scheme; a removed item drops its sentence; a multi-label run's holds (example, label) units: a relabel
  to present or absent toggles that label in the example's label set, a removed unit drops its
  example). It is
  the data set ``run:RUN:corrected/<queue>`` wherever a command takes data
  (``cartomap train --data run:RUN:corrected/<queue>``);
* ``decisions.parquet``: one row per queued example, columns
  :data:`cartomap.curation.aggregate.DECISION_COLUMNS` (id, decision, label, original_label,
  decided_by, n_annotators, queued_by, score).

:func:`export_corrected` writes both to a user's paths as JSON Lines, CSV or Parquet (labels as
names, plus ``review_decision`` and ``original_label`` columns in the corrected set; a token run's
sentences also in CoNLL columns, :func:`cartomap.data.conll.write_tagged`), never replacing a file unless
told to; :func:`corrected_bytes` gives the download in the shape of the run's own file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.tokens import split_unit_id
from cartomap.curation.aggregate import aggregate
from cartomap.curation.levels import WORD, sentence_of
from cartomap.curation.queue import load_queue, open_queue
from cartomap.curation.tags import check_tags, decode_tags
from cartomap.data.annotations import DERIVED_COLUMNS
from cartomap.data.conll import WRITTEN, is_token_data, tagged_format, to_conll, write_tagged
from cartomap.errors import CartomapError
from cartomap.io import atomic_save, atomic_write_bytes, atomic_write_parquet, refuse_overwrite
from cartomap.runs import layout
from cartomap.runs.store import CORRECTED_REF, RUN_REF, Run

FORMATS = ("jsonl", "csv", "parquet")
#: The format of a token run's corrected set in CoNLL columns (the run's file's own, when it was CoNLL).
CONLL = "conll"
CONLL_WRITTEN = tuple(suffix for suffix, shape in WRITTEN.items() if shape == CONLL)
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


def _tag_changes(table: pd.DataFrame, level: str) -> tuple[dict[str, dict[int, str]], set[str]]:
    """({sentence id: {word: new tag}}, sentences removed) of a decisions table of sentence or span items
    (a relabel's label is the sentence's tag list): the words each relabel changes from the gold tags,
    merged over the items of a sentence; CartomapError when two items set one word to different tags."""
    changes: dict[str, dict[int, str]] = {}
    by_item: dict[tuple[str, int], str] = {}
    removed = set()
    for row in table.to_dict("records"):
        sentence = sentence_of(row["id"], level)
        if row["decision"] == "remove":
            removed.add(sentence)
        if row["decision"] != "relabel":
            continue
        old, new = decode_tags(row["original_label"]), decode_tags(row["label"])
        for k, (before, after) in enumerate(zip(old, new, strict=True)):
            if before == after:
                continue
            earlier = changes.setdefault(sentence, {}).get(k)
            if earlier is not None and earlier != after:
                raise CartomapError(
                    f"items {by_item[(sentence, k)]!r} and {row['id']!r} set word {k} of sentence {sentence!r} to "
                    f"{earlier} and {after}: decide them alike"
                )
            changes[sentence][k], by_item[(sentence, k)] = after, str(row["id"])
    return changes, removed


def corrected_tag_lists(
    examples: pd.DataFrame, table: pd.DataFrame, label_names, kind, level: str, scheme: str | None
) -> pd.DataFrame:
    """A token run's ``examples`` corrected by a queue of sentences or spans: each relabel's changed tags
    applied to its sentence (:func:`_tag_changes`), checked to keep ``scheme`` (CartomapError naming the
    sentence and word otherwise); a sentence with an item decided ``remove`` dropped."""
    names = [str(n) for n in label_names]
    index = {n: k for k, n in enumerate(names)}
    changes, removed = _tag_changes(table, level)
    out = examples.copy()
    ids = out["id"].astype(str)
    tags = []
    for sid, row in zip(ids, out[kind.label_field], strict=True):
        if sid in changes:
            new = [names[c] for c in row]
            for k, tag in changes[sid].items():
                new[k] = tag
            try:
                check_tags(new, scheme, names)
            except CartomapError as err:
                raise CartomapError(f"sentence {sid!r} as corrected: {err}") from None
            row = np.asarray([index[t] for t in new], dtype=np.asarray(row).dtype)
        tags.append(row)
    out[kind.label_field] = tags
    return out[~ids.isin(removed).to_numpy()].reset_index(drop=True)


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
    db = open_queue(run, queue)
    if db.tag_lists:  # the queue's items are sentences or spans: each relabel a sentence's tag list
        corrected = corrected_tag_lists(examples, table, run.label_names, kind, db.level, db.scheme)
    elif kind.unit.sentences:  # the queue's items are words: their tags corrected in their sentences
        corrected = corrected_sentences(examples, table, run.label_names, kind)
    elif kind.unit.label_sets:  # (example, label) units: each label toggled in its example's set
        corrected = corrected_label_sets(examples, table, run.label_names, kind)
    else:
        corrected = corrected_examples(examples, table, run.label_names)
    folder = run.review_queue_dir(queue)
    atomic_write_parquet(folder / layout.CORRECTED, corrected)
    atomic_write_parquet(folder / layout.DECISIONS, table)
    found = table["decision"].value_counts()
    db.log_write(
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
        "level": db.level,
        "frame": corrected,
    }


def written_named(run: Run, queue: str, table: pd.DataFrame) -> pd.DataFrame | None:
    """The corrected set :func:`write_corrected` wrote for ``queue``, as :func:`named` gives it for a user's
    file; None before it was written."""
    path = run.corrected_path(queue)
    level = open_queue(run, queue).level
    return named(run, pd.read_parquet(path), table, level) if path.exists() else None


def named(run: Run, corrected: pd.DataFrame, table: pd.DataFrame, level: str = WORD) -> pd.DataFrame:
    """The corrected set for a user's file: labels as names, its review decision and original label (a token
    run's: its sentences with tag names, ``reviewed_words``: how many of its words the queue held, or
    ``reviewed_items`` in a queue of sentences or spans, how many of its items)."""
    names = np.asarray(run.label_names, dtype=object)
    kind = run.task_kind
    if kind.unit.sentences:
        field = kind.label_field
        out = corrected.assign(
            **{field: [list(names[np.asarray(t, dtype=np.int64)]) for t in corrected[field]]}
        )
        ids = table["id"].astype(str)
        queued = pd.Series([sentence_of(u, level) for u in ids], dtype=object).value_counts()
        column = "reviewed_words" if level == WORD else "reviewed_items"
        out[column] = out["id"].astype(str).map(queued).fillna(0).astype(int).to_numpy()
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


def tagged_out(run: Run, path: str | Path, format: str = "auto") -> bool:
    """Whether the corrected set goes to ``path`` as tagged sentences in CoNLL columns (a token run's, to a
    ``.conll``/``.bio``/``.iob``/``.iob2`` file or with format ``conll``:
    :func:`cartomap.data.conll.write_tagged`); CartomapError for ``conll`` on a run of other examples."""
    if format == CONLL and not run.task_kind.unit.sentences:
        raise CartomapError(
            f"format conll is for tagged sentences; run {run.id} is a {run.task_kind.name} run"
        )
    if not run.task_kind.unit.sentences:
        return False
    if format == CONLL:
        tagged_format(path)  # refuses a suffix it cannot write
        return True
    return format == "auto" and Path(path).suffix.lower() in CONLL_WRITTEN


def file_shape(run: Run) -> str:
    """The shape of the file ``run`` was trained from, which its corrected set is written in for a download:
    ``conll`` for a token run read from CoNLL columns, else ``jsonl`` (a token run's token and tag lists,
    or any run's examples)."""
    if run.task_kind.unit.sentences and is_token_data(run.config.data.path):
        return CONLL
    return "jsonl"


def corrected_bytes(run: Run, frame: pd.DataFrame) -> bytes:
    """The corrected set as :func:`named` gives it, in :func:`file_shape`: CoNLL columns (token, tag, each
    sentence's id in a ``# sent_id`` comment) or JSON Lines."""
    if file_shape(run) == CONLL:
        return to_conll(frame, id_comments=True).encode("utf-8")
    return table_bytes(frame, "jsonl")


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
    if out is not None and not tagged_out(run, out, format):
        table_format(out, format)
    if decisions_out is not None:
        table_format(decisions_out, "auto" if format == CONLL else format)
    refuse_overwrite(targets, overwrite)
    result = write_corrected(run, queue, by=by)
    if out is not None:
        frame = named(run, result["frame"], result["decisions"], result["level"])
        if tagged_out(run, out, format):  # a token run's sentences in CoNLL columns
            write_tagged(frame, out)
        else:
            write_table(frame, out, format)
    if decisions_out is not None:
        write_table(result["decisions"], decisions_out, format)
    return result
