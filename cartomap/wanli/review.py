"""WaNLI Stage 4: human review of the filtered examples, aggregation, agreement and export.

Every kept example of a filtered batch is reviewed by two annotators. Each may label it as it
is, revise it (minimal edits, then a label) or discard it. Reviews live in one SQLite database
per batch, ``run.path/"wanli"/<batch>/review.sqlite`` (WAL journal, busy timeout, one
connection per call, every action committed at once), so several annotators (browser tabs,
processes) can work at the same time and nothing is lost when a page or process dies.

Tables::

    annotators(name, created_at)
    items(gen_id, position, premise, hypothesis, intended_label, seed_id, "group", active)
    actions(id, gen_id, annotator, action, label, premise, hypothesis, created_at)
    undos(event_id, annotator, created_at)      an action undone by its annotator
    live_actions                                (view) the actions no undo names
    meta(key, value)            label names of the run

Actions are only ever appended: the latest action of an annotator on an item is their review,
so a changed mind is a new action and the history stays. An annotator may undo any of their own
reviews (:meth:`ReviewDB.undo`): the undo is appended too, and their review of the item is again the
action before it, or none (the item comes back to them); everything below reads the live actions. An item that a later filtering no
longer keeps is marked inactive (its reviews stay in the database) and is neither offered nor
exported.

Aggregation and agreement (METHODS.md §2, Stage 4) are :mod:`cartomap.wanli.review_rules`' pure
functions, applied here to the live actions.

Export: one row per kept example, with id (the gen_id), premise, hypothesis, label and
provenance (seed_id, group, intended_label, revised, annotators, rule) as JSONL or CSV; the
file loads with ``cartomap train --data out.jsonl``.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import CartomapError
from cartomap.io import atomic_write_bytes
from cartomap.runs.sqlite import BASE_SCHEMA, SQLiteStore, clean_name, undo_schema
from cartomap.runs.store import Run
from cartomap.wanli.batches import load_filtered, review_path
from cartomap.wanli.review_rules import (
    ACTIONS,
    REVIEWERS,
    aggregate,
    kappa_of,
    kappa_pairs,
)

EXPORT_FORMATS = ("jsonl", "csv")
EXPORT_COLUMNS = (
    "id",
    "premise",
    "hypothesis",
    "label",
    "seed_id",
    "group",
    "intended_label",
    "revised",
    "annotators",
    "rule",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    gen_id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    premise TEXT NOT NULL,
    hypothesis TEXT NOT NULL,
    intended_label TEXT,
    seed_id TEXT,
    "group" TEXT,
    active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    gen_id TEXT NOT NULL REFERENCES items(gen_id),
    annotator TEXT NOT NULL REFERENCES annotators(name),
    action TEXT NOT NULL CHECK (action IN ('label', 'revise', 'discard')),
    label TEXT,
    premise TEXT,
    hypothesis TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS actions_item_annotator ON actions (gen_id, annotator);
CREATE INDEX IF NOT EXISTS actions_annotator ON actions (annotator);
"""


# --------------------------------------------------------------------------- the database
def name_to_add(typed: Any, current: str | None = None) -> str | None:
    """What "Add annotator" adds: the typed name cleaned (adding is idempotent: a name that exists is
    picked again), or None when the field is empty and ``current`` is chosen: the name was just added
    (Enter in the field, then the button) and there is nothing left to do. CartomapError for an empty
    field with nobody chosen, or a name that is too long."""
    if not " ".join(str(typed or "").split()) and current:
        return None
    return clean_name(typed)


