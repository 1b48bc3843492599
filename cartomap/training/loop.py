"""Fine-tune a sequence classifier and record its training dynamics.

One readable loop on ``accelerate``: the same code runs on CPU, one GPU, or several processes
under ``accelerate launch`` / ``torchrun`` (every batch split across them, :mod:`.sharding`). For
every training example and epoch it records the logits of the training forward pass (Cartography)
and optionally of an eval-mode pass after the epoch (WaNLI), written into preallocated
[epochs, examples, classes] arrays by example index, each example once per epoch, so neither
shuffling nor gathering across processes can misplace, repeat or drop a row.

After every epoch the logits, the weights, the optimizer and the scheduler are saved: a
killed run restarts at its last completed epoch. The training loss every k steps goes to the run's
step log as it trains (:mod:`cartomap.runs.steps`; a restart first drops the lines of the epoch it trains
again). Every epoch reseeds all random number
generators from (seed, epoch), so a resumed run ends with the same dynamics as an
uninterrupted one.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cartomap.config import MAIN_METRICS, SOURCES, RunConfig, Source
from cartomap.data.conll import is_bio_tagged
from cartomap.errors import RunError
from cartomap.io import atomic_folder, atomic_write_json, read_json, torch_save
from cartomap.runs import cpu, layout
from cartomap.runs import steps as step_log
from cartomap.runs.progress import Phase, StepClock
from cartomap.runs.state import State, Throttle
from cartomap.runs.store import Run, RunStore
from cartomap.runs.tables import arrow_ids
from cartomap.runs.units import keyed_metrics
from cartomap.scores import entities
from cartomap.training.batching import (
    DynamicPadding,
    EpochBatches,
    TokenizedExamples,
    eval_batches_for,
    tokenize,
)
from cartomap.training.orders import training_batches
from cartomap.training.prepare import prepare_run
from cartomap.training.sharding import (
    any_process,
    check_complete,
    make_loader,
    record_once,
    sum_over_processes,
    training_loss,
)

StepCallback = Callable[[dict[str, Any]], None]
STATUS_EVERY_S = 1.0  # how often the running status is written to the run store


# --------------------------------------------------------------------------- data


# --------------------------------------------------------------------------- loop pieces
def model_inputs(batch) -> dict[str, Any]:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}


def to_device(batch: dict[str, Any], device) -> dict[str, Any]:
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()}


def gather_rows(accelerator, index, logits):
    """Gather (row index, logits) from every process; padding rows carry index -1 and are dropped."""
    index = accelerator.pad_across_processes(index, pad_index=-1)
    logits = accelerator.pad_across_processes(logits.float(), pad_index=0)
    index, logits = accelerator.gather((index, logits))
    keep = index >= 0
    return index[keep].cpu().numpy(), logits[keep].cpu().numpy()


def flat_units(logits, batch):
    """(logits [U, C], labels [U], index [U]) of a batch, one row per unit: a sequence classifier's
    rows as they are; a token classifier's sub-tokens flattened (those that record no unit carry
    index -1 and label -100, which the loss and the recording leave out); a multi-label classifier's
    logit z of every label (logits [B, L] as its labels [B, L]) as the two-class row (0, z): its softmax
    is (1 - sigmoid(z), sigmoid(z)), so the cross-entropy of a unit is the binary cross-entropy of its
    label and every per-unit metric is that of the label's sigmoid."""
    import torch

    labels, index = batch["labels"].reshape(-1), batch["index"].reshape(-1)
    if logits.dim() == batch["labels"].dim():  # one logit per label of each example
        z = logits.reshape(-1)
        return torch.stack((torch.zeros_like(z), z), dim=-1), labels, index
    return logits.reshape(-1, logits.shape[-1]), labels, index


def predict_logits(model, loader, accelerator, n_rows: int, n_classes: int) -> np.ndarray:
    """Eval-mode logits [n_rows, n_classes] for every row (unit) the loader yields."""
    import torch

    out = np.zeros((n_rows, n_classes), dtype=np.float32)
    model.eval()
    with torch.no_grad():
        for batch in loader:
            batch = to_device(batch, accelerator.device)
            with accelerator.autocast():
                logits = model(**model_inputs(batch)).logits
            logits, _, index = flat_units(logits, batch)
            index, values = gather_rows(accelerator, index, logits)
            out[index] = values
    return out


def seed_everything(seed: int) -> None:
    from accelerate.utils import set_seed

    set_seed(seed)


def epoch_seed(seed: int, epoch: int) -> int:
    return seed * 1009 + epoch  # distinct, reproducible stream per epoch


