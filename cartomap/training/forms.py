"""The training form's values -> a validated :class:`RunConfig` (pure logic, no Streamlit here).

:func:`build_run_config` raises :class:`CartomapError` with a message for the user; the checks it
uses (:func:`check_model`, :func:`check_device`, :func:`check_training_numbers`) serve every form
that configures training (the experiment pages too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cartomap.config import (
    DEFAULT_MODEL,
    DEMO_DEV,
    RECORDING_MODES,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainConfig,
)
from cartomap.data.forms import parse_names
from cartomap.errors import CartomapError, DataError

DEVICES = ("auto", "cpu", "cuda", "mps")


# --------------------------------------------------------------------------- form -> config


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1


def check_model(name: str) -> str:
    """The model field, stripped: 'default', an existing checkpoint folder, or a hub id 'org/name'."""
    from cartomap.training.models import resolve_model

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
    from cartomap.training.models import available_device

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
    if record not in RECORDING_MODES:
        raise CartomapError(
            f"unknown recording mode {record!r}: expected one of {', '.join(RECORDING_MODES)}"
        )
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
