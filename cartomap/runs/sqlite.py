"""SQLite stores in a run folder (the review databases of WaNLI batches and of review queues).

The house pattern, written once: one connection per call (cheap, safe across threads and
processes), the busy timeout set *before* any statement that may lock, WAL journal (readers never
block the writer), ``synchronous=NORMAL`` (SQLite's advice for WAL), write transactions that take
the write lock up front (``BEGIN IMMEDIATE``) and commit at once, and one idle connection held per
file and process so closing a connection does not checkpoint and delete the WAL every time.

:class:`SQLiteStore` is the base of :class:`cartomap.wanli.review.ReviewDB` and
:class:`cartomap.curation.store.QueueDB`; :func:`database_problem` turns a locked database or a
full disk into one line for a person.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from cartomap.errors import CartomapError
from cartomap.io import disk_full, writable

BUSY_TIMEOUT_MS = 30_000
RETRY_SECONDS = 30.0  # how long a write that met "database is locked" is tried again (retry_busy)
MAX_NAME = 80  # characters of an annotator's name

T = TypeVar("T")

#: The tables every review store has: its settings (JSON values) and its annotators.
BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS annotators (name TEXT PRIMARY KEY, created_at REAL NOT NULL);
"""
#: The table of undos, and the view of the events that count (``live_<events>``).
UNDOS = "undos"


def undo_schema(events: str) -> str:
    """The schema of undoing an event of table ``events`` (a review store's decisions or actions): an undo
    is itself an event, appended to :data:`UNDOS` (which event, by whom, when); the undone event stays in
    its table, and the view ``live_<events>`` holds the events no undo names (the ones that count)."""
    return f"""
CREATE TABLE IF NOT EXISTS {UNDOS} (
    event_id INTEGER PRIMARY KEY REFERENCES {events}(id),
    annotator TEXT NOT NULL REFERENCES annotators(name),
    created_at REAL NOT NULL
);
CREATE VIEW IF NOT EXISTS live_{events} AS
    SELECT * FROM {events} WHERE id NOT IN (SELECT event_id FROM {UNDOS});
"""


_OPEN: dict[tuple[int, str], sqlite3.Connection] = {}
_OPEN_LOCK = threading.Lock()


def keep_open(path: str | Path) -> None:
    """Hold one idle connection to ``path`` for the life of this process (never used for queries)."""
    key = (os.getpid(), str(Path(path).resolve()))
    if key in _OPEN:
        return
    with _OPEN_LOCK:
        if key not in _OPEN and Path(path).exists():
            _OPEN[key] = sqlite3.connect(key[1], timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)


#: Why a database is opened read-only (:func:`read_only_reason`): its folder cannot be written, or the
#: disk is full.
READ_ONLY, FULL = "read-only", "full"


def read_only_reason(path: str | Path) -> str | None:
    """Why the existing database ``path`` must be read without writing anything, not even SQLite's
    shared-memory file beside it (which a WAL database's reader makes): :data:`READ_ONLY` when its folder
    cannot be written (a read-only copy or mount), :data:`FULL` when the disk is full and that file is
    not there already; None when it can be opened as usual."""
    path = Path(path)
    if not path.exists():
        return None
    if not writable(path.parent):
        return READ_ONLY
    if disk_full(path.parent) and not Path(f"{path}-shm").exists():
        return FULL
    return None


def read_only_uri(path: str | Path) -> str:
    """The URI that opens database ``path`` read-only and immutable: nothing is written or locked (no
    journal, no shared memory); only for a database nobody can be writing (:func:`read_only_reason`)."""
    from urllib.parse import quote

    return f"file:{quote(str(Path(path).absolute()))}?mode=ro&immutable=1"


def is_busy(err: sqlite3.OperationalError) -> bool:
    """Whether an error is another connection's lock ("database is locked", "busy")."""
    text = str(err).lower()
    return "locked" in text or "busy" in text


