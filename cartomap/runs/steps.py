"""The training loss every k steps, in the run folder while it trains (``layout.STEPS``, JSON lines).

The per-epoch records of ``history.json`` give one point an epoch; this log gives the loss *within* an
epoch, so the loss curve moves while the first epoch runs (:mod:`cartomap.analysis.curves` draws it,
smoothed). Each line is one group of k consecutive optimizer steps::

    {"epoch": 1, "step": 40, "steps_per_epoch": 200, "global_step": 40, "loss": 1.0931, "n": 4}

``epoch`` (1-based) and ``step`` (1-based within the epoch, the group's last step) place it on the curve
(``epoch - 1 + step / steps_per_epoch``); ``loss`` is the mean training loss over the group's units
(examples, words or labels); ``n`` how many steps it averages. k is at least one and at most a
:data:`POINTS_PER_EPOCH`-th of an epoch (:func:`every`).

Append-safe: lines are appended whole (one ``write`` of complete lines to a file opened for appending),
and a reader drops a last line without its newline (a writer killed mid-write) and any line that is
not a record. A resumed run continues from its last completed epoch: :func:`trim` first rewrites the log
(atomically) with only the lines of the completed epochs, so every step is in it once, in order, as in a
run that was never stopped.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from cartomap.io import atomic_write_text

#: The most points an epoch adds to the log (the log of 550k examples at batch 32 stays small).
POINTS_PER_EPOCH = 500
#: The keys of a line, in order.
KEYS = ("epoch", "step", "steps_per_epoch", "global_step", "loss", "n")


def every(steps_per_epoch: int) -> int:
    """k: how many steps a line averages, so an epoch gives at most :data:`POINTS_PER_EPOCH` lines.

    >>> every(200), every(17_000)
    (1, 34)
    """
    return max(1, math.ceil(int(steps_per_epoch) / POINTS_PER_EPOCH))


def _record(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(k in value for k in KEYS):
        return None
    if not all(isinstance(value[k], int | float) and not isinstance(value[k], bool) for k in KEYS):
        return None
    return value if math.isfinite(float(value["loss"])) else None


def read(path: str | Path) -> list[dict[str, Any]]:
    """The lines of the log at ``path`` as records, in order ([] without the file). A last line without
    its newline (being written, or its writer killed) and lines that are not records are left out."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")[:-1]  # the part after the last newline is not a complete line
    return [r for r in map(_record, lines) if r is not None]


def trim(path: str | Path, epochs_done: int) -> None:
    """Keep only the lines of the first ``epochs_done`` epochs (the ones a resumed run does not train
    again), written atomically; the log is removed when none are kept."""
    path = Path(path)
    if not path.exists():
        return
    kept = [r for r in read(path) if int(r["epoch"]) <= int(epochs_done)]
    if not kept:
        path.unlink(missing_ok=True)
        return
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


class StepLog:
    """Adds each training step's loss and appends a line every k steps (:func:`every`); lines are written
    to the file at most every ``flush_s`` seconds and by :meth:`flush`. ``path`` None: nothing is written
    (a process other than the main one)."""

    def __init__(self, path: str | Path | None, steps_per_epoch: int, flush_s: float = 1.0):
        self.path = None if path is None else Path(path)
        self.steps_per_epoch = int(steps_per_epoch)
        self.k = every(steps_per_epoch)
        self.flush_s = flush_s
        self._loss = 0.0  # loss summed over the units of the steps since the last line
        self._units = 0
        self._steps = 0
        self._lines: list[str] = []
        self._flushed = time.monotonic()

    def add(self, epoch: int, step: int, global_step: int, loss_sum: float, units: int) -> None:
        """Step ``step`` (1-based) of ``epoch`` (1-based): ``loss_sum`` summed over its ``units``."""
        if self.path is None:
            return
        self._loss += float(loss_sum)
        self._units += int(units)
        self._steps += 1
        if self._steps >= self.k or step >= self.steps_per_epoch:  # an epoch's last group may be shorter
            self._close_group(epoch, step, global_step)
        if self._lines and time.monotonic() - self._flushed >= self.flush_s:
            self.flush()

    def _close_group(self, epoch: int, step: int, global_step: int) -> None:
        if self._units > 0:
            record = {
                "epoch": int(epoch),
                "step": int(step),
                "steps_per_epoch": self.steps_per_epoch,
                "global_step": int(global_step),
                "loss": round(self._loss / self._units, 6),
                "n": self._steps,
            }
            self._lines.append(json.dumps(record) + "\n")
        self._loss, self._units, self._steps = 0.0, 0, 0

    def flush(self) -> None:
        """Append the lines made so far, whole, in one write."""
        self._flushed = time.monotonic()
        if self.path is None or not self._lines:
            return
        data = "".join(self._lines).encode("utf-8")
        self._lines = []
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
