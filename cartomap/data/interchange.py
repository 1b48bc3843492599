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

Label Studio: :func:`write_label_studio` writes the tasks to import (``[{"data": {...}}, ...]``) and the
labeling config to paste into the project (:func:`label_studio_config`); :func:`read_label_studio` reads
the project's JSON export (tasks with ``annotations[].result[]`` of type ``choices`` / ``textarea``).
Cancelled (skipped) annotations are left out.

Argilla 2.x: :func:`write_argilla` writes the folder ``rg.Dataset.to_disk`` writes
(``.argilla/dataset.json``, ``.argilla/settings.json``, ``records.json``), which ``rg.Dataset.from_disk``
loads (:func:`argilla_zip`: that folder as a ZIP download); :func:`write_argilla_records` writes the records
file ``dataset.records.to_json`` writes, with its settings file (``rg.Settings.to_json``) next to it; :func:`read_argilla` reads the ``records.json`` of such a folder exported after the review
(``responses``: question -> ``[{"value", "user_id", "status"}]``). Only submitted responses count.

Malformed input is a DataError naming the file, the task or record index and the field.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np
import pandas as pd

from cartomap.config import REVIEW_DECISIONS
from cartomap.errors import DataError
from cartomap.io import atomic_write_json, atomic_write_text
from cartomap.tasks import registry as task_kinds

#: The decisions table: one row per (item, annotator).
DECISION_COLUMNS: tuple[str, ...] = ("item", "annotator", "decision", "new_label", "note")
#: Optional queue columns shown to the reviewers (when present).
EXTRA_COLUMNS: tuple[str, ...] = ("prediction", "score", "detector")
#: The questions' names in both tools (Label Studio ``from_name``s, Argilla question names).
DECISION_QUESTION = "decision"
NEW_LABEL_QUESTION = "new_label"
NOTE_QUESTION = "note"
#: The key of the example id in a Label Studio task's ``data`` (Label Studio numbers tasks itself).
ITEM_KEY = "item_id"
#: The key / field of the gold label shown to the reviewers.
GOLD_KEY = "gold_label"
#: The files of an Argilla dataset folder (``rg.Dataset.to_disk``).
ARGILLA_RECORDS = "records.json"
ARGILLA_SETTINGS = ".argilla/settings.json"
ARGILLA_DATASET = ".argilla/dataset.json"
_ARGILLA_NAME = re.compile(r"^(?=.*[a-z0-9])[a-z0-9_-]+$")
_LS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
#: Label Studio's and Argilla's own key for a text (a choice's caption, a note's value, a text field's
#: type): their format's name, not a column of a queue.
TEXT_KEY = "text"


# ---------------------------------------------------------------------------------------------------------
# The queue
# ---------------------------------------------------------------------------------------------------------


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def queue_text_columns(queue: pd.DataFrame, text_columns: Sequence[str] | None = None) -> tuple[str, ...]:
    """The queue's text columns: ``text_columns`` when given (each must exist), else the text fields of
    the task kind its columns show (a pair's two, else one text)."""
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
    if _missing(value):
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


