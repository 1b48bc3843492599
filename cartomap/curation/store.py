"""The decisions of a review queue: one SQLite database per queue (``review/<queue>/review.sqlite``).

The house pattern of :mod:`cartomap.runs.sqlite` (WAL, busy timeout set first, one connection per
call, ``BEGIN IMMEDIATE`` and a commit per click), so several annotators (tabs, processes, the CLI)
decide at the same time and nothing is lost when one dies. A write that still meets "database is
locked" (another writer held the lock past the busy timeout) is tried again
(:func:`cartomap.runs.sqlite.retry_busy`).

Tables::

    meta(key, value)             label_names (JSON), per_item (k annotators per item), guidelines (the
                                 queue's guidelines for its annotators), writes (who made what), level
                                 (what an item is: word (or example), sentence, span) and scheme (the
                                 BIO scheme a token run's tags keep: IOB1, IOB2 or none)
    annotators(name, created_at)
    items(item_id, position, score, gold)
    decisions(id, item_id, annotator, decision, label, note, origin, created_at)
    undos(event_id, annotator, created_at)    a decision undone by its annotator
    live_decisions                            (view) the decisions no undo names

Decisions are only ever appended: an annotator's latest decision on an item is theirs, so a changed
mind is a new row and the history stays. An annotator may undo any of their own decisions
(:meth:`QueueDB.undo`): the undo is appended too, the undone row stays, and their decision on that item
is again the one before it, or none (the item comes back to them). Everything that reads decisions
(assignment, progress, agreement, the final decisions) reads the live ones. ``decision`` is keep, relabel (``label`` the new class),
remove or unsure; a relabel to the gold label is recorded as keep. In a queue of sentences or entity
spans (:mod:`cartomap.curation.levels`) an item's ``gold`` and a relabel's ``label`` are the whole
sentence's tag list as one value (:func:`cartomap.curation.tags.encode_tags`): as many tags as the
sentence has words, each a tag of the run, keeping the queue's scheme (refused in one line otherwise). ``origin`` says where it came from
(``app``, ``cli``, ``labelstudio``, ``argilla``).

Assignment: each item wants ``per_item`` (k) annotators. The next item for annotator A is the first
item in queue order (highest score first) that A has not decided and that fewer than k annotators
have decided. An item never takes more than k annotators: a decision of a (k+1)th annotator (two who
opened the same item at once, a third on the command line, an import) is refused in one line, checked
inside the decision's immediate transaction (:meth:`QueueDB.record_many`); an annotator who decided
the item may always change their decision.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import REVIEW_DECISIONS
from cartomap.curation.sources import WORD
from cartomap.curation.tags import check_tags, decode_tags, encode_tags
from cartomap.errors import CartomapError
from cartomap.runs.sqlite import BASE_SCHEMA, SQLiteStore, clean_name, retry_busy, undo_schema
from cartomap.team.roles import name_key

DECISIONS = REVIEW_DECISIONS  # keep, relabel, remove, unsure
ORIGINS = ("app", "cli", "labelstudio", "argilla", "import")
DEFAULT_PER_ITEM = 2
MAX_NOTE = 2000
MAX_GUIDELINES = 20_000
RELABEL_PREFIX = "relabel:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    item_id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    score REAL,
    gold TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id TEXT NOT NULL REFERENCES items(item_id),
    annotator TEXT NOT NULL REFERENCES annotators(name),
    decision TEXT NOT NULL CHECK (decision IN ('keep', 'relabel', 'remove', 'unsure')),
    label TEXT,
    note TEXT NOT NULL DEFAULT '',
    origin TEXT NOT NULL DEFAULT 'app',
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_item_annotator ON decisions (item_id, annotator);
CREATE INDEX IF NOT EXISTS decisions_annotator ON decisions (annotator);
"""

LATEST_COLUMNS = [
    "decision_id",
    "item_id",
    "annotator",
    "decision",
    "label",
    "note",
    "origin",
    "created_at",
    "first_id",
]


def as_value(decision: str, label: str | None = None) -> str:
    """A decision in the agreement table's form: keep, remove, unsure or ``relabel:<label>``."""
    return f"{RELABEL_PREFIX}{label}" if decision == "relabel" else decision


def from_value(value: str) -> tuple[str, str | None]:
    """(decision, label) of a value written by :func:`as_value`."""
    if value.startswith(RELABEL_PREFIX):
        return "relabel", value[len(RELABEL_PREFIX) :]
    return value, None


