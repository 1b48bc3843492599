"""Scores of finished runs on their test sets, at the epoch best on validation.

Runs evaluate every test set of their config after every epoch (``dynamics/test_<k>/``), so any
epoch can be scored later without the model; the reported epoch is the one best on the dev set
(the last one without a dev set), as in the RoNLI paper's protocol.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cartomap.errors import RunError
from cartomap.runs.store import Run
from cartomap.scores.chance import chance_warning
from cartomap.scores.reports import classification_table, summary_scores
from cartomap.tasks import registry as task_kinds


def test_position(run: Run, test: int | str = 0) -> int:
    """Position of a test set given by position or by name."""
    if isinstance(test, int):
        if not 0 <= test < len(run.test_names):
            raise RunError(f"run {run.id} has {len(run.test_names)} test set(s); no test set {test}")
        return test
    if test not in run.test_names:
        raise RunError(f"run {run.id} has no test set {test!r}; it has {run.test_names}")
    return run.test_names.index(test)


def predictions_on_test(run: Run, test: int | str = 0, epoch: int | None = None) -> pd.DataFrame:
    """id, gold, pred, correct and the logits of one test set at ``epoch`` (default: best on dev)."""
    frame, logits = run.test_logits(test_position(run, test), epoch)
    out = frame[["id"]].astype(str).copy()
    for col in task_kinds.text_fields_in(frame.columns):
        out[col] = frame[col]
    out["gold"] = frame["label"].to_numpy(dtype=np.int64)
    out["pred"] = logits.argmax(1)
    out["correct"] = out["gold"] == out["pred"]
    for c in range(logits.shape[1]):
        out[f"logit_{c}"] = logits[:, c]
    return out


def run_scores(run: Run, test: int | str = 0, epoch: int | None = None) -> dict:
    """accuracy, micro and macro F1 on a test set, plus the epoch used and its dev accuracy."""
    epoch = run.best_epoch() if epoch is None else epoch
    if epoch is None:
        raise RunError(f"run {run.id} has no finished epoch")
    pred = predictions_on_test(run, test, epoch)
    scores = summary_scores(pred["gold"], pred["pred"], len(run.label_names))
    history = run.history()
    return {
        **scores,
        "epoch": epoch + 1,
        "dev_accuracy": history[epoch].get("dev_accuracy"),
        "test_set": run.test_names[test_position(run, test)],
    }


def run_class_table(run: Run, test: int | str = 0, epoch: int | None = None) -> pd.DataFrame:
    """Per-class precision, recall, F1 and support with micro and macro rows (reports.classification_table)."""
    pred = predictions_on_test(run, test, epoch)
    return classification_table(pred["gold"], pred["pred"], run.label_names)


def epoch_curves(run: Run) -> pd.DataFrame:
    """Long frame: epoch, metric (dev accuracy, test accuracy per test set, train loss), value."""
    rows = []
    for record in run.history():
        epoch = record.get("epoch")
        for key, value in record.items():
            if key == "epoch" or value is None or not isinstance(value, int | float):
                continue
            name = key
            if key.startswith("test_") and key.endswith("_accuracy"):
                k = int(key.split("_")[1])
                name = f"test accuracy: {run.test_names[k]}" if k < len(run.test_names) else key
            rows.append({"epoch": epoch, "metric": name, "value": float(value)})
    return pd.DataFrame(rows, columns=["epoch", "metric", "value"])


def _labels_of(run: Run, source: str) -> np.ndarray | None:
    """Gold label ids of a run's set ("train", "dev", "test_<k>"); None when it cannot be read."""
    try:
        if source == "dev":
            frame = run.dev_examples()
        elif source.startswith("test_"):
            frame = run.test_examples(int(source.split("_", 1)[1]))
        else:
            frame = run.examples(columns=["label"])
    except (OSError, ValueError, KeyError, RunError):
        return None
    return None if frame is None else frame["label"].to_numpy(dtype=np.int64)


def final_accuracy(run: Run) -> tuple[float, str] | None:
    """The run's model accuracy and which: its last dev accuracy ("dev accuracy"), else the accuracy of
    its last recorded pass over the training set ("final train-pass accuracy"); None before either."""
    history = run.history()
    dev = history[-1].get("dev_accuracy") if history else None
    if isinstance(dev, (int, float)):
        return float(dev), "dev accuracy"
    source = run.recorded_source()
    epochs = run.dynamics_epochs(source)
    if not epochs:
        return None
    try:
        frame = run.examples(columns=["id", "label"])
        logits = run.read_epoch(source, epochs[-1], frame["id"].astype(str).tolist())
    except (OSError, ValueError, KeyError, RunError):
        return None
    return float((logits.argmax(1) == frame["label"].to_numpy()).mean()), "final train-pass accuracy"


def run_chance_warning(run: Run, accuracy: float | None = None, source: str | None = None) -> str | None:
    """:func:`cartomap.scores.chance.chance_warning` for ``run``'s model: ``accuracy`` on ``source``
    ("dev", "test_<k>", "train") when given, else :func:`final_accuracy` (dev, else the train pass)."""
    if accuracy is None:
        found = final_accuracy(run)
        if found is None:
            return None
        accuracy, what = found
        source = "dev" if what == "dev accuracy" else "train"
    else:
        source = source or "dev"
        what = "test accuracy" if source.startswith("test_") else f"{source} accuracy"
    return chance_warning(accuracy, len(run.label_names), _labels_of(run, source), what=what)
