"""A tiny finished multi-label run for the map tests: 3 texts, 2 labels (politics, sports), 3 recordings of
hand-set label probabilities, its unit metrics and combined map as the training loop writes them. No
training.

Each unit (example, label) is recorded as the two-class row (0, z) with sigmoid(z) = :data:`P_PRESENT`;
its p(gold) is that when the label applies, 1 minus it when not (:data:`GOLD_PROBS`, hand-checkable)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import Run, RunStore
from cartomap.scores.label_examples import combined_map
from cartomap.scores.metrics import compute_metrics
from cartomap.tasks.base import label_unit_keys
from cartomap.tasks.multilabel import MULTILABEL

ROWS = [
    {"text": "the match ended in a draw", "labels": ["sports"]},
    {"text": "parliament votes on the new football stadium", "labels": ["politics", "sports"]},
    {"text": "a quiet day with nothing in the news", "labels": []},
]
NAMES = ("politics", "sports")
#: p(label present) after each recording [E, example, label].
P_PRESENT = np.array(
    [
        [[0.4, 0.3], [0.7, 0.2], [0.6, 0.1]],
        [[0.2, 0.6], [0.8, 0.4], [0.05, 0.4]],
        [[0.1, 0.9], [0.9, 0.4], [0.05, 0.4]],
    ]
)
GOLD = np.array([[False, True], [True, True], [False, False]])
#: p(gold state) after each recording [E, example, label]: ex-2's worst label is politics after one or two
#: recordings (0.4; mean 0.675) and sports after three (mean 0.7 < politics' 0.7667).
GOLD_PROBS = np.where(GOLD[None], P_PRESENT, 1 - P_PRESENT)


def make_multilabel_run(cache: Path, tmp: Path) -> Run:
    path = tmp / "topics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    data_config = DataConfig(path=str(path), task="multilabel", text_columns=("text",), label_column="labels")
    data = load_dataset(data_config)
    assert tuple(data.label_names) == NAMES
    config = RunConfig(
        data=data_config, train=TrainConfig(epochs=len(P_PRESENT), record="train"), name="topics"
    )
    run = RunStore(cache).create(config, data)
    unit_ids, labels, _ = MULTILABEL.units(data.frame, list(NAMES))
    z = np.log(P_PRESENT / (1 - P_PRESENT)).reshape(len(P_PRESENT), -1)  # [E, N * L]
    logits = np.stack([np.zeros_like(z), z], axis=-1).astype(np.float32)
    for e in range(len(logits)):
        run.write_epoch("train", e, unit_ids, logits[e])
    metrics = compute_metrics(logits, labels, unit_ids)
    example_ids = data.frame["id"].astype(str).tolist()
    for k, (name, values) in enumerate(label_unit_keys(example_ids, NAMES).items()):
        metrics.insert(1 + k, name, values)
    atomic_write_parquet(run.path / "metrics.parquet", metrics)
    atomic_write_parquet(run.example_metrics_path(), combined_map(metrics, example_ids, NAMES))
    run.set_status(state="done", progress=1.0)
    return run