def no_decay(name: str) -> bool:
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def build_optimizer(model, cfg, device_type: str = "cpu"):
    import torch

    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not no_decay(n)],
            "weight_decay": cfg.weight_decay,
        },
        {"params": [p for n, p in model.named_parameters() if no_decay(n)], "weight_decay": 0.0},
    ]
    # The fused kernel updates every tensor in one pass: on a CPU about 6x faster than the default
    # per-tensor loop (14 vs 82 ms a step for MiniLM's 22.7M parameters), which at batch 16 was a
    # third of each step (bench/bench_training.py). Same update rule, float rounding aside.
    fused = True if device_type in ("cpu", "cuda") else None
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, eps=cfg.adam_epsilon, fused=fused)


# --------------------------------------------------------------------------- resume state
def save_state(run: Run, epoch: int, model, optimizer, scheduler, trainer: dict) -> None:
    """Write the resume point of a completed epoch into the run's state folder (assembled under a
    temporary name, then renamed: :func:`cartomap.io.atomic_folder`, which leaves nothing behind when a
    write fails), then point its "latest" file at it and drop older ones."""
    from safetensors.torch import save_model

    def write(tmp: Path) -> None:
        save_model(model, str(tmp / layout.STATE_WEIGHTS))
        torch_save(optimizer.state_dict(), tmp / layout.STATE_OPTIMIZER)
        torch_save(scheduler.state_dict(), tmp / layout.STATE_SCHEDULER)
        atomic_write_json(tmp / layout.STATE_COUNTERS, trainer)

    final = atomic_folder(run.state_epoch_dir(epoch), write)
    atomic_write_json(run.state_latest_path, {"epoch": epoch})
    for old in run.state_dir.iterdir():
        if old.is_dir() and old != final and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)


def load_state(run: Run, model, optimizer, scheduler) -> dict | None:
    """Restore the last completed epoch, if any; returns its trainer counters."""
    import torch
    from safetensors.torch import load_model

    latest = run.state_latest_path
    if not latest.exists():
        return None
    folder = run.state_epoch_dir(read_json(latest)["epoch"])
    load_model(model, str(folder / layout.STATE_WEIGHTS))
    optimizer.load_state_dict(torch.load(folder / layout.STATE_OPTIMIZER, weights_only=True))
    scheduler.load_state_dict(torch.load(folder / layout.STATE_SCHEDULER, weights_only=True))
    return read_json(folder / layout.STATE_COUNTERS)


def save_pretrained_atomic(model, tokenizer, folder: Path) -> None:
    """The model's weights (safetensors) and the tokenizer (when given) into ``folder``, atomically
    (:func:`cartomap.io.atomic_folder`: a failed write leaves no temporary folder)."""
    from cartomap.training.models import quiet_transformers

    def write(tmp: Path) -> None:
        with quiet_transformers():
            model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)

    atomic_folder(folder, write)


# --------------------------------------------------------------------------- the loop
class Progress:
    """Throttled status writes plus a per-step callback (the CLI's progress bar)."""

    def __init__(self, run: Run, on_step: StepCallback | None, total_steps: int, start_step: int):
        self.run, self.on_step, self.total_steps = run, on_step, total_steps
        self.start_step = start_step
        self.clock = StepClock(total_steps)  # time left from measured steps only
        self.throttle = Throttle(STATUS_EVERY_S)
        self.fields: dict[str, Any] = {"eta_s": None}  # no estimate (of an earlier attempt) until measured
        self.writes = process_rank() == 0

    def update(self, force: bool = False, **fields) -> None:
        self.fields.update(fields)
        step = self.fields.get("global_step", self.start_step)
        if step > self.start_step and "global_step" in fields:  # a step just ended
            self.fields["eta_s"] = self.clock.eta_s(step)
        if self.on_step is not None:
            self.on_step(dict(self.fields))
        if self.writes and self.throttle.ready(force):
            self.run.set_status(state=State.RUNNING, **self.fields)


def process_rank() -> int:
    """Rank of this process under ``accelerate launch``/torchrun (0 when run alone)."""
    return int(os.environ.get("RANK", "0"))


def train_run(run: Run, on_step: StepCallback | None = None) -> Run:
    """Train (or resume) ``run`` to completion; status and artifacts go to its folder.

    Under ``accelerate launch`` / ``torchrun`` every process trains; only rank 0 holds the lock and
    writes, and every process returns once the run's state is saved.
    """
    if process_rank() > 0:
        _train_locked(run, None)
        return run
    with run.work():
        _train_locked(run, on_step)
    return run


def _train_locked(run: Run, on_step: StepCallback | None) -> None:
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    from cartomap.training.models import available_device, mixed_precision

    tc = run.config.train
    device = available_device(tc.device)
    # Loaders are sharded by cartomap.training.sharding, never by accelerate; split_batches makes the
    # prepared scheduler step once per optimizer step: batch_size is the global batch.
    accelerator = Accelerator(
        cpu=device == "cpu",
        mixed_precision=mixed_precision(device, tc.precision),
        dataloader_config=DataLoaderConfiguration(split_batches=True),
    )
    _train_prepared(run, on_step, accelerator)
    accelerator.wait_for_everyone()  # the other processes return once the main one saved the state


