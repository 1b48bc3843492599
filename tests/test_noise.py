"""Tests for cartomap.scores.noise: exact flip counts, reproducibility, ranking metrics, cleanlab wrappers."""

from __future__ import annotations

import numpy as np
import pytest

from cartomap.scores.consensus import model_confidence
from cartomap.scores.noise import (
    aum_scores,
    cleanlab_issues,
    cleanlab_scores,
    datamap_scores,
    flip_labels,
    margin_scores,
    ranking_report,
)

LABELS = np.repeat([0, 1, 2], [40, 35, 25])  # N = 100


@pytest.mark.parametrize("fraction,expected", [(0.0, 0), (0.1, 10), (0.125, 12), (0.333, 33), (1.0, 100)])
def test_symmetric_exact_count(fraction, expected):
    noisy, flipped = flip_labels(LABELS, fraction, 3, mode="symmetric", seed=3)
    assert int(flipped.sum()) == expected
    np.testing.assert_array_equal(flipped, noisy != LABELS)  # every flip changes the label
    assert noisy.min() >= 0 and noisy.max() <= 2


def test_symmetric_targets_cover_other_classes():
    labels = np.zeros(600, dtype=int)
    noisy, flipped = flip_labels(labels, 0.5, 3, seed=0)
    assert int(flipped.sum()) == 300
    counts = np.bincount(noisy[flipped], minlength=3)
    assert counts[0] == 0 and counts[1] > 100 and counts[2] > 100


@pytest.mark.parametrize("fraction,expected", [(0.1, 10), (0.25, 25), (0.75, 75)])
def test_asymmetric_exact_count_and_only_along_pairs(fraction, expected):
    noisy, flipped = flip_labels(LABELS, fraction, 3, mode="asymmetric", pairs=((1, 0), (0, 1)), seed=1)
    assert int(flipped.sum()) == expected
    np.testing.assert_array_equal(flipped, noisy != LABELS)
    moves = set(zip(LABELS[flipped].tolist(), noisy[flipped].tolist(), strict=True))
    assert moves <= {(1, 0), (0, 1)}
    assert not flipped[LABELS == 2].any()  # contradiction has no pair: never touched


def test_asymmetric_one_way_pair():
    noisy, flipped = flip_labels(LABELS, 0.2, 3, mode="asymmetric", pairs=((1, 0),), seed=0)
    assert int(flipped.sum()) == 20
    assert (LABELS[flipped] == 1).all() and (noisy[flipped] == 0).all()


def test_asymmetric_not_enough_eligible():
    # 75 examples have label 0 or 1; 0.76 * 100 = 76 flips
    with pytest.raises(ValueError, match="only 75 eligible"):
        flip_labels(LABELS, 0.76, 3, mode="asymmetric")
    with pytest.raises(ValueError, match="only 35 eligible"):
        flip_labels(LABELS, 0.36, 3, mode="asymmetric", pairs=((1, 0),))


def test_seeds_reproducible():
    for mode in ("symmetric", "asymmetric"):
        a = flip_labels(LABELS, 0.2, 3, mode=mode, seed=7)
        b = flip_labels(LABELS, 0.2, 3, mode=mode, seed=7)
        c = flip_labels(LABELS, 0.2, 3, mode=mode, seed=8)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert not np.array_equal(a[1], c[1])


def test_flip_validation():
    with pytest.raises(ValueError):
        flip_labels(LABELS, 1.5, 3)
    with pytest.raises(ValueError):
        flip_labels(LABELS, 0.1, 3, mode="pairwise")
    with pytest.raises(ValueError):
        flip_labels(LABELS, 0.1, 2)  # label 2 out of range
    with pytest.raises(ValueError):
        flip_labels(LABELS, 0.1, 3, mode="asymmetric", pairs=((1, 1),))


def test_ranking_report_perfect_and_reversed():
    flipped = np.array([False, True, False, False, True, False, True, False])
    perfect = flipped.astype(float) + np.linspace(0, 0.1, 8)  # flipped all score above the rest
    rep = ranking_report(perfect, flipped)
    assert rep["n"] == 8 and rep["n_flipped"] == 3 and rep["k"] == 3
    assert rep["precision_at_k"] == 1.0 and rep["recall_at_k"] == 1.0
    assert rep["average_precision"] == pytest.approx(1.0)
    rev = ranking_report(-perfect, flipped)
    assert rev["precision_at_k"] == 0.0 and rev["recall_at_k"] == 0.0
    # reversed: flipped ranked 6th, 7th, 8th -> AP = (1/6 + 2/7 + 3/8) / 3
    assert rev["average_precision"] == pytest.approx((1 / 6 + 2 / 7 + 3 / 8) / 3)


def test_ranking_report_partial():
    flipped = np.array([True, False, True, False])
    scores = np.array([0.9, 0.8, 0.1, 0.2])  # top-2 = {0, 1}: one hit
    rep = ranking_report(scores, flipped)
    assert rep["precision_at_k"] == 0.5 and rep["recall_at_k"] == 0.5
    # ranks of the flipped: 1 and 4 -> AP = (1/1 + 2/4) / 2
    assert rep["average_precision"] == pytest.approx(0.75)
    empty = ranking_report(scores, np.zeros(4, dtype=bool))
    assert np.isnan(empty["precision_at_k"]) and np.isnan(empty["average_precision"])


def test_margin_scores_hand_values():
    logits = np.array([[0.0, 2.5, 0.5], [3.0, 0.5, -1.0], [1.0, 3.0, 0.0], [2.0, 2.0, 0.0]])
    gold = np.array([0, 0, 0, 1])
    s = margin_scores(logits, gold)
    # max other - gold: 2.5 - 0 ; 0.5 - 3 ; 3 - 1 ; 2 - 2
    np.testing.assert_array_equal(s, [2.5, -2.5, 2.0, 0.0])
    mism = s > 0
    np.testing.assert_array_equal(s[mism], model_confidence(logits, gold)[mism])


def test_datamap_and_aum_scores_direction():
    np.testing.assert_allclose(datamap_scores([0.9, 0.25, 0.5]), [0.1, 0.75, 0.5])
    np.testing.assert_array_equal(aum_scores([1.5, -2.0, 0.0]), [-1.5, 2.0, 0.0])


def _synthetic_pred_probs():
    labels = np.repeat([0, 1, 2], 20)
    probs = np.full((60, 3), 0.1)
    probs[np.arange(60), labels] = 0.8
    probs[5] = [0.98, 0.01, 0.01]  # the model is sure example 5 is class 0 ...
    noisy = labels.copy()
    noisy[5] = 2  # ... but its (planted) label says 2
    return probs, noisy


def test_cleanlab_scores_rank_planted_flip_first():
    probs, noisy = _synthetic_pred_probs()
    s = cleanlab_scores(probs, noisy)
    assert s.shape == (60,)
    assert int(np.argmax(s)) == 5
    np.testing.assert_allclose(s[5], 0.99)  # 1 - self-confidence p[label] = 1 - 0.01
    np.testing.assert_allclose(np.delete(s, 5), 0.2)
    flipped = np.zeros(60, dtype=bool)
    flipped[5] = True
    assert ranking_report(s, flipped)["precision_at_k"] == 1.0


def test_cleanlab_issues_flags_planted_flip():
    probs, noisy = _synthetic_pred_probs()
    issues = cleanlab_issues(probs, noisy)
    assert issues.dtype == bool and issues.shape == (60,)
    assert np.flatnonzero(issues).tolist() == [5]
