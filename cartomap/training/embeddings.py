"""[CLS] embeddings of a run's training examples under its fine-tuned task model; a token run's words.

WaNLI (Liu et al., 2022), Stage 1: the representation of an example is the final-layer
hidden state of its first token ([CLS] for BERT, ``<s>`` for RoBERTa) in the task model,
in eval mode, truncated to 128 tokens, L2-normalised, so that a dot product is the cosine
similarity. The model is the final one saved in ``run.model_dir``.

A kind whose units are a sentence's words (token classification) is embedded per word, as its dynamics
are recorded: each word's final-layer hidden state at its first sub-word (the sentence encoded whole,
as in training), L2-normalised, keyed by the word's unit id ``<sentence id>#<k>``
(:func:`embedding_ids`). Every other kind has one vector per example (a multi-label example too).

Saved in the run folder (both written atomically): ``run.embeddings_path`` (float32 [N, H],
rows in the order of :func:`embedding_ids`) and ``run.embedding_ids_path`` (the N ids, same order).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cartomap.errors import RunError
from cartomap.io import atomic_save, atomic_write_json, read_json
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.tasks import registry as task_kinds
from cartomap.training.models import HF_CONFIG, is_checkpoint

TASK = "embeddings"
MAX_LENGTH = 128  # WaNLI: max length 128

ProgressCallback = Callable[[int, int], None]  # (examples done, total)


def _load_encoder(model_dir: str | Path):
    """The fine-tuned classifier's base encoder (the classification head is not needed)."""
    from transformers import AutoModelForSequenceClassification

    from cartomap.training.models import quiet_transformers

    try:
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_pretrained(str(model_dir))
    except OSError as err:
        raise RunError(f"could not load the task model from {model_dir}: {err}") from err
    return model.base_model


def _final_states(encoder, inputs: dict) -> object:
    """Final-layer hidden states of every token, [B, T, H]."""
    out = encoder(**inputs, output_hidden_states=True, return_dict=True)
    hidden = getattr(out, "last_hidden_state", None)
    return out.hidden_states[-1] if hidden is None else hidden


def _first_token_states(encoder, inputs: dict) -> object:
    """Final-layer hidden state of the first token, [B, H]."""
    return _final_states(encoder, inputs)[:, 0]


def _row_vectors(encoder, inputs: dict, index, per_word: bool):
    """(rows [R], vectors [R, H]) of one batch: each example's first token at its row (``index`` [B]);
    with ``per_word``, each word's first sub-word at its unit's row (``index`` [B, T]: the unit at a
    word's first sub-word, -1 elsewhere, as :func:`cartomap.training.batching.tokenize_words` aligns it)."""
    if not per_word:
        return index, _first_token_states(encoder, inputs)
    keep = index >= 0
    return index[keep], _final_states(encoder, inputs)[keep.to(inputs["input_ids"].device)]


def embedding_ids(task, examples) -> list[str]:
    """The ids of a run's embedding rows, in order: a word-unit kind's (token classification) words'
    unit ids ``<sentence id>#<k>`` (:meth:`TaskKind.unit_ids`, the dynamics' order), else the examples'
    ids (one vector per example, a multi-label example's too)."""
    if task.unit.sentences:
        return task.unit_ids(examples)[0]
    return examples["id"].astype(str).tolist()