def _optional_str(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return str(value)


class ReviewDB(SQLiteStore):
    """The review database of one batch. Cheap to make; every method opens its own connection
    (:class:`cartomap.runs.sqlite.SQLiteStore`: WAL, busy timeout, immediate transactions)."""

    SCHEMA = BASE_SCHEMA + _SCHEMA + undo_schema("actions")
    TABLES = frozenset({"meta", "annotators", "items", "actions", "undos"})
    EVENTS, ITEM = "actions", "gen_id"

    def __init__(self, path: str | Path, label_names: Sequence[str] | None = None):
        super().__init__(path)
        self.setup(None if label_names is None else {"label_names": [str(x) for x in label_names]})

    # -- setup -------------------------------------------------------------
    @property
    def label_names(self) -> tuple[str, ...] | None:
        names = self.meta("label_names")
        return tuple(names) if names else None

    def load_items(self, frame: pd.DataFrame) -> int:
        """Make the rows of ``frame`` (gen_id, premise, hypothesis, ...) the active items; returns how many are new.

        Idempotent: known items keep their text, position and reviews; items not in ``frame``
        become inactive (their reviews stay).
        """
        records = []
        for pos, row in enumerate(frame.to_dict("records")):
            records.append(
                (
                    str(row["gen_id"]),
                    pos,
                    str(row["premise"]),
                    str(row["hypothesis"]),
                    _optional_str(row.get("intended_label")),
                    _optional_str(row.get("seed_id")),
                    _optional_str(row.get("group")),
                )
            )
        wanted = [r[0] for r in records]
        with self.connect() as con:  # nothing to write (the usual case on a page rerun): no write lock
            active = [r[0] for r in con.execute("SELECT gen_id FROM items WHERE active = 1")]
        if sorted(active) == sorted(wanted):
            return 0
        with self.connect() as con, self.transaction(con):
            before = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
            con.executemany(
                'INSERT OR IGNORE INTO items (gen_id, position, premise, hypothesis, intended_label, seed_id, "group")'
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                records,
            )
            con.execute("UPDATE items SET active = 0")
            con.executemany("UPDATE items SET active = 1 WHERE gen_id = ?", [(r[0],) for r in records])
            after = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        return after - before

    # -- items -------------------------------------------------------------
    def items(self, active_only: bool = True) -> pd.DataFrame:
        query = 'SELECT gen_id, position, premise, hypothesis, intended_label, seed_id, "group", active FROM items'
        if active_only:
            query += " WHERE active = 1"
        columns = [
            "gen_id",
            "position",
            "premise",
            "hypothesis",
            "intended_label",
            "seed_id",
            "group",
            "active",
        ]
        return self.frame(query + " ORDER BY position, gen_id", columns)

    def item(self, gen_id: str) -> dict[str, Any]:
        with self.connect() as con:
            row = con.execute("SELECT * FROM items WHERE gen_id = ?", (str(gen_id),)).fetchone()
        if row is None:
            raise CartomapError(f"no item {gen_id!r} in {self.path}")
        return dict(row)

    def next_items(self, annotator: str, limit: int = 1) -> list[dict[str, Any]]:
        """Active items ``annotator`` has not reviewed yet, in the order to offer them.

        Items with fewer than two reviews from others come first, those with one review before
        those with none (so pairs are completed early), then file order; items two others
        reviewed already come last. Each dict has the item's columns plus ``others`` (how many
        other annotators reviewed it).
        """
        name = clean_name(annotator)
        query = f"""
            SELECT i.*, (SELECT COUNT(DISTINCT a.annotator) FROM {self.live} a
                         WHERE a.gen_id = i.gen_id AND a.annotator != :name) AS others
            FROM items i
            WHERE i.active = 1
              AND NOT EXISTS (SELECT 1 FROM {self.live} a WHERE a.gen_id = i.gen_id AND a.annotator = :name)
            ORDER BY (others >= 2), others DESC, i.position, i.gen_id
            LIMIT :limit
        """
        with self.connect() as con:
            return [dict(r) for r in con.execute(query, {"name": name, "limit": int(limit)})]

    # -- actions -----------------------------------------------------------
    def record(
        self,
        annotator: str,
        gen_id: str,
        action: str,
        label: str | None = None,
        premise: str | None = None,
        hypothesis: str | None = None,
    ) -> int:
        """Append one action, committed at once; returns its id. A new annotator name is registered.

        ``label`` needs a label; ``revise`` a label and the revised premise and hypothesis (a
        revision that changes nothing is recorded as ``label``); ``discard`` nothing.
        """
        name = clean_name(annotator)
        if action not in ACTIONS:
            raise CartomapError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        if action == "discard":
            label = premise = hypothesis = None
        elif label is None:
            raise CartomapError(f"action {action!r} needs a label")
        else:
            label = str(label)
        if action == "revise":
            premise = (premise or "").strip()
            hypothesis = (hypothesis or "").strip()
            if not premise or not hypothesis:
                raise CartomapError("a revision needs a premise and a hypothesis")
        elif action == "label":
            premise = hypothesis = None

        def write(con: sqlite3.Connection) -> int:
            kind, new_premise, new_hypothesis = action, premise, hypothesis
            item = con.execute(
                "SELECT premise, hypothesis FROM items WHERE gen_id = ?", (str(gen_id),)
            ).fetchone()
            if item is None:
                raise CartomapError(f"no item {gen_id!r} to review in {self.path}")
            known = con.execute("SELECT value FROM meta WHERE key = 'label_names'").fetchone()
            if label is not None and known is not None and label not in json.loads(known["value"]):
                raise CartomapError(f"unknown label {label!r}: expected one of {json.loads(known['value'])}")
            if kind == "revise" and (new_premise, new_hypothesis) == (
                item["premise"].strip(),
                item["hypothesis"].strip(),
            ):
                kind, new_premise, new_hypothesis = "label", None, None
            now = time.time()
            con.execute("INSERT OR IGNORE INTO annotators (name, created_at) VALUES (?, ?)", (name, now))
            cur = con.execute(
                "INSERT INTO actions (gen_id, annotator, action, label, premise, hypothesis, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (str(gen_id), name, kind, label, new_premise, new_hypothesis, now),
            )
            return int(cur.lastrowid)

        return self.write(write)

    def actions(self) -> pd.DataFrame:
        """Every action ever recorded, oldest first (undone ones too: :meth:`undone` names them)."""
        columns = ["id", "gen_id", "annotator", "action", "label", "premise", "hypothesis", "created_at"]
        return self.frame(f"SELECT {', '.join(columns)} FROM actions ORDER BY id", columns)

    def reviews(self, active_only: bool = True) -> pd.DataFrame:
        """The latest live action (not undone) per (gen_id, annotator), ordered by when that annotator
        first reviewed the item.

        Columns: action_id, gen_id, annotator, action, label, premise, hypothesis, created_at,
        first_action_id.
        """
        query = f"""
            SELECT a.id AS action_id, a.gen_id, a.annotator, a.action, a.label, a.premise, a.hypothesis,
                   a.created_at, f.first_id AS first_action_id
            FROM {self.live} a
            JOIN (SELECT gen_id, annotator, MAX(id) AS last_id, MIN(id) AS first_id
                  FROM {self.live} GROUP BY gen_id, annotator) f ON a.id = f.last_id
            JOIN items i ON i.gen_id = a.gen_id
        """
        if active_only:
            query += " WHERE i.active = 1"
        columns = [
            "action_id",
            "gen_id",
            "annotator",
            "action",
            "label",
            "premise",
            "hypothesis",
            "created_at",
            "first_action_id",
        ]
        return self.frame(query + " ORDER BY f.first_id", columns)

    def latest(self, annotator: str, limit: int | None = 1) -> pd.DataFrame:
        """``annotator``'s most recent reviews (latest live action per item), newest first; every one
        with ``limit`` None."""
        reviews = self.reviews()
        mine = reviews[reviews["annotator"] == clean_name(annotator)]
        mine = mine.sort_values("action_id", ascending=False)
        return (mine if limit is None else mine.head(limit)).reset_index(drop=True)

    def progress(self) -> dict[str, Any]:
        """Counts: active items, items with 0 / 1 / 2+ reviews, reviews per annotator."""
        items = self.items()
        reviews = self.reviews()
        per_item = reviews.groupby("gen_id")["annotator"].nunique() if len(reviews) else pd.Series(dtype=int)
        counts = per_item.reindex(items["gen_id"]).fillna(0).astype(int)
        return {
            "items": int(len(items)),
            "unreviewed": int((counts == 0).sum()),
            "one_review": int((counts == 1).sum()),
            "complete": int((counts >= REVIEWERS).sum()),
            "by_annotator": {
                str(k): int(v) for k, v in reviews["annotator"].value_counts().sort_index().items()
            },
            "actions": int(len(reviews)),
        }

    # -- results -----------------------------------------------------------
    def aggregate(self, seed: int = 0) -> pd.DataFrame:
        return aggregate(self.items(), self.reviews(), seed=seed)

    def kappa(self) -> tuple[float, int]:
        """(Cohen's κ, number of items it is computed on)."""
        first, second = kappa_pairs(self.reviews())
        return kappa_of(first, second), len(first)


# --------------------------------------------------------------------------- a batch's review


def open_review(run: Run, batch: str) -> ReviewDB:
    """The review database of a filtered batch, its items loaded from the kept rows of filtered.parquet."""
    filtered = load_filtered(run, batch)
    if filtered is None:
        raise CartomapError(
            f"batch {batch!r} of run {run.id} is not filtered yet: run `cartomap filter` first"
        )
    db = ReviewDB(review_path(run, batch), label_names=run.label_names)
    db.load_items(filtered[filtered["kept"]])
    return db


def export_frame(aggregated: pd.DataFrame) -> pd.DataFrame:
    """The kept examples of an aggregation, in export columns (id, premise, hypothesis, label, provenance)."""
    kept = aggregated[aggregated["status"] == "keep"]
    frame = pd.DataFrame(
        {
            "id": kept["gen_id"].astype(str),
            "premise": kept["premise"].astype(str),
            "hypothesis": kept["hypothesis"].astype(str),
            "label": kept["label"].astype(str),
            "seed_id": kept["seed_id"],
            "group": kept["group"],
            "intended_label": kept["intended_label"],
            "revised": kept["revised"].astype(bool),
            "annotators": kept["annotators"],
            "rule": kept["rule"],
        }
    )
    return frame.reset_index(drop=True)


def export_bytes(frame: pd.DataFrame, format: str = "jsonl") -> bytes:
    """An export frame as JSONL (annotators a list) or CSV (annotators joined with ';')."""
    if format not in EXPORT_FORMATS:
        raise CartomapError(f"unknown export format {format!r}: expected {' or '.join(EXPORT_FORMATS)}")
    records = frame.to_dict("records")
    if format == "jsonl":
        lines = []
        for rec in records:
            rec = {k: (list(v) if k == "annotators" else _plain(v)) for k, v in rec.items()}
            lines.append(json.dumps(rec, ensure_ascii=False))
        return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for rec in records:
        row = []
        for col in EXPORT_COLUMNS:
            value = rec.get(col)
            if col == "annotators":
                value = ";".join(value or [])
            elif col == "revised":
                value = "true" if value else "false"
            value = _plain(value)
            row.append("" if value is None else value)
        writer.writerow(row)
    return buffer.getvalue().encode("utf-8")


def _plain(value: Any) -> Any:
    """JSON-friendly scalars (numpy types to Python, NaN to None)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def export_format(out: str | Path, format: str = "auto") -> str:
    if format != "auto":
        return format
    suffix = Path(out).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise CartomapError(f"cannot tell the export format from {Path(out).name!r}: name it .jsonl or .csv")


def export_reviewed(
    run: Run, batch: str, out: str | Path, format: str = "auto", seed: int = 0, overwrite: bool = False
) -> tuple[Path, int]:
    """Write the reviewed batch's kept examples to ``out`` (JSONL or CSV); returns (path, rows).

    An existing ``out`` is replaced only with ``overwrite=True``.
    """
    out = Path(out)
    fmt = export_format(out, format)
    if out.exists() and not overwrite:
        raise CartomapError(f"{out} exists already: choose another name or allow overwriting")
    db = open_review(run, batch)
    frame = export_frame(db.aggregate(seed=seed))
    if frame.empty:
        raise CartomapError(
            f"nothing to export from batch {batch!r}: no example has two reviews and was kept"
        )
    atomic_write_bytes(out, export_bytes(frame, fmt))
    return out, len(frame)
