"""A review queue out to the annotation tools teams already run, and their decisions back (files only).

The **queue** is a DataFrame, one row per example to review: an id column (``id``), its text columns
(the text fields of its task kind, :mod:`cartomap.tasks`, or any named with ``text_columns``), the gold label (``label``: a
class name, or a class index with ``label_names``), and optionally :data:`EXTRA_COLUMNS` (a model's
``prediction``, the detector's ``score``, the ``detector``'s name), shown to the reviewers.

Each reviewer answers three questions per example: ``decision`` (one of
:data:`cartomap.config.REVIEW_DECISIONS`: keep, relabel, remove, unsure), ``new_label`` (the class a
relabel moves it to) and a free ``note``. What comes back is the long **decisions table**
(:data:`DECISION_COLUMNS`), one row per (item, annotator), in the order of the file:

* ``item`` (str): the example id; ``annotator`` (str): the tool's user (Label Studio's ``completed_by``,
  Argilla's ``user_id``; renamed with ``users={id: name}``);
* ``decision`` (str): keep | relabel | remove | unsure;
* ``new_label`` (str or None): the new class of a relabel (None for other decisions, whatever the form
  still held, and for a relabel without one);
* ``note`` (str or None).

:mod:`cartomap.scores.agreement` reads that table as it is.

The tools' own formats: :mod:`cartomap.data.label_studio` (tasks, labeling config, JSON export) and
:mod:`cartomap.data.argilla` (2.x ``to_disk`` folders, records files); both read their files back into the
decisions table with the readers below.

Malformed input is a DataError naming the file, the task or record index and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import REVIEW_DECISIONS
from cartomap.errors import DataError
from cartomap.io import read_json_file
from cartomap.tasks import registry as task_kinds

#: The decisions table: one row per (item, annotator).
DECISION_COLUMNS: tuple[str, ...] = ("item", "annotator", "decision", "new_label", "note")
#: Optional queue columns shown to the reviewers (when present; label_name: the label a multi-label card asks about).
EXTRA_COLUMNS: tuple[str, ...] = ("label_name", "prediction", "score", "detector")
#: The questions' names in both tools (Label Studio ``from_name``s, Argilla question names).
DECISION_QUESTION = "decision"
NEW_LABEL_QUESTION = "new_label"
NOTE_QUESTION = "note"
#: The key of the example id in a Label Studio task's ``data`` (Label Studio numbers tasks itself).
ITEM_KEY = "item_id"
#: The key / field of the gold label shown to the reviewers.
GOLD_KEY = "gold_label"
#: Label Studio's and Argilla's own key for a text (a choice's caption, a note's value, a text field's
#: type): their format's name, not a column of a queue.
TEXT_KEY = "text"


# ---------------------------------------------------------------------------------------------------------
# The queue
# ---------------------------------------------------------------------------------------------------------


def is_missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def queue_text_columns(queue: pd.DataFrame, text_columns: Sequence[str] | None = None) -> tuple[str, ...]:
    """The queue's text columns: ``text_columns`` when given (each must exist), else the text fields of
    the task kind its columns show (a pair's two, else one text): a queue file is a bare table, no run
    comes with it."""
    if text_columns is not None:
        cols = tuple(str(c) for c in text_columns)
        if not cols:
            raise DataError("no text columns given; expected at least one", field="text_columns")
        missing = [c for c in cols if c not in queue.columns]
        if missing:
            raise DataError(
                f"the queue has no column(s) {missing} (columns: {list(queue.columns)})", field="text_columns"
            )
        return cols
    try:
        return task_kinds.of_columns(queue.columns).text_fields
    except DataError:
        raise DataError(
            f"the queue has no {task_kinds.fields_label()} column (columns: {list(queue.columns)}); name them "
            "with text_columns",
            field="text_columns",
        ) from None


def _label_name(value: Any, label_names: Sequence[str] | None, row: int, column: str) -> str:
    if is_missing(value):
        raise DataError(f"row {row}: no {column}", field=column)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and label_names is not None:
        if not 0 <= int(value) < len(label_names):
            raise DataError(
                f"row {row}: class index {int(value)} outside 0..{len(label_names) - 1} ({list(label_names)})",
                field=column,
            )
        return str(label_names[int(value)])
    name = str(value)
    if label_names is not None and name not in label_names:
        raise DataError(
            f"row {row}: unknown label {name!r}; expected one of {list(label_names)}", field=column
        )
    return name


def queue_rows(
    queue: pd.DataFrame,
    *,
    label_names: Sequence[str],
    text_columns: Sequence[str] | None,
    id_column: str,
    label_column: str,
    extra_columns: Sequence[str] | None,
) -> tuple[tuple[str, ...], tuple[str, ...], list[dict[str, Any]]]:
    """(text columns, extra columns, one plain dict per row: item, texts, gold, extras)."""
    if not isinstance(queue, pd.DataFrame):
        raise DataError(f"expected the queue as a DataFrame, got {type(queue).__name__}", field="queue")
    names = [str(n) for n in label_names]
    if len(names) < 2 or len(set(names)) != len(names):
        raise DataError(f"expected at least 2 distinct label names, got {names}", field="label_names")
    texts = queue_text_columns(queue, text_columns)
    for column in (id_column, label_column):
        if column not in queue.columns:
            raise DataError(
                f"the queue has no column {column!r} (columns: {list(queue.columns)})", field=column
            )
    if extra_columns is None:
        extras = tuple(c for c in EXTRA_COLUMNS if c in queue.columns)
    else:
        extras = tuple(str(c) for c in extra_columns)
        missing = [c for c in extras if c not in queue.columns]
        if missing:
            raise DataError(f"the queue has no column(s) {missing}", field="extra_columns")
    clash = {ITEM_KEY, GOLD_KEY} & set(texts + extras)
    if clash or len(set(texts + extras)) != len(texts + extras):
        raise DataError(
            f"text and extra columns must be distinct and not named {ITEM_KEY!r} or {GOLD_KEY!r}: {list(texts + extras)}",
            field="text_columns",
        )
    rows = []
    seen: set[str] = set()
    for i, record in enumerate(queue.to_dict("records")):
        item = record[id_column]
        if is_missing(item) or str(item).strip() == "":
            raise DataError(f"row {i}: no id", field=id_column)
        item = str(item)
        if item in seen:
            raise DataError(
                f"row {i}: id {item!r} appears twice; expected one row per example", field=id_column
            )
        seen.add(item)
        row: dict[str, Any] = {
            "item": item,
            "gold": _label_name(record[label_column], names, i, label_column),
        }
        for c in texts:
            if is_missing(record[c]):
                raise DataError(f"row {i}: no text", field=c)
            row[c] = str(record[c])
        for c in extras:
            value = record[c]
            if is_missing(value):
                row[c] = None
            elif c == "prediction":
                row[c] = _label_name(value, names, i, c)
            elif isinstance(value, (float, np.floating)):
                row[c] = float(value)
            elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                row[c] = int(value)
            else:
                row[c] = str(value)
        rows.append(row)
    return texts, extras, rows


# ---------------------------------------------------------------------------------------------------------
# Reading the tools' files back
# ---------------------------------------------------------------------------------------------------------


#: What an annotation tool's file holds, for messages.
TOOL_JSON = "a Label Studio JSON export or an Argilla records.json"


def load_tool_json(path: str | Path) -> Any:
    """The JSON of an annotation tool's export file (:func:`cartomap.io.read_json_file`): DataError naming
    the file and line when it is missing, not UTF-8, not JSON or nested too deeply."""
    return read_json_file(path, TOOL_JSON)


def annotator_name(raw: Any, users: Mapping[Any, str] | None, where: str, field: str) -> str:
    if isinstance(raw, Mapping):
        raw = next((raw[k] for k in ("email", "username", "id") if not is_missing(raw.get(k))), None)
    if is_missing(raw) or isinstance(raw, (bool, list, dict)) or str(raw).strip() == "":
        raise DataError("no annotator", location=where, field=field)
    name = str(raw).strip()
    if users:
        lookup = {str(k): str(v) for k, v in users.items()}
        name = lookup.get(name, name)
    return name


def decision_value(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or value.strip() not in REVIEW_DECISIONS:
        raise DataError(
            f"unknown decision {value!r}; expected one of {list(REVIEW_DECISIONS)}",
            location=where,
            field=field,
        )
    return value.strip()


def new_label_value(value: Any, label_names: Sequence[str] | None, where: str, field: str) -> str | None:
    if is_missing(value) or (isinstance(value, str) and value.strip() == ""):
        return None
    if not isinstance(value, str):
        raise DataError(f"expected a label name, got {value!r}", location=where, field=field)
    if label_names is not None and value.strip() not in label_names:
        raise DataError(
            f"unknown label {value!r}; expected one of {list(label_names)}", location=where, field=field
        )
    return value.strip()


def note_value(value: Any, where: str, field: str) -> str | None:
    if is_missing(value):
        return None
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise DataError(f"expected text, got {value!r}", location=where, field=field)
        value = "\n".join(value)
    if not isinstance(value, str):
        raise DataError(f"expected text, got {value!r}", location=where, field=field)
    return value.strip() or None


def item_id(value: Any, where: str, field: str) -> str:
    """A tool's example id as a string; DataError naming the field when it is missing, blank or not a
    plain value."""
    if is_missing(value) or isinstance(value, (bool, list, dict)) or str(value).strip() == "":
        raise DataError("no example id", location=where, field=field)
    return str(value)


def decision_row(item: str, annotator: str, answers: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One row of :func:`decisions_frame` from a reviewer's parsed answers (``decision``, and optionally
    ``new_label`` and ``note``): the new label kept for a relabel only."""
    decision = answers["decision"]
    return {
        "item": item,
        "annotator": annotator,
        "decision": decision,
        "new_label": answers.get("new_label") if decision == "relabel" else None,
        "note": answers.get("note"),
        "_where": where,
    }


def decisions_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*DECISION_COLUMNS, "_where"])
    repeated = frame.duplicated(["item", "annotator"], keep="first")
    if repeated.any():
        first = frame[repeated].iloc[0]
        raise DataError(
            f"annotator {first['annotator']!r} decided item {first['item']!r} twice; expected one decision per "
            "annotator and item",
            location=first["_where"],
            field="annotator",
        )
    frame = frame.drop(columns="_where")
    for c in ("item", "annotator", "decision"):
        frame[c] = frame[c].astype(str) if len(frame) else frame[c].astype(object)
    for c in ("new_label", "note"):
        frame[c] = frame[c].astype(object).where(frame[c].notna(), None)
    return frame.reset_index(drop=True)
