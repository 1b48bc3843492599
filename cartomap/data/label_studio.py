"""A review queue out to Label Studio and its decisions back (files only; the shared queue and decisions
table are :mod:`cartomap.data.interchange`'s).

:func:`write_label_studio` writes the tasks to import (``[{"data": {...}}, ...]``) and the labeling config to
paste into the project (:func:`label_studio_config`); :func:`read_label_studio` reads the project's JSON
export (tasks with ``annotations[].result[]`` of type ``choices`` / ``textarea``). Cancelled (skipped)
annotations are left out. Malformed input is a DataError naming the file, the task index and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from cartomap.config import REVIEW_DECISIONS
from cartomap.data.interchange import (
    DECISION_QUESTION,
    GOLD_KEY,
    ITEM_KEY,
    NEW_LABEL_QUESTION,
    NOTE_QUESTION,
    TEXT_KEY,
    annotator_name,
    decision_row,
    decision_value,
    decisions_frame,
    item_id,
    load_tool_json,
    new_label_value,
    note_value,
    queue_rows,
)
from cartomap.errors import DataError
from cartomap.io import atomic_write_json, atomic_write_text

#: What Label Studio accepts as a control's name.
_LS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


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
        *queue_rows(
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
        data.update({c: _display_value(row[c]) for c in extras})
        tasks.append({"data": data})
    return tasks


def label_studio_config_path(path: str | Path) -> Path:
    """The labeling config written next to a tasks file: ``<stem>.config.xml``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.config.xml")


def label_studio_json(queue: pd.DataFrame, *, label_names: Sequence[str]) -> bytes:
    """The tasks of :func:`label_studio_tasks` as the bytes of a JSON file (a download)."""
    return json.dumps(label_studio_tasks(queue, label_names=label_names), indent=1).encode("utf-8")


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
    texts, extras, rows = queue_rows(
        queue,
        label_names=label_names,
        text_columns=text_columns,
        id_column=id_column,
        label_column=label_column,
        extra_columns=extra_columns,
    )
    config = label_studio_config(texts, [str(n) for n in label_names], extra_columns=extras)
    tasks = _tasks(texts, extras, rows)
    config_path = label_studio_config_path(path)
    atomic_write_text(config_path, config)
    atomic_write_json(path, tasks)
    return path, config_path


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
        item = item_id(data.get(ITEM_KEY), where, f"data.{ITEM_KEY}")
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
            annotator = annotator_name(annotation.get("completed_by"), users, where, f"{at}.completed_by")
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
                    found["decision"] = decision_value(
                        _single_choice(region.get("value"), where, f"{rf}.value"),
                        where,
                        f"{rf}.value.choices",
                    )
                elif name == NEW_LABEL_QUESTION:
                    found["new_label"] = new_label_value(
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
                    found["note"] = note_value(value.get(TEXT_KEY), where, f"{rf}.value.{TEXT_KEY}")
            if "decision" not in found:
                raise DataError(
                    f"no {DECISION_QUESTION!r} choice in the result", location=where, field=f"{at}.result"
                )
            rows.append(decision_row(item, annotator, found, where))
    return decisions_frame(rows)


def read_label_studio(
    path: str | Path, *, label_names: Sequence[str] | None = None, users: Mapping[Any, str] | None = None
) -> pd.DataFrame:
    """The decisions table of a Label Studio JSON export file (see :func:`label_studio_decisions`)."""
    return label_studio_decisions(
        load_tool_json(path), label_names=label_names, users=users, source=str(path)
    )


def _display_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


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