def _train_prepared(run: Run, on_step: StepCallback | None, accelerator) -> None:
    """The loop, in the order it runs: set up, then per epoch train its steps, record the training set,
    evaluate, checkpoint, follow the CPUs' load; then finish (the data map's metrics, the model, the final
    status)."""
    t = set_up(run, on_step, accelerator)
    if t is None:  # cancelled while queued
        return
    for epoch in range(t.start_epoch, t.tc.epochs):
        if t.trainer["stopped_early"]:
            break
        trained = train_epoch(t, epoch)
        if trained is None:  # cancelled: a resume restarts this epoch
            return
        record, recording = trained
        record_epoch_end(t, epoch, record, recording)
        dev_logits, test_logits = evaluate(t, record)
        end_epoch(t, epoch, record)
        checkpoint(t, epoch, record, dev_logits, test_logits)
        follow_load(t, epoch)
    finish(t)


@dataclass
class EvalSet:
    """A set evaluated after every epoch (dev, a test set): its examples, loader and gold per unit."""

    frame: Any
    loader: Any
    labels: np.ndarray


@dataclass
class Training:
    """What one training holds while it runs (:func:`set_up` makes it; the steps of the loop read and
    advance it): the run and its config, the units recorded (``ids``, gold ``labels``), the loaders, the
    model with its optimizer and scheduler, the trainer's counters (``trainer``: saved with every
    checkpoint), the recordings in preallocated [recordings, units, classes] arrays, the history so far."""

    run: Run
    accelerator: Any
    task: Any
    label_names: tuple[str, ...]
    ids: list[str]
    labels: np.ndarray
    example_ids: np.ndarray
    train_ids: Any
    n_classes: int
    tokenizer: Any
    batches: Any
    train_loader: Any
    eval_loader: Any
    dev: EvalSet | None
    tests: list[EvalSet]
    model: Any = None
    optimizer: Any = None
    scheduler: Any = None
    trainer: dict = field(default_factory=dict)
    start_epoch: int = 0  # the epochs completed when this training started (a resume's)
    recorded: dict = field(default_factory=dict)
    per_epoch: dict = field(default_factory=dict)
    mid_points: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    steps_log: Any = None
    progress: Any = None
    ready_s: float | None = None  # seconds from the process's start to training: what a restart repeats
    asked_at: float = field(default_factory=time.monotonic)  # when the CPUs' load was last asked about
    declined: str | None = None  # a waiting a restart would not have paid for (said once in the log)

    @property
    def tc(self):
        return self.run.config.train

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def n_proc(self) -> int:
        return self.accelerator.num_processes

    @property
    def steps_per_epoch(self) -> int:
        return len(self.batches)

    @property
    def sources(self) -> list[str]:
        return list(self.recorded)

    def predict(self, loader, n_rows: int) -> np.ndarray:
        return predict_logits(self.model, loader, self.accelerator, n_rows, self.n_classes)


@dataclass
class EpochRecording:
    """An epoch's bookkeeping of its recordings: which units the training pass recorded already (each
    once), whether an eval-mode pass records this epoch, and the seconds spent recording inside it."""

    rows: np.ndarray
    eval_now: bool
    seconds: float = 0.0
    t0: float = field(default_factory=time.time)
    loss_sum: float = 0.0
    seen: int = 0


# --------------------------------------------------------------------------- set-up
def set_up(run: Run, on_step: StepCallback | None, accelerator) -> Training | None:
    """Everything the loop needs, in the order that keeps a run's random draws the same: the launch
    checked, the data tokenized into loaders, the model and optimiser built (seeded), a checkpoint's
    state restored, the recordings of completed epochs read back. None when cancelled while queued."""
    check_launch(run, accelerator)
    if any_process(accelerator, run.cancel_requested()):  # cancelled while queued
        if accelerator.is_main_process:
            run.log("cancelled before training started")
            run.set_status(state=State.CANCELLED)
        return None
    t = load_data(run, accelerator)
    build_optimisation(t)
    restore(t)
    start_progress(t, on_step)
    return t


def check_launch(run: Run, accelerator) -> None:
    """A RunError when this launch's process count is not the run's, or a kind that trains in one process
    is launched in several."""
    tc, n_proc = run.config.train, accelerator.num_processes
    if n_proc != tc.processes:
        raise RunError(
            f"run {run.id} trains in {tc.processes} process(es) and this launch has {n_proc}: dropout masks "
            f"follow how batches are split, so a run keeps its process count (start it with {tc.processes}, "
            "or train the options again: another run)"
        )
    task = run.task_kind
    if not task.unit.shards and n_proc > 1:
        raise RunError(
            f"run {run.id}: a {task.name} run trains in one process (its units are per {task.unit})"
        )


