"""Repairing a damaged run: what can be rebuilt from what the run still holds, and what cannot.

* an unreadable metrics file is computed again from the recorded dynamics;
* an unreadable or missing status is written afresh from the run's history: ``done`` when every
  epoch was recorded and the final model saved, else ``cancelled`` (the run resumes with
  ``cartomap train --run ID``, from its last resume point);
* a temporary file or folder of a write that never finished (a process killed while it wrote: the names of
  :func:`cartomap.io.is_temporary`) is removed, unless it was written in the last
  :data:`TEMPORARY_AGE` seconds (a write that may still be going on: named, and kept);
* a missing or unreadable config.json, data copy or dynamics file cannot be rebuilt (the config
  holds the label names and the data fingerprints): the report says so, and removing the run
  (``cartomap delete``) or training the same config on the same data again (which restores a lost
  config.json) is the way out.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from cartomap.config import MAIN_METRICS
from cartomap.errors import RunError
from cartomap.io import is_temporary
from cartomap.runs import layout
from cartomap.runs.state import DAMAGED, State
from cartomap.runs.store import Run

#: A temporary file younger than this (seconds) may belong to a write still going on: repair keeps it.
TEMPORARY_AGE = 60.0


@dataclass
class RepairReport:
    fixed: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    #: what was found and left alone on purpose (a temporary file of a write that may be going on)
    notes: list[str] = field(default_factory=list)


def temporaries(folder: Path) -> list[Path]:
    """The temporary files and folders of atomic writes under ``folder`` (:func:`cartomap.io.is_temporary`;
    a temporary folder's own files are not listed)."""
    found = []
    for parent, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            if is_temporary(name):
                found.append(Path(parent) / name)
        folders[:] = [name for name in folders if not is_temporary(name)]
    return sorted(found)


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def remove_temporaries(folder: Path, report: RepairReport, now: float | None = None) -> None:
    """Remove the temporary files and folders under ``folder`` (:func:`temporaries`) older than
    :data:`TEMPORARY_AGE` seconds (what a killed write left), each said in ``report.fixed``; a younger one
    is kept and said in ``report.notes``."""
    now = time.time() if now is None else now
    for path in temporaries(folder):
        try:
            age, size = now - path.stat().st_mtime, _size(path)
        except FileNotFoundError:
            continue  # its write just finished
        shown = path.relative_to(folder)
        if age < TEMPORARY_AGE:
            report.notes.append(f"kept {shown}: written {age:.0f} s ago, a write may still be going on")
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        report.fixed.append(f"removed {shown} ({size / 1024**2:.1f} MB), left by a write that never finished")


def _status_from_history(run: Run) -> dict:
    history = run.history()
    epochs = run.config.train.epochs
    model_saved = (run.model_dir / "config.json").exists() or any(run.model_dir.glob("*.safetensors"))
    if history and len(history) >= epochs and model_saved:
        return {"state": State.DONE, "phase": State.DONE, "epochs_done": len(history)}
    return {
        "state": State.CANCELLED,
        "epochs_done": len(history),
        "error": "status rewritten by `cartomap repair`; train again to resume",
    }


def repair_run(run: Run) -> RepairReport:
    """Fix what can be fixed in ``run`` (module docstring); refused while a process works on it."""
    if run.is_locked():
        raise RunError(f"run {run.id} is being trained right now: repair it when it stops")
    report = RepairReport()
    remove_temporaries(run.path, report)
    try:
        _ = run.info
    except RunError as err:
        report.remaining.append(str(err).split(": ", 1)[1].replace(run.REMEDY, ""))
        return report
    try:
        status = run.saved_status()
    except FileNotFoundError:
        status = {"state": DAMAGED}
    if status.get("state") == DAMAGED:
        try:
            fresh = _status_from_history(run)
        except (OSError, ValueError, RunError) as err:
            report.remaining.append(f"{layout.STATUS} cannot be rebuilt: {layout.HISTORY} unreadable ({err})")
        else:
            run.set_status(**fresh)
            report.fixed.append(f"{layout.STATUS} written afresh (state {fresh['state']})")
    for problem in run.check():
        if problem.startswith(layout.STATUS):
            continue
        if "can be recomputed from the dynamics" in problem:
            name = problem.split(" ", 1)[0]
            source = MAIN_METRICS if name == layout.METRICS else name.split("_", 1)[1].rsplit(".", 1)[0]
            try:
                run.recompute_metrics(source, reason=problem.split(";")[0])
            except RunError as err:
                report.remaining.append(str(err))
            else:
                report.fixed.append(f"{name} recomputed from the dynamics")
        else:
            report.remaining.append(problem)
    from cartomap.runs.groups import damaged_groups

    for path in damaged_groups(run):  # a listing leaves them out: say them here, with how to mend
        report.remaining.append(
            f"{path.relative_to(run.path)}: a damaged group file (not a JSON object with its ids); delete it"
        )
    return report
