"""A review queue out to Argilla 2.x and its decisions back (files only; the shared queue and decisions
table are :mod:`cartomap.data.interchange`'s).

:func:`write_argilla` writes the folder ``rg.Dataset.to_disk`` writes (``.argilla/dataset.json``,
``.argilla/settings.json``, ``records.json``), which ``rg.Dataset.from_disk`` loads (:func:`argilla_zip`:
that folder as a ZIP download); :func:`write_argilla_records` writes the records file
``dataset.records.to_json`` writes, with its settings file (``rg.Settings.to_json``) next to it;
:func:`read_argilla` reads the ``records.json`` of such a folder exported after the review (``responses``:
question -> ``[{"value", "user_id", "status"}]``). Only submitted responses count. Malformed input is a
DataError naming the file, the record index and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.config import REVIEW_DECISIONS
from cartomap.data.interchange import (
    DECISION_QUESTION,
    GOLD_KEY,
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
from cartomap.io import atomic_folder, atomic_write_json

#: The files of an Argilla dataset folder (``rg.Dataset.to_disk``).
ARGILLA_RECORDS = "records.json"
ARGILLA_SETTINGS = ".argilla/settings.json"
ARGILLA_DATASET = ".argilla/dataset.json"
#: What Argilla accepts as a field's or question's name.
_ARGILLA_NAME = re.compile(r"^(?=.*[a-z0-9])[a-z0-9_-]+$")


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
        *queue_rows(
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
    texts, extras, rows = queue_rows(
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

    def write(tmp: Path) -> None:
        for path, value in files.items():
            atomic_write_json(tmp / path, value)

    return atomic_folder(folder, write)


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


def _argilla_label_names(folder: Path) -> list[str] | None:
    """The new_label options of a dataset folder's settings, or None without settings."""
    path = folder / ARGILLA_SETTINGS
    if not path.exists():
        return None
    settings = load_tool_json(path)
    questions = settings.get("questions") if isinstance(settings, Mapping) else None
    for q in questions if isinstance(questions, list) else []:
        if isinstance(q, Mapping) and q.get("name") == NEW_LABEL_QUESTION:
            found = q.get("settings")
            options = found.get("options") if isinstance(found, Mapping) else None
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
        item = item_id(record.get("id"), where, "id")
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
                user = annotator_name(answer.get("user_id"), users, where, f"{af}.user_id")
                value = answer.get("value")
                if question == DECISION_QUESTION:
                    parsed = decision_value(value, where, f"{af}.value")
                elif question == NEW_LABEL_QUESTION:
                    parsed = new_label_value(value, names, where, f"{af}.value")
                else:
                    parsed = note_value(value, where, f"{af}.value")
                per_user.setdefault(user, {})[question] = parsed
        for user, answers in per_user.items():
            if DECISION_QUESTION not in answers:
                raise DataError(
                    f"reviewer {user!r} answered {sorted(answers)} but not {DECISION_QUESTION!r}",
                    location=where,
                    field=f"responses.{DECISION_QUESTION}",
                )
            named = {
                "decision": answers[DECISION_QUESTION],
                "new_label": answers.get(NEW_LABEL_QUESTION),
                "note": answers.get(NOTE_QUESTION),
            }
            rows.append(decision_row(item, user, named, where))
    return decisions_frame(rows)


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
    return argilla_decisions(load_tool_json(path), label_names=label_names, users=users, source=str(path))
