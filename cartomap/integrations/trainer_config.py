"""What a ``Trainer``'s run is made of: the config :class:`cartomap.integrations.trainer.DataMapCallback`
records it with, whose identity is the run id (the data, the mode, the Trainer's arguments that decide the
dynamics, the model's config, the Trainer's class and overridden methods, its collator and optimizer, and
the tag), and what the callback reads of the Trainer, its model and dataset to make it (label names,
tokenizer, max length).
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
from collections.abc import Mapping
from typing import Any

from cartomap.config import ModelConfig, Origin, TrainConfig
from cartomap.errors import CartomapError
from cartomap.integrations.examples import LABEL_COLUMNS, class_names, column_names
from cartomap.integrations.origin import recorded_config
from cartomap.integrations.trainer_recording import IndexCollator
from cartomap.runs.store import Run

#: TrainingArguments that decide the dynamics: with the data, the model and the mode they make the run id.
IDENTITY_ARGS = (
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "num_train_epochs",
    "max_steps",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_steps",
    "warmup_ratio",
    "optim",
    "optim_args",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "seed",
    "data_seed",
    "train_sampling_strategy",
    "group_by_length",
    "label_smoothing_factor",
    "bf16",
    "fp16",
    "tf32",
    "dataloader_drop_last",
    "neftune_noise_alpha",
    "gradient_checkpointing",
    "full_determinism",
    "average_tokens_across_devices",
    "remove_unused_columns",
    "label_names",
    "torch_compile",
    "torch_compile_backend",
    "torch_compile_mode",
    "use_liger_kernel",
    "past_index",
)


#: Fields of a model's config that do not change the dynamics (paths, versions, output switches).
NOT_DYNAMICS_CONFIG = (
    "_name_or_path",
    "name_or_path",
    "transformers_version",
    "architectures",
    "output_hidden_states",
    "output_attentions",
    "return_dict",
    "use_cache",
    "torchscript",
)


#: Methods of a Trainer whose override changes the training (their qualified names join the identity).
TRAINER_METHODS = (
    "compute_loss",
    "training_step",
    "create_optimizer",
    "create_scheduler",
    "get_train_dataloader",
)


class ReusedRunWarning(UserWarning):
    """A training mapped onto a finished run of the same identity: it is not recorded again."""


def reused_message(run: Run) -> str:
    return (
        f"cartomap: this training is NOT recorded: run {run.id} ({run.config.name or 'unnamed'}, {run.path}) "
        "already holds a finished data map of the same data, model config, Trainer and arguments. To record "
        f"this training as a new run, give DataMapCallback(..., tag='...') another tag, or delete the old run "
        f"(`cartomap delete {run.id} --yes`)."
    )


def qualified_name(obj: Any) -> str | None:
    """``module.qualname`` of a function, method or class; of any other callable, its class's; None for None."""
    if obj is None:
        return None
    if isinstance(obj, functools.partial):
        return f"partial({qualified_name(obj.func)})"
    target = getattr(obj, "__func__", obj)  # a bound method: its function
    if not (inspect.isfunction(target) or inspect.isclass(target) or inspect.isbuiltin(target)):
        target = type(target)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{getattr(target, '__qualname__', getattr(target, '__name__', '?'))}"


def model_settings(model: Any) -> dict[str, Any] | None:
    """The model's config (``to_dict``) without what does not change the dynamics (its path, versions,
    output switches): another dropout, another run."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return None
    return {
        str(k): stable(v)
        for k, v in sorted(config.to_dict().items())
        if k not in NOT_DYNAMICS_CONFIG and not str(k).startswith("_")
    }


def stable(value: Any) -> Any:
    """``value`` as JSON that is the same in every process: plain values, lists and dicts as they are,
    an enum as its value, any other object as its class's qualified name (never a repr with an address)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): stable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [stable(v) for v in value]
    plain = getattr(value, "value", None)
    if isinstance(plain, (bool, int, float, str)):
        return plain
    return qualified_name(type(value))


