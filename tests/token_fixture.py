"""A tiny finished token run for the map tests: 3 CoNLL sentences (11 words), 2 epochs of hand-set logits
per word, its metrics as the training loop writes them (keyed by sentence id and word index). No training.

Tags (sorted, as loading codes them): 0 B-LOC, 1 B-PER, 2 I-PER, 3 O. Each word's logits are 0 but for
one tag set to ``STRENGTH``: the gold tag for most words, so p(gold) = e^s / (e^s + 3) per epoch; the
words of ``WRONG`` get another tag, and their sentence ``sent-1`` holds the worst word of the run.

With ``gold_probs`` [E, 11] (e.g. :data:`OVER_EPOCHS`) the run has E recordings instead, each word's
p(gold) after recording e set to ``gold_probs[e, word]`` and the rest spread evenly over the 3 other tags
(logits = log-probabilities): a word is predicted right when p(gold) > 1/4."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import Run, RunStore
from cartomap.scores.metrics import compute_metrics
from cartomap.tasks.token import TOKEN

CONLL = """\
Arnold B-PER
Schwarzenegger I-PER
lives O
in O
Paris B-LOC

Mary B-PER
visited O
Berlin B-LOC

The O
cat O
sat O
"""
STRENGTH = 2.0
#: unit id -> the tag the logits favour instead of gold, in both epochs ("Berlin" read as a person).
WRONG = {"sent-1#2": 1}


#: p(gold) of the 11 words (columns, in order) after each of 3 recordings (rows): "Berlin" (sent-1#2) is
#: learned at the last one; sent-2's worst word is "The" after one recording and "cat" afterwards.
OVER_EPOCHS = np.array(
    [
        # Arnold Schw. lives in  Paris | Mary visited Berlin | The  cat  sat
        [0.7, 0.9, 0.9, 0.9, 0.5, 0.6, 0.9, 0.1, 0.3, 0.5, 0.9],
        [0.8, 0.9, 0.9, 0.9, 0.6, 0.7, 0.9, 0.2, 0.9, 0.5, 0.9],
        [0.9, 0.9, 0.9, 0.9, 0.4, 0.8, 0.9, 0.9, 0.9, 0.5, 0.9],
    ]
)


def p_gold(strength: float = STRENGTH, n_tags: int = 4) -> float:
    """p(favoured tag) of a word's softmax: e^s / (e^s + n_tags - 1)."""
    return float(np.exp(strength) / (np.exp(strength) + n_tags - 1))


def make_token_run(
    cache: Path, tmp: Path, gold_probs: np.ndarray | None = None, seed: int | None = None
) -> Run:
    """The run (named "ner"; with a ``seed``, "ner-<seed>" trained with that seed)."""
    path = tmp / "ner.conll"
    path.write_text(CONLL, encoding="utf-8")
    data = load_dataset(DataConfig(path=str(path)))
    n_epochs = 2 if gold_probs is None else len(gold_probs)
    train = TrainConfig(epochs=n_epochs, record="train", **({} if seed is None else {"seed": seed}))
    name = "ner" if seed is None else f"ner-{seed}"
    config = RunConfig(data=DataConfig(path=str(path)), train=train, name=name)
    run = RunStore(cache).create(config, data)
    unit_ids, labels, counts = TOKEN.units(data.frame)
    n_tags = len(data.label_names)
    if gold_probs is None:
        favoured = np.array([WRONG.get(u, g) for u, g in zip(unit_ids, labels.tolist(), strict=True)])
        logits = np.zeros((2, len(unit_ids), n_tags), dtype=np.float32)
        logits[:, np.arange(len(unit_ids)), favoured] = STRENGTH
    else:
        q = np.asarray(gold_probs, dtype=np.float64)  # [E, M]
        probs = np.repeat(((1 - q) / (n_tags - 1))[:, :, None], n_tags, axis=2)
        probs[:, np.arange(len(unit_ids)), labels] = q
        logits = np.log(probs).astype(np.float32)
    for e in range(n_epochs):
        run.write_epoch("train", e, unit_ids, logits[e])
    metrics = compute_metrics(logits, labels, unit_ids)
    example_ids = data.frame["id"].astype(str).to_numpy()
    metrics.insert(1, "example_id", np.repeat(example_ids, counts))
    metrics.insert(2, "word", np.concatenate([np.arange(n) for n in counts]))
    atomic_write_parquet(run.path / "metrics.parquet", metrics)
    run.set_status(state="done", progress=1.0)
    return run