def load_data(run: Run, accelerator) -> Training:
    """The run's units (one recorded row each: an example, a word "<id>#<k>", a label "<id>#<j>"), its
    training set tokenized into the training order's loader and a length-ordered one for eval-mode passes,
    and its dev and test sets as :class:`EvalSet`."""
    from cartomap.training.models import load_tokenizer

    cfg: RunConfig = run.config
    tc = cfg.train
    n_proc, rank = accelerator.num_processes, accelerator.process_index
    label_names = run.label_names
    examples = run.examples()
    task = run.task_kind
    ids, labels, _ = task.units(examples, label_names)
    tokenizer = load_tokenizer(run.resolve_path(cfg.model.name_or_path))  # a relative folder works anywhere
    train_set = TokenizedExamples(
        tokenize(tokenizer, examples, cfg.model.max_length, task), task.label_rows(labels, len(examples))
    )
    collate = DynamicPadding(tokenizer.pad_token_id or 0)
    batches = training_batches(run, examples, labels, train_set.lengths)
    example_ids = examples["id"].astype(str).to_numpy()
    del examples  # tokenized: the texts (hundreds of MB on 550k pairs) are not needed while training
    # The eval-mode pass over the training set and the dev evaluation both go in length order.
    ordered = EpochBatches(train_set.lengths, tc.eval_batch_size, tc.seed, shuffle=False)

    def eval_set(frame) -> EvalSet | None:
        if frame is None:
            return None
        dataset, batches_k, y = eval_batches_for(frame, tokenizer, cfg, label_names)
        return EvalSet(frame, make_loader(dataset, batches_k, collate, n_proc, rank), y)

    return Training(
        run=run,
        accelerator=accelerator,
        task=task,
        label_names=label_names,
        ids=ids,
        labels=labels,
        example_ids=example_ids,
        train_ids=arrow_ids(ids),  # converted once, written with every epoch's logits
        n_classes=len(task.unit_classes(label_names)),  # per unit: (absent, present) for each label
        tokenizer=tokenizer,
        batches=batches,
        train_loader=make_loader(train_set, batches, collate, n_proc, rank),
        eval_loader=make_loader(train_set, ordered, collate, n_proc, rank),
        dev=eval_set(run.dev_examples()),
        tests=[eval_set(run.test_examples(k)) for k in range(len(run.test_names))],
    )


def build_optimisation(t: Training) -> None:
    """The classifier (its new head's weights drawn from the run's seed), AdamW and the linear schedule
    with warm-up over every step of every epoch."""
    from transformers import get_linear_schedule_with_warmup

    from cartomap.training.models import load_classifier

    tc = t.tc
    seed_everything(tc.seed)  # the new classifier head's initial weights
    t.model = load_classifier(t.run.resolve_path(t.run.config.model.name_or_path), t.label_names, t.task)
    t.optimizer = build_optimizer(t.model, tc, t.accelerator.device.type)
    total_steps = t.steps_per_epoch * tc.epochs
    t.scheduler = get_linear_schedule_with_warmup(
        t.optimizer, int(tc.warmup_ratio * total_steps), total_steps
    )


def restore(t: Training) -> None:
    """The state of the last completed epoch (weights, optimiser, scheduler, counters) where a checkpoint
    exists, the recordings of completed epochs read back, the history and step log cut to them."""
    run, tc = t.run, t.tc
    t.trainer = load_state(run, t.model, t.optimizer, t.scheduler) or {
        "epochs_done": 0,
        "global_step": 0,
        "best_dev_accuracy": None,
        "bad_epochs": 0,
        "stopped_early": False,
    }
    start = t.start_epoch = t.trainer["epochs_done"]
    if start and t.main:
        run.log(f"resuming after epoch {start}")
    if t.main:  # the step log holds the completed epochs only: the one restarted is logged again
        step_log.trim(run.steps_path, start)
    t.model, t.optimizer, t.scheduler = t.accelerator.prepare(t.model, t.optimizer, t.scheduler)
    t.per_epoch = recordings_per_epoch(tc)
    t.recorded = {
        s: np.zeros((tc.epochs * t.per_epoch[s], len(t.ids), t.n_classes), dtype=np.float32)
        for s in tc.record.sources
    }
    for s in t.recorded:  # epochs completed before a restart
        for e in range(start):
            if tc.records_in_epoch(s, e):
                for p in range(e * t.per_epoch[s], (e + 1) * t.per_epoch[s]):
                    t.recorded[s][p] = run.read_epoch(s, p, t.ids)
    # Steps after which an eval-mode pass records the training set inside an epoch (record_points > 1).
    t.mid_points = eval_marks(t.steps_per_epoch, t.per_epoch.get(Source.EVAL, 1))
    t.history = run.history()[:start]