def _queue_rows(
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
        if _missing(item) or str(item).strip() == "":
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
            if _missing(record[c]):
                raise DataError(f"row {i}: no text", field=c)
            row[c] = str(record[c])
        for c in extras:
            value = record[c]
            if _missing(value):
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


def _display(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# ---------------------------------------------------------------------------------------------------------
# Label Studio
# ---------------------------------------------------------------------------------------------------------


def label_studio_config(
    text_columns: Sequence[str], label_names: Sequence[str], *, extra_columns: Sequence[str] = ()
) -> str:
    """The labeling config (XML) of a review project, to paste into Label Studio's Labeling Interface.

    Shows each text column, the gold label and the extra columns as ``Text``; asks ``decision``
    (``Choices``, single, required: keep / relabel / remove / unsure), ``new_label`` (``Choices`` of
    ``label_names``, shown once "relabel" is chosen) and ``note`` (``TextArea``). Names must be plain
    identifiers (letters, digits, ``_ . -``); every value is XML-escaped."""
    shown = [*text_columns, GOLD_KEY, *extra_columns]
    for name in shown:
        if not _LS_NAME.match(str(name)):
            raise DataError(
                f"{name!r} is not usable as a Label Studio name (letters, digits, _ . -; not starting with a digit)",
                field="text_columns",
            )
    target = str(text_columns[0])
    lines = ["<View>"]
    for name in shown:
        title = "gold label" if name == GOLD_KEY else str(name)
        lines.append(f'  <Header value={quoteattr(title)} size="6"/>')
        lines.append(f"  <Text name={quoteattr(str(name))} value={quoteattr('$' + str(name))}/>")
    lines.append(
        f'  <Choices name={quoteattr(DECISION_QUESTION)} toName={quoteattr(target)} choice="single" '
        'required="true" showInline="true">'
    )
    lines += [f"    <Choice value={quoteattr(d)}/>" for d in REVIEW_DECISIONS]
    lines.append("  </Choices>")
    lines.append(
        f'  <Choices name={quoteattr(NEW_LABEL_QUESTION)} toName={quoteattr(target)} choice="single" '
        f'showInline="true" visibleWhen="choice-selected" whenTagName={quoteattr(DECISION_QUESTION)} '
        'whenChoiceValue="relabel">'
    )
    lines += [f"    <Choice value={quoteattr(str(n))}/>" for n in label_names]
    lines.append("  </Choices>")
    lines.append(
        f'  <TextArea name={quoteattr(NOTE_QUESTION)} toName={quoteattr(target)} rows="2" '
        'placeholder="note (optional)" maxSubmissions="1" editable="true"/>'
    )
    lines.append("</View>")
    return "\n".join(lines) + "\n"


def label_studio_tasks(
    queue: pd.DataFrame,
    *,
    label_names: Sequence[str],
    text_columns: Sequence[str] | None = None,
    id_column: str = "id",
    label_column: str = "label",
    extra_columns: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The queue as Label Studio tasks to import: ``[{"data": {"item_id", <texts>, "gold_label",
    <extras>}}, ...]`` (extras as display strings). The example id travels as ``data.item_id``."""
    return _tasks(
        *_queue_rows(
            queue,
            label_names=label_names,
            text_columns=text_columns,
            id_column=id_column,
            label_column=label_column,
            extra_columns=extra_columns,
        )
    )


def _tasks(
    texts: tuple[str, ...], extras: tuple[str, ...], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    tasks = []
    for row in rows:
        data: dict[str, Any] = {ITEM_KEY: row["item"]}
        data.update({c: row[c] for c in texts})
        data[GOLD_KEY] = row["gold"]
        data.update({c: _display(row[c]) for c in extras})
        tasks.append({"data": data})
    return tasks


def write_label_studio(
    queue: pd.DataFrame,
    path: str | Path,
    *,
    label_names: Sequence[str],
    text_columns: Sequence[str] | None = None,
    id_column: str = "id",
    label_column: str = "label",
    extra_columns: Sequence[str] | None = None,
) -> tuple[Path, Path]:
    """Write the tasks (:func:`label_studio_tasks`) to ``path`` (JSON) and the labeling config
    (:func:`label_studio_config`) next to it as ``<stem>.config.xml``; returns both paths. Atomic."""
    path = Path(path)
    texts, extras, rows = _queue_rows(
        queue,
        label_names=label_names,
        text_columns=text_columns,
        id_column=id_column,
        label_column=label_column,
        extra_columns=extra_columns,
    )
    config = label_studio_config(texts, [str(n) for n in label_names], extra_columns=extras)
    tasks = _tasks(texts, extras, rows)
    config_path = path.with_name(f"{path.stem}.config.xml")
    atomic_write_text(config_path, config)
    atomic_write_json(path, tasks)
    return path, config_path


def _load_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise DataError("no such file", location=str(path)) from err
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read the file ({err})", location=str(path)) from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(
            f"not valid JSON: {err.msg} (column {err.colno})", location=f"{path}:{err.lineno}"
        ) from err


def _annotator(raw: Any, users: Mapping[Any, str] | None, where: str, field: str) -> str:
    if isinstance(raw, Mapping):
        raw = next((raw[k] for k in ("email", "username", "id") if not _missing(raw.get(k))), None)
    if _missing(raw) or isinstance(raw, (bool, list, dict)) or str(raw).strip() == "":
        raise DataError("no annotator", location=where, field=field)
    name = str(raw).strip()
    if users:
        lookup = {str(k): str(v) for k, v in users.items()}
        name = lookup.get(name, name)
    return name


def _decision(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or value.strip() not in REVIEW_DECISIONS:
        raise DataError(
            f"unknown decision {value!r}; expected one of {list(REVIEW_DECISIONS)}",
            location=where,
            field=field,
        )
    return value.strip()


def _new_label(value: Any, label_names: Sequence[str] | None, where: str, field: str) -> str | None:
    if _missing(value) or (isinstance(value, str) and value.strip() == ""):
        return None
    if not isinstance(value, str):
        raise DataError(f"expected a label name, got {value!r}", location=where, field=field)
    if label_names is not None and value.strip() not in label_names:
        raise DataError(
            f"unknown label {value!r}; expected one of {list(label_names)}", location=where, field=field
        )
    return value.strip()


def _note(value: Any, where: str, field: str) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise DataError(f"expected text, got {value!r}", location=where, field=field)
        value = "\n".join(value)
    if not isinstance(value, str):
        raise DataError(f"expected text, got {value!r}", location=where, field=field)
    return value.strip() or None


def _single_choice(value: Any, where: str, field: str) -> Any:
    if not isinstance(value, Mapping):
        raise DataError(f"expected an object with 'choices', got {value!r}", location=where, field=field)
    choices = value.get("choices")
    if not isinstance(choices, list):
        raise DataError(
            f"expected a list of choices, got {choices!r}", location=where, field=f"{field}.choices"
        )
    if len(choices) != 1:
        raise DataError(f"expected one choice, got {choices!r}", location=where, field=f"{field}.choices")
    return choices[0]


def _decisions_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
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


def label_studio_decisions(
    tasks: Any,
    *,
    label_names: Sequence[str] | None = None,
    users: Mapping[Any, str] | None = None,
    source: str = "tasks",
) -> pd.DataFrame:
    """The decisions table (:data:`DECISION_COLUMNS`) of Label Studio's JSON export, already parsed.

    Each task needs ``data.item_id`` (the example id, as :func:`label_studio_tasks` wrote it) and a list
    ``annotations``; each annotation not ``was_cancelled`` needs ``completed_by`` (a user id, or an object
    with email/username/id) and a ``result`` list holding a ``decision`` choice; ``new_label`` (checked
    against ``label_names`` when given) and ``note`` (textarea) are optional. Other results (other
    ``from_name``s) are ignored. ``source`` names the file in errors."""
    if not isinstance(tasks, list):
        raise DataError(f"expected a list of tasks, got {type(tasks).__name__}", location=source)
    names = None if label_names is None else [str(n) for n in label_names]
    rows: list[dict[str, Any]] = []
    for t, task in enumerate(tasks):
        where = f"{source} task {t}"
        if not isinstance(task, Mapping):
            raise DataError(f"expected an object, got {type(task).__name__}", location=where)
        data = task.get("data")
        if not isinstance(data, Mapping):
            raise DataError("expected an object", location=where, field="data")
        item = data.get(ITEM_KEY)
        if _missing(item) or isinstance(item, (bool, list, dict)) or str(item).strip() == "":
            raise DataError("no example id", location=where, field=f"data.{ITEM_KEY}")
        annotations = task.get("annotations", [])
        if not isinstance(annotations, list):
            raise DataError(
                f"expected a list, got {type(annotations).__name__}", location=where, field="annotations"
            )
        for a, annotation in enumerate(annotations):
            at = f"annotations[{a}]"
            if not isinstance(annotation, Mapping):
                raise DataError(
                    f"expected an object, got {type(annotation).__name__}", location=where, field=at
                )
            if annotation.get("was_cancelled"):
                continue
            annotator = _annotator(annotation.get("completed_by"), users, where, f"{at}.completed_by")
            result = annotation.get("result")
            if not isinstance(result, list):
                raise DataError(
                    f"expected a list, got {type(result).__name__}", location=where, field=f"{at}.result"
                )
            found: dict[str, Any] = {}
            for r, region in enumerate(result):
                rf = f"{at}.result[{r}]"
                if not isinstance(region, Mapping):
                    raise DataError(
                        f"expected an object, got {type(region).__name__}", location=where, field=rf
                    )
                name = region.get("from_name")
                if name == DECISION_QUESTION:
                    found["decision"] = _decision(
                        _single_choice(region.get("value"), where, f"{rf}.value"),
                        where,
                        f"{rf}.value.choices",
                    )
                elif name == NEW_LABEL_QUESTION:
                    found["new_label"] = _new_label(
                        _single_choice(region.get("value"), where, f"{rf}.value"),
                        names,
                        where,
                        f"{rf}.value.choices",
                    )
                elif name == NOTE_QUESTION:
                    value = region.get("value")
                    if not isinstance(value, Mapping):
                        raise DataError(
                            f"expected an object with {TEXT_KEY!r}, got {value!r}",
                            location=where,
                            field=f"{rf}.value",
                        )
                    found["note"] = _note(value.get(TEXT_KEY), where, f"{rf}.value.{TEXT_KEY}")
            if "decision" not in found:
                raise DataError(
                    f"no {DECISION_QUESTION!r} choice in the result", location=where, field=f"{at}.result"
                )
            rows.append(
                {
                    "item": str(item),
                    "annotator": annotator,
                    "decision": found["decision"],
                    "new_label": found.get("new_label") if found["decision"] == "relabel" else None,
                    "note": found.get("note"),
                    "_where": where,
                }
            )
    return _decisions_frame(rows)


def read_label_studio(
    path: str | Path, *, label_names: Sequence[str] | None = None, users: Mapping[Any, str] | None = None
) -> pd.DataFrame:
    """The decisions table of a Label Studio JSON export file (see :func:`label_studio_decisions`)."""
    return label_studio_decisions(_load_json(path), label_names=label_names, users=users, source=str(path))


# ---------------------------------------------------------------------------------------------------------
# Argilla 2.x
# ---------------------------------------------------------------------------------------------------------


def _argilla_name(name: str, field: str) -> str:
    if not _ARGILLA_NAME.match(name):
        raise DataError(
            f"{name!r} is not usable as an Argilla name (lowercase letters, digits, _ and -); rename the column",
            field=field,
        )
    return name


def _question(
    name: str, title: str, settings: dict[str, Any], *, required: bool, description: str | None = None
):
    return {
        "id": None,
        "name": name,
        "title": title,
        "description": description,
        "required": required,
        "settings": settings,
        "inserted_at": None,
        "updated_at": None,
    }


def _options(values: Sequence[str]) -> list[dict[str, Any]]:
    return [{"value": v, TEXT_KEY: v, "description": None} for v in values]


def argilla_settings(
    text_columns: Sequence[str],
    label_names: Sequence[str],
    *,
    extra_columns: Mapping[str, str] | None = None,
    guidelines: str | None = None,
    min_submitted: int = 1,
) -> dict[str, Any]:
    """The dataset settings (``rg.Settings`` serialised, ``.argilla/settings.json``): a ``TextField`` per
    text column and the gold label, the ``LabelQuestion``s ``decision`` (required) and ``new_label``,
    the ``TextQuestion`` ``note``, metadata properties for the extra columns (``{name: "terms" |
    "float"}``) and the task distribution: each record stays open until ``min_submitted`` reviewers
    submitted it (set it to the number of reviewers wanted per example)."""
    if isinstance(min_submitted, bool) or not isinstance(min_submitted, int) or min_submitted < 1:
        raise DataError(
            f"min_submitted must be an integer >= 1, got {min_submitted!r}", field="min_submitted"
        )
    fields = [
        {
            "id": None,
            "name": _argilla_name(str(c), "text_columns"),
            "title": "gold label" if c == GOLD_KEY else str(c),
            "required": True,
            "settings": {"type": TEXT_KEY, "use_markdown": False},
            "inserted_at": None,
            "updated_at": None,
        }
        for c in [*text_columns, GOLD_KEY]
    ]
    questions = [
        _question(
            DECISION_QUESTION,
            "Is the gold label right?",
            {"type": "label_selection", "options": _options(list(REVIEW_DECISIONS)), "visible_options": None},
            required=True,
            description="keep: the gold label is right; relabel: it is another class (choose it below); "
            "remove: the example is unusable; unsure: no decision",
        ),
        _question(
            NEW_LABEL_QUESTION,
            "New label (relabel only)",
            {
                "type": "label_selection",
                "options": _options([str(n) for n in label_names]),
                "visible_options": None,
            },
            required=False,
        ),
        _question(NOTE_QUESTION, "Note", {"type": TEXT_KEY, "use_markdown": False}, required=False),
    ]
    metadata = []
    for name, kind in (extra_columns or {}).items():
        settings: dict[str, Any] = (
            {"type": "terms", "values": None}
            if kind == "terms"
            else {"type": "float", "min": None, "max": None}
        )
        metadata.append(
            {
                "id": None,
                "name": _argilla_name(str(name), "extra_columns"),
                "title": str(name),
                "settings": settings,
                "visible_for_annotators": True,
                "inserted_at": None,
                "updated_at": None,
            }
        )
    return {
        "guidelines": guidelines,
        "questions": questions,
        "fields": fields,
        "vectors": [],
        "metadata": metadata,
        "allow_extra_metadata": False,
        "distribution": {"strategy": "overlap", "min_submitted": min_submitted},
    }


def _extra_kinds(extras: Sequence[str], rows: list[dict[str, Any]]) -> dict[str, str]:
    kinds = {}
    for c in extras:
        values = [r[c] for r in rows if r[c] is not None]
        kinds[c] = "float" if values and all(isinstance(v, (int, float)) for v in values) else "terms"
    return kinds


def argilla_records(
    queue: pd.DataFrame,
    *,
    label_names: Sequence[str],
    text_columns: Sequence[str] | None = None,
    id_column: str = "id",
    label_column: str = "label",
    extra_columns: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The queue as Argilla records (``Record.to_dict``, the ``records.json`` of ``to_disk``): ``id`` =
    the example id, ``fields`` = texts and gold label, ``metadata`` = extras (numbers stay numbers,
    others as text), no responses yet."""
    return _records(
        *_queue_rows(
            queue,
            label_names=label_names,
            text_columns=text_columns,
            id_column=id_column,
            label_column=label_column,
            extra_columns=extra_columns,
        )
    )


def _records(
    texts: tuple[str, ...], extras: tuple[str, ...], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    kinds = _extra_kinds(extras, rows)
    return [
        {
            "id": row["item"],
            "fields": {**{c: row[c] for c in texts}, GOLD_KEY: row["gold"]},
            "metadata": {
                c: (float(row[c]) if kinds[c] == "float" else str(row[c]))
                for c in extras
                if row[c] is not None
            },
            "suggestions": {},
            "responses": {},
            "vectors": {},
            "status": "pending",
            "_server_id": None,
        }
        for row in rows
    ]


def argilla_files(
    queue: pd.DataFrame,
    *,
    label_names: Sequence[str],
    name: str = "cartomap-review",
    text_columns: Sequence[str] | None = None,
    id_column: str = "id",
    label_column: str = "label",
    extra_columns: Sequence[str] | None = None,
    guidelines: str | None = None,
    min_submitted: int = 1,
) -> dict[str, Any]:
    """The files of the folder ``rg.Dataset.to_disk`` writes, as {path in the folder: JSON value}:
    :data:`ARGILLA_DATASET` (name, guidelines), :data:`ARGILLA_SETTINGS` (:func:`argilla_settings`, what
    ``rg.Settings.to_json`` writes) and :data:`ARGILLA_RECORDS` (:func:`argilla_records`, what
    ``dataset.records.to_json`` writes)."""
    texts, extras, rows = _queue_rows(
        queue,
        label_names=label_names,
        text_columns=text_columns,
        id_column=id_column,
        label_column=label_column,
        extra_columns=extra_columns,
    )
    settings = argilla_settings(
        texts,
        [str(n) for n in label_names],
        extra_columns=_extra_kinds(extras, rows),
        guidelines=guidelines,
        min_submitted=min_submitted,
    )
    dataset = {  # DatasetModel's fields, as an unpublished dataset's to_disk writes them
        "id": None,
        "inserted_at": None,
        "updated_at": None,
        "name": str(name),
        "status": "draft",
        "guidelines": guidelines,
        "allow_extra_metadata": False,
        "distribution": settings["distribution"],
        "workspace_id": None,
        "last_activity_at": None,
    }
    return {
        ARGILLA_DATASET: dataset,
        ARGILLA_SETTINGS: settings,
        ARGILLA_RECORDS: _records(texts, extras, rows),
    }


def write_argilla(queue: pd.DataFrame, folder: str | Path, **options: Any) -> Path:
    """Write the queue as the folder ``rg.Dataset.to_disk`` writes (load it with
    ``rg.Dataset.from_disk(folder, workspace=...)``): the files of :func:`argilla_files` (``options``
    are its keyword arguments). ``folder`` must not exist or be empty; it is assembled under a temporary
    name and renamed, so it is complete or absent. Returns ``folder``."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise DataError(
            "exists and is not an empty folder; expected a new or empty folder", location=str(folder)
        )
    files = argilla_files(queue, **options)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        for path, value in files.items():
            atomic_write_json(tmp / path, value)
        os.chmod(tmp, 0o777 & ~_umask())
        if folder.exists():
            folder.rmdir()
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def argilla_settings_path(path: str | Path) -> Path:
    """The settings file written next to a records file: ``<stem>.settings.json``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.settings.json")


def write_argilla_records(queue: pd.DataFrame, path: str | Path, **options: Any) -> tuple[Path, Path]:
    """Write the queue as Argilla's records file (``dataset.records.to_json(path)``'s format: a list of
    ``Record.to_dict``; load it with ``dataset.records.from_json(path)``) at ``path`` and its dataset
    settings next to it (:func:`argilla_settings_path`, ``rg.Settings.to_json``'s format: make the dataset
    with ``rg.Settings.from_json``); ``options`` are :func:`argilla_files`'s. Atomic; returns both paths."""
    path = Path(path)
    files = argilla_files(queue, **options)
    settings = argilla_settings_path(path)
    atomic_write_json(settings, files[ARGILLA_SETTINGS])
    atomic_write_json(path, files[ARGILLA_RECORDS])
    return path, settings


def argilla_zip(queue: pd.DataFrame, folder_name: str = "cartomap-review", **options: Any) -> bytes:
    """The folder of :func:`write_argilla` as the bytes of a ZIP file (a download): unzipped, it loads with
    ``rg.Dataset.from_disk(<folder_name>)``; ``options`` are :func:`argilla_files`'s."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, value in argilla_files(queue, **options).items():
            archive.writestr(f"{folder_name}/{path}", json.dumps(value, indent=1))
    return buffer.getvalue()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _argilla_label_names(folder: Path) -> list[str] | None:
    """The new_label options of a dataset folder's settings, or None without settings."""
    path = folder / ARGILLA_SETTINGS
    if not path.exists():
        return None
    settings = _load_json(path)
    questions = settings.get("questions") if isinstance(settings, Mapping) else None
    for q in questions if isinstance(questions, list) else []:
        if isinstance(q, Mapping) and q.get("name") == NEW_LABEL_QUESTION:
            options = (q.get("settings") or {}).get("options")
            if isinstance(options, list):
                return [str(o.get("value")) for o in options if isinstance(o, Mapping)]
    return None


def argilla_decisions(
    records: Any,
    *,
    label_names: Sequence[str] | None = None,
    users: Mapping[Any, str] | None = None,
    source: str = "records",
) -> pd.DataFrame:
    """The decisions table (:data:`DECISION_COLUMNS`) of Argilla records (``Record.to_dict``), parsed.

    Each record needs ``id`` (the example id) and ``responses``: question name -> list of
    ``{"value", "user_id", "status"}``. A response whose ``status`` is given and not ``"submitted"``
    (draft, discarded) is left out. Every reviewer with a response needs a ``decision``; ``new_label``
    (checked against ``label_names`` when given) and ``note`` are optional; other questions are ignored."""
    if not isinstance(records, list):
        raise DataError(f"expected a list of records, got {type(records).__name__}", location=source)
    names = None if label_names is None else [str(n) for n in label_names]
    rows: list[dict[str, Any]] = []
    for i, record in enumerate(records):
        where = f"{source} record {i}"
        if not isinstance(record, Mapping):
            raise DataError(f"expected an object, got {type(record).__name__}", location=where)
        item = record.get("id")
        if _missing(item) or isinstance(item, (bool, list, dict)) or str(item).strip() == "":
            raise DataError("no example id", location=where, field="id")
        responses = record.get("responses")
        responses = {} if responses is None else responses
        if not isinstance(responses, Mapping):
            raise DataError(
                f"expected an object, got {type(responses).__name__}", location=where, field="responses"
            )
        per_user: dict[str, dict[str, Any]] = {}
        for question in (DECISION_QUESTION, NEW_LABEL_QUESTION, NOTE_QUESTION):
            answers = responses.get(question, [])
            field = f"responses.{question}"
            if not isinstance(answers, list):
                raise DataError(f"expected a list, got {type(answers).__name__}", location=where, field=field)
            for k, answer in enumerate(answers):
                af = f"{field}[{k}]"
                if not isinstance(answer, Mapping):
                    raise DataError(
                        f"expected an object, got {type(answer).__name__}", location=where, field=af
                    )
                status = answer.get("status")
                if status is not None and status != "submitted":
                    continue
                user = _annotator(answer.get("user_id"), users, where, f"{af}.user_id")
                value = answer.get("value")
                if question == DECISION_QUESTION:
                    parsed = _decision(value, where, f"{af}.value")
                elif question == NEW_LABEL_QUESTION:
                    parsed = _new_label(value, names, where, f"{af}.value")
                else:
                    parsed = _note(value, where, f"{af}.value")
                per_user.setdefault(user, {})[question] = parsed
        for user, answers in per_user.items():
            if DECISION_QUESTION not in answers:
                raise DataError(
                    f"reviewer {user!r} answered {sorted(answers)} but not {DECISION_QUESTION!r}",
                    location=where,
                    field=f"responses.{DECISION_QUESTION}",
                )
            decision = answers[DECISION_QUESTION]
            rows.append(
                {
                    "item": str(item),
                    "annotator": user,
                    "decision": decision,
                    "new_label": answers.get(NEW_LABEL_QUESTION) if decision == "relabel" else None,
                    "note": answers.get(NOTE_QUESTION),
                    "_where": where,
                }
            )
    return _decisions_frame(rows)


def read_argilla(
    path: str | Path, *, label_names: Sequence[str] | None = None, users: Mapping[Any, str] | None = None
) -> pd.DataFrame:
    """The decisions table of an Argilla dataset folder written by ``rg.Dataset.to_disk`` after the review
    (its ``records.json``), or of a records JSON file itself. Without ``label_names``, new labels are
    checked against the folder's ``new_label`` options (``.argilla/settings.json``) when it has them."""
    path = Path(path)
    if path.is_dir():
        if label_names is None:
            label_names = _argilla_label_names(path)
        path = path / ARGILLA_RECORDS
    return argilla_decisions(_load_json(path), label_names=label_names, users=users, source=str(path))