def compute_cls_embeddings(
    model_dir: str | Path,
    frame,
    max_length: int = MAX_LENGTH,
    batch_size: int = 64,
    device: str = "auto",
    progress: ProgressCallback | None = None,
    task=None,
) -> np.ndarray:
    """L2-normalised final-layer first-token vectors of every row of ``frame``: float32 [N, H].

    ``frame`` holds the text fields of ``task`` (default: the kind its columns show, for a bare frame with no
    run to ask; :func:`embed_run` passes the run's). Rows are batched
    in length order (little padding) and returned in the frame's order. A word-unit kind's rows are
    sentences: one vector per word, its first sub-word's, in :func:`embedding_ids` order (float32
    [words, H]; a sentence longer than ``max_length`` sub-words is a DataError naming it). Runs on the
    GPU when present (``device="auto"``), in fp32.
    """
    import torch
    from torch.utils.data import DataLoader

    from cartomap.training.batching import DynamicPadding, TokenizedExamples, tokenize
    from cartomap.training.loop import model_inputs
    from cartomap.training.models import available_device, load_tokenizer

    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    task = task if task is not None else task_kinds.of_columns(frame.columns)
    per_word = bool(task.unit.sentences)
    device = available_device(device)
    tokenizer = load_tokenizer(str(model_dir))
    encoder = _load_encoder(model_dir).to(device).eval()
    n = len(frame)
    n_rows = len(embedding_ids(task, frame)) if per_word else n
    hidden_size = int(encoder.config.hidden_size)
    out = np.zeros((n_rows, hidden_size), dtype=np.float32)
    if n == 0:
        return out

    encoded = tokenize(tokenizer, frame, max_length, task)
    dataset = TokenizedExamples(encoded, np.zeros(n, dtype=np.int64))
    order = np.argsort(-dataset.lengths, kind="stable")  # longest first: a memory error shows at once
    batches = [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    loader = DataLoader(dataset, batch_sampler=batches, collate_fn=DynamicPadding(pad_id))
    done = 0
    with torch.inference_mode():
        for batch in loader:
            inputs = {k: v.to(device) for k, v in model_inputs(batch).items()}
            rows, vectors = _row_vectors(encoder, inputs, batch["index"], per_word)
            vectors = torch.nn.functional.normalize(vectors.float(), p=2, dim=1)
            out[rows.numpy()] = vectors.cpu().numpy()
            done += len(batch["index"])
            if progress is not None:
                progress(done, n)
    return out


# --------------------------------------------------------------------------- run files
def embeddings_path(run: Run) -> Path:
    return run.embeddings_path


def has_embeddings(run: Run) -> bool:
    return run.embeddings_path.exists() and run.embedding_ids_path.exists()


def save_embeddings(run: Run, ids: list[str], array: np.ndarray) -> None:
    """Write the array, then the ids, atomically; :func:`load_embeddings` checks they agree."""
    array = np.ascontiguousarray(array, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != len(ids):
        raise ValueError(f"expected an array [{len(ids)}, H], got shape {array.shape}")

    def write(path: Path) -> None:
        with open(path, "wb") as handle:  # np.save on a path would append ".npy" to the temp name
            np.save(handle, array)

    atomic_save(run.embeddings_path, write)
    atomic_write_json(run.embedding_ids_path, [str(i) for i in ids])


def load_embeddings(run: Run) -> tuple[list[str], np.ndarray] | None:
    """(ids, float32 [N, H]) in examples order, or None when not computed (or stale / half written).

    The array is a read-only memory map of the file: 550k x 384 vectors are 845 MB, which the
    dashboard and its jobs then share through the page cache instead of each holding a copy."""
    if not has_embeddings(run):
        return None
    ids = [str(i) for i in read_json(run.embedding_ids_path)]
    array = np.load(run.embeddings_path, mmap_mode="r")
    if array.ndim != 2 or array.shape[0] != len(ids):
        return None
    return ids, array


def embedding_model(run: Run, model: str | Path | None = None) -> Path:
    """The model folder the run's embeddings are computed with: ``model`` when given (a saved
    classifier's folder), else the run's final model, else (scored checkpoints) the last checkpoint
    folder. RunError with the reason and what to do when there is none."""
    if model is not None and str(model) != "":
        path = Path(model).expanduser()
        if not is_checkpoint(path):
            raise RunError(f"--model {model}: not a saved model folder (expected a folder with {HF_CONFIG})")
        return path
    if is_checkpoint(run.model_dir):
        return run.model_dir
    origin = run.config.origin
    if origin.kind.scored_checkpoints and origin.checkpoints and is_checkpoint(Path(origin.checkpoints[-1])):
        return Path(origin.checkpoints[-1])
    state = run.state
    if state != State.DONE:
        raise RunError(
            f"run {run.id} has no final model yet (state: {state}); embeddings need a finished run"
        )
    if not origin.kind.trains_here:
        raise RunError(
            f"run {run.id} was recorded outside cartomap by {origin.kind.recorded_by}, without its weights: "
            f"compute its embeddings with the fine-tuned model's folder, `cartomap embed {run.id} --model PATH`"
        )
    from cartomap.runs import shipped

    if shipped.is_recording(run):
        raise RunError(f"run {run.id}: {shipped.NO_WEIGHTS}")
    raise RunError(
        f"run {run.id} has no final model (its model folder is missing): train it again, or give a model "
        f"folder with `cartomap embed {run.id} --model PATH`"
    )


def embedding_problem(run: Run, model: str | Path | None = None) -> str | None:
    """Why the run's embeddings cannot be computed (one line), or None when they can."""
    try:
        embedding_model(run, model)
    except RunError as err:
        return str(err)
    return None


def embed_run(
    run: Run,
    batch_size: int = 64,
    device: str = "auto",
    max_length: int = MAX_LENGTH,
    progress: ProgressCallback | None = None,
    force: bool = False,
    model: str | Path | None = None,
) -> tuple[list[str], np.ndarray]:
    """Compute and save the run's [CLS] embeddings as task ``embeddings`` (progress in tasks/embeddings.json);
    a token run's word vectors (:func:`embedding_ids`), its sentences read up to the longer of
    ``max_length`` and the run's own max length (every word trained is embedded).

    Needs a model (:func:`embedding_model`: ``model``, the run's final model, or a scored run's last
    checkpoint). Returns the saved embeddings; an existing, consistent set is returned without
    recomputing unless ``force`` (or another ``model``).
    """
    from cartomap.runs.tasks import task, task_status, task_update, throttled_reporter
    from cartomap.training.models import available_device

    examples = run.examples()
    kind = run.task_kind
    ids = embedding_ids(kind, examples)
    if not force and not model:
        loaded = load_embeddings(run)
        if loaded is not None and loaded[0] == ids:
            if (task_status(run, TASK) or {}).get("state") == State.QUEUED:  # a job started for nothing
                task_update(run, TASK, state=State.DONE, progress=1.0)
            return loaded
    if kind.unit.sentences:
        max_length = max(int(max_length), int(run.config.model.max_length))
    with task(run, TASK, total=len(examples), device=device) as update:  # a failure is recorded there
        model_dir = embedding_model(run, model)
        device = available_device(device)
        update(device=device, model=str(model_dir))
        report = throttled_reporter(update, progress)

        t0 = time.time()
        array = compute_cls_embeddings(
            model_dir,
            examples,
            max_length=max_length,
            batch_size=batch_size,
            device=device,
            progress=report,
            task=kind,
        )
        save_embeddings(run, ids, array)
        update(seconds=round(time.time() - t0, 2), dim=int(array.shape[1]))
    run.log(f"embeddings: {array.shape[0]} x {array.shape[1]} of {model_dir} in {time.time() - t0:.1f}s")
    return ids, array
