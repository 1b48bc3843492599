"""Repairing a damaged run: what can be rebuilt from what the run still holds, and what cannot.

* an unreadable metrics file is computed again from the recorded dynamics;
* an unreadable or missing status is written afresh from the run's history: ``done`` when every
  epoch was recorded and the final model saved, else ``cancelled`` (the run resumes with
  ``cartomap train --run ID``, from its last resume point);
* a missing or unreadable config.json, data copy or dynamics file cannot be rebuilt (the config
  holds the label names and the data fingerprints): the report says so, and removing the run
  (``cartomap delete``) or training the same config on the same data again (which restores a lost
  config.json) is the way out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cartomap.errors import RunError
from cartomap.runs import layout
from cartomap.runs.state import DAMAGED, State
from cartomap.runs.store import Run


@dataclass
class RepairReport:
    fixed: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)


def _status_from_history(run: Run) -> dict:
    history = run.history()
    epochs = run.config.train.epochs
    model_saved = (run.model_dir / "config.json").exists() or any(run.model_dir.glob("*.safetensors"))
    if history and len(history) >= epochs and model_saved:
        return {"state": State.DONE, "phase": "done", "epochs_done": len(history)}
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
            source = "train" if name == layout.METRICS else name.split("_", 1)[1].rsplit(".", 1)[0]
            try:
                run.recompute_metrics(source, reason=problem.split(";")[0])
            except RunError as err:
                report.remaining.append(str(err))
            else:
                report.fixed.append(f"{name} recomputed from the dynamics")
        else:
            report.remaining.append(problem)
    return report
