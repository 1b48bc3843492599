"""Dynamics from saved checkpoints: the eval-mode pass of each checkpoint over the training data.

``cartomap score-checkpoints DIR --data train.jsonl`` maps a fine-tuning that already happened:
DIR is a ``Trainer`` ``output_dir`` (its ``checkpoint-<step>`` folders, in step order), or several
checkpoint folders or hub ids, one per epoch, in order (how to map a classifier someone else
fine-tuned). Each checkpoint runs in eval mode (no dropout) over every training example, batched
longest first; its logits are epoch ``k`` of the run's ``eval`` dynamics. The run is a job like
training: created before it starts (:func:`prepare_scoring`), scored checkpoint by checkpoint
(:func:`score_run`, resumable: scored checkpoints are kept), followed on the dashboard.

The checkpoint's classes are matched to the data's by name (``id2label``, case-insensitive), so a
model whose label order differs from the data's (an MNLI model's contradiction, entailment, neutral)
is read right; a model with generic names (``LABEL_0`` ...) is taken in the data's class order.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cartomap.config import DataConfig, ModelConfig, Origin, Record, RunConfig, Source, TrainConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.integrations.origin import recorded_config
from cartomap.io import atomic_write_json
from cartomap.runs import jobs
from cartomap.runs.importer import finish_run
from cartomap.runs.progress import Phase
from cartomap.runs.state import State, Throttle
from cartomap.runs.store import Run, RunStore
from cartomap.tasks import support
from cartomap.training.models import HF_CONFIG, is_checkpoint

CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
GENERIC_LABEL = re.compile(r"^(LABEL_)?\d+$", re.IGNORECASE)
DEFAULT_BATCH_SIZE = 64
Progress = Callable[[dict[str, Any]], None]


# --------------------------------------------------------------------------- finding checkpoints
def trainer_checkpoints(folder: Path) -> list[Path]:
    """The ``checkpoint-<step>`` folders of a Trainer output_dir, by step."""
    found = [p for p in folder.iterdir() if p.is_dir() and CHECKPOINT_NAME.match(p.name)]
    return sorted(found, key=lambda p: int(CHECKPOINT_NAME.match(p.name).group(1)))


def find_checkpoints(paths: Sequence[str]) -> list[str]:
    """Checkpoints in epoch order: each path is a Trainer output_dir (expanded into its checkpoints),
    a checkpoint folder, or a hub id (a name that is no local path)."""
    if not paths:
        raise DataError(
            "no checkpoints given: a Trainer output_dir, or checkpoint folders / hub ids in order"
        )
    out: list[str] = []
    for raw in paths:
        raw = str(raw).strip()
        if not raw:
            continue
        path = Path(raw).expanduser()
        if path.is_dir():
            inner = trainer_checkpoints(path)
            if inner:
                bad = [p for p in inner if not is_checkpoint(p)]
                if bad:
                    raise DataError(f"{bad[0]} has no {HF_CONFIG}: not a saved model", location=str(bad[0]))
                out += [str(p.resolve()) for p in inner]
            elif is_checkpoint(path):
                out.append(str(path.resolve()))
            else:
                raise DataError(
                    f"{path} holds neither {HF_CONFIG} (a saved model) nor checkpoint-<step> folders (a "
                    "Trainer output_dir)",
                    location=str(path),
                )
        elif path.exists() or raw.startswith(("/", ".", "~")):
            raise DataError(f"{raw} is not a folder: expected a checkpoint folder or a hub id", location=raw)
        else:
            out.append(raw)  # a hub id: loads where the network allows
    if not out:
        raise DataError(
            "no checkpoints given: a Trainer output_dir, or checkpoint folders / hub ids in order"
        )
    return out


def checkpoint_stamp(checkpoint: str) -> Any:
    """What identifies a checkpoint's weights cheaply: (file, size, mtime) of its weight and config
    files for a folder (a retrained folder gets a new stamp), the name for a hub id."""
    path = Path(checkpoint)
    if not path.is_dir():
        return checkpoint
    files = sorted(
        p for p in path.iterdir() if p.is_file() and (p.suffix in WEIGHT_SUFFIXES or p.name == HF_CONFIG)
    )
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]


# --------------------------------------------------------------------------- what the checkpoints tell of the training
TRAINER_STATE = "trainer_state.json"  # a Trainer checkpoint's state (not a cartomap run file)
TRAINING_ARGS = "training_args.bin"  # a Trainer checkpoint's pickled TrainingArguments
#: TrainingArguments read from training_args.bin -> the name cartomap records them under.
ARGS_READ = {
    "learning_rate": "learning_rate",
    "seed": "seed",
    "per_device_train_batch_size": "per_device_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "weight_decay": "weight_decay",
    "lr_scheduler_type": "lr_scheduler",
    "optim": "optimizer",
    "num_train_epochs": "epochs",
}


def _safe_globals() -> list[Any]:
    """The classes a TrainingArguments pickle holds (the arguments, their enums, accelerate's state): a
    fixed list, never names read from the file; whatever else a file asks for fails the load."""
    import importlib

    names = [
        "transformers.training_args.TrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
        "transformers.training_args.OptimizerNames",
        "transformers.trainer_utils.IntervalStrategy",
        "transformers.trainer_utils.SaveStrategy",
        "transformers.trainer_utils.HubStrategy",
        "transformers.trainer_utils.SchedulerType",
        "transformers.trainer_utils.FSDPOption",
        "transformers.debug_utils.DebugOption",
        "transformers.trainer_pt_utils.AcceleratorConfig",
        "accelerate.state.PartialState",
        "accelerate.utils.dataclasses.DistributedType",
    ]
    found = []
    for name in names:
        module, _, attr = name.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            continue
    return found


def training_args(path: Path) -> dict[str, Any] | None:
    """The TrainingArguments of a ``training_args.bin`` that loads with ``torch.load(weights_only=True)``
    (the arguments' own classes allowed, nothing else): {cartomap name: value}; None when it does not load."""
    import torch

    try:
        with torch.serialization.safe_globals(_safe_globals()):
            args = torch.load(path, weights_only=True, map_location="cpu")
    except Exception:  # noqa: BLE001 - any file that does not load as plain arguments is "unknown"
        return None
    out = {}
    for field, key in ARGS_READ.items():
        value = getattr(args, field, None)
        value = getattr(value, "value", value)  # an enum: its value
        if isinstance(value, (bool, int, float, str)):
            out[key] = value
    return out


def checkpoint_training(checkpoints: Sequence[str]) -> dict[str, Any]:
    """What the last local checkpoint's ``trainer_state.json`` (epochs, batch size per device, steps,
    the largest logged learning rate) and ``training_args.bin`` (learning rate, seed, accumulation, ...)
    say of the fine-tuning; empty when neither is there (a hub id, a plain saved model)."""
    folder = next((Path(c) for c in reversed(checkpoints) if Path(c).is_dir()), None)
    if folder is None:
        return {}
    known: dict[str, Any] = {}
    sources = []
    try:
        state = json.loads((folder / TRAINER_STATE).read_text())
    except (OSError, ValueError):
        state = None
    if isinstance(state, dict):
        sources.append(TRAINER_STATE)
        for field, key in (
            ("num_train_epochs", "epochs"),
            ("train_batch_size", "per_device_batch_size"),
            ("global_step", "global_step"),
        ):
            if isinstance(state.get(field), (int, float)) and not isinstance(state.get(field), bool):
                known[key] = state[field]
        rates = [
            h["learning_rate"]
            for h in state.get("log_history") or []
            if isinstance(h, dict) and isinstance(h.get("learning_rate"), (int, float))
        ]
        if rates:
            known["learning_rate_logged_max"] = max(rates)
    args = training_args(folder / TRAINING_ARGS) if (folder / TRAINING_ARGS).is_file() else None
    if args:
        sources.append(TRAINING_ARGS)
        known.update({k: v for k, v in args.items() if not (k == "epochs" and "epochs" in known)})
    if known:
        known["source"] = " + ".join(f"{folder.name}/{s}" for s in sources)
    return known


# --------------------------------------------------------------------------- labels
def _names(config) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    return [str(id2label[k]) for k in sorted(id2label)]


def label_columns(model_names: Sequence[str], data_names: Sequence[str], where: str) -> np.ndarray:
    """Column of the model's logits for each of the data's classes (the data's order)."""
    if len(model_names) != len(data_names):
        raise RunError(
            f"{where} has {len(model_names)} outputs {list(model_names)}, the data {len(data_names)} classes "
            f"{list(data_names)}"
        )
    if all(GENERIC_LABEL.match(n) for n in model_names):
        return np.arange(len(data_names))
    lookup = {n.lower(): k for k, n in enumerate(model_names)}
    if set(lookup) != {n.lower() for n in data_names}:
        raise RunError(
            f"{where} predicts {list(model_names)} but the data's classes are {list(data_names)}: name the data's "
            "classes like the model's (--label-names) so each logit goes to its class"
        )
    return np.array([lookup[n.lower()] for n in data_names])


# --------------------------------------------------------------------------- the run
def _load_data(data: DataConfig, first: str) -> TextDataset:
    """The training data; integer labels without names take the first checkpoint's id2label."""
    try:
        return load_dataset(data)
    except DataError as err:
        names = _model_label_names(first) if data.label_names is None else None
        if not names:
            raise
        try:
            return load_dataset(data, label_names=names)
        except DataError:
            raise err from None


def _model_label_names(checkpoint: str) -> tuple[str, ...] | None:
    from transformers import AutoConfig

    from cartomap.training.models import quiet_transformers

    try:
        with quiet_transformers():
            names = _names(AutoConfig.from_pretrained(checkpoint))
    except (OSError, ValueError):
        return None
    return tuple(names) if names and not all(GENERIC_LABEL.match(n) for n in names) else None


def scoring_config(
    checkpoints: Sequence[str],
    data: DataConfig,
    examples: TextDataset,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_length: int = ModelConfig.max_length,
    tokenizer: str = "",
    device: str = "auto",
    save_model: bool = True,
    name: str = "",
) -> RunConfig:
    """The run of scoring ``checkpoints`` on ``data``: its id comes from the data, the checkpoints (with
    their file stamps), the max length and the tokenizer."""
    if int(batch_size) != batch_size or batch_size < 1:
        raise CartomapError(f"batch size must be a whole number of at least 1, got {batch_size}")
    if int(max_length) != max_length or max_length < 8:
        raise CartomapError(f"max length must be a whole number of at least 8, got {max_length}")
    first = Path(checkpoints[0])
    label = first.parent.name if CHECKPOINT_NAME.match(first.name) else first.name
    train = TrainConfig(
        epochs=len(checkpoints),
        eval_batch_size=int(batch_size),
        record=Record.EVAL,
        save_checkpoints=False,
        device=device,
    )
    return recorded_config(
        Origin.CHECKPOINTS,
        examples,
        data_name=data.name or str(data.path),
        model=str(checkpoints[-1]),
        train=train,
        settings={
            "stamps": [checkpoint_stamp(c) for c in checkpoints],
            "tokenizer": tokenizer,
            "save_model": bool(save_model),
        },
        name=name or f"checkpoints of {label}",
        max_length=max_length,
        checkpoints=tuple(checkpoints),
        data=dataclasses.replace(data, label_names=examples.label_names),
        training=checkpoint_training(checkpoints),
    )


def prepare_scoring(
    paths: Sequence[str], data: DataConfig, store: RunStore | None = None, **options: Any
) -> Run:
    """Validate the checkpoints and the data and create (or find) the run. Scores nothing. The data's kind
    before it is loaded: a checkpoint's logits are scored as one softmax row per example (a multi-label set would need
    each label's sigmoid recorded as its (example, label) unit, a sentence its words')."""
    store = store or RunStore()
    checkpoints = find_checkpoints(paths)
    support.CHECKPOINT_SCORING.require(data.task_kind, data.path)
    examples = _load_data(data, checkpoints[0])
    return store.create(scoring_config(checkpoints, data, examples, **options), examples)


def start_scoring(
    paths: Sequence[str], data: DataConfig, store: RunStore, by: str | None = None, **options: Any
) -> Run:
    """Create the run and score it in a background job (unless done or already running); ``by``: the
    person who started it (the status's ``started_by``)."""
    run = prepare_scoring(paths, data, store, **options)
    if run.state == State.DONE or run.is_locked():
        return run
    atomic_write_json(
        run.job_config_path, run.config.to_dict()
    )  # the parameters, saved before the job starts
    run.clear_cancel()
    pid = jobs.spawn(scoring_job_args(run), run.job_log_path, store.root, **jobs.as_person(by))
    run.set_status(state=State.QUEUED, pid=pid, error=None, queued_at=time.time(), **jobs.started_by(by))
    return run


def scoring_job_args(run: Run) -> list[str]:
    """The command line of a job that scores (or resumes scoring) an existing run."""
    return ["score-checkpoints", "--run", run.id, "--quiet", "--job"]


def restart_scoring(run: Run, store: RunStore, by: str | None = None) -> Run:
    """Start the job of an interrupted or cancelled scoring run again (scored checkpoints are kept)."""
    if run.state == State.DONE or run.is_locked():
        return run
    run.clear_cancel()
    pid = jobs.spawn(scoring_job_args(run), run.job_log_path, store.root, **jobs.as_person(by))
    run.set_status(state=State.QUEUED, pid=pid, error=None, queued_at=time.time(), **jobs.started_by(by))
    return run


def score_checkpoints(
    paths: Sequence[str],
    data: DataConfig,
    store: RunStore | None = None,
    on_progress: Progress | None = None,
    **options,
) -> Run:
    """Score ``paths`` on ``data`` in this process and return the finished run (see module docstring)."""
    run = prepare_scoring(paths, data, store, **options)
    return score_run(run, on_progress)


# --------------------------------------------------------------------------- scoring
def _tokenizer_for(checkpoint: str, fallback: str):
    from transformers import AutoTokenizer

    from cartomap.training.models import quiet_transformers

    candidates = [fallback] if fallback else []
    candidates.append(checkpoint)
    parent = Path(checkpoint).parent
    if CHECKPOINT_NAME.match(Path(checkpoint).name) and parent.is_dir():
        candidates.append(str(parent))  # the output_dir root, where a Trainer saves the tokenizer too
    errors = []
    for source in candidates:
        try:
            with quiet_transformers():
                return AutoTokenizer.from_pretrained(source)
        except (OSError, ValueError, TypeError) as err:
            errors.append(f"{source}: {err}")
    raise RunError(
        f"no tokenizer for checkpoint {checkpoint} (tried {', '.join(candidates)}): give one with --tokenizer "
        "(a folder or hub id)"
    )


def checkpoint_logits(
    checkpoint: str,
    frame,
    label_names: Sequence[str],
    *,
    tokenizer: str = "",
    max_length: int = ModelConfig.max_length,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str = "auto",
    on_batch: Callable[[int, int], None] | None = None,
    keep: Callable[[Any, Any], None] | None = None,
) -> np.ndarray:
    """Eval-mode logits [N, C] of ``checkpoint`` for every row of an examples frame, classes in
    ``label_names`` order. ``on_batch(done, total)`` after each batch; ``keep(model, tokenizer)`` sees
    the loaded model once scoring is done (to save it)."""
    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForSequenceClassification

    from cartomap.training.batching import DynamicPadding, TokenizedExamples, tokenize
    from cartomap.training.loop import model_inputs
    from cartomap.training.models import available_device, quiet_transformers

    device = available_device(device)
    tok = _tokenizer_for(checkpoint, tokenizer)
    try:
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(checkpoint)
    except (OSError, ValueError) as err:
        raise RunError(f"could not load the classifier {checkpoint}: {err}") from err
    columns = label_columns(_names(model.config), label_names, f"checkpoint {checkpoint}")
    n = len(frame)
    dataset = TokenizedExamples(tokenize(tok, frame, max_length), np.zeros(n, dtype=np.int64))
    order = np.argsort(-dataset.lengths, kind="stable")
    batches = [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    loader = DataLoader(dataset, batch_sampler=batches, collate_fn=DynamicPadding(pad_id))
    out = np.zeros((n, len(label_names)), dtype=np.float32)
    model.to(device).eval()
    done = 0
    with torch.inference_mode():
        for batch in loader:
            inputs = {k: v.to(device) for k, v in model_inputs(batch).items()}
            logits = model(**inputs).logits.float().cpu().numpy()
            out[batch["index"].numpy()] = logits[:, columns]
            done += len(batch["index"])
            if on_batch is not None:
                on_batch(done, n)
    if keep is not None:
        keep(model, tok)
    return out


def score_run(run: Run, on_progress: Progress | None = None) -> Run:
    """Score every checkpoint of ``run`` not scored yet, then write its metrics (nothing when done).

    Holds the run's lock; progress goes to its status (and ``on_progress``); a cancel request stops
    it after the current batch, and a later call goes on with the next checkpoint."""
    if run.state == State.DONE:
        return run
    with run.work():
        if run.cancel_requested():
            run.log("cancelled before scoring started")
            run.set_status(state=State.CANCELLED)
            return run
        _score_locked(run, on_progress)
    return run


class _Cancelled(Exception):
    pass


def _score_locked(run: Run, on_progress: Progress | None) -> None:
    config = run.config
    checkpoints = list(config.origin.checkpoints)
    settings = json.loads(config.origin.settings or "{}")
    examples = run.examples()
    ids = examples["id"].astype(str).tolist()
    labels = examples["label"].to_numpy(dtype=np.int64)
    names = run.label_names
    n, total = len(ids), len(ids) * len(checkpoints)
    throttle, t_start = Throttle(1.0), time.time()
    scored = set(run.dynamics_epochs(Source.EVAL))
    history = [h for h in run.history() if h["epoch"] - 1 in scored]  # checkpoints scored before a stop
    scored &= {h["epoch"] - 1 for h in history}
    done_before = len(scored) * n

    def report(epoch: int, done: int, force: bool = False, **fields) -> None:
        fields.setdefault(
            "phase", Phase.CHECKPOINT.of(epoch + 1, len(checkpoints), Path(checkpoints[epoch]).name)
        )
        status = {
            "epoch": epoch + 1,
            "epochs": len(checkpoints),
            "step": done,
            "steps_per_epoch": n,
            "global_step": epoch * n + done,
            "total_steps": total,
            **fields,
        }
        elapsed, scored = time.time() - t_start, epoch * n + done - done_before
        if scored > 0:
            status["eta_s"] = round(elapsed / scored * (total - epoch * n - done), 1)
        if on_progress is not None:
            on_progress(dict(status))
        if throttle.ready(force):
            run.set_status(state=State.RUNNING, **status)
        if run.cancel_requested():
            raise _Cancelled

    run.log(f"scoring {len(checkpoints)} checkpoint(s) on {n} examples")
    report(len(history), 0, force=True, error=None, device=config.train.device)
    try:
        for e, checkpoint in enumerate(checkpoints):
            if e in scored:
                continue
            t0 = time.time()
            last = e == len(checkpoints) - 1
            keep = _saver(run) if last and settings.get("save_model", True) else None
            logits = checkpoint_logits(
                checkpoint,
                examples,
                names,
                tokenizer=settings.get("tokenizer", ""),
                max_length=config.model.max_length,
                batch_size=config.train.eval_batch_size,
                device=config.train.device,
                on_batch=lambda done, _n, e=e: report(e, done),
                keep=keep,
            )
            run.write_epoch(Source.EVAL, e, ids, logits)
            record = {
                "epoch": e + 1,
                "checkpoint": checkpoint,
                "train_accuracy": float((logits.argmax(1) == labels).mean()),
                "seconds": round(time.time() - t0, 3),
            }
            history.append(record)
            atomic_write_json(run.history_path, history)
            run.log(
                f"checkpoint {e + 1}/{len(checkpoints)} {checkpoint}: accuracy {record['train_accuracy']:.4f}"
            )
            report(e, n, force=True)
    except _Cancelled:
        run.log("cancelled; scoring again goes on with the next checkpoint")
        run.set_status(state=State.CANCELLED)
        return
    _, dynamics = run.dynamics(Source.EVAL)
    finish_run(run, {Source.EVAL: dynamics}, labels, ids, history, write_dynamics=False)
    run.log("done")


def _saver(run: Run) -> Callable[[Any, Any], None]:
    """Keep the last checkpoint as the run's model (embeddings, neighbours and WaNLI stage 1 read it)."""

    def save(model, tokenizer) -> None:
        from cartomap.training.loop import save_pretrained_atomic

        save_pretrained_atomic(model, tokenizer, run.model_dir)

    return save
