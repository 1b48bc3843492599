"""DynamicsRecorder: a hand-written PyTorch loop records a run; every misuse is a clear error."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cartomap.errors import DataError, RunError
from cartomap.integrations import DynamicsRecorder
from cartomap.runs.store import RunStore
from cartomap.scores.metrics import compute_metrics

NAMES = ("entailment", "neutral", "contradiction")


def loop(recorder: DynamicsRecorder, seed: int = 0, epochs: int = 3) -> dict:
    """A logistic regression on 10 random points, shuffled batches of 3 (the last one short); returns
    the logits it produced, by (epoch, id), to compare with what the recorder kept."""
    import torch

    torch.manual_seed(seed)
    x = torch.randn(10, 4)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    ids = torch.arange(100, 110)  # integer ids, not row positions
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    seen = {}
    for epoch in range(epochs):
        order = torch.randperm(10)
        for start in range(0, 10, 3):
            batch = order[start : start + 3]
            logits = model(x[batch])
            recorder(epoch, ids[batch], logits)  # a tensor with grad: the recorder detaches
            for i, row in zip(ids[batch].tolist(), logits.detach().numpy(), strict=True):
                seen[(epoch, str(i))] = row
            loss = torch.nn.functional.cross_entropy(logits, y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return seen


def labels_and_texts():
    labels = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    texts = [(f"premise {i}", f"hypothesis {i}") for i in range(100, 110)]
    return labels, texts


def test_a_hand_written_loop_becomes_a_run(tmp_path):
    labels, texts = labels_and_texts()
    recorder = DynamicsRecorder(
        range(100, 110),
        labels,
        texts,
        label_names=NAMES,
        store=tmp_path,
        name="my loop",
        model="linear",
        settings={"learning_rate": 0.5, "batch_size": 3, "optimizer": "sgd"},
    )
    seen = loop(recorder)
    run = recorder.close()
    assert run.state == "done" and run.config.origin.kind == "recorder"
    assert run.config.train.learning_rate == 0.5 and run.config.train.batch_size == 3
    assert run.config.train.epochs == 3 and run.label_names == NAMES
    examples = run.examples()
    assert examples["id"].tolist() == [str(i) for i in range(100, 110)]
    assert examples["premise"].iloc[2] == "premise 102" and examples["label"].tolist() == labels
    ids, logits = run.dynamics()
    assert logits.shape == (3, 10, 3)
    for (epoch, i), row in seen.items():
        np.testing.assert_array_equal(logits[epoch, ids.index(i)], row)
    pd.testing.assert_frame_equal(
        run.metrics(), compute_metrics(logits, np.array(labels), ids), check_dtype=False
    )
    assert recorder.close() is run  # closing twice returns the same run
    with pytest.raises(RunError, match="closed"):
        recorder(0, [100], np.zeros((1, 3)))

    # the same loop recorded again is the same run; another seed is another run
    again = DynamicsRecorder(
        range(100, 110),
        labels,
        texts,
        label_names=NAMES,
        store=tmp_path,
        model="linear",
        settings={"learning_rate": 0.5, "batch_size": 3, "optimizer": "sgd"},
    )
    loop(again)
    assert again.close().id == run.id
    other = DynamicsRecorder(
        range(100, 110),
        labels,
        texts,
        label_names=NAMES,
        store=tmp_path,
        model="linear",
        settings={"learning_rate": 0.5, "batch_size": 3, "optimizer": "sgd"},
    )
    loop(other, seed=1)
    assert other.close().id != run.id and len(RunStore(tmp_path).list()) == 2


def test_metrics_by_hand_and_a_run_without_texts(tmp_path):
    """Two examples, 3 epochs, logits log(p): confidence is the mean gold probability."""
    p = {
        "a": ([0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.8, 0.1, 0.1]),  # gold 0: .5 .25 .8
        "b": ([0.6, 0.2, 0.2], [0.1, 0.6, 0.3], [0.4, 0.4, 0.2]),  # gold 2: .2 .3 .2
    }
    with DynamicsRecorder(["a", "b"], [0, 2], store=tmp_path, mode="eval") as recorder:
        for epoch in range(3):
            for i in ("b", "a"):  # any order
                recorder.record(epoch, [i], np.log([p[i][epoch]]))
    run = recorder.closed
    metrics = run.metrics().set_index("id")
    assert metrics.loc["a", "confidence"] == pytest.approx((0.5 + 0.25 + 0.8) / 3)
    assert metrics.loc["b", "confidence"] == pytest.approx((0.2 + 0.3 + 0.2) / 3)
    assert metrics.loc["a", "variability"] == pytest.approx(np.std([0.5, 0.25, 0.8]))
    assert metrics.loc["a", "correct_count"] == 2 and metrics.loc["b", "correct_count"] == 0
    assert run.label_names == ("class_0", "class_1", "class_2") and run.config.train.record == "eval"
    assert run.dynamics_epochs("eval") == [0, 1, 2] and run.status()["metrics_source"] == "eval"
    assert run.examples()["text"].tolist() == ["", ""]


def test_errors_say_what_went_wrong(tmp_path):
    labels, _ = labels_and_texts()
    with pytest.raises(DataError, match="duplicate id 'x'"):
        DynamicsRecorder(["x", "y", "x"], [0, 1, 0])
    with pytest.raises(DataError, match="3 labels for 2 ids"):
        DynamicsRecorder(["x", "y"], [0, 1, 0])
    with pytest.raises(DataError, match="label of id 'y' is 'maybe'"):
        DynamicsRecorder(["x", "y"], ["neutral", "maybe"], label_names=NAMES)
    with pytest.raises(DataError, match="expected a class index 0..2"):
        DynamicsRecorder(["x", "y"], [0, 3], label_names=NAMES)
    with pytest.raises(DataError, match="1 texts for 2 ids"):
        DynamicsRecorder(["x", "y"], [0, 1], ["only one"])
    with pytest.raises(DataError, match="unknown mode"):
        DynamicsRecorder(["x", "y"], [0, 1], mode="test")

    recorder = DynamicsRecorder(range(10), labels, store=tmp_path, epochs=2)
    z = np.zeros((3, 3), dtype=np.float32)
    with pytest.raises(DataError, match="epoch 0: id '42' is not one of the recorder's 10 ids"):
        recorder(0, [1, 2, 42], z)
    with pytest.raises(DataError, match="id '1' recorded twice"):
        recorder(0, [1, 1, 2], z)
    recorder(0, [0, 1, 2], z)
    with pytest.raises(DataError, match="epoch 0: id '2' recorded twice"):
        recorder(0, [2, 3, 4], z)
    with pytest.raises(DataError, match="logits of shape \\(2, 3\\) for 3 ids"):
        recorder(0, [3, 4, 5], z[:2])
    with pytest.raises(DataError, match="4 columns, expected 3"):
        recorder(0, [3, 4, 5], np.zeros((3, 4)))
    with pytest.raises(DataError, match="non-finite logits for id '4'"):
        recorder(0, [3, 4, 5], np.array([[0, 0, 0], [math.nan, 0, 0], [0, 0, 0]]))
    with pytest.raises(DataError, match="epoch 2 is beyond the 2 epochs"):
        recorder(2, [3], z[:1])
    with pytest.raises(DataError, match="epoch must be an integer"):
        recorder(-1, [3], z[:1])
    # a loader that dropped its last batch: found when the next epoch begins, and at close
    recorder(0, np.arange(3, 9), np.zeros((6, 3)))
    assert recorder.missing(0) == ["9"]
    with pytest.raises(DataError, match="epoch 0 is missing 1 of 10 ids when epoch 1 began: '9'"):
        recorder(1, [0], z[:1])
    with pytest.raises(DataError, match="epoch 0 is missing 1 of 10 ids: '9'"):
        recorder.close()
    recorder(0, [9], z[:1])
    recorder(1, np.arange(10), np.zeros((10, 3)))
    run = recorder.close()
    assert run.dynamics()[1].shape == (2, 10, 3)

    # an epoch never recorded, or nothing at all
    gap = DynamicsRecorder(["x", "y"], [0, 1], store=tmp_path)
    gap(1, ["x", "y"], np.zeros((2, 2)))
    with pytest.raises(DataError, match="epoch 0 was never recorded"):
        gap.close()
    with pytest.raises(DataError, match="nothing was recorded"):
        DynamicsRecorder(["x", "y"], [0, 1], store=tmp_path).close()
    wide = DynamicsRecorder(["x", "y"], [0, 2], store=tmp_path)
    with pytest.raises(DataError, match="a gold label is 2 but the logits have 2 classes"):
        wide(0, ["x"], np.zeros((1, 2)))
