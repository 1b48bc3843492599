"""A review queue out to Label Studio / Argilla, and their decisions back into the queue's store.

The files are :mod:`cartomap.data.label_studio`'s and :mod:`cartomap.data.argilla`'s: a Label Studio
tasks JSON (plus its labeling config ``<stem>.config.xml``), and for Argilla a dataset folder (``rg.Dataset.from_disk``; as a ZIP for a
download) or a records JSON file (``dataset.records.from_json``, its settings in ``<stem>.settings.json``). Each task shows the
texts, the gold label, the model's prediction, the queuing score and what queued it; the reviewers
answer decision / new label / note. The export of the project (Label Studio JSON) or the dataset folder
(Argilla, ``to_disk``) comes back with :func:`import_decisions`: every decision is appended to the
queue's SQLite store (origin ``labelstudio`` / ``argilla``) in one transaction, so a file with one bad
row records nothing. A relabel without a new label is recorded as unsure, with a note saying so. Importing the same file twice appends the same decisions again: an annotator's
latest decision is theirs, so the outcome does not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.curation.queue import load_queue, open_queue
from cartomap.curation.sources import WORD
from cartomap.data import argilla, label_studio
from cartomap.data.interchange import TOOL_JSON
from cartomap.errors import CartomapError, DataError
from cartomap.io import UTF8_BOM, decode_utf8, parse_json_text
from cartomap.tasks import registry as task_kinds

TOOLS = ("labelstudio", "argilla")


def _tool(tool: str) -> str:
    if tool not in TOOLS:
        raise CartomapError(f"unknown annotation tool {tool!r}: expected {' or '.join(TOOLS)}")
    return tool


def tool_refusal(level: str) -> str | None:
    """Why a queue of ``level`` cannot go to the tools (its items are decided as a sentence's tag list; the
    tools' forms here pick one label per item), in one line; None when it can."""
    if level == WORD:
        return None
    return (
        f"a review queue by {level} is decided as a sentence's tag list, which the Label Studio and "
        "Argilla files here do not carry (one label per item): review it on the dashboard or with "
        "`cartomap review-queue decide`"
    )


def _one_label_each(level: str) -> None:
    """CartomapError with :func:`tool_refusal`'s line for a queue of sentences or spans."""
    why = tool_refusal(level)
    if why is not None:
        raise CartomapError(why)


def _classes(run: Any, queue: str) -> list[str]:
    """What the queue's decisions choose among, as its store keeps them: the run's label names, or a
    multi-label queue's unit classes (absent, present: a relabel toggles the card's label)."""
    return list(open_queue(run, queue).label_names)


def tool_queue(items: pd.DataFrame) -> pd.DataFrame:
    """The queue in the interchange's columns: id, texts, label (gold name), prediction, score, detector;
    a multi-label queue's ``label_name`` too (the label each card asks about). A queue of sentences or
    spans is refused (:func:`_one_label_each`)."""
    if "level" in items.columns and len(items):
        _one_label_each(str(items["level"].iloc[0]))
    texts = [c for c in task_kinds.text_fields() if c in items.columns]
    frame = items[["id", *texts]].copy()
    frame["id"] = frame["id"].astype(str)
    frame["label"] = items["gold"].astype(str).to_numpy()
    if "label_name" in items.columns:
        frame["label_name"] = items["label_name"].astype(str).to_numpy()
    if "predicted" in items.columns and items["predicted"].notna().any():
        frame["prediction"] = items["predicted"].to_numpy()
    frame["score"] = items["score"].to_numpy()
    frame["detector"] = items["queued_by"].astype(str).to_numpy()
    return frame


def argilla_options(run: Any, queue: str) -> dict[str, Any]:
    """The options of the queue's Argilla files (:func:`cartomap.data.argilla.argilla_files`): its
    label names, its dataset name (the queue's name as Argilla spells names), each record open until
    the queue's k annotators submitted it, and the queue's guidelines (the dataset's)."""
    name = "".join(c if c.isalnum() or c in "_-" else "-" for c in queue.lower()) or "cartomap-review"
    db = open_queue(run, queue)
    return {
        "label_names": _classes(run, queue),
        "name": name,
        "min_submitted": db.per_item,
        "guidelines": db.guidelines or None,
    }


def export_queue(run: Any, queue: str, out: str | Path, tool: str, overwrite: bool = False) -> list[Path]:
    """Write queue ``queue`` for ``tool`` at ``out``; returns the paths written. Label Studio: a JSON file
    of tasks and its labeling config next to it. Argilla: ``out`` ending in ``.json`` is Argilla's records
    file with its settings file next to it (``dataset.records.from_json``, ``rg.Settings.from_json``);
    any other ``out`` a new or empty folder (``rg.Dataset.from_disk``)."""
    _tool(tool)
    items = load_queue(run, queue)
    frame = tool_queue(items)
    out = Path(out)
    if tool == "labelstudio":
        files = [out, label_studio.label_studio_config_path(out)]
    elif out.suffix.lower() == ".json" and not out.is_dir():
        files = [out, argilla.argilla_settings_path(out)]
    else:
        return [argilla.write_argilla(frame, out, **argilla_options(run, queue))]
    existing = [str(p) for p in files if p.exists()]
    if existing and not overwrite:
        raise CartomapError(f"{', '.join(existing)} exists already: choose another name or pass --force")
    if tool == "labelstudio":
        return list(label_studio.write_label_studio(frame, out, label_names=_classes(run, queue)))
    return list(argilla.write_argilla_records(frame, out, **argilla_options(run, queue)))


def label_studio_download(run: Any, queue: str) -> bytes:
    """The queue's Label Studio tasks as a JSON file (:func:`cartomap.data.label_studio.label_studio_json`)."""
    return label_studio.label_studio_json(
        tool_queue(load_queue(run, queue)), label_names=_classes(run, queue)
    )


def argilla_download(run: Any, queue: str) -> bytes:
    """The queue's Argilla dataset folder as a ZIP file (:func:`cartomap.data.argilla.argilla_zip`)."""
    options = argilla_options(run, queue)
    return argilla.argilla_zip(tool_queue(load_queue(run, queue)), options["name"], **options)


def read_decisions(
    path: str | Path, tool: str, label_names, users: Mapping[Any, str] | None = None
) -> pd.DataFrame:
    """The decisions table (item, annotator, decision, new_label, note) of a tool's export."""
    _tool(tool)
    if tool == "labelstudio":
        return label_studio.read_label_studio(path, label_names=label_names, users=users)
    return argilla.read_argilla(path, label_names=label_names, users=users)


def import_decisions(
    run: Any,
    queue: str,
    path: str | Path,
    tool: str,
    users: Mapping[Any, str] | None = None,
    by: str | None = None,
) -> int:
    """Append the decisions of a tool's export file or folder to the queue's store (all or none);
    returns how many. ``by``: the person who imported them (noted in the queue's store)."""
    table = read_decisions(path, tool, _classes(run, queue), users)
    return record_table(run, queue, table, tool, str(path), by=by)


def import_upload(
    run: Any, queue: str, data: bytes, tool: str, name: str = "upload", by: str | None = None
) -> int:
    """:func:`import_decisions` for the bytes of an uploaded JSON file (a Label Studio export, or an
    Argilla ``records.json``)."""
    _tool(tool)
    try:
        text = decode_utf8(data[len(UTF8_BOM) :] if data[:3] == UTF8_BOM else data, name)
        parsed = parse_json_text(text, name, TOOL_JSON)
    except DataError as err:
        raise CartomapError(f"not a JSON file: {err}") from None
    names = _classes(run, queue)
    if tool == "labelstudio":
        table = label_studio.label_studio_decisions(parsed, label_names=names, source=name)
    else:
        table = argilla.argilla_decisions(parsed, label_names=names, source=name)
    return record_table(run, queue, table, tool, name, by=by)


def record_table(
    run: Any, queue: str, table: pd.DataFrame, tool: str, source: str, by: str | None = None
) -> int:
    """Append a decisions table (item, annotator, decision, new_label, note) to the queue's store, in one
    transaction; CartomapError naming ``source`` when an item is not in the queue."""
    db = open_queue(run, queue)
    _one_label_each(db.level)
    known = set(db.items()["item_id"].astype(str))
    unknown = sorted(set(table["item"].astype(str)) - known)
    if unknown:
        raise CartomapError(
            f"{source}: {len(unknown)} decisions are about examples not in queue {queue!r}, e.g. {unknown[:3]}"
        )
    rows = []
    for r in table.to_dict("records"):
        decision, label, note = r["decision"], r.get("new_label"), str(r.get("note") or "")
        if decision == "relabel" and (label is None or pd.isna(label)):  # the tool's form left it empty
            decision, note = "unsure", f"{note} (relabel without a new label in {tool})".strip()
        rows.append((r["annotator"], str(r["item"]), decision, label, note))
    if not rows:
        return 0
    try:
        db.record_many(rows, origin=tool)
    except CartomapError as err:
        raise CartomapError(f"{source}: {err}") from None
    db.log_write("imported", by, tool=tool, source=str(source), decisions=len(rows))
    return len(rows)