def start_progress(t: Training, on_step: StepCallback | None) -> None:
    """The step log and the progress shown while training (status file, ``on_step``), and the run's log
    line that says what trains where."""
    import torch

    run, tc, accelerator = t.run, t.tc, t.accelerator
    start = t.start_epoch
    total_steps = t.steps_per_epoch * tc.epochs
    t.steps_log = step_log.StepLog(run.steps_path if t.main else None, t.steps_per_epoch, STATUS_EVERY_S)
    t.progress = Progress(run, on_step, total_steps, t.trainer["global_step"])
    t.progress.update(
        force=True,
        epoch=start + 1,
        epochs=tc.epochs,
        step=0,
        steps_per_epoch=t.steps_per_epoch,
        global_step=t.trainer["global_step"],
        total_steps=total_steps,
        phase=Phase.TRAIN,
        error=None,
        device=str(accelerator.device),
    )
    t.ready_s = cpu.since_start()
    if t.main:
        threads = f"; {torch.get_num_threads()} CPU threads, {cpu.waiting()}"
        run.log(
            f"training on {accelerator.device} ({t.n_proc} process(es)), "
            f"{t.task.plural(len(t.example_ids))}"
            + t.task.unit.count_note(len(t.ids))
            + f", {tc.epochs} epochs, {t.steps_per_epoch} steps/epoch"
            + (threads if accelerator.device.type == "cpu" else "")
        )


# --------------------------------------------------------------------------- an epoch
def train_epoch(t: Training, epoch: int) -> tuple[dict, EpochRecording] | None:
    """One epoch's optimiser steps over the training order (every generator reseeded from (seed, epoch),
    so a resumed run draws what an uninterrupted one does), its recordings inside the epoch, and the
    epoch's mean training loss. None when cancelled (every process stops at the same step)."""
    seed_everything(epoch_seed(t.tc.seed, epoch))
    t.batches.set_epoch(epoch)
    t.model.train()
    eval_now = Source.EVAL in t.recorded and t.tc.records_in_epoch(
        Source.EVAL, epoch
    )  # none in skipped epochs
    recording = EpochRecording(rows=np.zeros(len(t.ids), dtype=bool), eval_now=eval_now)
    for step, batch in enumerate(t.train_loader):
        train_step(t, epoch, step, batch, recording)
        if step + 1 in t.mid_points and recording.eval_now:
            record_inside_epoch(t, epoch, step, recording)
        t.progress.update(
            epoch=epoch + 1,
            step=step + 1,
            global_step=t.trainer["global_step"],
            loss=round(recording.loss_sum / max(recording.seen, 1), 4),  # 0 rows: a process given padding
            examples_per_s=round(recording.seen / (time.time() - recording.t0), 1),
        )
        if any_process(t.accelerator, t.run.cancel_requested()):
            t.steps_log.flush()
            if t.main:
                t.run.log(f"cancelled during epoch {epoch + 1}; resume restarts that epoch")
                t.run.set_status(state=State.CANCELLED)
            return None
        follow_load_inside(t, epoch, step, recording)
    t.steps_log.flush()
    if Source.TRAIN in t.recorded:
        check_complete(recording.rows, t.ids, epoch)
    loss_sum, seen = sum_over_processes(t.accelerator, recording.loss_sum, recording.seen)
    record = {
        "epoch": epoch + 1,
        "train_loss": loss_sum / max(seen, 1),
        "train_seconds": time.time() - recording.t0 - recording.seconds,
    }
    return record, recording


def train_step(t: Training, epoch: int, step: int, batch, recording: EpochRecording) -> None:
    """One optimiser step: forward, the loss over the batch's real units, backward, clipped gradients, the
    optimiser and schedule; the training pass's logits recorded (Cartography: each unit's first of the
    epoch), the loss summed and logged every k steps."""
    accelerator, n_proc = t.accelerator, t.n_proc
    batch = to_device(batch, accelerator.device)
    with accelerator.autocast():
        logits = t.model(**model_inputs(batch)).logits
    logits, unit_labels, unit_index = flat_units(logits, batch)
    loss = training_loss(logits, unit_labels, unit_index, batch.get("global_size"), n_proc)
    accelerator.backward(loss)
    if t.tc.max_grad_norm:
        accelerator.clip_grad_norm_(t.model.parameters(), t.tc.max_grad_norm)
    t.optimizer.step()
    t.scheduler.step()
    t.optimizer.zero_grad(set_to_none=True)
    if Source.TRAIN in t.recorded:
        index, values = gather_rows(accelerator, unit_index, logits.detach())
        record_once(t.recorded[Source.TRAIN][epoch], recording.rows, index, values)
    real = int((unit_index >= 0).sum())
    # summed over this process's real rows (several processes: the loss without the n / global_size scaling)
    value = loss.item()
    step_loss = value * real if n_proc == 1 else value * batch["global_size"] / n_proc
    recording.loss_sum += step_loss
    recording.seen += real
    t.trainer["global_step"] += 1
    t.steps_log.add(epoch + 1, step + 1, t.trainer["global_step"], step_loss, real)


