"""How often a page following a job asks for its status, and when its training curves are drawn again.

Every poll of a live job panel costs the server a rerun and the browser a redraw: on a 2-core machine,
CPU taken from the training it follows. So a page asks less often while nothing it shows changes, and
draws the curves again only when they gained something to see:

* the interval (:func:`next_interval`) starts at :data:`POLL_MIN_S`, grows by :data:`POLL_GROWTH` at each
  poll that saw no change, up to :data:`POLL_MAX_S`, and is back to :data:`POLL_MIN_S` at the first poll
  that saw one;
* a change (:func:`marks`) is one of what the panel says in words: the job's state (queued -> running,
  the end), its phase (training, the recording pass, evaluating, saving) or its epoch; the step counter
  and the loss moving inside an epoch are not one (they are redrawn at each poll all the same);
* the curves' key (:func:`curves_key`) changes when the run's history gains an epoch (``history.json``
  rewritten: its modification time and size) or its step log grows by a :data:`CURVE_REDRAWS_PER_EPOCH`-th
  of an epoch (the status's global step); the curves are built and sent again only then
  (:func:`curves_due`): at once for a new epoch, for steps alone at most every :data:`CURVES_MIN_S`.

Pure functions of a status dict (``status.json``, :mod:`cartomap.runs.state`) and a file's signature.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The shortest interval between two polls, in seconds: right after the page is drawn and after a change.
POLL_MIN_S = 2.0
#: The longest interval, in seconds: a state change shows at most this long after it happened.
POLL_MAX_S = 10.0
#: How much longer each interval is than the one before while nothing changes.
POLL_GROWTH = 1.5
#: How often an epoch's step-loss curve is drawn again (at most, and at the polls).
CURVE_REDRAWS_PER_EPOCH = 4
#: The least time, in seconds, between two drawings of the curves for steps alone (an epoch: at once).
CURVES_MIN_S = 60.0


def next_interval(previous: float | None, changed: bool) -> float:
    """Seconds to the next poll: :data:`POLL_MIN_S` after a change (or at the first poll, ``previous``
    None), else ``min(POLL_MAX_S, previous x POLL_GROWTH)`` (never below :data:`POLL_MIN_S`): 2, 3, 4.5,
    6.75, 10, 10, ... while nothing changes."""
    if changed or previous is None:
        return POLL_MIN_S
    return min(POLL_MAX_S, max(POLL_MIN_S, float(previous) * POLL_GROWTH))


def marks(status: dict[str, Any] | None) -> tuple[Any, ...]:
    """What a change of the job is made of: (state, phase, epoch); two polls with equal marks saw no
    change (the step and loss moving inside an epoch are not one)."""
    if not status:
        return (None, None, None)
    return (status.get("state"), status.get("phase"), status.get("epoch"))


def file_signature(path: Path) -> tuple[int, int] | None:
    """(modification time in ns, size) of ``path``, None when it is not there: a rewritten file has
    another signature (one ``stat``, the file is not read)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size)


def curves_key(history: tuple[int, int] | None, status: dict[str, Any] | None) -> tuple[Any, ...]:
    """The key of a run's training curves: (the history file's signature, the step log's chunk), where the
    chunk is ``global_step // k`` with ``k = max(1, steps_per_epoch // CURVE_REDRAWS_PER_EPOCH)``; equal keys,
    the same curves to the eye (the figure is not built nor sent again)."""
    status = status or {}
    per_epoch = status.get("steps_per_epoch") or 0
    chunk = max(1, int(per_epoch) // CURVE_REDRAWS_PER_EPOCH)
    return (history, int(status.get("global_step") or 0) // chunk)


def curves_due(drawn: tuple[Any, ...], key: tuple[Any, ...], age_s: float) -> bool:
    """Whether curves drawn ``age_s`` seconds ago with key ``drawn`` are to be drawn again for ``key``
    (both :func:`curves_key`): True when the history changed (a new epoch), or when only the step chunk
    moved and ``age_s >= CURVES_MIN_S``; False for an equal key."""
    if key == drawn:
        return False
    return key[0] != drawn[0] or age_s >= CURVES_MIN_S
