"""A ``transformers.TrainerCallback`` that records a data map of your own ``Trainer``: :class:`DataMapCallback`.

::

    from cartomap.integrations import DataMapCallback

    callback = DataMapCallback(train_dataset, mode="eval")      # the default; or "train", or "both"
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset, callbacks=[callback])
    trainer.train()
    callback.run                                                # a finished run in cartomap's store

The run holds the per-example logits of every epoch keyed by the dataset's id column (or its row
index when it has none), the labels and texts, the history, the data-map metrics and regions: the
dashboard and every ``cartomap`` command open it like a run cartomap trained itself. It is created
when training begins and shows its progress while the Trainer runs; each completed epoch is written
at once, so a Trainer resumed from an end-of-epoch checkpoint continues the same run.

A token classifier (``AutoModelForTokenClassification``): ``DataMapCallback(train_dataset, task="token")``
with a dataset of one sentence per row, its words (``tokens``), its word tags (``ner_tags``, a
``Sequence(ClassLabel)``) and the tokenised inputs with their aligned ``labels`` (a word's tag at its
first sub-word, -100 elsewhere). Each word is recorded at its first sub-word, keyed by (sentence id,
word index) as ``<id>#<k>``, in both modes; a sentence cut by ``max_length`` is an error naming it.

A multi-label classifier (``problem_type="multi_label_classification"``, one sigmoid output per label):
``DataMapCallback(train_dataset, task="multilabel")`` with a dataset of one text per row and its labels:
the multi-hot ``labels`` the Trainer trains on (float 0/1 vectors, one entry per label) or a column of
label-name lists (``label_column=``). The label names come from ``label_names`` or the model's
``id2label`` (not transformers' made-up ``LABEL_0``, ``LABEL_1``, ...). Each label's logit z of each
example is recorded as the two-class row (0, z), keyed by (example id, label index) as ``<id>#<j>``, in
both modes, so the run is the multi-label run ``cartomap train --task multilabel`` makes (per-label maps,
the combined map); ``compute_metrics=multilabel_metrics`` gives it the per-label dev accuracy and exact match.

Two recording modes, as in cartomap's own loop:

* ``"eval"`` (WaNLI): after each epoch, an eval-mode pass (no dropout, no gradients) over the whole
  training set, length-sorted and split across processes. Works with any Trainer.
* ``"train"`` (Cartography): the logits of the training forward pass itself. They are taken through
  the Trainer's own extension points, not a copy of its loop: the training DataLoader's fetch adds
  each item's row index, a wrapper around its data collator moves the indices out of the features
  (so neither ``remove_unused_columns`` nor the user's collator sees them) into the batch, and a
  forward pre-hook on the model takes them out of the model's inputs again; a forward hook keeps
  the logits with them (on the device, no synchronisation per step). Gradient accumulation,
  ``train_sampling_strategy="group_by_length"``, worker processes and several training processes
  change nothing: every row carries its own index.

Under several processes (``torchrun``, ``accelerate launch``) each process keeps what it saw; at
the end of an epoch the rows are gathered with their indices and every example is kept once, in
the order it was trained: the repeats a distributed sampler adds to even out the last batch are
dropped, any other repeat or a missing example is an error naming the epoch and the ids. Rank 0
writes the run.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from cartomap.config import ModelConfig, TrainConfig
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.integrations.examples import (
    LABEL_COLUMNS,
    class_names,
    column_names,
    user_examples,
    user_multilabel_examples,
    user_token_examples,
)
from cartomap.integrations.origin import recorded_config
from cartomap.integrations.recorder import as_numpy, label_unit_rows
from cartomap.runs.importer import finish_run
from cartomap.runs.progress import StepClock
from cartomap.runs.state import Throttle
from cartomap.runs.store import Run, RunStore

MODES = {"train": ("train",), "eval": ("eval",), "both": ("train", "eval")}
#: Key of the row index inside a training item and batch; it never reaches the model.
INDEX_KEY = "cartomap_index"
#: Keys of a batch that are labels, not model inputs (dropped for the eval-mode pass).
LABEL_KEYS = ("labels", "label", "label_ids")
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
STATUS_EVERY_S = 1.0


# --------------------------------------------------------------------------- processes
def _dist():
    """torch.distributed when several processes train, else None."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def broadcast(value: Any) -> Any:
    """Rank 0's ``value`` on every process."""
    dist = _dist()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather(value: Any) -> list[Any]:
    """Every process's ``value``, in rank order."""
    dist = _dist()
    if dist is None:
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


# --------------------------------------------------------------------------- the train-pass plumbing
class IndexedFetch:
    """A DataLoader dataset's batch fetch (``__getitems__``) that adds each item's row index."""

    def __init__(self, dataset: Any):
        fetch = getattr(dataset, "__getitems__", None)
        self.fetch = fetch.fetch if isinstance(fetch, IndexedFetch) else fetch  # not twice
        self.dataset = dataset

    def plain(self, indices: Sequence[int]) -> list[Any]:
        if self.fetch is not None:
            return list(self.fetch(list(indices)))
        return [self.dataset[i] for i in indices]

    def __call__(self, indices: Sequence[int]) -> list[Any]:
        items = []
        for item, i in zip(self.plain(indices), indices, strict=True):
            if not isinstance(item, Mapping):
                raise DataError(
                    f"training items are {type(item).__name__}, not dicts: the train-pass mode of DataMapCallback "
                    "needs dict items (as a Trainer's datasets have); use mode='eval'"
                )
            item = dict(item)
            item[INDEX_KEY] = int(i)
            items.append(item)
        return items