def record_inside_epoch(t: Training, epoch: int, step: int, recording: EpochRecording) -> None:
    """An eval-mode recording of the training set after ``step`` (record_points > 1), with torch's random
    state saved and restored around it so that training draws what it would have without it."""
    t.progress.update(force=True, phase=Phase.EVAL_PASS)
    t_pass = time.time()
    with preserved_rng(t.accelerator.device):
        logits_now = t.predict(t.eval_loader, len(t.ids))
    for j in t.mid_points[step + 1]:
        t.recorded[Source.EVAL][epoch * t.per_epoch[Source.EVAL] + j] = logits_now
    t.model.train()
    recording.seconds += time.time() - t_pass
    t.progress.update(force=True, phase=Phase.TRAIN)


def record_epoch_end(t: Training, epoch: int, record: dict, recording: EpochRecording) -> None:
    """The eval-mode recording of the training set at the epoch's end (WaNLI's), and the seconds every
    eval-mode pass of the epoch took."""
    if not recording.eval_now:
        return
    t.progress.update(force=True, phase=Phase.EVAL_PASS)
    t_pass = time.time()
    last = (epoch + 1) * t.per_epoch[Source.EVAL] - 1
    t.recorded[Source.EVAL][last] = t.predict(t.eval_loader, len(t.ids))
    record["record_seconds"] = recording.seconds + time.time() - t_pass


def evaluate(t: Training, record: dict) -> tuple[np.ndarray | None, list[np.ndarray]]:
    """The dev set's and each test set's logits after the epoch, their accuracy (per unit; a multi-label
    run's subset accuracy too; a tagger's entity-level scores) added to ``record``."""
    import torch
    import torch.nn.functional as F

    dev_logits = None
    if t.dev is not None:
        t.progress.update(force=True, phase=Phase.DEV)
        dev_logits = t.predict(t.dev.loader, len(t.dev.labels))
        record.update(eval_scores("dev", t, t.dev, dev_logits))
        record["dev_loss"] = float(F.cross_entropy(torch.tensor(dev_logits), torch.tensor(t.dev.labels)))
        record.update(entity_record(t, "dev", t.dev, dev_logits))
    test_logits = []
    for k, test in enumerate(t.tests):
        t.progress.update(force=True, phase=Phase.TEST.of(k + 1, len(t.tests)))
        test_logits.append(t.predict(test.loader, len(test.labels)))
        record.update(eval_scores(f"test_{k}", t, test, test_logits[-1]))
        record.update(entity_record(t, f"test_{k}", test, test_logits[-1]))
    return dev_logits, test_logits


def eval_scores(prefix: str, t: Training, evaluated: EvalSet, logits: np.ndarray) -> dict:
    """``<prefix>_accuracy`` per unit, and a multi-label run's ``<prefix>_exact_match`` (every label of an
    example right)."""
    scores = {f"{prefix}_accuracy": float((logits.argmax(1) == evaluated.labels).mean())}
    if t.task.unit.label_sets:
        scores[f"{prefix}_exact_match"] = exact_match(logits, evaluated.labels, len(t.label_names))
    return scores


def entity_record(t: Training, prefix: str, evaluated: EvalSet, logits: np.ndarray) -> dict:
    """Named entities (BIO tags): entity-level precision, recall and F1 beside the per-word accuracy."""
    if not (t.task.unit.sentences and is_bio_tagged(t.label_names)):
        return {}
    counts = t.task.unit_ids(evaluated.frame)[1]
    return entities.history_record(prefix, logits, evaluated.labels, counts, t.label_names)


def end_epoch(t: Training, epoch: int, record: dict) -> None:
    """The trainer's counters after the epoch (early stopping on the dev accuracy, never before the
    epochs the map skips are over) and the epoch's record in the history."""
    tc = t.tc
    t.trainer.update(early_stopping(t.trainer, record.get("dev_accuracy"), tc.early_stopping_patience))
    if epoch < tc.skip_epochs:  # the map needs an epoch after the skipped ones: no stop before that
        t.trainer["stopped_early"] = False
    t.trainer["epochs_done"] = epoch + 1
    t.history.append(record)


def checkpoint(t: Training, epoch: int, record: dict, dev_logits, test_logits: list) -> None:
    """What a killed run resumes from, written by the main process: the epoch's recordings and dev/test
    logits, its weights (a checkpoint folder when asked), the history, and the optimiser, scheduler and
    counters (written last: a state names an epoch whose files are all there)."""
    run, tc = t.run, t.tc
    if t.main:
        t.progress.update(force=True, phase=Phase.SAVING)
        for s in t.sources:
            if tc.records_in_epoch(s, epoch):
                for p in range(epoch * t.per_epoch[s], (epoch + 1) * t.per_epoch[s]):
                    run.write_epoch(s, p, t.train_ids, t.recorded[s][p])
        if t.dev is not None:
            run.write_epoch("dev", epoch, t.task.unit_ids(t.dev.frame, t.label_names)[0], dev_logits)
        for k, logits_k in enumerate(test_logits):
            run.write_epoch(f"test_{k}", epoch, t.task.unit_ids(t.tests[k].frame, t.label_names)[0], logits_k)
        unwrapped = t.accelerator.unwrap_model(t.model)
        if tc.save_checkpoints:
            save_pretrained_atomic(unwrapped, None, run.checkpoint_dir(epoch + 1))
        atomic_write_json(run.history_path, t.history)
        save_state(run, epoch, unwrapped, t.optimizer, t.scheduler, t.trainer)  # epoch index completed
        run.log(  # the numbers of the epoch (an entity table is in history.json)
            " ".join(
                f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in record.items()
                if not isinstance(v, dict)
            )
        )
    t.accelerator.wait_for_everyone()
    t.progress.update(force=True, phase=Phase.TRAIN, dev_accuracy=record.get("dev_accuracy"))


