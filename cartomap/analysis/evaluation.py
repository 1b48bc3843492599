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
from cartomap.scores import entities
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
    """id, gold, pred, correct and the logits of one test set at ``epoch`` (default: best on dev); a token
    run's row per word (:func:`unit_predictions`)."""
    k = test_position(run, test)
    epoch = run.best_epoch() if epoch is None else epoch
    if epoch is None:
        raise RunError(f"run {run.id} has not finished an epoch yet")
    return unit_predictions(run, run.test_examples(k), f"test_{k}", epoch, with_logits=True)


def unit_predictions(run: Run, frame: pd.DataFrame, source: str, epoch: int, with_logits: bool = False):
    """id, the texts, gold, pred (and with ``with_logits`` correct and logit_<c>) of a set's recorded
    predictions at ``epoch`` (``source`` dev or test_<k>, ``frame`` its examples): a row per example, or
    for a token run a row per word (id ``<sentence id>#<k>``, the word as its text, its tag codes)."""
    kind = run.task_kind
    ids, gold, _ = kind.units(frame, run.label_names)
    if kind.unit.sentences:  # a row per word: the word as its text
        field = kind.text_fields[0]
        out = pd.DataFrame({"id": ids, field: [str(w) for words in frame[field] for w in words]})
    else:
        out = frame[["id"]].astype(str).copy()
        for col in task_kinds.text_fields_in(frame.columns):
            out[col] = frame[col]
    logits = run.read_epoch(source, epoch, ids)
    out["gold"] = np.asarray(gold, dtype=np.int64)
    out["pred"] = logits.argmax(1)
    if with_logits:
        out["correct"] = out["gold"] == out["pred"]
        for c in range(logits.shape[1]):
            out[f"logit_{c}"] = logits[:, c]
    return out


def entity_scores_at(run: Run, source: str, epoch: int) -> dict:
    """A named-entity run's :func:`cartomap.scores.entities.entity_scores` of set ``source`` (dev,
    test_<k>) at 0-based ``epoch``, as saved in its history ({} when it has none)."""
    history = run.history()
    if not 0 <= epoch < len(history):
        return {}
    return history[epoch].get(entities.scores_key(source)) or {}


def run_scores(run: Run, test: int | str = 0, epoch: int | None = None) -> dict:
    """accuracy, micro and macro F1 on a test set, plus the epoch used and its dev accuracy (a token run's:
    per word, plus ``entity_f1`` and ``entity_macro_f1`` of whole entities when its tags name entities)."""
    epoch = run.best_epoch() if epoch is None else epoch
    if epoch is None:
        raise RunError(f"run {run.id} has no finished epoch")
    pred = predictions_on_test(run, test, epoch)
    scores = summary_scores(pred["gold"], pred["pred"], len(run.label_names))
    history = run.history()
    out = {
        **scores,
        "epoch": epoch + 1,
        "dev_accuracy": history[epoch].get("dev_accuracy"),
        "test_set": run.test_names[test_position(run, test)],
    }
    found = entity_scores_at(run, f"test_{test_position(run, test)}", epoch)
    if found:  # named entities: whole-entity F1 beside the per-word scores
        out["entity_f1"] = found["micro"]["f1"]
        out["entity_macro_f1"] = found["macro"]["f1"]
    return out


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
    """Gold label ids of a run's set ("train", "dev", "test_<k>"), a token run's per word; None when it
    cannot be read."""
    try:
        return run.unit_labels(source)[1]
    except (OSError, ValueError, KeyError, RunError):  # RunError: a set the run lacks, or damaged
        return None


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
        ids, labels = run.unit_labels("train")  # per example, per word of a token run
        logits = run.read_epoch(source, epochs[-1], ids)
    except (OSError, ValueError, KeyError, RunError):
        return None
    return float((logits.argmax(1) == labels).mean()), "final train-pass accuracy"


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
