"""Tags of a run's examples: short labels people put on one or many examples (``needs a second look``,
``typo``, ``duplicate``), kept in the run folder with who set them and when.

One SQLite database per run (``tags.sqlite``), the house pattern of :mod:`cartomap.runs.sqlite` (WAL,
busy timeout first, one connection per call, ``BEGIN IMMEDIATE`` and a commit per write), so several
people tagging at once (tabs, processes, the CLI) lose nothing, and a write is all or nothing. Tables::

    meta(key, value)
    annotators(name, created_at)      (unused; every store of the house has it)
    tags(example_id, tag, tagged_by, tagged_at)      the tags each example has now
    tag_events(id, action, tag, examples, done_by, done_at)    every tagging and untagging

A tag set on an example that has it already keeps its first ``tagged_by``/``tagged_at``. The ids are
those of the points of the run's maps: its examples (and, for a run whose units are words or labels,
its units' ids too). Reading a run without tags creates nothing (a read-only store stays browsable).
"""

from __future__ import annotations

import sqlite3
import time
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import CartomapError
from cartomap.io import file_stamp, writable
from cartomap.runs.sqlite import BASE_SCHEMA, SQLiteStore, is_busy, retry_busy
from cartomap.runs.store import Run

#: The longest tag (characters).
MAX_TAG = 40
#: How an example's tags are written in one cell of a table (downloads): sorted, joined by this.
SEPARATOR = ", "
#: The column of an example's tags in tables and downloads (not ``tags``: a token run's data has that, its
#: tag of every word).
TAGS_COLUMN = "user_tags"
#: The columns of :func:`tags_of`.
TAG_COLUMNS = ["id", "tag", "tagged_by", "tagged_at"]
#: The columns of :func:`history`.
EVENT_COLUMNS = ["id", "action", "tag", "examples", "done_by", "done_at"]
ADD, REMOVE = "add", "remove"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tags (
    example_id TEXT NOT NULL,
    tag TEXT NOT NULL,
    tagged_by TEXT,
    tagged_at REAL NOT NULL,
    PRIMARY KEY (example_id, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tags_by_tag ON tags (tag);
CREATE TABLE IF NOT EXISTS tag_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    action TEXT NOT NULL CHECK (action IN ('add', 'remove')),
    tag TEXT NOT NULL,
    examples INTEGER NOT NULL,
    done_by TEXT,
    done_at REAL NOT NULL
);
"""


def clean_tag(tag: Any) -> str:
    """A tag with its whitespace collapsed; CartomapError when empty, longer than :data:`MAX_TAG`, or
    holding a comma (tags are listed comma-separated in downloads) or a control character."""
    text = " ".join(str(tag or "").split())
    if not text:
        raise CartomapError("a tag needs a name (a word or a few)")
    if len(text) > MAX_TAG:
        raise CartomapError(
            f"tags have at most {MAX_TAG} characters ({len(text)} given): {text[:MAX_TAG]!r}…"
        )
    if "," in text:
        raise CartomapError(
            f"tag {text!r}: no commas in a tag (an example's tags are listed comma-separated)"
        )
    if any(unicodedata.category(c).startswith("C") for c in text):
        raise CartomapError(f"tag {text!r}: no control characters in a tag")
    return text


class TagStore(SQLiteStore):
    """The tags of one run. Cheap to make; every method opens its own connection."""

    SCHEMA = BASE_SCHEMA + _SCHEMA
    TABLES = frozenset({"meta", "annotators", "tags", "tag_events"})


def _store(run: Run) -> TagStore:
    return TagStore(run.tags_path)


def _problem(run: Run, err: sqlite3.OperationalError, writing: bool = True) -> CartomapError:
    """One line about the tag database that could not be written (``writing``) or read."""
    if not writing:
        return CartomapError(f"{run.tags_path}: the tags cannot be read now ({err})")
    if not writable(run.tags_path.parent) or "readonly" in str(err):
        return CartomapError(
            f"{run.tags_path}: the run's folder is read-only: tags can be read here, not changed (no tag was changed)"
        )
    if is_busy(err):
        return CartomapError(
            f"{run.tags_path}: the tags are being written by someone else; try again in a moment (nothing is lost)"
        )
    if "full" in str(err).lower():
        return CartomapError(
            f"{run.tags_path}: the disk is full: free some space and tag again (no tag was changed)"
        )
    return CartomapError(f"{run.tags_path}: the tags cannot be written now ({err}; no tag was changed)")


def known_ids(run: Run) -> set[str]:
    """The ids a tag may be set on: the run's examples, and its units' when they are words or labels."""
    known = set(run.examples(columns=["id"])["id"].astype(str))
    if not run.task_kind.unit.per_example and run.has_metrics():
        known |= set(run.metrics(columns=["id"])["id"].astype(str))
    return known


def _checked_ids(run: Run, ids: Iterable[Any], known: Iterable[str] | None) -> list[str]:
    wanted = list(dict.fromkeys(str(i) for i in ids))
    if not wanted:
        raise CartomapError("no examples to tag: select some first")
    allowed = set(known) if known is not None else known_ids(run)
    unknown = [i for i in wanted if i not in allowed]
    if unknown:
        raise CartomapError(
            f"{len(unknown):,} ids are not examples of run {run.id}, e.g. {', '.join(map(repr, unknown[:3]))}"
        )
    return wanted


def _write(run: Run, body) -> int:
    store = _store(run)
    try:
        retry_busy(store.setup)
        return store.write(body)
    except sqlite3.OperationalError as err:
        raise _problem(run, err) from None


def add_tag(
    run: Run, tag: str, ids: Iterable[Any], *, by: str | None = None, known: Iterable[str] | None = None
) -> int:
    """Tag the examples ``ids`` of ``run`` with ``tag`` (in one transaction), as ``by`` (the person, None
    without a team); returns how many did not have it yet. ``known``: the ids a tag may go on, when the
    caller has them (else read from the run); CartomapError for an id that is not one, before anything is
    written."""
    tag = clean_tag(tag)
    wanted = _checked_ids(run, ids, known)
    now = time.time()

    def body(con: sqlite3.Connection) -> int:
        before = con.total_changes
        con.executemany(
            "INSERT OR IGNORE INTO tags (example_id, tag, tagged_by, tagged_at) VALUES (?, ?, ?, ?)",
            ((i, tag, by, now) for i in wanted),
        )
        added = con.total_changes - before
        con.execute(
            "INSERT INTO tag_events (action, tag, examples, done_by, done_at) VALUES (?, ?, ?, ?, ?)",
            (ADD, tag, added, by, now),
        )
        return added

    return _write(run, body)


def remove_tag(run: Run, tag: str, ids: Iterable[Any] | None = None, *, by: str | None = None) -> int:
    """Take ``tag`` off the examples ``ids`` of ``run`` (None: off every example that has it), as ``by``;
    returns how many had it. Recorded as an event (who, when, how many)."""
    tag = clean_tag(tag)
    wanted = None if ids is None else list(dict.fromkeys(str(i) for i in ids))
    if not run.tags_path.exists():
        return 0
    now = time.time()

    def body(con: sqlite3.Connection) -> int:
        before = con.total_changes
        if wanted is None:
            con.execute("DELETE FROM tags WHERE tag = ?", (tag,))
        else:
            con.executemany("DELETE FROM tags WHERE example_id = ? AND tag = ?", ((i, tag) for i in wanted))
        removed = con.total_changes - before
        if removed:
            con.execute(
                "INSERT INTO tag_events (action, tag, examples, done_by, done_at) VALUES (?, ?, ?, ?, ?)",
                (REMOVE, tag, removed, by, now),
            )
        return removed

    return _write(run, body)


def _read(run: Run, query: str, columns: list[str], params: tuple = ()) -> pd.DataFrame:
    if not run.tags_path.exists():
        return pd.DataFrame(columns=columns)
    try:
        return _store(run).frame(query, columns, params)
    except sqlite3.OperationalError as err:
        if "no such table" in str(err):  # made by the first write just now, schema not there yet
            return pd.DataFrame(columns=columns)
        raise _problem(run, err, writing=False) from None


def tags_of(run: Run, tag: str | None = None) -> pd.DataFrame:
    """Every (example, tag) of ``run`` (only ``tag``'s when given): columns :data:`TAG_COLUMNS` (id, tag,
    tagged_by, tagged_at in seconds since the epoch), by tag then id. Empty when the run has no tags."""
    where, params = ("WHERE tag = ?", (clean_tag(tag),)) if tag is not None else ("", ())
    return _read(
        run,
        f"SELECT example_id AS id, tag, tagged_by, tagged_at FROM tags {where} ORDER BY tag, example_id",
        TAG_COLUMNS,
        params,
    )


def tag_counts(run: Run) -> pd.DataFrame:
    """One row per tag of ``run``: tag, examples (how many have it), last_tagged_at, most recent first."""
    return _read(
        run,
        "SELECT tag, COUNT(*) AS examples, MAX(tagged_at) AS last_tagged_at FROM tags GROUP BY tag "
        "ORDER BY last_tagged_at DESC, tag",
        ["tag", "examples", "last_tagged_at"],
    )


def history(run: Run) -> pd.DataFrame:
    """Every tagging and untagging of ``run``, oldest first: :data:`EVENT_COLUMNS`."""
    return _read(run, "SELECT * FROM tag_events ORDER BY id", EVENT_COLUMNS)


def stamp(run: Run) -> tuple:
    """A cache key part that changes whenever the run's tags do (the database and its write-ahead log)."""
    path = run.tags_path
    return (file_stamp(path), file_stamp(Path(f"{path}-wal")))


def ids_with(tags: pd.DataFrame, wanted: Iterable[str]) -> np.ndarray:
    """The ids (distinct, object array) that have any of the tags ``wanted``, from a :func:`tags_of` frame."""
    wanted = [str(t) for t in wanted]
    if tags.empty or not wanted:
        return np.zeros(0, dtype=object)
    hit = tags["tag"].isin(wanted).to_numpy()
    return pd.unique(tags["id"].to_numpy(dtype=object)[hit])


def tag_column(ids: Iterable[Any], tags: pd.DataFrame) -> np.ndarray:
    """Each of ``ids``' tags, sorted and joined by :data:`SEPARATOR` ("" for an id without), from a
    :func:`tags_of` frame: the :data:`TAGS_COLUMN` of downloads and tables."""
    ids = np.asarray([str(i) for i in ids], dtype=object)
    if tags.empty or not len(ids):
        return np.full(len(ids), "", dtype=object)
    joined = tags.sort_values(["id", "tag"]).groupby("id", sort=False)["tag"].agg(SEPARATOR.join)
    return joined.reindex(ids).fillna("").to_numpy(dtype=object)


def with_tags(table: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """``table`` (with an ``id`` column) and a :data:`TAGS_COLUMN` column (:func:`tag_column`) last;
    ``table`` itself when the run has no tag (no empty column added)."""
    if tags.empty:
        return table
    column = tag_column(table["id"].tolist(), tags)
    out = table.copy()
    out[TAGS_COLUMN] = column
    return out
