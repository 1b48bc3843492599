"""Pure logic behind the dashboard's training form and run-status widgets (no Streamlit here).

* :func:`preview_table` and :func:`guess_columns`: the first rows of a dataset, before any
  column mapping, and a first guess at that mapping;
* :func:`build_run_config`: form values -> a validated :class:`RunConfig` (raises
  :class:`CartomapError` with a message for the user);
* :func:`effective_state`, :func:`describe_progress`, :func:`run_label`: what a status
  widget or a run picker shows.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from .config import DEFAULT_MODEL, DEMO_DEV, DEMO_TRAIN, DataConfig, ModelConfig, RunConfig, TrainConfig
from .errors import CartomapError, DataError

DEVICES = ("auto", "cpu", "cuda", "mps")
RECORD_MODES = ("train", "eval", "both")
ACTIVE_STATES = ("queued", "running")
RESUMABLE_STATES = ("cancelled", "failed", "interrupted", "exited")

_TEXT_PAIRS = (("premise", "hypothesis"), ("sentence1", "sentence2"), ("question", "sentence"))
_TEXT_SINGLE = ("text", "sentence", "review", "content")
_LABELS = ("label", "gold_label", "labels", "class", "target")
_IDS = ("id", "pairID", "uid", "guid", "idx")
_GENRES = ("genre", "domain", "source")


# --------------------------------------------------------------------------- data preview
def preview_table(path: str, format: str = "auto", split: str | None = None, rows: int = 5):
    """(first ``rows`` rows, number of rows) of the raw table at ``path``, before column mapping.

    ``path`` may be ``demo:train`` / ``demo:dev``. Hub datasets (``hf:NAME``) have no preview.
    Raises DataError naming the file.
    """
    from .data import demo_path, read_table

    path = str(path).strip()
    if not path:
        raise DataError("no data chosen: enter a path")
    if path in (DEMO_TRAIN, DEMO_DEV):
        frame, _ = read_table(demo_path(path.split(":", 1)[1]), "jsonl" if format == "auto" else format)
    elif path.startswith("hf:"):
        raise DataError("no preview for hub datasets: type the column names", location=path)
    else:
        frame, _ = read_table(Path(path).expanduser(), format, split or None)
    return frame.head(rows).reset_index(drop=True), len(frame)


def guess_columns(columns: list[str], frame: pd.DataFrame | None = None) -> dict[str, Any]:
    """A first mapping for ``columns``: text_columns (1 or 2), label, id ('' = generate), genre (or None)."""
    cols = [str(c) for c in columns]
    present = set(cols)
    text = next((list(pair) for pair in _TEXT_PAIRS if set(pair) <= present), None)
    if text is None:
        single = next((c for c in _TEXT_SINGLE if c in present), None)
        if single is None and frame is not None:  # first column holding strings
            single = next((c for c in cols if frame[c].map(lambda v: isinstance(v, str)).all()), None)
        text = [single or (cols[0] if cols else "")]
    label = next((c for c in _LABELS if c in present), None)
    if label is None:
        label = next((c for c in cols if c not in text), "")
    return {
        "text_columns": text,
        "label_column": label,
        "id_column": next((c for c in _IDS if c in present), ""),
        "genre_column": next((c for c in _GENRES if c in present), None),
    }


# --------------------------------------------------------------------------- form -> config
def parse_names(text: str | None) -> tuple[str, ...] | None:
    """'a, b, c' -> ('a', 'b', 'c'); blank -> None. Repeated names are an error."""
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    if not names:
        return None
    if len(set(names)) != len(names):
        raise DataError(f"label names repeat a name: {list(names)}; give each class once, in order")
    return names


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1


def check_model(name: str) -> str:
    """The model field, stripped: 'default', an existing checkpoint folder, or a hub id 'org/name'."""
    from .models import resolve_model

    name = (name or "").strip() or DEFAULT_MODEL
    if _looks_like_path(name) and not Path(name).expanduser().exists():
        raise CartomapError(f"model folder {name} not found: give a local checkpoint folder or a hub id")
    resolve_model(name)  # RunError: default encoder missing, or a folder without config.json
    return name


def check_device(device: str) -> str:
    """'auto' and 'cpu' always work; an explicit GPU must be present (imports torch only then)."""
    device = (device or "auto").strip()
    if device in ("auto", "cpu"):
        return device
    from .models import available_device

    return available_device(device)  # RunError when absent or unknown


def check_training_numbers(epochs, batch_size, max_length, learning_rate) -> None:
    """Raise CartomapError unless epochs, batch size >= 1 and max length >= 8 are whole and the lr is > 0."""
    for label, value, low in (
        ("epochs", epochs, 1),
        ("batch size", batch_size, 1),
        ("max length", max_length, 8),
    ):
        if int(value) != value or value < low:
            raise CartomapError(f"{label} must be a whole number of at least {low}, got {value}")
    if not learning_rate > 0:
        raise CartomapError(f"the learning rate must be positive, got {learning_rate}")


def build_run_config(
    *,
    data_path: str,
    text_columns: list[str] | tuple[str, ...],
    label_column: str,
    id_column: str = "",
    genre_column: str | None = None,
    label_names: str = "",
    format: str = "auto",
    split: str | None = None,
    dev: str = "none",
    dev_path: str = "",
    dev_split: str | None = None,
    model: str = DEFAULT_MODEL,
    max_length: int = ModelConfig.max_length,
    epochs: int = TrainConfig.epochs,
    batch_size: int = TrainConfig.batch_size,
    learning_rate: float = TrainConfig.learning_rate,
    device: str = TrainConfig.device,
    record: str = TrainConfig.record,
    save_checkpoints: bool = TrainConfig.save_checkpoints,
    seed: int = TrainConfig.seed,
    name: str = "",
    **train_extra: Any,
) -> RunConfig:
    """A RunConfig from the training form's values; raises CartomapError (DataError for data fields).

    ``dev`` is 'none', 'demo' (demo:dev, with its own columns) or 'path' (``dev_path``, read with
    the same format and column mapping as the training data). ``train_extra`` holds further TrainConfig
    fields (warmup_ratio, weight_decay, ...).
    """
    data_path = (data_path or "").strip()
    if not data_path:
        raise DataError("no training data chosen: pick the demo, enter a path or upload a file")
    text = tuple(c for c in (text_columns or ()) if c)
    if len(text) not in (1, 2) or len(set(text)) != len(text):
        raise DataError(
            f"choose one text column (single texts) or two different ones (a pair), got {list(text)}",
            location=data_path,
        )
    if not label_column:
        raise DataError("choose the label column", location=data_path)
    if label_column in text:
        raise DataError(f"the label column {label_column!r} is also a text column", location=data_path)
    if id_column and (id_column in text or id_column == label_column):
        raise DataError(f"the id column {id_column!r} is also a text or label column", location=data_path)
    mapping = {
        "format": format or "auto",
        "text_columns": text,
        "label_column": label_column,
        "id_column": id_column or "",
        "label_names": parse_names(label_names),
        "genre_column": genre_column or None,
    }
    data = DataConfig(path=data_path, split=(split or "").strip() or None, **mapping)
    if dev == "none":
        dev_config = None
    elif dev == "demo":
        dev_config = DataConfig(path=DEMO_DEV)  # the demo's own columns; its labels must match training's
    elif dev == "path":
        if not (dev_path or "").strip():
            raise DataError("no dev set path: enter one, or choose no dev set")
        dev_config = DataConfig(path=dev_path.strip(), split=(dev_split or "").strip() or None, **mapping)
    else:
        raise CartomapError(f"unknown dev set choice {dev!r}: expected none, demo or path")
    check_training_numbers(epochs, batch_size, max_length, learning_rate)
    if record not in RECORD_MODES:
        raise CartomapError(f"unknown recording mode {record!r}: expected one of {', '.join(RECORD_MODES)}")
    train = TrainConfig(
        epochs=int(epochs),
        batch_size=int(batch_size),
        learning_rate=float(learning_rate),
        device=check_device(device),
        record=record,
        save_checkpoints=bool(save_checkpoints),
        seed=int(seed),
        **train_extra,
    )
    return RunConfig(
        data=data,
        dev=dev_config,
        model=ModelConfig(name_or_path=check_model(model), max_length=int(max_length)),
        train=train,
        name=(name or "").strip(),
    )


# --------------------------------------------------------------------------- status display
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


def effective_state(status: dict[str, Any]) -> str:
    """The status's state, or 'exited' for a queued job whose process is gone before it started."""
    state = status.get("state", "queued")
    if state == "queued" and "pid" in status and not pid_alive(status.get("pid")):
        return "exited"
    return state


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
    state = effective_state(status)
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
