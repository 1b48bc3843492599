"""The one state machine of long work: runs, experiments and tasks all move through it.

Saved states (in a ``status.json``, written atomically)::

    queued --> running --> done
       |          |------> failed
       |          '------> cancelled (a cancel flag was seen between steps)
       '---------------->  cancelled (cancelled before it started)

The states are :class:`State`, a ``str``-valued enum: ask it (``State.DONE``, :func:`is_active`, ...),
never spell a state's name elsewhere (``tests/test_architecture.py`` checks it). Three more states
are *derived* when the status is read, never saved:

* ``interrupted``: saved ``running``, but no process holds the lock any more (killed, crashed);
  saved ``queued`` with the lock held reads ``running`` (its process is preparing the work);
* ``exited``: saved ``queued`` with the pid of the job started for it, and that process is gone
  before it took the lock (it failed while starting);
* ``damaged``: the status file exists but cannot be read (not JSON, not an object, no state):
  what went wrong is in ``error``; the next :meth:`StatusFolder.set_status` writes a fresh one.

:class:`StatusFolder` gives runs and experiments (a folder with a status file, a lock and a cancel
flag) the same reading, writing, locking and cancelling; :class:`cartomap.runs.tasks.Task` uses it
for the tasks of a run. :class:`Throttle` is the one rate limit of status writes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from enum import Enum
from pathlib import Path
from typing import Any

from cartomap.errors import RunError
from cartomap.io import atomic_write_json, is_locked, lock_file, read_json
from cartomap.runs import layout


class State(str, Enum):
    """The state of a piece of long work, saved (``status.json`` holds its value) or derived on reading.

    A ``str``: ``State.DONE == "done"``, and JSON, parquet and labels hold the plain string, so status
    files written before the type existed read the same. Ask this class, never spell a state."""

    def __str__(self) -> str:  # "done" in labels and f-strings, not "State.DONE" (enum.StrEnum's, 3.11+)
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: Derived: saved running, but no process holds the lock any more.
    INTERRUPTED = "interrupted"
    #: Derived: saved queued with the pid of its job, and that process is gone before it took the lock.
    EXITED = "exited"
    #: Derived: the status file cannot be read (see the module docstring).
    DAMAGED = "damaged"
    #: A reader's word for a folder it cannot read at this moment (being written or deleted); never saved.
    UNKNOWN = "unknown"


SAVED_STATES = (State.QUEUED, State.RUNNING, State.DONE, State.FAILED, State.CANCELLED)
#: Work that is under way (or about to be): pages poll it, buttons offer Cancel.
ACTIVE_STATES = (State.QUEUED, State.RUNNING)
#: Work that stopped before it was done: buttons offer Resume.
RESUMABLE_STATES = (State.CANCELLED, State.FAILED, State.INTERRUPTED, State.EXITED)
#: Work that stopped without finishing: by failure (or its process dying), a cancel, or a damaged status.
STOPPED_STATES = RESUMABLE_STATES + (State.DAMAGED,)
#: A status file that cannot be read (see the module docstring).
DAMAGED = State.DAMAGED
STATES = SAVED_STATES + (State.INTERRUPTED, State.EXITED, DAMAGED)


def as_state(value: Any) -> State | None:
    """``value`` (a state's string, as a status file holds it) as a :class:`State`; None for anything else."""
    try:
        return State(value)
    except ValueError:
        return None


def is_active(state: Any) -> bool:
    """Whether work in ``state`` is under way or about to be (queued or running)."""
    return state in ACTIVE_STATES


def is_done(state: Any) -> bool:
    """Whether work in ``state`` finished (done)."""
    return state == State.DONE


def is_resumable(state: Any) -> bool:
    """Whether work in ``state`` stopped before it was done and can go on (cancelled, failed,
    interrupted, exited)."""
    return state in RESUMABLE_STATES


def is_stopped(state: Any) -> bool:
    """Whether work in ``state`` stopped without finishing: resumable, or damaged."""
    return state in STOPPED_STATES


def pid_alive(pid: Any) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux /proc; elsewhere: exists)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def derive_state(status: dict[str, Any], locked: bool | None = None) -> State | Any:
    """The state a reader should see: the saved one, ``interrupted``, ``exited`` or ``running``
    (module docstring), as a :class:`State` (a value that is none is returned as it is).

    ``locked``: whether a process holds the work's lock (None: unknown, so ``running`` stays). Saved
    ``queued`` with its lock held reads ``running``: its process took the work and is preparing it
    (loading a model, reading data) before its first progress write."""
    saved = status.get("state", State.QUEUED)
    state = as_state(saved)
    if state is None:
        return saved
    if state == State.RUNNING and locked is False:
        return State.INTERRUPTED
    if state == State.QUEUED and locked:
        return State.RUNNING
    if state == State.QUEUED and status.get("pid") is not None and not pid_alive(status["pid"]):
        return State.EXITED
    return state


