"""The config of a run recorded outside cartomap's loop: what the run id is made of.

The identity of such a run is its data (the examples' fingerprint: ids, texts, labels), the model
it names, the TrainConfig fields that describe the training, and :class:`OriginConfig` (who recorded
it, and as canonical JSON whatever else decided the dynamics: a Trainer's arguments, a recorder's
settings and the digest of its dynamics, the file stamps of scored checkpoints).
"""

from __future__ import annotations

import json
from typing import Any

from cartomap.config import DataConfig, ModelConfig, Origin, OriginConfig, RunConfig, TrainConfig
from cartomap.data.dataset import TextDataset
from cartomap.tasks import registry as task_kinds


def canonical(settings: dict[str, Any]) -> str:
    """Settings as JSON with sorted keys (non-JSON values as their str): equal settings, equal text."""
    return json.dumps(settings, sort_keys=True, default=str, separators=(",", ":"))


def data_config(kind: Origin | str, data_name: str, examples: TextDataset) -> DataConfig:
    """A DataConfig naming in-memory examples: path ``<origin>:<data name>``, cartomap's own columns."""
    kind = Origin(kind).value
    return DataConfig(
        path=f"{kind}:{data_name}",
        format=kind,
        text_columns=examples.text_columns,
        task=task_kinds.config_name(examples.task_kind, examples.text_columns),
        label_column=examples.task_kind.label_field,
        id_column="id",
        label_names=examples.label_names,
        genre_column=None,
        name=data_name,
    )


def recorded_config(
    kind: Origin,
    examples: TextDataset,
    *,
    data_name: str,
    model: str,
    train: TrainConfig,
    settings: dict[str, Any],
    name: str = "",
    max_length: int = ModelConfig.max_length,
    checkpoints: tuple[str, ...] = (),
    data: DataConfig | None = None,
    training: dict[str, Any] | None = None,
) -> RunConfig:
    """The RunConfig of a run whose dynamics ``kind`` (trainer, recorder, checkpoints) recorded;
    ``training``: what is known of the training (:data:`TRAINING_KEYS`), shown by ``cartomap show``."""
    return RunConfig(
        data=data or data_config(kind, data_name, examples),
        dev=None,
        model=ModelConfig(name_or_path=model, max_length=int(max_length)),
        train=train,
        name=name,
        origin=OriginConfig(
            kind=kind,
            checkpoints=tuple(checkpoints),
            settings=canonical(settings),
            training=canonical({k: v for k, v in (training or {}).items() if v is not None}),
        ),
    )


#: What a run may know of its training (``OriginConfig.training``), in the order ``show`` prints it.
TRAINING_KEYS = (
    "epochs",  # epochs trained (a Trainer's num_train_epochs)
    "batch_size",  # examples per optimizer step: per device x accumulation x processes
    "per_device_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",  # the peak (configured) learning rate
    "learning_rate_logged_max",  # the largest learning rate in a Trainer's log history (when the peak is unknown)
    "seed",
    "weight_decay",
    "lr_scheduler",
    "warmup",
    "optimizer",
    "global_step",
    "source",  # where these came from
)
#: What ``show`` prints for a setting a run does not know.
UNKNOWN = "unknown"
NOT_RECORDED = "not recorded"


def known_training(config: RunConfig) -> dict[str, Any]:
    """What is known of a run's training: its TrainConfig for a run of cartomap's loop, else what the
    recording wrote (``origin.training``; runs recorded before it existed: what their config says for
    sure). Nothing is filled in from TrainConfig's defaults."""
    train, kind = config.train, config.origin.kind
    if kind.trains_here:
        return {
            "epochs": train.epochs,
            "batch_size": train.batch_size,
            "learning_rate": train.learning_rate,
            "seed": train.seed,
            "weight_decay": train.weight_decay,
            "warmup": train.warmup_ratio,
            "source": "cartomap",
        }
    try:
        known = json.loads(config.origin.training or "{}")
    except ValueError:
        known = {}
    known = dict(known) if isinstance(known, dict) else {}
    if (
        not config.origin.training and kind.config_from_arguments
    ):  # older callback runs: TrainConfig came from the arguments
        known = {
            "epochs": train.epochs,
            "batch_size": train.batch_size,
            "learning_rate": train.learning_rate,
            "seed": train.seed,
            "source": "TrainingArguments",
        }
    if kind.epochs_recorded:
        known.setdefault("epochs", train.epochs)  # the recorded (imported) epochs
    return known


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def shown_settings(config: RunConfig) -> dict[str, str]:
    """``epochs``, ``batch``, ``lr`` and ``seed`` of a run as ``cartomap show`` prints them: the real
    values, or "unknown" (scored checkpoints, imported dynamics) / "not recorded" (a callback or recorder
    run that did not get them), never TrainConfig's defaults."""
    known = known_training(config)
    missing = NOT_RECORDED if config.origin.kind.training_known else UNKNOWN
    out = {"epochs": _number(known["epochs"]) if "epochs" in known else missing}
    if "batch_size" in known:
        out["batch"] = _number(known["batch_size"])
    elif "per_device_batch_size" in known:
        steps = known.get("gradient_accumulation_steps")
        out["batch"] = f"{known['per_device_batch_size']} per device" + (
            f" x {steps} accumulation" if steps else f" (accumulation {missing})"
        )
    else:
        out["batch"] = missing
    if "learning_rate" in known:
        out["lr"] = _number(known["learning_rate"])
    elif "learning_rate_logged_max" in known:
        out["lr"] = f"{_number(known['learning_rate_logged_max'])} (largest logged)"
    else:
        out["lr"] = missing
    out["seed"] = _number(known["seed"]) if "seed" in known else missing
    return out