#: What a run's log says when a training restarts as the CPUs' load changed, and when a change did not
#: pay (benches count them).
RESTARTED = "starting again with threads waiting"
NOT_WORTH = "would cost more than waiting"


def follow_load(t: Training, epoch: int) -> None:
    """Between two epochs, once the checkpoint is written: when the CPUs became crowded (or free again)
    since this process chose how its threads wait, and it may start again (:func:`cartomap.runs.cpu.rechoose`:
    a job or ``cartomap train --run``), it restarts in place waiting the other way and resumes from the
    checkpoint just written (the waiting changes no result). Nothing after the last epoch."""
    if epoch + 1 >= t.tc.epochs or t.trainer["stopped_early"] or not follows_load(t):
        return
    t.asked_at = time.monotonic()
    choice = cpu.rechoose()
    if choice is None:
        return
    left = (t.tc.epochs - epoch - 1) * t.history[-1]["train_seconds"]
    restart_if_it_pays(
        t, choice, left, 0.0, f"during epoch {epoch + 1}", f"the checkpoint of epoch {epoch + 1}"
    )


def follow_load_inside(t: Training, epoch: int, step: int, recording: EpochRecording) -> None:
    """Inside an epoch, after step ``step`` (0-based), at each of its recordings and at least every
    :data:`cartomap.runs.cpu.FOLLOW_EVERY_S` of training: the same question as :func:`follow_load`. A
    restart here resumes from the last epoch's checkpoint (or the start), so the steps of this epoch done
    so far count as part of its cost: worth it early in a long epoch, not near its end."""
    if step + 1 >= t.steps_per_epoch or not follows_load(t):
        return  # the epoch's end asks once its checkpoint is written
    at_recording = step + 1 in t.mid_points and recording.eval_now
    if not at_recording and time.monotonic() - t.asked_at < cpu.FOLLOW_EVERY_S:
        return
    t.asked_at = time.monotonic()
    choice = cpu.rechoose()
    if choice is None:
        return
    trained = time.time() - recording.t0 - recording.seconds
    per_step = trained / (step + 1)
    left = per_step * (t.steps_per_epoch - step - 1 + t.steps_per_epoch * (t.tc.epochs - epoch - 1))
    since = f"the checkpoint of epoch {epoch}" if epoch else "the start"
    restart_if_it_pays(
        t, choice, left, time.time() - recording.t0, f"in epoch {epoch + 1}, at step {step + 1}", since
    )


def follows_load(t: Training) -> bool:
    """Whether this training may restart as the load changes: one process on a CPU (several processes,
    or an accelerator, keep how they compute)."""
    return t.main and t.n_proc == 1 and t.accelerator.device.type == "cpu"


def restart_if_it_pays(t: Training, choice: str, left_s: float, lost_s: float, when: str, since: str) -> None:
    """Start this process again waiting as ``choice`` says, from ``since`` (what it resumes from), when
    :func:`cartomap.runs.cpu.pays`: the share waiting ``choice`` saves of the ``left_s`` seconds of
    training left beats the restart (the process's start, and the ``lost_s`` seconds of work since the
    checkpoint, done again). Else the log says why not, once for each choice declined."""
    cost = (t.ready_s or 0.0) + lost_s
    if not cpu.pays(choice, left_s, cost):
        if t.declined != choice:
            t.declined = choice
            t.run.log(
                f"the CPUs' load changed {when}; threads keep waiting as they do: starting again (about "
                f"{cost:.0f} s) {NOT_WORTH} {choice} could save of the {left_s:.0f} s of training left"
            )
        return
    t.run.log(f"the CPUs' load changed {when}: {RESTARTED} {choice}, from {since}")
    t.steps_log.flush()
    t.run.set_status(state=State.QUEUED, phase=Phase.RESTARTING, pid=os.getpid(), queued_at=time.time())
    cpu.restart(choice)


