"""What a status widget shows of a run, an experiment or a task: progress, durations, labels, phases.

Pure functions of a status dict (``status.json``; see :mod:`cartomap.runs.state`), and :class:`Phase`,
the step of its work a status names beside its state (``status["phase"]``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cartomap.config import Valued
from cartomap.runs.state import State, derive_state, is_active


class Phase(Valued):
    """The step a piece of long work is at, saved as ``status["phase"]`` beside its state and shown after
    it ("running · dev"). A ``str`` that is its value in JSON, labels and f-strings (:class:`Valued`), so
    status files written before the type existed read the same. Ask this class, never spell a phase (an
    architecture test); a finished or cancelled job's phase is its :class:`~cartomap.runs.state.State`."""

    def of(self, k: int, n: int, detail: str = "") -> str:
        """This phase at item k of n, then ``detail`` after a colon: ``Phase.TEST.of(1, 2)`` is "test 1/2"."""
        text = f"{self.value} {k}/{n}"
        return f"{text}: {detail}" if detail else text

    # a training run (the loop and the Trainer callback)
    TRAIN = "train"  # training steps
    EVAL_PASS = "eval-pass"  # the eval-mode pass over the training set that records the map
    DEV = "dev"  # evaluating on the dev set
    TEST = "test"  # evaluating on test set k of n (:meth:`of`)
    SAVING = "saving"  # writing the model and the map
    CHECKPOINT = "checkpoint"  # scoring saved checkpoint k of n (:meth:`of`)
    RESTARTING = "restarting"  # starting again as the CPUs' load changed (runs/cpu.py)
    # an experiment (the runner)
    STARTING = "starting"
    TRAINING = "training"  # one run at a time
    WAITING = "waiting"  # for a run another process trains
    TRAINING_IN_PARALLEL = "training in parallel"
    FINALIZING = "finalizing"
    # a WaNLI batch: generation, filtering, exemplar groups
    LOADING_MODEL = "loading the model"
    GENERATING = "generating"
    STOPPED = "stopped"  # halted between chunks, what was generated kept
    MAX_VARIABILITY = "max variability"
    HEURISTICS = "heuristics"
    EMBEDDINGS = "embeddings"
    COLLECTING = "collecting"
    # a projection of a run's embeddings
    FITTING = "fitting"


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


ESTIMATING = "estimating…"  # what time-left says before enough steps were measured
MIN_ETA_STEPS = 5  # steps timed (after the first) before time left is estimated


class StepClock:
    """Time left of a training job from its measured steps only.

    The clock starts when the first step of this process ends: start-up (libraries, data, model) and
    the first step's warm-up are not work that repeats, and counting them made the first estimates
    several times too long. Until :data:`MIN_ETA_STEPS` steps were timed there is no estimate (None).
    Steps are global steps; ``total_steps`` the job's last one."""

    def __init__(self, total_steps: int, now: Callable[[], float] = time.monotonic):
        self.total_steps, self.now = int(total_steps), now
        self.first: tuple[int, float] | None = None  # (global step, time) when the first step ended

    def eta_s(self, global_step: int) -> float | None:
        """Seconds left after ``global_step`` steps (None while too few steps were measured)."""
        t = self.now()
        if self.first is None:
            self.first = (int(global_step), t)
            return None
        timed = int(global_step) - self.first[0]
        if timed < MIN_ETA_STEPS:
            return None
        left = max(self.total_steps - int(global_step), 0)
        return round((t - self.first[1]) / timed * left, 1)


def time_left(status: dict[str, Any], state: str) -> str:
    """Time left as shown: "0 s" when done, the estimate, "estimating…" while an active job has none."""
    if state == State.DONE:
        return "0 s"
    eta = status.get("eta_s")
    if eta is None:
        return ESTIMATING if is_active(state) else "–"
    return format_duration(eta)


def state_text(state: str, phase: Any = None) -> str:
    """The state, then the phase when it says more: "running · dev"; "done" (never "done · done")."""
    phase = str(phase or "").strip()
    return f"{state} · {phase}" if phase and phase != state else str(state)


def describe_progress(status: dict[str, Any]) -> dict[str, Any]:
    """What a progress widget shows: state, fraction done (0..1), and display strings."""
    state = derive_state(status)
    total = status.get("total_steps") or 0
    done_steps = status.get("global_step") or 0
    fraction = 1.0 if state == State.DONE else (min(1.0, done_steps / total) if total else 0.0)
    epochs = status.get("epochs")
    epoch = status.get("epochs_done") if state == State.DONE else status.get("epoch")
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
        "time_left": time_left(status, state),
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