class IndexCollator:
    """Wraps the training data collator: takes the row indices out of the features, collates the rest
    with the user's collator, and puts them into the batch as a tensor. Checks that the labels of the
    Trainer's items are the labels of the callback's dataset at those rows."""

    def __init__(self, collate, labels: np.ndarray):
        self.collate, self.labels = collate, labels

    def __call__(self, features: list[dict[str, Any]]):
        import torch

        index = [f.pop(INDEX_KEY) for f in features if INDEX_KEY in f]
        if len(index) == len(features):
            self._check_labels(features, index)
        batch = self.collate(features)
        if len(index) == len(features) and isinstance(batch, Mapping):
            batch[INDEX_KEY] = torch.tensor(index, dtype=torch.long)
        return batch

    def _check_labels(self, features, index) -> None:
        key = next((k for k in LABEL_KEYS if k in features[0]), None)
        if key is None:
            return
        expected = self.labels[np.asarray(index)]
        try:
            if expected.ndim == 2:  # multi-label: a multi-hot vector per item
                given = np.stack([np.asarray(as_numpy(f[key]), dtype=np.float64) for f in features]) != 0
                if given.shape != expected.shape:
                    return
                given = given.astype(np.int64)
            else:
                given = np.asarray([int(f[key]) for f in features])
        except (TypeError, ValueError, RuntimeError):
            return  # not class indices (soft labels): nothing to compare
        wrong = np.flatnonzero((given != expected).reshape(len(index), -1).any(axis=1))
        if len(wrong):
            k = wrong[0]
            raise DataError(
                f"row {index[k]} of the Trainer's training set has label {given[k].tolist()}, the callback's "
                f"dataset label {expected[k].tolist()}: give DataMapCallback the dataset the Trainer trains on (same rows, same "
                "order) and label_names in the model's label order",
                field=key,
            )


def _logits_of(output: Any):
    if isinstance(output, Mapping):
        return output["logits"]
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)):
        return output[1] if len(output) > 1 and output[0].dim() == 0 else output[0]
    return output


def _labels_of(batch: Mapping[str, Any]):
    """The aligned sub-word labels of a collated batch (None when it has none), on the CPU."""
    labels = batch.get("labels") if isinstance(batch, Mapping) else None
    return labels.detach().cpu() if hasattr(labels, "detach") else labels