# --------------------------------------------------------------------------- the end
def finish(t: Training) -> None:
    """The data map's metrics of every recorded source (the first: the run's main file), the final model
    and tokenizer, the checkpoint state removed, the run done."""
    from cartomap.scores.metrics import RegionRule, compute_metrics

    if not t.main:
        return
    run, tc, task = t.run, t.tc, t.task
    done = t.trainer["epochs_done"]
    sources = t.sources
    for s in sources:
        kept = [e for e in range(done) if tc.records_in_epoch(s, e)]
        rows = [p for e in kept for p in range(e * t.per_epoch[s], (e + 1) * t.per_epoch[s])]
        burn_in = tc.map_burn_in(s, rows)
        if not s.eval_mode and burn_in < tc.skip_epochs:
            run.log(f"the map leaves out {burn_in} epoch(s), not {tc.skip_epochs}: {done} were trained")
        frame = compute_metrics(
            t.recorded[s][rows], t.labels, t.ids, regions=RegionRule.for_kind(task), burn_in=burn_in
        )
        name = MAIN_METRICS if s == sources[0] else s  # the first source: the main file
        run.save_metrics(name, *keyed_metrics(task, frame, t.ids, t.example_ids, t.label_names))
    save_pretrained_atomic(t.accelerator.unwrap_model(t.model), t.tokenizer, run.model_dir)
    shutil.rmtree(run.state_dir, ignore_errors=True)
    final = t.history[-1] if t.history else {}
    run.set_status(
        state=State.DONE,
        phase=State.DONE,
        epochs_done=done,
        dev_accuracy=final.get("dev_accuracy"),
        metrics_source=sources[0] if sources else None,
        stopped_early=t.trainer["stopped_early"],
        eta_s=0,
    )
    run.log("done")


def exact_match(logits: np.ndarray, labels: np.ndarray, n_labels: int) -> float:
    """Multi-label subset accuracy: the share of examples whose every label was predicted right, from the
    two-class rows (0, z) of their units (``logits`` [N * L, 2], ``labels`` [N * L], example by example)."""
    right = (logits.argmax(1) == labels).reshape(-1, n_labels)
    return float(right.all(axis=1).mean()) if len(right) else float("nan")


def recordings_per_epoch(tc) -> dict[str, int]:
    """{source: recordings of the training set per epoch} (:meth:`TrainConfig.recordings_per_epoch`)."""
    return {s: tc.recordings_per_epoch(s) for s in SOURCES}


def eval_marks(steps_per_epoch: int, points: int) -> dict[int, list[int]]:
    """{step number after which to record (1-based): the recording indices within the epoch made there} for
    the ``points - 1`` eval-mode passes inside an epoch, evenly spaced; the last pass is the epoch's end.
    An epoch of fewer steps than recordings makes some at the same step (one pass, the same logits), so
    a small dataset never fails for it.

    >>> eval_marks(100, 4)
    {25: [0], 50: [1], 75: [2]}
    >>> eval_marks(1, 2)
    {1: [0]}
    """
    marks: dict[int, list[int]] = {}
    for j in range(points - 1):
        step = min(max(1, round((j + 1) * steps_per_epoch / points)), max(steps_per_epoch, 1))
        marks.setdefault(step, []).append(j)
    return marks


def preserved_rng(device):
    """A context in which torch's random state is saved and restored, so that an extra eval pass inside an
    epoch (its loader draws a seed) leaves the rest of training's dropout masks and order unchanged."""
    import torch

    devices = [device.index or 0] if device.type == "cuda" else []
    return torch.random.fork_rng(devices=devices)


def early_stopping(trainer: dict, dev_accuracy: float | None, patience: int) -> dict:
    """Updated counters: stop after ``patience`` epochs without a better dev accuracy (0 = never)."""
    if dev_accuracy is None:
        return {}
    best = trainer["best_dev_accuracy"]
    if best is None or dev_accuracy > best:
        return {"best_dev_accuracy": dev_accuracy, "bad_epochs": 0}
    bad = trainer["bad_epochs"] + 1
    return {"bad_epochs": bad, "stopped_early": bool(patience) and bad >= patience}


# --------------------------------------------------------------------------- entry points


def train_or_load(
    config: RunConfig,
    store: RunStore | None = None,
    on_step: StepCallback | None = None,
    *,
    as_job: bool = False,
) -> Run:
    """The run for ``config``: returned at once when done, resumed when interrupted, trained otherwise."""
    return continue_run(prepare_run(config, store), on_step, as_job=as_job)


def continue_run(run: Run, on_step: StepCallback | None = None, *, as_job: bool = False) -> Run:
    """Train an existing run to completion (nothing when done, resumed when interrupted).

    A direct call is an explicit start and clears an earlier cancel request; a background job
    (``as_job``) keeps one made while it was queued, and stops at once.
    """
    if run.state == State.DONE:
        return run
    if not as_job:
        run.clear_cancel()
    if process_rank() == 0 and run.is_locked():
        raise RunError(
            f"run {run.id} is being trained by another process; follow it with `cartomap show {run.id}`"
        )
    return train_run(run, on_step=on_step)
