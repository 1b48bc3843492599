"""What a status widget shows of a run, an experiment or a task: progress, durations, labels.

Pure functions of a status dict (``status.json``; see :mod:`cartomap.runs.state`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cartomap.runs.state import derive_state


def format_duration(seconds: Any) -> str:
    """12 -> '12 s', 125 -> '2 min 5 s', 7300 -> '2 h 1 min'; None -> '–'."""
    if seconds is None:
        return "–"
    s = max(0, int(round(float(seconds))))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def describe_progress(status: dict[str, Any]) -> dict[str, Any]:
    """What a progress widget shows: state, fraction done (0..1), and display strings."""
    state = derive_state(status)
    total = status.get("total_steps") or 0
    done_steps = status.get("global_step") or 0
    fraction = 1.0 if state == "done" else (min(1.0, done_steps / total) if total else 0.0)
    epochs = status.get("epochs")
    epoch = status.get("epochs_done") if state == "done" else status.get("epoch")
    loss, acc = status.get("loss"), status.get("dev_accuracy")
    step, per_epoch = status.get("step"), status.get("steps_per_epoch")
    return {
        "state": state,
        "fraction": float(fraction),
        "phase": status.get("phase") or state,
        "epoch": f"{epoch}/{epochs}" if epoch is not None and epochs else "–",
        "step": f"{step}/{per_epoch}" if step is not None and per_epoch else "–",
        "loss": f"{loss:.4f}" if isinstance(loss, (int, float)) else "–",
        "dev_accuracy": f"{acc:.1%}" if isinstance(acc, (int, float)) else "–",
        "time_left": "0 s" if state == "done" else format_duration(status.get("eta_s")),
        "device": status.get("device") or "",
        "error": status.get("error"),
        "updated": time.strftime("%H:%M:%S", time.localtime(status["updated_at"]))
        if status.get("updated_at")
        else "",
    }


def short_path(path: str) -> str:
    """A data path for a label: demo/hub names as they are, files by name, uploads by a short hash."""
    if ":" in path and not Path(path).exists():
        return path
    name = Path(path).name
    stem = name.split(".", 1)[0]
    if len(stem) == 64 and all(c in "0123456789abcdef" for c in stem):
        return f"upload {stem[:8]}…{name[64:]}"
    return name or path


def run_label(summary: dict[str, Any]) -> str:
    """One line for a run picker: name (id) · state · data · created."""
    rid = summary.get("id", "?")
    head = f"{summary['name']} ({rid})" if summary.get("name") else rid
    parts = [
        head,
        summary.get("state") or "?",
        short_path(str(summary.get("data") or "")),
        summary.get("created"),
    ]
    return " · ".join(str(p) for p in parts if p)