def _unwrapped_collator(collate: Any) -> Any:
    """The user's collator inside the wrappers around it (the callback's, the Trainer's column removal)."""
    for _ in range(5):
        if isinstance(collate, IndexCollator):
            collate = collate.collate
        elif type(collate).__name__ == "RemoveColumnsCollator" and hasattr(collate, "data_collator"):
            collate = collate.data_collator
        else:
            return collate
    return collate


def trainer_settings(trainer: Any, optimizer: Any = None, collate: Any = None) -> dict[str, Any]:
    """What of the Trainer decides the dynamics beyond its arguments: its class, the overridden methods
    (``compute_loss``, ``training_step``, ...) and ``compute_loss_func`` by qualified name, the data
    collator's class, the optimizer's class and defaults. ``trainer_class`` None: not found."""
    out: dict[str, Any] = {"trainer_class": None}
    if trainer is not None:
        out["trainer_class"] = qualified_name(type(trainer))
        for method in TRAINER_METHODS:
            bound = getattr(trainer, method, None)
            if bound is not None:
                out[method] = qualified_name(bound)
        out["compute_loss_func"] = qualified_name(getattr(trainer, "compute_loss_func", None))
        collate = getattr(trainer, "data_collator", collate)
        optimizer = getattr(trainer, "optimizer", None) or optimizer
    out["data_collator"] = qualified_name(_unwrapped_collator(collate))
    optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper: the torch optimizer
    if optimizer is not None:
        out["optimizer"] = qualified_name(type(optimizer))
        defaults = getattr(optimizer, "defaults", None) or {}
        out["optimizer_defaults"] = {
            str(k): v
            for k, v in sorted(defaults.items())
            if isinstance(v, (bool, int, float, str, tuple, list))
        }
    return out


def find_trainer(callback: Any) -> Any:
    """The Trainer whose callbacks hold ``callback``: a ``self`` on the call stack (``Trainer.train``
    calls the callbacks through its handler), else None."""
    frame = sys._getframe(1)
    for _ in range(40):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        handler = getattr(candidate, "callback_handler", None)
        if handler is not None and any(cb is callback for cb in getattr(handler, "callbacks", ())):
            return candidate
        frame = frame.f_back
    return None


def _plain(value: Any) -> Any:
    """An enum's value (SchedulerType.LINEAR -> "linear"), anything else as it is."""
    return getattr(value, "value", value)


def dataset_label(dataset: Any, examples: Any) -> str:
    """A name that tells runs of different data apart: the dataset's builder, config and split (a
    ``datasets.Dataset``'s info) or its type, its size and a short hash of its examples' content
    (ids, texts, labels), e.g. ``glue/mnli[train] 392702 rows #1a2b3c4d``."""
    info = getattr(dataset, "info", None)
    name = getattr(info, "dataset_name", None) or getattr(info, "builder_name", None)
    config = getattr(info, "config_name", None)
    if name and config and config != "default":
        name = f"{name}/{config}"
    if not name:
        name = {"DataFrame": "dataframe", "list": "rows", "tuple": "rows", "dict": "columns"}.get(
            type(dataset).__name__, "dataset"
        )
    split = getattr(dataset, "split", None)
    if split:
        name = f"{name}[{split}]"
    return f"{name} {len(examples)} rows #{examples.fingerprint()[:8]}"


def tokenizer_of(processing_class: Any):
    """The tokenizer of a Trainer's processing class (a tokenizer, or a processor holding one)."""
    if processing_class is None:
        return None
    if hasattr(processing_class, "batch_decode") and hasattr(processing_class, "pad_token_id"):
        return processing_class
    return getattr(processing_class, "tokenizer", None)


def id2label_names(model) -> tuple[str, ...] | None:
    """The model's class names in order (its config's id2label), None without."""
    id2label = getattr(getattr(model, "config", None), "id2label", None) or {}
    return tuple(str(id2label[k]) for k in sorted(id2label)) if id2label else None


def named_labels(model) -> tuple[str, ...] | None:
    """The model's id2label when it names the labels: None without, or for the names transformers makes up
    (``LABEL_0``, ``LABEL_1``, ...), which say nothing of a multi-label run's labels."""
    names = id2label_names(model)
    if names is None or names == tuple(f"LABEL_{k}" for k in range(len(names))):
        return None
    return names


