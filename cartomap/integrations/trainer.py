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

import math
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from cartomap.config import RECORDING_MODES, Record, Source, TrainConfig, recorded_sources
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.integrations.examples import (
    LABEL_COLUMNS,
    column_names,
    user_examples,
    user_multilabel_examples,
    user_token_examples,
)
from cartomap.integrations.trainer_config import (
    ReusedRunWarning,
    find_trainer,
    id2label_names,
    model_label_names,
    named_labels,
    reused_message,
    tokenizer_of,
    trainer_run_config,
)
from cartomap.integrations.trainer_recording import IndexedFetch, LogitsRecording, broadcast
from cartomap.integrations.unit_rows import UnitLayout
from cartomap.runs.importer import finish_run
from cartomap.runs.progress import Phase, StepClock
from cartomap.runs.state import State, Throttle
from cartomap.runs.store import Run, RunStore

MODES = {mode: recorded_sources(mode) for mode in RECORDING_MODES}  # mode -> the sources it records
STATUS_EVERY_S = 1.0


# --------------------------------------------------------------------------- the callback
class DataMapCallback(LogitsRecording, TrainerCallback):
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
        mode: str = Record.EVAL,
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
        self.words = self.task is not None and self.task.unit.sentences
        self.multilabel = self.task is not None and self.task.unit.label_sets
        if mode not in MODES:
            raise DataError(f"unknown mode {mode!r}: expected one of {tuple(MODES)}", field="mode")
        TrainConfig(record=mode, record_points=record_points)  # DataError naming a bad value
        if record_points > 1 and Source.EVAL not in MODES[mode]:
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
                model_names=id2label_names(model),
            )
        elif self.multilabel:
            self.examples, self.how = user_multilabel_examples(
                self.dataset,
                id_column=self.id_column,
                label_column=self.label_column,
                text_columns=self.text_columns,
                label_names=self.label_names,
                model_names=named_labels(model),
                tokenizer=tokenizer_of(kwargs.get("processing_class")),
            )
        else:
            self.examples, self.how = user_examples(
                self.dataset,
                id_column=self.id_column,
                label_column=self.label_column,
                text_columns=self.text_columns,
                label_names=self.label_names or model_label_names(model, self.dataset, self.label_column),
                tokenizer=tokenizer_of(kwargs.get("processing_class")),
            )
        # the units of the dynamics: the examples, every word of every sentence (``<id>#<k>``), or every
        # label of every example (``<id>#<j>``)
        self.rows = self.examples.frame["id"].astype(str).tolist()
        names = self.examples.label_names
        unit_ids, self.labels, self.counts = self.examples.task_kind.units(self.examples.frame, names)
        self.ids = list(unit_ids)
        self.n_labels = len(names)
        self.layout = UnitLayout(
            self.examples.task_kind.unit, self.rows, self.ids, self.labels, self.counts, self.n_labels
        )
        self.n_classes = len(self.examples.task_kind.unit_classes(names))  # a label unit: (absent, present)
        loader_set = train_dataloader.dataset
        if not hasattr(loader_set, "__len__") or len(loader_set) != len(self.rows):
            size = len(loader_set) if hasattr(loader_set, "__len__") else "an unknown number of"
            raise DataError(
                f"the Trainer trains on {size} rows, the callback's dataset has {len(self.rows)}: give "
                "DataMapCallback the dataset you pass to the Trainer as train_dataset (a map-style dataset)"
            )
        self._check_labels(loader_set)
        if Source.TRAIN in self.sources:
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
        if Source.TRAIN in self.sources:
            self._install(model, train_dataloader)
        self.epoch = self.start_epoch
        self.history = self.run.history()[: self.start_epoch] if self.rank == 0 else []
        self.throttle, self.loss, self.t_start = Throttle(STATUS_EVERY_S), None, time.time()
        self.start_step = state.global_step
        self.clock = StepClock(state.max_steps or 0)  # time left from measured steps only
        self._status(state, force=True, phase=Phase.TRAIN)

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

    def _check_drop_last(self, args) -> None:
        per_step = args.per_device_train_batch_size * self.world
        dropped = len(self.rows) % per_step if args.dataloader_drop_last else 0
        if dropped:
            raise DataError(
                f"dataloader_drop_last drops {dropped} of {len(self.rows)} examples every epoch, so the training "
                "pass never sees them: use mode='eval', or dataloader_drop_last=False",
                field="dataloader_drop_last",
            )

    def _open_run(self, args, state, model, trainer=None, optimizer=None) -> dict[str, Any]:
        """Create or reopen the run (rank 0); what every process needs to know about it."""
        config = trainer_run_config(
            args,
            state,
            model,
            examples=self.examples,
            how=self.how,
            dataset=self.dataset,
            mode=self.mode,
            world=self.world,
            n_labels=self.n_labels,
            record_points=self.record_points,
            skip_epochs=self.skip_epochs,
            tag=self.tag,
            name=self.name,
            data_name=self.data_name,
            trainer=trainer,
            optimizer=optimizer,
            collate=getattr(self, "collate", None),
        )
        run = self.store.create(config, self.examples)
        self.run = run
        if run.state == State.DONE:
            warnings.warn(reused_message(run), ReusedRunWarning, stacklevel=2)
            run.log("a training with this config on this data began: not recorded (the run is done)")
            return {"active": False, "start_epoch": 0, "path": str(run.path)}
        resumed = state.global_step > 0
        start = int(math.floor(state.epoch + 1e-9)) if resumed else 0
        if resumed and Source.TRAIN in self.sources and abs(state.epoch - start) > 1e-6:
            raise RunError(
                f"the Trainer resumes in the middle of epoch {start + 1} (from a checkpoint saved at step "
                f"{state.global_step}); the training-pass logits of its first batches were not kept: resume from "
                "an end-of-epoch checkpoint (save_strategy='epoch') or record with mode='eval'"
            )
        self._lock = run.acquire_lock()  # RunError while another process records into this run
        for source in self.sources:
            kept = start * (self.record_points if source.eval_mode else 1)  # recordings of finished epochs
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
        run.set_status(state=State.RUNNING, error=None, pid=None)
        print(
            f"cartomap: recording {self.mode} dynamics into run {run.id} (ids from {self.how['ids']}): {run.path}",
            flush=True,
        )
        return {"active": True, "start_epoch": start, "path": str(run.path)}

    # -- during training ---------------------------------------------------------------------------
    def on_epoch_begin(self, args, state, control, **kwargs):
        if self.active:
            self.epoch = int(math.floor(state.epoch + 1e-9))
            self._steps = []
            self._mid: dict[int, np.ndarray] = {}
            self.t_epoch = time.time()
            self._marks = {}
            if Source.EVAL in self.sources and self.record_points > 1:
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

            self._status(state, force=True, phase=Phase.EVAL_PASS)
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
            state=State.RUNNING,
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
        if Source.TRAIN in self.sources:
            logits[Source.TRAIN] = self._gathered_train()
        if Source.EVAL in self.sources:
            self._status(state, force=True, phase=Phase.EVAL_PASS)
            t0 = time.time()
            logits[Source.EVAL] = self._eval_pass(model, args)
            record["eval_pass_seconds"] = round(time.time() - t0, 3)
        if self.rank == 0:
            first = logits[self.sources[0]]
            record["train_accuracy"] = float((first.argmax(1) == self.labels).mean())
            record["train_loss"] = self._epoch_loss(state, logits)
            for source, values in logits.items():
                if source == Source.EVAL and self.record_points > 1:
                    self._write_points(values)
                else:
                    self.run.write_epoch(source, self.epoch, self.ids, values)
            self.history.append(record)
            _write_history(self.run, self.history)
            self.run.log(" ".join(f"{k}={v}" for k, v in record.items()))
        self._steps = []
        self._status(state, force=True, phase=Phase.TRAIN)

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
            self.run.write_epoch(Source.EVAL, self.epoch * k + j, self.ids, self._mid[j])
        self.run.write_epoch(Source.EVAL, self.epoch * k + k - 1, self.ids, last)

    def _epoch_loss(self, state, logits: dict[str, np.ndarray]) -> float:
        """Mean training loss of the epoch: from the train-pass logits, else the Trainer's logged losses."""
        if Source.TRAIN in logits:
            z = logits[Source.TRAIN].astype(np.float64)
            z = z - z.max(1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(1, keepdims=True))
            return float(-logp[np.arange(len(self.labels)), self.labels].mean())
        losses = [
            h["loss"]
            for h in state.log_history
            if "loss" in h and self.epoch < h.get("epoch", 0) <= self.epoch + 1
        ]
        return float(np.mean(losses)) if losses else float("nan")

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
            run.set_status(state=State.FAILED, error="training ended before a complete epoch: nothing to map")
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


def _write_history(run: Run, history: list[dict[str, Any]]) -> None:
    from cartomap.io import atomic_write_json

    atomic_write_json(run.history_path, history)