def check_guidelines(text: Any) -> str:
    """A queue's guidelines: text of at most :data:`MAX_GUIDELINES` characters, line ends made ``\n``,
    the ends stripped."""
    text = str(text or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if len(text) > MAX_GUIDELINES:
        raise CartomapError(f"guidelines have at most {MAX_GUIDELINES:,} characters, got {len(text):,}")
    return text


def _per_item(con: sqlite3.Connection) -> int:
    """k of the queue whose database ``con`` is open on (:data:`DEFAULT_PER_ITEM` when unset)."""
    row = con.execute("SELECT value FROM meta WHERE key = 'per_item'").fetchone()
    return DEFAULT_PER_ITEM if row is None else int(json.loads(row[0]) or DEFAULT_PER_ITEM)


class QueueDB(SQLiteStore):
    """The decisions of one review queue. Cheap to make; every method opens its own connection."""

    SCHEMA = BASE_SCHEMA + _SCHEMA + undo_schema("decisions")
    TABLES = frozenset({"meta", "annotators", "items", "decisions", "undos"})
    EVENTS, ITEM = "decisions", "item_id"

    def __init__(
        self,
        path: str | Path,
        label_names: Sequence[str] | None = None,
        per_item: int | None = None,
        level: str | None = None,
        scheme: str | None = None,
    ):
        super().__init__(path)
        if per_item is not None and (int(per_item) != per_item or int(per_item) < 1):
            raise CartomapError(f"annotators per item must be a whole number >= 1, got {per_item!r}")

        meta: dict[str, Any] = {}
        if label_names is not None:
            meta["label_names"] = [str(x) for x in label_names]
        if per_item is not None:
            meta["per_item"] = int(per_item)
        if level is not None:
            meta["level"], meta["scheme"] = str(level), scheme
        retry_busy(lambda: self.setup(meta))

    # -- setup -------------------------------------------------------------
    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(self.meta("label_names") or ())

    @property
    def per_item(self) -> int:
        """k: how many annotators each item wants."""
        return int(self.meta("per_item") or DEFAULT_PER_ITEM)

    @property
    def level(self) -> str:
        """What an item is (:data:`cartomap.curation.sources.LEVELS`): ``word`` (a word or an example) for a
        queue made before levels."""
        return str(self.meta("level") or WORD)

    @property
    def tag_lists(self) -> bool:
        """Whether an item is decided as a sentence's tag list (a queue of sentences or spans)."""
        return self.level != WORD

    @property
    def scheme(self) -> str | None:
        """The BIO scheme a relabel's tags keep (IOB1, IOB2), or None."""
        return self.meta("scheme") or None

    @property
    def guidelines(self) -> str:
        """The queue's guidelines for its annotators ("" when it has none)."""
        return str(self.meta("guidelines") or "")

    def creator(self) -> str | None:
        """Who made the queue (team mode keeps it), or None: made without a team, or before who made
        what was kept."""
        return next((str(w["by"]) for w in self.writes("created") if w.get("by")), None)

    def may_edit_guidelines(self, by: str | None) -> bool:
        """Whether ``by`` may edit the guidelines: the queue's creator; anyone for a queue made without a
        team (no one is known to have made it)."""
        creator = self.creator()
        return creator is None or (by is not None and name_key(by) == name_key(creator))

    def set_guidelines(self, text: str, by: str | None = None) -> str:
        """Replace the guidelines (kept as written: lines and all, ends stripped), noting who did it;
        returns them. Only the queue's creator may (:meth:`may_edit_guidelines`): CartomapError else."""
        text = check_guidelines(text)
        if not self.may_edit_guidelines(by):
            raise CartomapError(
                f"only {self.creator()}, who made review queue {self.path.parent.name!r}, can edit its guidelines"
            )
        self.write(
            lambda con: con.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('guidelines', ?)", (json.dumps(text),)
            )
        )
        self.log_write("guidelines", by, characters=len(text))
        return text

    def set_per_item(self, k: int) -> None:
        if int(k) != k or int(k) < 1:
            raise CartomapError(f"annotators per item must be a whole number >= 1, got {k!r}")

        self.write(
            lambda con: con.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('per_item', ?)", (json.dumps(int(k)),)
            )
        )

    def load_items(self, frame: pd.DataFrame) -> int:
        """Add the rows of ``frame`` (id, position, score, gold) as items; known items are left as they
        are. Returns how many are new."""
        records = [
            (
                str(r["id"]),
                int(r["position"]),
                None if r.get("score") is None or pd.isna(r.get("score")) else float(r["score"]),
                str(r["gold"]),
            )
            for r in frame.to_dict("records")
        ]

        def write(con: sqlite3.Connection) -> int:
            before = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
            con.executemany(
                "INSERT OR IGNORE INTO items (item_id, position, score, gold) VALUES (?, ?, ?, ?)", records
            )
            return con.execute("SELECT COUNT(*) FROM items").fetchone()[0] - before

        return self.write(write)

    # -- items -------------------------------------------------------------
    def items(self) -> pd.DataFrame:
        """item_id, position, score, gold: every item in queue order."""
        return self.frame(
            "SELECT item_id, position, score, gold FROM items ORDER BY position, item_id",
            ["item_id", "position", "score", "gold"],
        )

    def next_items(self, annotator: str, limit: int = 1) -> list[str]:
        """The ids of the next items for ``annotator``: not decided by them, fewer than k annotators
        so far, in queue order (see the module docstring)."""
        name = clean_name(annotator)
        query = f"""
            SELECT i.item_id FROM items i
            WHERE NOT EXISTS (SELECT 1 FROM {self.live} d WHERE d.item_id = i.item_id AND d.annotator = :name)
              AND (SELECT COUNT(DISTINCT d.annotator) FROM {self.live} d WHERE d.item_id = i.item_id) < :k
            ORDER BY i.position, i.item_id
            LIMIT :limit
        """
        k = self.per_item
        with self.connect() as con:
            return [str(r[0]) for r in con.execute(query, {"name": name, "k": k, "limit": int(limit)})]

    # -- decisions ---------------------------------------------------------
    def _checked(
        self, annotator: str, decision: str, label: str | None, note: str | None, origin: str
    ) -> tuple[str, str, str | None, str, str]:
        """(annotator, decision, label, note, origin) validated; CartomapError naming what is wrong."""
        name = clean_name(annotator)
        if decision not in DECISIONS:
            raise CartomapError(f"unknown decision {decision!r}: expected one of {', '.join(DECISIONS)}")
        if origin not in ORIGINS:
            raise CartomapError(f"unknown origin {origin!r}: expected one of {', '.join(ORIGINS)}")
        note = " ".join(str(note or "").split())
        if len(note) > MAX_NOTE:
            raise CartomapError(f"a note has at most {MAX_NOTE} characters")
        if decision == "relabel":
            if label is None or (isinstance(label, float) and np.isnan(label)) or not str(label).strip():
                raise CartomapError("a relabel needs the new label")
            label = str(label).strip()
            names = self.label_names
            if self.tag_lists:  # the sentence's tags, every one a tag of the run, in the queue's scheme
                label = encode_tags(check_tags(decode_tags(label), self.scheme, names or None))
            elif names and label not in names:
                raise CartomapError(f"unknown label {label!r}: expected one of {', '.join(names)}")
        else:
            label = None
        return name, decision, label, note, origin

    def record(
        self,
        annotator: str,
        item_id: str,
        decision: str,
        label: str | None = None,
        note: str = "",
        origin: str = "app",
    ) -> int:
        """Append one decision, committed at once; returns its id. A new annotator name is registered.

        ``relabel`` needs ``label``, one of the queue's label names; a relabel to the item's gold label
        is recorded as ``keep``. The other decisions take no label.
        """
        return self.record_many([(annotator, item_id, decision, label, note)], origin=origin)[0]

    def record_many(self, rows: Sequence[tuple[Any, ...]], origin: str = "import") -> list[int]:
        """Append decisions ``(annotator, item_id, decision, label, note)`` in one transaction: all of them
        or, when one is invalid (CartomapError naming it), none. Returns their ids."""
        checked = []
        for k, (annotator, item_id, decision, label, note) in enumerate(rows):
            try:
                name, decision, label, note, origin = self._checked(annotator, decision, label, note, origin)
            except CartomapError as err:
                where = f"decision {k + 1} (item {item_id!r}): " if len(rows) > 1 else ""
                raise CartomapError(f"{where}{err}") from None
            checked.append((name, str(item_id), decision, label, note))

        tag_lists = self.tag_lists

        def write(con: sqlite3.Connection) -> list[int]:
            wanted = sorted({item_id for _, item_id, *_ in checked})
            if len(wanted) > 500:  # a whole file of imports: read every item (SQLite caps the ? per query)
                gold = dict(con.execute("SELECT item_id, gold FROM items").fetchall())
            else:
                marks = ", ".join("?" * len(wanted))
                query = f"SELECT item_id, gold FROM items WHERE item_id IN ({marks})"
                gold = dict(con.execute(query, wanted).fetchall())
            now, out = time.time(), []
            k = _per_item(con)
            for name, item_id, decision, label, note in checked:
                if item_id not in gold:
                    raise CartomapError(f"no item {item_id!r} in the review queue {self.path.parent.name!r}")
                if (
                    label is not None
                    and tag_lists
                    and len(decode_tags(label)) != len(decode_tags(gold[item_id]))
                ):
                    raise CartomapError(
                        f"{len(decode_tags(label))} tags for item {item_id!r}, whose sentence has "
                        f"{len(decode_tags(gold[item_id]))} words"
                    )
                self._check_room(con, k, name, item_id)
                if decision == "relabel" and label == gold[item_id]:
                    decision, label = "keep", None
                con.execute("INSERT OR IGNORE INTO annotators (name, created_at) VALUES (?, ?)", (name, now))
                cur = con.execute(
                    "INSERT INTO decisions (item_id, annotator, decision, label, note, origin, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (item_id, name, decision, label, note, origin, now),
                )
                out.append(int(cur.lastrowid))
            return out

        return self.write(write) if checked else []

    def _check_room(self, con: sqlite3.Connection, k: int, name: str, item_id: str) -> None:
        """CartomapError (one line) when ``name`` would be a (k+1)th annotator of ``item_id``: the others
        with a live decision on it number k already. Read in the writing transaction, so two annotators
        deciding at once cannot both pass."""
        others = [
            str(r[0])
            for r in con.execute(
                f"SELECT DISTINCT annotator FROM {self.live} WHERE item_id = ? AND annotator != ? ORDER BY annotator",
                (item_id, name),
            )
        ]
        if len(others) >= k:
            raise CartomapError(
                f"{item_id!r} of review queue {self.path.parent.name!r} has its {k} annotator(s) already "
                f"({', '.join(others)}): {name}'s decision is not recorded; take the next example"
            )

    def history(self) -> pd.DataFrame:
        """Every decision ever recorded, oldest first, with ``undone`` (True for a decision undone)."""
        columns = ["id", "item_id", "annotator", "decision", "label", "note", "origin", "created_at"]
        query = (
            f"SELECT {', '.join(columns)}, id IN (SELECT event_id FROM undos) AS undone FROM decisions "
            "ORDER BY id"
        )
        frame = self.frame(query, [*columns, "undone"])
        frame["undone"] = frame["undone"].astype(bool)
        return frame

    def latest(self) -> pd.DataFrame:
        """The latest live decision (not undone) per (item, annotator), ordered by when that annotator
        first decided the item. Columns: :data:`LATEST_COLUMNS`."""
        query = f"""
            SELECT d.id AS decision_id, d.item_id, d.annotator, d.decision, d.label, d.note, d.origin,
                   d.created_at, f.first_id
            FROM {self.live} d
            JOIN (SELECT item_id, annotator, MAX(id) AS last_id, MIN(id) AS first_id
                  FROM {self.live} GROUP BY item_id, annotator) f ON d.id = f.last_id
            ORDER BY f.first_id
        """
        return self.frame(query, LATEST_COLUMNS)

    def decisions_of(self, annotator: str) -> pd.DataFrame:
        """``annotator``'s live decisions, one per item, the most recent first (what they can undo or
        change). Columns: :data:`LATEST_COLUMNS`."""
        latest = self.latest()
        mine = latest[latest["annotator"] == clean_name(annotator)]
        return mine.sort_values("decision_id", ascending=False).reset_index(drop=True)

    def long_table(self) -> pd.DataFrame:
        """item, annotator, value (keep | remove | unsure | relabel:<label>): the agreement table."""
        latest = self.latest()
        values = [as_value(d, lab) for d, lab in zip(latest["decision"], latest["label"], strict=True)]
        return pd.DataFrame(
            {"item": latest["item_id"].astype(str), "annotator": latest["annotator"], "value": values},
            columns=["item", "annotator", "value"],
        )

    def decision_of(self, annotator: str, item_id: str) -> dict[str, Any] | None:
        """``annotator``'s latest decision on ``item_id`` (decision, label, note), or None."""
        with self.connect() as con:
            row = con.execute(
                f"SELECT decision, label, note FROM {self.live} WHERE annotator = ? AND item_id = ?"
                " ORDER BY id DESC LIMIT 1",
                (clean_name(annotator), str(item_id)),
            ).fetchone()
        return None if row is None else dict(row)

    def last_decided(self, annotator: str) -> str | None:
        """The item of ``annotator``'s most recent live decision (to change or undo it), or None."""
        with self.connect() as con:
            row = con.execute(
                f"SELECT item_id FROM {self.live} WHERE annotator = ? ORDER BY id DESC LIMIT 1",
                (clean_name(annotator),),
            ).fetchone()
        return None if row is None else str(row[0])

    def progress(self) -> dict[str, Any]:
        """items, complete (k or more annotators), partial (1..k-1), undecided (none), per_item (k),
        by_annotator ({name: items decided})."""
        items = self.items()
        latest = self.latest()
        per_item = latest.groupby("item_id")["annotator"].nunique() if len(latest) else pd.Series(dtype=int)
        counts = per_item.reindex(items["item_id"]).fillna(0).astype(int).to_numpy()
        k = self.per_item
        return {
            "items": int(len(items)),
            "per_item": k,
            "complete": int((counts >= k).sum()),
            "partial": int(((counts > 0) & (counts < k)).sum()),
            "undecided": int((counts == 0).sum()),
            "by_annotator": {
                str(a): int(n) for a, n in latest["annotator"].value_counts().sort_index().items()
            },
            "fraction": float(np.mean(counts >= k)) if len(counts) else 0.0,
        }
