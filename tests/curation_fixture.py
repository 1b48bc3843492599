"""A tiny finished run for the review-queue tests: 8 NLI pairs with votes, 3 epochs of hand-set
logits, metrics, and 2-D embeddings whose neighbours are known by hand. No training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.io import atomic_write_parquet
from cartomap.runs.groups import save_group
from cartomap.runs.store import Run, RunStore
from cartomap.scores.metrics import compute_metrics
from cartomap.training.embeddings import save_embeddings

LABELS = ("entailment", "neutral", "contradiction")
#: (id, gold, how strongly the model believes gold over the epochs: higher = less suspect)
ROWS = [
    ("e0", "entailment", 3.0),
    ("e1", "entailment", -2.0),  # never believed: most suspect
    ("n0", "neutral", 2.0),
    ("n1", "neutral", -1.0),
    ("c0", "contradiction", 2.5),
    ("c1", "contradiction", -0.5),
    ("e2", "entailment", 1.0),
    ("n2", "neutral", 1.5),
]


def write_data(folder: Path) -> Path:
    path = folder / "train.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for k, (i, gold, _) in enumerate(ROWS):
        votes = [gold, gold, "neutral"] if k % 2 == 0 else ["contradiction", "contradiction", gold]
        lines.append(
            json.dumps(
                {
                    "id": i,
                    "premise": f"Premise {i} <b>bold</b> *star*",
                    "hypothesis": f"Hypothesis {i}.",
                    "label": gold,
                    "annotator_labels": votes,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_run(cache: Path, embeddings: bool = True, group: bool = True) -> Run:
    path = write_data(Path(cache).parent / "data")
    data_cfg = DataConfig(path=str(path), label_names=LABELS)
    data = load_dataset(data_cfg)
    config = RunConfig(data=data_cfg, dev=None, train=TrainConfig(epochs=3, record="train"), name="suspects")
    run = RunStore(cache).create(config, data, None)
    labels = np.asarray(data.labels)
    strength = np.asarray([s for _, _, s in ROWS])
    logits = []
    for e in range(3):
        z = np.zeros((len(ROWS), 3), dtype=np.float32)
        z[np.arange(len(ROWS)), labels] = strength * (e + 1) / 3
        wrong = (labels + 1) % 3  # the class the model drifts to
        z[np.arange(len(ROWS)), wrong] += 0.5
        run.write_epoch("train", e, data.ids, z)
        logits.append(z)
    atomic_write_parquet(run.metrics_path(), compute_metrics(np.stack(logits), labels, data.ids))
    run.set_status(state="done", progress=1.0)
    if embeddings:
        # two clusters on a circle: e* and n* near angle 0, c* near angle pi/2
        angles = {"e0": 0.0, "e1": 0.1, "e2": 0.2, "n0": 0.3, "n1": 0.4, "n2": 0.5, "c0": 1.5, "c1": 1.6}
        emb = np.asarray([[np.cos(angles[i]), np.sin(angles[i])] for i in data.ids], dtype=np.float32)
        save_embeddings(run, list(data.ids), emb)
    if group:
        save_group(run, "lasso", ["c1", "n2", "e0"], source="selection")
    return run