def model_label_names(model, dataset, label_column) -> tuple[str, ...] | None:
    """The model's id2label, unless the dataset's ClassLabel column names the classes itself."""
    columns = column_names(dataset)
    column = label_column or next((c for c in LABEL_COLUMNS if c in columns), None)
    if column is not None and class_names(dataset, column):
        return None
    id2label = getattr(getattr(model, "config", None), "id2label", None) or {}
    if not id2label:
        return None
    return tuple(str(id2label[k]) for k in sorted(id2label))


def max_length(dataset: Any) -> int:
    """The longest input_ids of the dataset (the truncation it was tokenized with), else the default."""
    try:
        if hasattr(dataset, "select_columns") and "input_ids" in column_names(dataset):
            return max(len(x) for x in dataset["input_ids"])
    except (CartomapError, TypeError, KeyError, ValueError):
        pass
    return ModelConfig.max_length


def trainer_run_config(
    args,
    state,
    model,
    *,
    examples,
    how: dict[str, Any],
    dataset: Any,
    mode: str,
    world: int,
    n_labels: int,
    record_points: int = 1,
    skip_epochs: int = 0,
    tag: str = "",
    name: str = "",
    data_name: str | None = None,
    trainer: Any = None,
    optimizer: Any = None,
    collate: Any = None,
):
    """The recorded config of a Trainer's run (:func:`cartomap.integrations.origin.recorded_config`): its
    ``TrainingArguments`` and ``state`` as a :class:`cartomap.config.TrainConfig`, and the settings its
    identity is made of (the module text); ``examples`` and ``how`` (where their ids came from) are the
    callback's, ``dataset`` the dataset it was given."""
    settings = {k: getattr(args, k) for k in IDENTITY_ARGS if hasattr(args, k)}
    settings.update(
        world_size=world,
        model_class=type(model).__name__,
        model_config=model_settings(model),
        num_labels=n_labels,
        mode=mode,
        ids=how["ids"],
        **trainer_settings(trainer, optimizer, collate),
    )
    if tag:
        settings["tag"] = tag
    epochs = int(state.num_train_epochs or math.ceil(args.num_train_epochs))
    warmup = float(getattr(args, "warmup_steps", 0) or 0)
    train = TrainConfig(
        epochs=max(1, epochs),
        batch_size=args.per_device_train_batch_size * args.gradient_accumulation_steps * world,
        eval_batch_size=args.per_device_eval_batch_size * world,
        learning_rate=float(args.learning_rate),
        weight_decay=float(args.weight_decay),
        adam_epsilon=float(args.adam_epsilon),
        warmup_ratio=warmup if warmup < 1 else warmup / max(1, state.max_steps),
        max_grad_norm=float(args.max_grad_norm or 0.0),
        seed=int(args.seed),
        group_by_length=getattr(args, "train_sampling_strategy", "") == "group_by_length"
        or bool(getattr(args, "group_by_length", False)),
        record=mode,
        record_points=record_points,
        skip_epochs=min(skip_epochs, max(1, epochs) - 1),
        save_checkpoints=False,
        device=str(args.device),
        precision="bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
    )
    name_or_path = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
    return recorded_config(
        Origin.TRAINER,
        examples,
        data_name=data_name or dataset_label(dataset, examples),
        model=str(name_or_path),
        train=train,
        settings=settings,
        name=name,
        max_length=max_length(dataset),
        training={
            "epochs": train.epochs,
            "batch_size": train.batch_size,
            "per_device_batch_size": args.per_device_train_batch_size,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "learning_rate": train.learning_rate,
            "seed": train.seed,
            "weight_decay": train.weight_decay,
            "lr_scheduler": _plain(getattr(args, "lr_scheduler_type", None)),
            "warmup": getattr(args, "warmup_steps", None) or getattr(args, "warmup_ratio", None),
            "optimizer": _plain(getattr(args, "optim", None)),
            "source": "TrainingArguments",
        },
    )