def set_wal(con: Any) -> None:
    """``PRAGMA journal_mode=WAL``, waiting for a lock as any other statement does: SQLite answers a
    journal-mode change that meets another connection's lock at once, without its busy handler, so two
    people opening a new database at the same moment would get "database is locked"."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if not is_busy(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def retry_busy(action: Callable[[], T], seconds: float | None = None) -> T:
    """``action()``, tried again while it fails with "database is locked" (another writer held the lock
    past the busy timeout), for up to ``seconds`` (default :data:`RETRY_SECONDS`) with a growing pause;
    the last error is raised past that. (Kept by hand: eight lines on one SQLite error; tenacity, not a
    dependency of cartomap's, would add a package for the same loop.)"""
    deadline = time.monotonic() + (RETRY_SECONDS if seconds is None else seconds)
    pause = 0.01
    while True:
        try:
            return action()
        except sqlite3.OperationalError as err:
            if not is_busy(err) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def database_problem(err: sqlite3.OperationalError, path: str | Path = "") -> str:
    """One line for a reviewer about a review database that cannot be used right now."""
    where = f" ({path})" if path else ""
    if is_busy(err):
        return (
            f"the review database{where} is busy: another reviewer is writing to it; try again in a moment "
            "(nothing recorded is lost)"
        )
    if "full" in str(err).lower():
        return (
            f"the review database{where} cannot grow: the disk is full; free some space and try again "
            "(what was recorded is kept)"
        )
    return f"the review database{where} cannot be used right now ({err})"


def clean_name(name: Any) -> str:
    """An annotator's name with its whitespace collapsed; CartomapError when empty or too long."""
    text = " ".join(str(name or "").split())
    if not text:
        raise CartomapError("an annotator needs a name")
    if len(text) > MAX_NAME:
        raise CartomapError(f"annotator names have at most {MAX_NAME} characters")
    return text


class SQLiteStore:
    """One SQLite database file. Cheap to make; every method opens its own connection.

    Subclasses set :attr:`SCHEMA` (statements separated by ``;``, starting with :data:`BASE_SCHEMA`) and :attr:`TABLES` (the tables that show the schema is there);
    :meth:`setup` creates them once, in one immediate transaction, with the first meta rows."""

    SCHEMA = ""
    TABLES: frozenset[str] = frozenset()

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def setup(self, meta: dict[str, Any] | None = None) -> None:
        """Create the schema unless it is there with every key of ``meta``; write the ``meta`` rows a
        new file lacks (JSON text; a key set already keeps its value)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        meta = dict(meta or {})
        with self.connect() as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables >= self.TABLES and all(
                con.execute("SELECT 1 FROM meta WHERE key = ?", (key,)).fetchone() is not None for key in meta
            ):
                return  # set up already: opening it writes nothing
            set_wal(con)  # persistent: set once, kept in the file
            with self.transaction(con):
                for statement in filter(str.strip, self.SCHEMA.split(";")):
                    con.execute(statement)
                for key, value in meta.items():
                    con.execute(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value))
                    )

    def meta(self, key: str) -> Any:
        """The value of meta row ``key`` (None when there is none)."""
        with self.connect() as con:
            row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row["value"])

    def log_write(self, what: str, by: str | None, **details: Any) -> None:
        """Note in meta row ``writes`` that ``by`` (None: nobody in particular, one person without a team)
        did ``what`` to this store or what it makes (created it, wrote its corrected set, imported
        decisions ...), when, and ``details`` (JSON values): the provenance of every write.
        :meth:`writes` reads them."""
        entry = {"what": what, "by": by, "at": time.time(), **details}

        def body(con: sqlite3.Connection) -> None:
            row = con.execute("SELECT value FROM meta WHERE key = 'writes'").fetchone()
            writes = [] if row is None else json.loads(row["value"])
            con.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('writes', ?)",
                (json.dumps([*writes, entry]),),
            )

        self.write(body)

    def writes(self, what: str | None = None) -> list[dict[str, Any]]:
        """The writes :meth:`log_write` noted (those of kind ``what``), oldest first."""
        return [w for w in self.meta("writes") or [] if what is None or w.get("what") == what]

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A new connection (autocommit; WAL; waits up to 30 s for a lock); closed afterwards.

        ``synchronous=NORMAL`` is SQLite's advice for WAL: a committed action survives the
        process dying; only a power cut can lose the last few. The file stays open in this
        process (:func:`keep_open`), so closing a connection does not checkpoint and delete
        the WAL each time (that made every action cost an fsync or two).

        A database that cannot be written (a read-only store, a full disk: :func:`read_only_reason`) is
        opened read-only (:func:`read_only_uri`), so reading it works; a write to it fails, on a full disk
        with SQLite's "database or disk is full".
        """
        reason = read_only_reason(self.path)
        try:
            if reason is None:
                keep_open(self.path)
                con = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            else:
                con = sqlite3.connect(read_only_uri(self.path), uri=True, isolation_level=None)
            try:
                con.row_factory = sqlite3.Row
                con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                con.execute("PRAGMA synchronous=NORMAL")
                con.execute("PRAGMA foreign_keys=ON")
                yield con
            finally:
                con.close()
        except sqlite3.OperationalError as err:
            if reason == FULL and "readonly" in str(err):  # a write on a full disk, opened read-only
                raise sqlite3.OperationalError(f"database or disk is full ({self.path})") from err
            # a full disk reads "disk I/O error" in WAL mode: said as what it is (database_problem, the CLI)
            if "full" not in str(err) and "I/O" in str(err) and disk_full(self.path):
                raise sqlite3.OperationalError(f"database or disk is full ({err}: {self.path})") from err
            raise

    @staticmethod
    @contextlib.contextmanager
    def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): the write lock is taken up front."""
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body(con)`` in one immediate transaction, committed at once; tried again while the database
        is locked past the busy timeout (:func:`retry_busy`)."""

        def attempt() -> T:
            with self.connect() as con, self.transaction(con):
                return body(con)

        return retry_busy(attempt)

    def frame(self, query: str, columns: list[str], params: Any = ()) -> pd.DataFrame:
        """The rows of ``query`` as a DataFrame with ``columns`` (kept when there are no rows)."""
        with self.connect() as con:
            rows = [dict(r) for r in con.execute(query, params)]
        return pd.DataFrame(rows, columns=columns)

    def add_annotator(self, name: str) -> str:
        """Register an annotator (nothing happens when the name exists); returns the cleaned name."""
        name = clean_name(name)
        with self.connect() as con:
            con.execute(
                "INSERT OR IGNORE INTO annotators (name, created_at) VALUES (?, ?)", (name, time.time())
            )
        return name

    def annotators(self) -> list[str]:
        with self.connect() as con:
            return [r["name"] for r in con.execute("SELECT name FROM annotators ORDER BY created_at, name")]

    # -- undo (stores whose SCHEMA has undo_schema(EVENTS)) ------------------------------------------
    #: The table of the store's events (one per click: decisions, actions) and its item column.
    EVENTS = ""
    ITEM = ""

    @property
    def live(self) -> str:
        """The view of the events that count (every event no undo names)."""
        return f"live_{self.EVENTS}"

    def undo(self, annotator: str, item: str) -> int:
        """Undo ``annotator``'s latest event on ``item`` that counts, committed at once; returns its id.

        Nothing is deleted: the undo is appended (:func:`undo_schema`), and the annotator's decision on the
        item is again their event before it, or none (the item is theirs to decide again). Only one's own
        events can be undone; CartomapError when ``annotator`` has none on ``item``."""
        name = clean_name(annotator)

        def write(con: sqlite3.Connection) -> int:
            row = con.execute(
                f"SELECT id FROM {self.live} WHERE {self.ITEM} = ? AND annotator = ? ORDER BY id DESC LIMIT 1",
                (str(item), name),
            ).fetchone()
            if row is None:
                raise CartomapError(f"{name} has no decision on {item!r} to undo")
            con.execute(
                f"INSERT INTO {UNDOS} (event_id, annotator, created_at) VALUES (?, ?, ?)",
                (int(row[0]), name, time.time()),
            )
            return int(row[0])

        return self.write(write)

    def undone(self) -> set[int]:
        """The ids of the events undone."""
        with self.connect() as con:
            return {int(r[0]) for r in con.execute(f"SELECT event_id FROM {UNDOS}")}