def first_occurrences(parts: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows of every process (``{"rows", "logits", "step", "last"}`` each) -> (rows, logits, bad, dropped):
    each row once, first in (step, rank, position) order; the rows seen again outside a process's
    last step (``bad``); and how many repeats in the last steps were dropped (a distributed sampler
    repeats the first rows of the epoch to even out the processes' last batches)."""
    rows = np.concatenate([p["rows"] for p in parts])
    logits = np.concatenate([p["logits"] for p in parts])
    step = np.concatenate([p["step"] for p in parts])
    rank = np.concatenate([np.full(len(p["rows"]), r) for r, p in enumerate(parts)])
    last = np.concatenate([p["step"] == p["last"] for p in parts])
    order = np.lexsort((np.arange(len(rows)), rank, step))
    rows, logits, last = rows[order], logits[order], last[order]
    unique, first = np.unique(rows, return_index=True)
    repeated = np.ones(len(rows), dtype=bool)
    repeated[first] = False
    bad = rows[repeated & ~last]
    return unique, logits[first], bad, int(repeated.sum()) - len(bad)


# --------------------------------------------------------------------------- the callback
class DataMapCallback(TrainerCallback):
    """Records a cartomap run (data map) of the ``Trainer`` it is added to.

    ``train_dataset``: the dataset the Trainer trains on (same rows, same order), with its id, text
    and label columns (a ``datasets.Dataset``, a DataFrame, or a sequence of dict rows).
    ``mode``: ``"eval"`` (an eval-mode pass after each epoch, WaNLI; the default: across seeds its maps
    agreed far better than the training pass's, docs/stability.md), ``"train"`` (the training forward
    pass, Cartography: free) or ``"both"``. ``id_column``: ids of the examples (default ``id``; the row index
    when absent). ``label_column`` / ``text_columns``: found by name when not given; without text
    columns the texts are decoded from ``input_ids`` with the Trainer's tokenizer. ``label_names``:
    class order (default: the ClassLabel names, else the model's ``id2label``). ``store``: the run
    store or its folder (default ``CARTOMAP_CACHE`` or ``cache/``). ``name``: a label for the run.
    ``save_model``: keep the final weights in the run (embeddings, neighbours and WaNLI stage 1 need
    them). ``record_points`` (modes "eval"/"both"): eval-mode passes per epoch, evenly spaced, the last at
    the epoch's end (as ``cartomap train --record-points``); ``skip_epochs``: the map's metrics leave out
    the first epochs' recordings (docs/stability.md). ``task``: ``"token"`` for a token classifier,
    ``"multilabel"`` for a multi-label one (the module text); default: one label per example. After
    training, ``callback.run`` is the run.

    The run's identity is the data, the mode, the Trainer's arguments that decide the dynamics, the
    model's config (dropout, ...), the Trainer's class and overridden methods (``compute_loss`` ...), its
    ``compute_loss_func``, data collator and optimizer, and ``tag``. A done run of the same identity is
    returned as it is: the training is not recorded again (a :class:`ReusedRunWarning` names the run;
    give another ``tag`` to record it as a new run).
    """

    def __init__(
        self,
        train_dataset: Any,
        *,
        mode: str = "eval",
        id_column: str | None = "id",
        label_column: str | None = None,
        text_columns: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        store: RunStore | str | Path | None = None,
        name: str = "",
        data_name: str | None = None,
        save_model: bool = True,
        tag: str = "",
        record_points: int = 1,
        skip_epochs: int = 0,
        task: str = "",
    ):
        from cartomap.tasks import registry as task_kinds

        self.task = task_kinds.kind(task) if task else None
        self.words = self.task is not None and self.task.unit == "word"
        self.multilabel = self.task is not None and self.task.unit == "label"
        if mode not in MODES:
            raise DataError(f"unknown mode {mode!r}: expected one of {tuple(MODES)}", field="mode")
        TrainConfig(record=mode, record_points=record_points)  # DataError naming a bad value
        if record_points > 1 and "eval" not in MODES[mode]:
            raise DataError(
                "several recordings an epoch are eval-mode passes: use mode='eval' or 'both'",
                field="record_points",
            )
        if isinstance(skip_epochs, bool) or not isinstance(skip_epochs, int) or skip_epochs < 0:
            raise DataError(f"expected a whole number >= 0, got {skip_epochs!r}", field="skip_epochs")
        self.record_points, self.skip_epochs = int(record_points), skip_epochs
        self.dataset, self.mode, self.sources = train_dataset, mode, MODES[mode]
        self.id_column, self.label_column, self.text_columns = id_column, label_column, text_columns
        self.label_names = tuple(label_names) if label_names is not None else None
        self.store = store if isinstance(store, RunStore) else RunStore(store)
        self.name, self.save_model, self.tag = name, save_model, str(tag)
        self.data_name = data_name  # None: named after the dataset and its content (on train begin)
        columns = column_names(train_dataset)  # a DatasetDict or rows without names fail here
        if label_column is None and not self.words and not set(LABEL_COLUMNS) & set(columns):
            raise DataError(
                f"the training dataset has no label column: looked for {', '.join(LABEL_COLUMNS)} among its "
                f"columns {columns}; name yours with label_column=... (a data map needs every gold label)",
                field="label_column",
            )
        if label_column is not None and label_column not in columns:
            raise DataError(
                f"no label column {label_column!r}; the columns are {columns}", field="label_column"
            )
        self.run: Run | None = None
        self.active = False
        self._hooks: list[Any] = []
        self._lock = None

    # -- train begin ----------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, train_dataloader=None, **kwargs):
        self.rank, self.world = args.process_index, max(1, args.world_size)
        self._remove_hooks()  # of an earlier train() that raised
        self._release()
        if train_dataloader is None or model is None:
            raise RunError("DataMapCallback needs the Trainer's model and training DataLoader")
        if self.words:
            self.examples, self.how = user_token_examples(
                self.dataset,
                id_column=self.id_column,
                label_column=self.label_column,
                text_columns=self.text_columns,
                label_names=self.label_names,
                model_names=_id2label(model),
            )
        elif self.multilabel:
            self.examples, self.how = user_multilabel_examples(
                self.dataset,
                id_column=self.id_column,
                label_column=self.label_column,
                text_columns=self.text_columns,
                label_names=self.label_names,
                model_names=_named_labels(model),
                tokenizer=_tokenizer(kwargs.get("processing_class")),
            )
        else:
            self.examples, self.how = user_examples(
                self.dataset,
                id_column=self.id_column,
                label_column=self.label_column,
                text_columns=self.text_columns,
                label_names=self.label_names or _model_label_names(model, self.dataset, self.label_column),
                tokenizer=_tokenizer(kwargs.get("processing_class")),
            )
        # the units of the dynamics: the examples, every word of every sentence (``<id>#<k>``), or every
        # label of every example (``<id>#<j>``)
        self.rows = self.examples.frame["id"].astype(str).tolist()
        names = self.examples.label_names
        unit_ids, self.labels, self.counts = self.examples.task_kind.units(self.examples.frame, names)
        self.ids = list(unit_ids)
        self.offsets = np.cumsum(self.counts) - self.counts
        self.n_labels = len(names)
        self.n_classes = len(self.examples.task_kind.unit_classes(names))  # a label unit: (absent, present)
        loader_set = train_dataloader.dataset
        if not hasattr(loader_set, "__len__") or len(loader_set) != len(self.rows):
            size = len(loader_set) if hasattr(loader_set, "__len__") else "an unknown number of"
            raise DataError(
                f"the Trainer trains on {size} rows, the callback's dataset has {len(self.rows)}: give "
                "DataMapCallback the dataset you pass to the Trainer as train_dataset (a map-style dataset)"
            )
        self._check_labels(loader_set)
        if "train" in self.sources:
            self._check_drop_last(args)
        self.collate = train_dataloader.collate_fn
        if self.words:  # the labels of a token model's batch mark each word's first sub-word
            self._check_token_model(model)
        if self.multilabel:
            self._check_multilabel_model(model)
        decision = None
        if self.rank == 0:
            try:
                decision = self._open_run(args, state, model, find_trainer(self), kwargs.get("optimizer"))
            except CartomapError as err:
                broadcast({"error": str(err)})
                raise
        decision = broadcast(decision)
        if "error" in decision:
            raise RunError(f"rank 0: {decision['error']}")
        self.active, self.start_epoch = decision["active"], decision["start_epoch"]
        if self.rank != 0:
            self.run = Run(Path(decision["path"]))
        if not self.active:
            return
        self.loader_dataset, self.fetch = loader_set, IndexedFetch(loader_set)
        if "train" in self.sources:
            self._install(model, train_dataloader)
        self.epoch = self.start_epoch
        self.history = self.run.history()[: self.start_epoch] if self.rank == 0 else []
        self.throttle, self.loss, self.t_start = Throttle(STATUS_EVERY_S), None, time.time()
        self.start_step = state.global_step
        self.clock = StepClock(state.max_steps or 0)  # time left from measured steps only
        self._status(state, force=True, phase="train")

    def _check_labels(self, loader_set) -> None:
        """The Trainer's labels are the callback's, row for row (when the Trainer's set has a label column)."""
        try:
            column = next((c for c in LABEL_COLUMNS if c in column_names(loader_set)), None)
            given = np.asarray(loader_set[column]) if column and hasattr(loader_set, "column_names") else None
        except (CartomapError, TypeError, KeyError, ValueError):
            return
        if self.multilabel:  # multi-hot vectors [N, L]: each label present or absent as the callback's
            if given is None or given.shape != (len(self.rows), self.n_labels) or given.dtype == object:
                return
            given = (given != 0).astype(np.int64).reshape(-1)
            wrong = np.flatnonzero(given != self.labels)
            if len(wrong):
                k = int(wrong[0])
                raise DataError(
                    f"{len(wrong)} labels of the Trainer's training set differ from the callback's dataset, e.g. "
                    f"label {self.examples.label_names[k % self.n_labels]!r} of row {k // self.n_labels} (id "
                    f"{self.rows[k // self.n_labels]!r}): {int(given[k])} against {int(self.labels[k])}; give "
                    "DataMapCallback the dataset the Trainer trains on (same rows, same order), and label_names "
                    "in the model's label order",
                    field=column,
                )
            return
        if given is None or given.shape != self.labels.shape or not np.issubdtype(given.dtype, np.integer):
            return
        wrong = np.flatnonzero(given != self.labels)
        if len(wrong):
            k = int(wrong[0])
            raise DataError(
                f"{len(wrong)} rows of the Trainer's training set have other labels than the callback's dataset, "
                f"e.g. row {k} (id {self.rows[k]!r}): {int(given[k])} against {int(self.labels[k])}; give "
                "DataMapCallback the dataset the Trainer trains on (same rows, same order), and label_names in "
                "the model's label order",
                field=column,
            )

    def _check_token_model(self, model) -> None:
        """A token task needs a token classifier: one row of logits per sub-word."""
        kind = type(model).__name__
        if "TokenClassification" not in kind and not getattr(model, "cartomap_token_model", False):
            warnings.warn(
                f"task='token' with a {kind}: the callback expects a token classifier's logits "
                "[batch, sub-words, classes] and the batch's aligned labels",
                stacklevel=3,
            )

    def _check_multilabel_model(self, model) -> None:
        """A multi-label task needs one sigmoid output per label of the label space."""
        config = getattr(model, "config", None)
        outputs = getattr(config, "num_labels", None)
        if isinstance(outputs, int) and outputs != self.n_labels:
            raise DataError(
                f"the model has {outputs} outputs (num_labels), the dataset {self.n_labels} labels "
                f"{list(self.examples.label_names)}: a multi-label model has one logit per label",
                field="label_names",
            )
        problem = getattr(config, "problem_type", None)
        if problem not in (None, "multi_label_classification"):
            warnings.warn(
                f"task='multilabel' with a model of problem_type {problem!r}: the callback records one sigmoid "
                "output per label (problem_type='multi_label_classification')",
                stacklevel=3,
            )

    def _word_rows(self, rows, logits, labels):
        """(unit rows, logits [M, C]) of a batch of sentences at ``rows``: each word at its first sub-word."""
        from cartomap.integrations.recorder import word_unit_rows

        if labels is None:
            raise DataError(
                "a token task's batches need their aligned labels (a word's tag at its first sub-word, -100 "
                "elsewhere) to find the words: keep the 'labels' column",
                field="labels",
            )
        return word_unit_rows(
            np.asarray(rows, dtype=np.int64),
            logits,
            labels,
            self.offsets,
            self.counts,
            self.labels,
            self.ids,
            self.rows,
            self.epoch,
        )

    def _check_drop_last(self, args) -> None:
        per_step = args.per_device_train_batch_size * self.world
        dropped = len(self.rows) % per_step if args.dataloader_drop_last else 0
        if dropped:
            raise DataError(
                f"dataloader_drop_last drops {dropped} of {len(self.rows)} examples every epoch, so the training "
                "pass never sees them: use mode='eval', or dataloader_drop_last=False",
                field="dataloader_drop_last",
            )

    def _config(self, args, state, model, trainer=None, optimizer=None):
        world = self.world
        settings = {k: getattr(args, k) for k in IDENTITY_ARGS if hasattr(args, k)}
        settings.update(
            world_size=world,
            model_class=type(model).__name__,
            model_config=model_settings(model),
            num_labels=self.n_labels,
            mode=self.mode,
            ids=self.how["ids"],
            **trainer_settings(trainer, optimizer, getattr(self, "collate", None)),
        )
        if self.tag:
            settings["tag"] = self.tag
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
            record=self.mode,
            record_points=self.record_points,
            skip_epochs=min(self.skip_epochs, max(1, epochs) - 1),
            save_checkpoints=False,
            device=str(args.device),
            precision="bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
        )
        name_or_path = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        return recorded_config(
            "trainer",
            self.examples,
            data_name=self.data_name or dataset_label(self.dataset, self.examples),
            model=str(name_or_path),
            train=train,
            settings=settings,
            name=self.name,
            max_length=_max_length(self.dataset),
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

    def _open_run(self, args, state, model, trainer=None, optimizer=None) -> dict[str, Any]:
        """Create or reopen the run (rank 0); what every process needs to know about it."""
        config = self._config(args, state, model, trainer, optimizer)
        run = self.store.create(config, self.examples)
        self.run = run
        if run.state == "done":
            warnings.warn(reused_message(run), ReusedRunWarning, stacklevel=2)
            run.log("a training with this config on this data began: not recorded (the run is done)")
            return {"active": False, "start_epoch": 0, "path": str(run.path)}
        resumed = state.global_step > 0
        start = int(math.floor(state.epoch + 1e-9)) if resumed else 0
        if resumed and "train" in self.sources and abs(state.epoch - start) > 1e-6:
            raise RunError(
                f"the Trainer resumes in the middle of epoch {start + 1} (from a checkpoint saved at step "
                f"{state.global_step}); the training-pass logits of its first batches were not kept: resume from "
                "an end-of-epoch checkpoint (save_strategy='epoch') or record with mode='eval'"
            )
        self._lock = run.acquire_lock()  # RunError while another process records into this run
        for source in self.sources:
            kept = start * (self.record_points if source == "eval" else 1)  # recordings of finished epochs
            have = run.dynamics_epochs(source)
            if have[:kept] != list(range(kept)):
                self._release()
                raise RunError(
                    f"run {run.id} has {source} dynamics of epochs {have} but the Trainer resumes after epoch "
                    f"{start}: start the training again without resume_from_checkpoint"
                )
            for e in have[kept:]:  # from an earlier attempt that did not finish
                run.epoch_path(source, e).unlink()
        run.log(
            f"recording {self.mode} dynamics of a transformers Trainer with DataMapCallback "
            f"({len(self.ids)} examples, ids from {self.how['ids']}, {self.world} process(es))"
            + (f"; resumed after epoch {start}" if resumed else "")
        )
        run.set_status(state="running", error=None, pid=None)
        print(
            f"cartomap: recording {self.mode} dynamics into run {run.id} (ids from {self.how['ids']}): {run.path}",
            flush=True,
        )
        return {"active": True, "start_epoch": start, "path": str(run.path)}

    def _install(self, model, train_dataloader) -> None:
        """The train-pass plumbing: indexed fetch, index collator, hooks on the model."""
        try:
            self.loader_dataset.__getitems__ = self.fetch
        except AttributeError as err:
            raise DataError(
                f"cannot add row indices to a {type(self.loader_dataset).__name__}: use mode='eval'"
            ) from err
        if isinstance(self.collate, IndexCollator):
            self.collate = self.collate.collate
        # accelerate's prepared loader iterates the DataLoader it wraps: the collator goes there
        loader = getattr(train_dataloader, "base_dataloader", train_dataloader)
        expected = self.labels.reshape(-1, self.n_labels) if self.multilabel else self.labels
        loader.collate_fn = IndexCollator(self.collate, expected)
        self._steps: list[tuple[Any, Any]] = []
        self._pending = None
        self._hooks = [
            model.register_forward_pre_hook(self._pre_hook, with_kwargs=True, prepend=True),
            model.register_forward_hook(self._hook),
        ]
        self._model, self._loader = model, loader

    def _pre_hook(self, module, args, kwargs):
        index = kwargs.pop(INDEX_KEY, None)
        self._pending = index if index is not None and module.training else None
        self._pending_labels = kwargs.get("labels") if self.words else None
        return args, kwargs

    def _hook(self, module, args, output):
        if self._pending is not None:
            logits = _logits_of(output).detach().float()
            if self.multilabel:  # each label of each example a unit (0, z), on the device
                self._steps.append(self._label_units(self._pending.detach(), logits))
            elif self.words:  # every word at its first sub-word (on the CPU: one synchronisation a step)
                import torch

                rows, values = self._word_rows(
                    self._pending.cpu().numpy(),
                    logits.cpu(),
                    self._pending_labels.detach().cpu() if self._pending_labels is not None else None,
                )
                self._steps.append((torch.as_tensor(rows), torch.as_tensor(values)))
            else:
                self._steps.append((self._pending.detach(), logits))
            self._pending = None

    def _label_units(self, index, logits):
        """(unit rows [B * L], rows (0, z) [B * L, 2]) of a multi-label batch: example row i's logit z of
        label j as unit i * L + j (:func:`cartomap.integrations.recorder.label_unit_rows`, in torch)."""
        import torch

        if logits.dim() != 2 or logits.shape[-1] != self.n_labels:
            raise DataError(
                f"logits of shape {tuple(logits.shape)}; a multi-label model's are [batch, {self.n_labels}] "
                "(one logit per label)",
                field="logits",
            )
        labels = torch.arange(self.n_labels, device=index.device)
        rows = (index.reshape(-1, 1) * self.n_labels + labels).reshape(-1)
        z = logits.reshape(-1)
        return rows, torch.stack((torch.zeros_like(z), z), dim=-1)

    # -- during training ---------------------------------------------------------------------------
    def on_epoch_begin(self, args, state, control, **kwargs):
        if self.active:
            self.epoch = int(math.floor(state.epoch + 1e-9))
            self._steps = []
            self._mid: dict[int, np.ndarray] = {}
            self.t_epoch = time.time()
            self._marks = {}
            if "eval" in self.sources and self.record_points > 1:
                from cartomap.training.loop import eval_marks

                epochs = max(1, int(state.num_train_epochs or 1))
                self._per_epoch = max(1, round(state.max_steps / epochs))
                self._marks = eval_marks(self._per_epoch, self.record_points)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.active and logs and "loss" in logs:
            self.loss = float(logs["loss"])

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if not self.active:
            return
        step = state.global_step - self.epoch * getattr(self, "_per_epoch", 1)
        if getattr(self, "_marks", None) and step in self._marks and model is not None:
            from cartomap.training.loop import preserved_rng

            self._status(state, force=True, phase="eval-pass")
            with preserved_rng(next(model.parameters()).device):  # the Trainer's dropout masks untouched
                logits_now = self._eval_pass(model, args)
            for j in self._marks[step]:
                self._mid[j] = logits_now
        self._status(state)

    def _status(self, state, force: bool = False, **fields) -> None:
        if self.rank != 0 or not self.throttle.ready(force):
            return
        epochs = max(1, int(state.num_train_epochs or 1))
        per_epoch = max(1, round(state.max_steps / epochs)) if state.max_steps else None
        done = state.global_step - self.start_step
        eta = self.clock.eta_s(state.global_step) if done > 0 and state.max_steps else None
        self.run.set_status(
            state="running",
            epoch=min(self.epoch + 1, epochs),
            epochs=epochs,
            step=state.global_step - self.epoch * per_epoch if per_epoch else None,
            steps_per_epoch=per_epoch,
            global_step=state.global_step,
            total_steps=state.max_steps,
            loss=self.loss,
            eta_s=round(eta, 1) if eta is not None else None,
            **fields,
        )

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        if not self.active:
            return
        complete = abs(state.epoch - (self.epoch + 1)) < 1e-6
        if not complete:  # max_steps or a stop in the middle of the epoch
            if self.rank == 0:
                self.run.log(f"epoch {self.epoch + 1} stopped at {state.epoch:.3f}: not recorded")
            return
        record: dict[str, Any] = {
            "epoch": self.epoch + 1,
            "global_step": state.global_step,
            "train_seconds": round(time.time() - self.t_epoch, 3),
        }
        logits: dict[str, np.ndarray] = {}
        if "train" in self.sources:
            logits["train"] = self._gathered_train()
        if "eval" in self.sources:
            self._status(state, force=True, phase="eval-pass")
            t0 = time.time()
            logits["eval"] = self._eval_pass(model, args)
            record["eval_pass_seconds"] = round(time.time() - t0, 3)
        if self.rank == 0:
            first = logits[self.sources[0]]
            record["train_accuracy"] = float((first.argmax(1) == self.labels).mean())
            record["train_loss"] = self._epoch_loss(state, logits)
            for source, values in logits.items():
                if source == "eval" and self.record_points > 1:
                    self._write_points(values)
                else:
                    self.run.write_epoch(source, self.epoch, self.ids, values)
            self.history.append(record)
            _write_history(self.run, self.history)
            self.run.log(" ".join(f"{k}={v}" for k, v in record.items()))
        self._steps = []
        self._status(state, force=True, phase="train")

    def _write_points(self, last: np.ndarray) -> None:
        """The epoch's eval-mode recordings as recordings epoch * k ... epoch * k + k - 1 (the last one is
        the end-of-epoch pass)."""
        k = self.record_points
        missing = sorted(set(range(k - 1)) - set(self._mid))
        if missing:
            raise RunError(
                f"epoch {self.epoch + 1}: the eval-mode recordings {missing} inside the epoch were not made "
                f"(the Trainer's steps per epoch did not match the plan of {k} recordings an epoch)"
            )
        for j in range(k - 1):
            self.run.write_epoch("eval", self.epoch * k + j, self.ids, self._mid[j])
        self.run.write_epoch("eval", self.epoch * k + k - 1, self.ids, last)

    def _epoch_loss(self, state, logits: dict[str, np.ndarray]) -> float:
        """Mean training loss of the epoch: from the train-pass logits, else the Trainer's logged losses."""
        if "train" in logits:
            z = logits["train"].astype(np.float64)
            z = z - z.max(1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(1, keepdims=True))
            return float(-logp[np.arange(len(self.labels)), self.labels].mean())
        losses = [
            h["loss"]
            for h in state.log_history
            if "loss" in h and self.epoch < h.get("epoch", 0) <= self.epoch + 1
        ]
        return float(np.mean(losses)) if losses else float("nan")

    def _gathered_train(self) -> np.ndarray:
        """This epoch's train-pass logits [N, C] from every process, each example once (module docstring)."""
        import torch

        if self._steps:
            rows = torch.cat([s[0].reshape(-1) for s in self._steps]).cpu().numpy()
            values = torch.cat([s[1] for s in self._steps]).cpu().numpy()
            sizes = [len(s[0].reshape(-1)) for s in self._steps]
        else:
            rows, values, sizes = np.zeros(0, np.int64), np.zeros((0, self.n_classes), np.float32), []
        step = np.repeat(np.arange(len(sizes)), sizes)
        part = {"rows": rows, "logits": values, "step": step, "last": len(sizes) - 1}
        unique, logits, repeated, dropped = first_occurrences(all_gather(part))
        if dropped and self.rank == 0:
            self.run.log(f"epoch {self.epoch + 1}: dropped {dropped} repeated row(s) of the last batches")
        if len(repeated):
            raise DataError(
                f"epoch {self.epoch + 1}: example {self.ids[int(repeated[0])]!r} was trained twice in one epoch "
                "(a sampler that repeats examples?); the training-pass mode records each example once per "
                "epoch: use mode='eval'",
                field="ids",
            )
        if len(unique) != len(self.ids):
            seen = np.zeros(len(self.ids), dtype=bool)
            seen[unique] = True
            missing = [self.ids[k] for k in np.flatnonzero(~seen)[:5]]
            raise DataError(
                f"epoch {self.epoch + 1}: the training pass saw {len(unique)} of {len(self.ids)} examples; "
                f"missing e.g. {missing} (a sampler that skips examples, or dataloader_drop_last?)",
                field="ids",
            )
        if logits.shape[1] != self.n_classes:
            raise DataError(f"the model has {logits.shape[1]} outputs, the dataset {self.n_classes} classes")
        out = np.empty((len(self.ids), self.n_classes), dtype=np.float32)
        out[unique] = logits
        return out

    def _eval_pass(self, model, args) -> np.ndarray:
        """Eval-mode logits [N, C] of every training example (split across processes, gathered)."""
        import torch

        order = self._eval_order()
        mine = order[self.rank :: self.world]
        size = max(1, args.per_device_eval_batch_size)
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        rows, values = [], []
        try:
            with torch.no_grad():
                for start in range(0, len(mine), size):
                    batch_rows = mine[start : start + size].tolist()
                    batch = self.collate(self.fetch.plain(batch_rows))
                    inputs = {
                        k: v.to(device) if hasattr(v, "to") else v
                        for k, v in batch.items()
                        if k not in LABEL_KEYS and k != INDEX_KEY
                    }
                    logits = _logits_of(model(**inputs)).float().cpu().numpy()
                    if self.words:  # every word at its first sub-word
                        unit_rows, logits = self._word_rows(batch_rows, logits, _labels_of(batch))
                        rows.extend(unit_rows.tolist())
                    elif self.multilabel:  # each label of each example a unit (0, z)
                        unit_rows, logits = label_unit_rows(batch_rows, logits, self.n_labels, self.epoch)
                        rows.extend(unit_rows.tolist())
                    else:
                        rows.extend(batch_rows)
                    values.append(logits)
        finally:
            model.train(was_training)
        local = {
            "rows": np.asarray(rows, dtype=np.int64),
            "logits": np.concatenate(values) if values else np.zeros((0, self.n_classes), np.float32),
        }
        out = np.empty((len(self.ids), self.n_classes), dtype=np.float32)
        for part in all_gather(local):
            out[part["rows"]] = part["logits"]
        return out

    def _eval_order(self) -> np.ndarray:
        """Rows longest first (less padding), when the items have input_ids; else in order."""
        cached = getattr(self, "_order", None)
        if cached is not None:
            return cached
        n = len(self.rows)
        lengths = None
        try:
            if "input_ids" in column_names(self.loader_dataset):
                lengths = np.array([len(x) for x in self.loader_dataset["input_ids"]])
        except (CartomapError, TypeError, KeyError):
            lengths = None
        self._order = np.argsort(-lengths, kind="stable") if lengths is not None else np.arange(n)
        return self._order

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not (self.active and self.rank == 0 and metrics and self.history):
            return
        record = self.history[-1]
        if abs(record["epoch"] - state.epoch) > 1e-6:
            return  # an evaluation in the middle of an epoch
        if "eval_accuracy" in metrics:
            record["dev_accuracy"] = float(metrics["eval_accuracy"])
        if "eval_exact_match" in metrics:  # a multi-label run: every label of an example right
            record["dev_exact_match"] = float(metrics["eval_exact_match"])
        if "eval_loss" in metrics:
            record["dev_loss"] = float(metrics["eval_loss"])
        _write_history(self.run, self.history)

    # -- train end ---------------------------------------------------------------------------------
    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if not self.active:
            return
        self._remove_hooks()
        if self.rank == 0:
            try:
                self._finish(model, processing_class)
            finally:
                self._release()
        self.active = False

    def _finish(self, model, tokenizer) -> None:
        run = self.run
        epochs = run.dynamics_epochs(self.sources[0])
        if not epochs:
            run.set_status(state="failed", error="training ended before a complete epoch: nothing to map")
            run.log("training ended before a complete epoch: nothing recorded")
            return
        dynamics = {source: run.dynamics(source)[1] for source in self.sources}
        if self.save_model and model is not None:
            from cartomap.training.loop import save_pretrained_atomic

            saver = tokenizer if hasattr(tokenizer, "save_pretrained") else None
            save_pretrained_atomic(model, saver, run.model_dir)
        last = self.history[-1] if self.history else {}
        finish_run(
            run,
            dynamics,
            self.labels,
            self.ids,
            self.history,
            write_dynamics=False,
            dev_accuracy=last.get("dev_accuracy"),
            recorded_by="DataMapCallback",
        )
        run.log(f"done: {len(epochs)} epochs of {', '.join(self.sources)} dynamics")

    def _remove_hooks(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        loader = getattr(self, "_loader", None)
        if loader is not None and isinstance(loader.collate_fn, IndexCollator):
            loader.collate_fn = loader.collate_fn.collate
        dataset = getattr(self, "loader_dataset", None)
        if dataset is not None and isinstance(
            getattr(dataset, "__dict__", {}).get("__getitems__"), IndexedFetch
        ):
            del dataset.__dict__["__getitems__"]

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


# --------------------------------------------------------------------------- multi-label evaluation
def multilabel_metrics(eval_prediction: Any) -> dict[str, float]:
    """A ``compute_metrics`` for a multi-label ``Trainer``: ``accuracy``, the share of (example, label) whose
    prediction (present iff its logit > 0) is its gold state, and ``exact_match``, the share of examples
    with every label right, as ``cartomap train --task multilabel`` reports them. DataMapCallback keeps the
    Trainer's ``eval_accuracy`` and ``eval_exact_match`` as the run's per-label dev accuracy and dev exact
    match. ``eval_prediction``: the Trainer's EvalPrediction, or (logits [N, L], multi-hot labels [N, L])."""
    logits, labels = (
        (eval_prediction.predictions, eval_prediction.label_ids)
        if hasattr(eval_prediction, "predictions")
        else tuple(eval_prediction)
    )
    if isinstance(logits, (tuple, list)):  # a model that returns more than its logits
        logits = logits[0]
    z, gold = np.asarray(logits, dtype=np.float64), np.asarray(labels, dtype=np.float64) != 0
    if z.ndim != 2 or z.shape != gold.shape:
        raise DataError(
            f"logits of shape {z.shape} for labels of shape {gold.shape}; a multi-label model's are "
            "[examples, labels], as its multi-hot labels",
            field="labels",
        )
    right = (z > 0) == gold
    return {"accuracy": float(right.mean()), "exact_match": float(right.all(axis=1).mean())}


# --------------------------------------------------------------------------- what the run id is made of
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


# --------------------------------------------------------------------------- helpers
def _write_history(run: Run, history: list[dict[str, Any]]) -> None:
    from cartomap.io import atomic_write_json

    atomic_write_json(run.history_path, history)


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


def _tokenizer(processing_class: Any):
    """The tokenizer of a Trainer's processing class (a tokenizer, or a processor holding one)."""
    if processing_class is None:
        return None
    if hasattr(processing_class, "batch_decode") and hasattr(processing_class, "pad_token_id"):
        return processing_class
    return getattr(processing_class, "tokenizer", None)


def _id2label(model) -> tuple[str, ...] | None:
    """The model's class names in order (its config's id2label), None without."""
    id2label = getattr(getattr(model, "config", None), "id2label", None) or {}
    return tuple(str(id2label[k]) for k in sorted(id2label)) if id2label else None


def _named_labels(model) -> tuple[str, ...] | None:
    """The model's id2label when it names the labels: None without, or for the names transformers makes up
    (``LABEL_0``, ``LABEL_1``, ...), which say nothing of a multi-label run's labels."""
    names = _id2label(model)
    if names is None or names == tuple(f"LABEL_{k}" for k in range(len(names))):
        return None
    return names


def _model_label_names(model, dataset, label_column) -> tuple[str, ...] | None:
    """The model's id2label, unless the dataset's ClassLabel column names the classes itself."""
    columns = column_names(dataset)
    column = label_column or next((c for c in LABEL_COLUMNS if c in columns), None)
    if column is not None and class_names(dataset, column):
        return None
    id2label = getattr(getattr(model, "config", None), "id2label", None) or {}
    if not id2label:
        return None
    return tuple(str(id2label[k]) for k in sorted(id2label))


def _max_length(dataset: Any) -> int:
    """The longest input_ids of the dataset (the truncation it was tokenized with), else the default."""
    try:
        if hasattr(dataset, "select_columns") and "input_ids" in column_names(dataset):
            return max(len(x) for x in dataset["input_ids"])
    except (CartomapError, TypeError, KeyError, ValueError):
        pass
    return ModelConfig.max_length
