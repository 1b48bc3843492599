"""Tests for cartomap.scores.consensus on a hand-made logits fixture (expected values computed by hand)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.scores.consensus import (
    DEFAULT_SWEEP,
    confidence_change,
    mismatch_category,
    mismatch_matrix,
    mismatch_types,
    model_confidence,
    predictions,
    pruned_ids,
    select_suspects,
    stratified_folds,
    threshold_sweep,
)

# Classes: 0 entailment, 1 neutral, 2 contradiction. Values are exact in binary floating point.
# Each row: logits  # example  gold  pred  conf = |z[pred] - z[gold]|  category
LOGITS = np.array(
    [
        [3.0, 0.5, -1.0],  # 0     0     0     0                            ""
        [0.0, 2.5, 0.5],  # 1      0     1     2.5 - 0.0 = 2.5              P1G0
        [1.0, 3.0, 0.0],  # 2      0     1     3.0 - 1.0 = 2.0 (tie at 2.0) P1G0
        [0.5, 4.5, 0.0],  # 3      0     1     4.5 - 0.5 = 4.0              P1G0
        [2.0, 0.0, 5.0],  # 4      1     2     5.0 - 0.0 = 5.0              P2G1
        [-1.0, 1.0, 0.5],  # 5     1     1     0                            ""
        [3.5, 0.0, 0.0],  # 6      2     0     3.5 - 0.0 = 3.5              P0G2
        [0.0, 0.0, 2.0],  # 7      2     2     0                            ""
        [1.0, 2.0, 0.5],  # 8      0     1     2.0 - 1.0 = 1.0              P1G0
    ]
)
GOLD = np.array([0, 0, 0, 0, 1, 1, 2, 2, 0])


def test_predictions_and_categories():
    pred = predictions(LOGITS)
    assert pred.tolist() == [0, 1, 1, 1, 2, 1, 0, 2, 1]
    cats = mismatch_category(pred, GOLD)
    assert cats.tolist() == ["", "P1G0", "P1G0", "P1G0", "P2G1", "", "P0G2", "", "P1G0"]


def test_mismatch_matrix_counts():
    m = mismatch_matrix(predictions(LOGITS), GOLD, 3)
    expected = pd.DataFrame(
        [[1, 0, 1], [4, 1, 0], [0, 1, 1]], index=["P0", "P1", "P2"], columns=["G0", "G1", "G2"]
    )
    pd.testing.assert_frame_equal(m, expected, check_dtype=False)
    assert int(np.trace(m.to_numpy())) == 3  # correct predictions: examples 0, 5, 7
    assert int(m.to_numpy().sum()) == 9


def test_model_confidence_raw_logits():
    conf = model_confidence(LOGITS, GOLD)
    np.testing.assert_array_equal(conf, [0.0, 2.5, 2.0, 4.0, 5.0, 0.0, 3.5, 0.0, 1.0])
    assert conf.max() > 1.0  # logits, not probabilities


def test_select_suspects_p1g0_strictly_above_threshold():
    mask = select_suspects(LOGITS, GOLD, categories=("P1G0",), threshold=2.0)
    # example 2 has confidence exactly 2.0: excluded; example 8 (1.0) too low; 4 and 6 other categories
    assert mask.tolist() == [False, True, False, True, False, False, False, False, False]
    assert select_suspects(LOGITS, GOLD).tolist() == mask.tolist()  # paper defaults
    # 4.0: example 3 ties, so nothing is selected
    assert not select_suspects(LOGITS, GOLD, threshold=4.0).any()
    # all mismatches above 3.0: examples 3 (4.0), 4 (5.0), 6 (3.5)
    assert np.flatnonzero(select_suspects(LOGITS, GOLD, categories=None, threshold=3.0)).tolist() == [3, 4, 6]
    assert np.flatnonzero(
        select_suspects(LOGITS, GOLD, categories=("P2G1", "P0G2"), threshold=0)
    ).tolist() == [
        4,
        6,
    ]


def test_threshold_sweep_counts_and_monotone():
    sweep = threshold_sweep(LOGITS, GOLD, categories=("P1G0", "P2G1"), thresholds=(0, 1, 2, 3, 4, 5))
    assert list(sweep.columns) == ["threshold", "P1G0", "P2G1", "total"]
    assert sweep["threshold"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert sweep["P1G0"].tolist() == [4, 3, 2, 1, 0, 0]
    assert sweep["P2G1"].tolist() == [1, 1, 1, 1, 1, 0]
    assert sweep["total"].tolist() == [5, 4, 3, 2, 1, 0]
    full = threshold_sweep(LOGITS, GOLD, categories=("P1G0",))
    assert full["threshold"].tolist() == list(DEFAULT_SWEEP)
    assert full["threshold"].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0]
    assert np.all(np.diff(full["total"].to_numpy()) <= 0)
    # the sweep at 2.0 agrees with select_suspects
    assert int(full.loc[full["threshold"] == 2.0, "P1G0"].iloc[0]) == int(select_suspects(LOGITS, GOLD).sum())


def test_mismatch_types():
    gold = [0, 0, 1, 1, 2]
    pred0 = [0, 1, 1, 2, 0]
    pred1 = [0, 0, 2, 2, 1]
    assert mismatch_types(gold, pred0, pred1).tolist() == [0, 1, 2, 3, 3]


def test_confidence_change():
    logits0 = np.array([[0.0, 2.5, 0.5], [3.0, 0.5, -1.0]])
    logits1 = np.array([[1.0, 2.0, 0.0], [0.0, 1.5, -1.0]])
    conf0, change = confidence_change(logits0, logits1, [0, 0])
    np.testing.assert_array_equal(conf0, [2.5, 0.0])
    np.testing.assert_array_equal(change, [-1.5, 1.5])  # conf1 = [1.0, 1.5]


def test_pruned_ids():
    ids = np.array(["a", "b", "c", "d", "e", "f", "g", "h", "i"])
    mask = select_suspects(LOGITS, GOLD)
    assert pruned_ids(ids, mask).tolist() == ["b", "d"]
    assert pruned_ids(list(range(9)), mask).tolist() == [1, 3]
    with pytest.raises(ValueError):
        pruned_ids(ids, mask[:3])


def test_stratified_folds():
    labels = np.repeat([0, 1, 2], 10)
    folds = stratified_folds(labels, k=10, seed=0)
    assert folds.shape == (30,)
    assert sorted(set(folds.tolist())) == list(range(10))
    for f in range(10):  # each fold holds one example of each class
        assert sorted(labels[folds == f].tolist()) == [0, 1, 2]
    np.testing.assert_array_equal(folds, stratified_folds(labels, k=10, seed=0))
    assert not np.array_equal(folds, stratified_folds(labels, k=10, seed=1))


def test_stratified_folds_too_few_per_class():
    labels = np.array([0] * 10 + [1] * 10 + [2] * 9)
    with pytest.raises(ValueError, match="class 2: 9"):
        stratified_folds(labels, k=10)
    assert stratified_folds(labels, k=9).max() == 8


def test_input_validation():
    with pytest.raises(ValueError):
        model_confidence(LOGITS, GOLD[:3])
    with pytest.raises(ValueError):
        model_confidence(LOGITS, [0, 0, 0, 0, 1, 1, 2, 2, 3])
    with pytest.raises(ValueError):
        mismatch_matrix([0, 3], [0, 1], 3)