class StatusFolder:
    """A status file, a lock file and a cancel flag: the state of one piece of long work.

    Subclasses set ``path`` (the folder) and may rename the three files; ``status()`` returns the
    saved status with the derived state.
    """

    path: Path
    STATUS_NAME = layout.STATUS
    LOCK_NAME = "state.lock"
    CANCEL_NAME = layout.CANCEL
    BUSY = "is busy in another process"

    @property
    def status_path(self) -> Path:
        return self.path / self.STATUS_NAME

    @property
    def lock_path(self) -> Path:
        return self.path / self.LOCK_NAME

    @property
    def cancel_path(self) -> Path:
        return self.path / self.CANCEL_NAME

    def saved_status(self) -> dict[str, Any]:
        """The saved status; ``{"state": "damaged", "error": ...}`` when the file cannot be read as one
        (a missing file raises FileNotFoundError: the folder is being made or deleted)."""
        try:
            status = read_json(self.status_path)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as err:
            return {
                "state": DAMAGED,
                "error": f"{self.STATUS_NAME} cannot be read ({type(err).__name__}: {err})",
            }
        if not isinstance(status, dict) or status.get("state") not in SAVED_STATES:
            found = status.get("state") if isinstance(status, dict) else type(status).__name__
            return {"state": DAMAGED, "error": f"{self.STATUS_NAME} holds no valid state (found {found!r})"}
        status["state"] = State(status["state"])
        return status

    def status(self) -> dict[str, Any]:
        status = self.saved_status()
        status["state"] = derive_state(status, self.is_locked())
        return status

    def set_status(self, **fields: Any) -> dict[str, Any]:
        status = self.saved_status() if self.status_path.exists() else {}
        if status.get("state") == DAMAGED:
            status = {}  # start afresh: the fields given are all that can be trusted
        status.update(fields, updated_at=time.time())
        if status.get("state") not in SAVED_STATES:
            raise ValueError(f"unknown state {status.get('state')!r}; expected one of {SAVED_STATES}")
        atomic_write_json(self.status_path, status)
        return status

    @property
    def state(self) -> State:
        return self.status()["state"]

    def is_locked(self) -> bool:
        return is_locked(self.lock_path)

    def acquire_lock(self):
        """Hold an exclusive lock for as long as the returned handle is open (released if the process dies)."""
        try:
            return lock_file(self.lock_path)
        except BlockingIOError as err:
            raise RunError(f"{self.describe()} {self.BUSY}") from err

    def describe(self) -> str:
        return f"{type(self).__name__.lower()} {self.path.name}"

    @property
    def log_path(self) -> Path:
        return self.path / layout.LOG

    @property
    def job_log_path(self) -> Path:
        """Output of the background job working on it."""
        return self.path / layout.JOB_LOG

    def log(self, message: str, warn: bool = True) -> None:
        """Append a time-stamped line to the human-readable log. Best effort: a log that cannot be
        written (a full disk, a read-only store) is said on stderr (unless ``warn`` is False: the
        failure being logged is said anyway), never raised, so it cannot stand between a failure and
        its status."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(f"{stamp} {message}\n")
        except OSError as err:
            if warn:
                print(
                    f"cartomap: warning: {self.log_path} not written ({err.strerror or err})", file=sys.stderr
                )

    @contextlib.contextmanager
    def work(self):
        """Hold the lock for a block of work; an exception in it is logged with its traceback and
        saved as state ``failed`` with its message, then raised again. RunError when busy."""
        handle = self.acquire_lock()
        try:
            yield self
        except Exception as err:
            self.record_failure(err)
            raise
        finally:
            handle.close()

    def record_failure(self, err: BaseException) -> None:
        """Save state ``failed`` with ``err``'s message first, then log the traceback (best effort).
        When even the status cannot be written (the disk is full), RunError says so in one line, with
        the failure itself; the saved state then reads ``interrupted`` (its lock is released)."""
        error = f"{type(err).__name__}: {err}"
        try:
            self.set_status(state=State.FAILED, error=error)
        except OSError as status_err:
            raise RunError(
                f"{self.describe()} failed ({error}), and its {self.STATUS_NAME} could not be saved "
                f"({status_err.strerror or status_err}); it reads 'interrupted' and can be resumed"
            ) from err
        self.log("failed:\n" + traceback.format_exc(), warn=False)  # the failure itself is said

    def request_cancel(self) -> None:
        self.cancel_path.touch()

    def cancel_requested(self) -> bool:
        return self.cancel_path.exists()

    def clear_cancel(self) -> None:
        self.cancel_path.unlink(missing_ok=True)


class Throttle:
    """Pass at most one call per ``every_s`` seconds (and every forced one): status writes of a
    tight loop cost nothing measurable and a page polling once a second still sees fresh values."""

    def __init__(self, every_s: float = 1.0):
        self.every_s, self.last = every_s, 0.0

    def ready(self, force: bool = False) -> bool:
        now = time.time()
        if force or now - self.last >= self.every_s:
            self.last = now
            return True
        return False
