"""Premise-hypothesis semantic similarity from a sentence encoder (WaNLI §4.3; STS-CL of RoNLI).

Each sentence is encoded on its own: the encoder's last hidden states, mean-pooled over the real
tokens (attention mask), L2-normalised; the similarity of a pair is the cosine (a dot product of unit
vectors), in [-1, 1], higher = more similar. For the default all-MiniLM-L6-v2 this is exactly its
sentence-transformers pooling (mean, then normalise), so the numbers are its SBERT similarities.

Importable without streamlit; torch and transformers are imported inside the functions that need them.

Run file (written atomically) and task::

    similarity.parquet    id, similarity: one row per training example, examples.parquet order
    tasks/similarity.json progress of ``cartomap similarity RUN`` (with the encoder used)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.config import DEFAULT_MODEL
from cartomap.errors import RunError
from cartomap.io import atomic_write_parquet
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.tasks import support

TASK = "similarity"
MAX_LENGTH = 128  # tokens per sentence
SUMMARY_COLUMNS = ("label", "count", "mean", "std", "min", "q25", "median", "q75", "max")

ProgressCallback = Callable[[int, int], None]  # (sentences done, total)


def _load_encoder(model: str):
    """Tokenizer and base encoder of ``model`` ("default", a local folder or a hub id), offline-safe.

    A sequence-classification checkpoint (a run's model) loads as its base encoder: the head is unused."""
    from transformers import AutoModel

    from cartomap.training.models import load_tokenizer, quiet_transformers, resolve_model

    source = resolve_model(model)
    tokenizer = load_tokenizer(model)
    try:
        with quiet_transformers():
            encoder = AutoModel.from_pretrained(source)
    except OSError as err:
        raise RunError(f"could not load a sentence encoder from {model!r}: {err}") from err
    return tokenizer, encoder


def encode_sentences(
    texts: Sequence[str],
    model: str = DEFAULT_MODEL,
    batch_size: int = 64,
    max_length: int = MAX_LENGTH,
    device: str = "cpu",
    progress: ProgressCallback | None = None,
) -> np.ndarray:
    """Mean-pooled (over the attention mask), L2-normalised last hidden states: float32 [N, H].

    mean_i = Σ_t mask_t h_t / Σ_t mask_t, then v_i = mean_i / ‖mean_i‖. Sentences are batched in
    length order (little padding) and returned in input order.
    """
    import torch

    from cartomap.training.models import available_device

    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    texts = [str(t) for t in texts]
    tokenizer, encoder = _load_encoder(model)
    device = available_device(device)
    encoder = encoder.to(device).eval()
    out = np.zeros((len(texts), int(encoder.config.hidden_size)), dtype=np.float32)
    if not texts:
        return out
    order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first: memory errors show at once
    done = 0
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            batch = tokenizer(
                [texts[i] for i in rows],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            hidden = encoder(**batch, return_dict=True).last_hidden_state.float()
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            out[rows] = torch.nn.functional.normalize(mean, p=2, dim=1).cpu().numpy()
            done += len(rows)
            if progress is not None:
                progress(done, len(texts))
    return out


def pair_similarity(
    premises: Sequence[str],
    hypotheses: Sequence[str],
    model: str = DEFAULT_MODEL,
    batch_size: int = 64,
    max_length: int = MAX_LENGTH,
    device: str = "cpu",
    progress: ProgressCallback | None = None,
) -> np.ndarray:
    """Cosine similarity of each (premise, hypothesis) pair under the sentence encoder: float32 [N].

    Both sides are encoded separately with :func:`encode_sentences`; each distinct sentence once (in
    NLI a premise often has several hypotheses). Higher = more similar; 1.0 for identical texts.
    Symmetric: pair_similarity(a, b) == pair_similarity(b, a). ``device``: cpu, cuda, mps or auto.
    """
    premises, hypotheses = [str(t) for t in premises], [str(t) for t in hypotheses]
    if len(premises) != len(hypotheses):
        raise ValueError(
            f"expected as many premises as hypotheses, got {len(premises)} and {len(hypotheses)}"
        )
    if not premises:
        return np.zeros(0, dtype=np.float32)
    unique = list(dict.fromkeys(premises + hypotheses))
    position = {t: i for i, t in enumerate(unique)}
    vectors = encode_sentences(
        unique, model, batch_size=batch_size, max_length=max_length, device=device, progress=progress
    )
    a = vectors[[position[t] for t in premises]]
    b = vectors[[position[t] for t in hypotheses]]
    return np.clip(np.einsum("ij,ij->i", a, b), -1.0, 1.0).astype(np.float32)


def similarity_by_label(sim, labels, label_names: Sequence[str]) -> pd.DataFrame:
    """Per gold label: count, mean, std (sample, ddof=1), min, quartiles (q25, median, q75) and max of
    the similarities. One row per label in ``label_names`` order (NaN statistics for an absent label)."""
    sim = np.asarray(sim, dtype=np.float64)
    labels = np.asarray(labels)
    if sim.shape != labels.shape or sim.ndim != 1:
        raise ValueError(f"expected one similarity per label, got shapes {sim.shape} and {labels.shape}")
    rows = []
    for code, name in enumerate(label_names):
        values = sim[labels == code]
        if values.size:
            q25, median, q75 = np.quantile(values, [0.25, 0.5, 0.75])
            stats = {
                "mean": values.mean(),
                "std": values.std(ddof=1) if values.size > 1 else np.nan,
                "min": values.min(),
                "q25": q25,
                "median": median,
                "q75": q75,
                "max": values.max(),
            }
        else:
            stats = dict.fromkeys(SUMMARY_COLUMNS[2:], np.nan)
        rows.append({"label": str(name), "count": int(values.size), **stats})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


# --------------------------------------------------------------------------- run files
def similarity_path(run: Run) -> Path:
    return run.similarity_path


def save_similarity(run: Run, ids: Sequence[str], sim: np.ndarray) -> Path:
    sim = np.asarray(sim, dtype=np.float32)
    if sim.shape != (len(ids),):
        raise ValueError(f"expected {len(ids)} similarities, got shape {sim.shape}")
    frame = pd.DataFrame({"id": pd.Series([str(i) for i in ids], dtype=str), "similarity": sim})
    return atomic_write_parquet(similarity_path(run), frame)


def load_similarity(run: Run) -> pd.DataFrame | None:
    """The run's saved similarities (id, similarity), or None when they were not computed."""
    path = similarity_path(run)
    if not path.exists():
        return None
    frame = pd.read_parquet(path)
    frame["id"] = frame["id"].astype(str)
    return frame


def aligned_similarity(saved: pd.DataFrame | None, ids) -> np.ndarray | None:
    """The saved similarity in the order of ``ids`` (float [N]), or None when it misses any of them."""
    if saved is None:
        return None
    values = saved.set_index("id")["similarity"].reindex(pd.Index(ids).astype(str))
    return None if values.isna().any() else values.to_numpy(dtype=np.float64)


def similarity_run(
    run: Run,
    model: str = DEFAULT_MODEL,
    batch_size: int = 64,
    max_length: int = MAX_LENGTH,
    device: str = "auto",
    progress: ProgressCallback | None = None,
    force: bool = False,
) -> pd.DataFrame:
    """Compute and save the similarity of the two texts of every training pair of ``run`` as task
    ``similarity`` (progress in tasks/similarity.json). A saved result for the same examples and encoder
    is returned without recomputing unless ``force``."""
    from cartomap.runs.tasks import task, task_status, task_update, throttled_reporter
    from cartomap.training.models import available_device

    examples = run.examples()
    kind = run.task_kind
    support.SIMILARITY.require(kind, location=f"run {run.id}")
    ids = examples["id"].astype(str).tolist()
    status = task_status(run, TASK) or {}
    saved = load_similarity(run)
    if (
        not force
        and saved is not None
        and saved["id"].tolist() == ids
        and status.get("model") in (None, model)
    ):
        if status.get("state") == State.QUEUED:  # a job started for nothing
            task_update(run, TASK, state=State.DONE, progress=1.0)
        return saved
    with task(run, TASK, total=len(ids), model=model) as update:
        device = available_device(device)
        update(device=device)
        report = throttled_reporter(
            update,
            progress,
            lambda done, total: {
                "progress": round(done / max(total, 1), 4),
                "done": done,
                "total": total,
                "unit": "sentences",
            },
        )

        t0 = time.time()
        first, second = (examples[f].astype(str).tolist() for f in kind.text_fields[:2])
        sim = pair_similarity(
            first,
            second,
            model=model,
            batch_size=batch_size,
            max_length=max_length,
            device=device,
            progress=report,
        )
        save_similarity(run, ids, sim)
        update(seconds=round(time.time() - t0, 2))
    run.log(f"similarity ({model}): {len(ids)} pairs in {time.time() - t0:.1f}s")
    return load_similarity(run)
