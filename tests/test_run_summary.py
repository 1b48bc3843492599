"""A run at a glance (cartomap.analysis.summary): accuracy last and best, recording, the dev confusion matrix."""

from __future__ import annotations

import numpy as np
import pytest

from cartomap.analysis import summary
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.io import atomic_write_json
from cartomap.runs.store import RunStore

HISTORY = [
    {"epoch": 1, "train_loss": 1.0, "dev_accuracy": 0.5, "test_0_accuracy": 0.40},
    {"epoch": 2, "train_loss": 0.7, "dev_accuracy": 0.8, "test_0_accuracy": 0.70},
    {"epoch": 3, "train_loss": 0.5, "dev_accuracy": 0.7, "test_0_accuracy": 0.75},
]


def test_summarise_reports_last_and_best_epoch():
    s = summary.summarise(
        HISTORY,
        epochs_planned=4,
        record="eval",
        record_points=2,
        skip_epochs=1,
        n_seeds=3,
        test_names=["hans"],
    )
    assert s["epochs_done"] == 3 and s["epochs_planned"] == 4 and s["best_epoch"] == 2
    assert s["accuracy"] == {"dev": {"last": 0.7, "best": 0.8}, "test: hans": {"last": 0.75, "best": 0.70}}
    rows = dict(summary.summary_rows(s).to_numpy())
    assert rows["epochs"] == "3 of 4" and rows["seeds"] == "3"
    assert (
        rows["dev accuracy, best epoch (2)"] == "80.0%" and rows["test: hans accuracy, last epoch"] == "75.0%"
    )
    assert rows["recording"] == "eval, 2 recordings an epoch, map skips the first 1 epoch(s)"
    assert summary.summary_line(s) == (
        "3/4 epochs · dev accuracy 70.0% last, 80.0% best (epoch 2) · 3 seeds · recorded: eval"
    )


def test_summarise_without_dev_or_history():
    s = summary.summarise(
        [{"epoch": 1, "train_loss": 1.0}, {"epoch": 2, "train_loss": 0.9}], epochs_planned=2, record="train"
    )
    assert s["best_epoch"] == 2 and s["accuracy"] == {}
    assert summary.summary_line(s) == "2/2 epochs · 1 seed · recorded: train"
    empty = summary.summarise([], epochs_planned=3, record="train")
    assert empty["best_epoch"] is None and empty["epochs_done"] == 0
    assert dict(summary.summary_rows(empty).to_numpy())["epochs"] == "0 of 3"


def test_confusion_matrix_counts_gold_by_prediction():
    labels = [0, 0, 1, 2, 2, 2]
    logits = np.eye(3)[[0, 1, 1, 2, 0, 2]]
    cm = summary.confusion_matrix(labels, logits, ["e", "n", "c"])
    assert list(cm.index) == ["gold e", "gold n", "gold c"]
    assert list(cm.columns) == ["predicted e", "predicted n", "predicted c"]
    assert cm.to_numpy().tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    assert summary.confusion_matrix([0], np.eye(3)[[2]], ["e", "n", "c"]).to_numpy().sum() == 1
    with pytest.raises(DataError, match="logits must be"):
        summary.confusion_matrix([0, 1], np.eye(3)[[0]], ["e", "n", "c"])


def test_run_summary_and_dev_confusion_of_a_run(tmp_path):
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(
        data=DataConfig(path="demo:dev"),
        dev=DataConfig(path="demo:dev"),
        train=TrainConfig(epochs=2, record="train", skip_epochs=1),
        name="summary",
    )
    run = RunStore(tmp_path / "cache").create(config, data, data)
    assert summary.dev_confusion(run) is None  # no dev epoch yet
    y = np.asarray(data.labels)
    right = np.eye(3, dtype=np.float32)[y]
    wrong = right.copy()
    wrong[:10] = np.eye(3, dtype=np.float32)[(y[:10] + 1) % 3]  # the first 10 predicted as the next class
    run.write_epoch("dev", 0, data.ids, right)
    run.write_epoch("dev", 1, data.ids, wrong)
    atomic_write_json(run.history_path, HISTORY[:2])
    cm = summary.dev_confusion(run)  # the final epoch
    expected = np.diag(np.bincount(y, minlength=3))
    for label in y[:10]:
        expected[label, label] -= 1
        expected[label, (label + 1) % 3] += 1
    assert cm.to_numpy().tolist() == expected.tolist()
    assert cm.index[0] == f"gold {run.label_names[0]}"
    assert np.trace(summary.dev_confusion(run, epoch=0).to_numpy()) == len(y)
    s = summary.run_summary(run, n_seeds=1, region_rule="by rank")
    assert s["epochs_done"] == 2 and s["skip_epochs"] == 1 and s["record"] == "train"
    assert s["accuracy"]["dev"] == {"last": 0.8, "best": 0.8}
