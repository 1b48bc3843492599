"""The second-axis scores (cartomap.scores.ambiguity) against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.scores import ambiguity

# Three examples x four recordings, three classes; gold labels 0, 1, 2.
#   A: sure and right at every recording.
#   B: a tie between classes 0 and 1 (argmax takes class 0: wrong) at recordings 1 and 3, sure and right
#      at 2 and 4.
#   C: uniform over the three classes at every recording (argmax: class 0, wrong).
THIRD = 1 / 3
PROBS = np.array(
    [
        [[1, 0, 0], [0.5, 0.5, 0], [THIRD, THIRD, THIRD]],
        [[1, 0, 0], [0, 1, 0], [THIRD, THIRD, THIRD]],
        [[1, 0, 0], [0.5, 0.5, 0], [THIRD, THIRD, THIRD]],
        [[1, 0, 0], [0, 1, 0], [THIRD, THIRD, THIRD]],
    ],
    dtype=np.float64,
)
LABELS = np.array([0, 1, 2])
LN2_LN3 = math.log(2) / math.log(3)
H_MEAN_B = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) / math.log(3)  # mean of B: [.25, .75, 0]

EXPECTED = {
    "variability": [0.0, 0.25, 0.0],
    "mean_entropy": [0.0, LN2_LN3 / 2, 1.0],
    "gold_bernoulli": [0.0, 0.125, 2 / 9],
    "margin_gap": [0.0, 0.5, 1.0],
    "entropy_of_mean": [0.0, H_MEAN_B, 1.0],
    "last_entropy": [0.0, 0.0, 1.0],
    "epoch_disagreement": [0.0, H_MEAN_B - LN2_LN3 / 2, 0.0],
    "forgetting": [0.0, 1.0, 0.0],  # B: right at 2, wrong at 3
    "learned_late": [0.0, 0.75, 1.0],  # B: right from recording 4 on; C never
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_score_by_hand(name):
    got = ambiguity.score(name, PROBS, LABELS)
    np.testing.assert_allclose(got, EXPECTED[name], atol=1e-12)


def test_every_registered_score_is_checked_here():
    assert set(ambiguity.SCORES) == set(EXPECTED) | {"margin_spread"}
    assert set(ambiguity.MAP_SCORES) <= set(ambiguity.SCORES)


def test_two_classes_and_p_zero_one():
    probs = np.array([[[0.2, 0.8], [1.0, 0.0]], [[0.2, 0.8], [1.0, 0.0]]])  # [E=2, N=2, C=2]
    labels = np.array([1, 1])
    h = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8)) / math.log(2)
    np.testing.assert_allclose(ambiguity.score("mean_entropy", probs, labels), [h, 0.0], atol=1e-12)
    np.testing.assert_allclose(ambiguity.score("margin_gap", probs, labels), [0.4, 0.0], atol=1e-12)
    np.testing.assert_allclose(ambiguity.score("gold_bernoulli", probs, labels), [0.16, 0.0], atol=1e-12)
    # the second example is sure and wrong: no entropy, but never learned
    np.testing.assert_allclose(ambiguity.score("learned_late", probs, labels), [0.0, 1.0])


def test_margin_spread_on_logits():
    logits = np.array([[[0.0, 1.0, -5.0]], [[0.0, 3.0, 2.0]]])  # gold 1: margins 1 and 1; then 1 and 3
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    # margins: recording 1: z1 - max(z0, z2) = 1 - 0 = 1; recording 2: 3 - 2 = 1 -> std 0
    np.testing.assert_allclose(ambiguity.score("margin_spread", probs, np.array([1]), logits), [0.0])
    logits[1, 0, 2] = 0.0  # now 3 - 0 = 3: margins 1 and 3, std 1
    np.testing.assert_allclose(ambiguity.score("margin_spread", probs, np.array([1]), logits), [1.0])
    with pytest.raises(DataError, match="logits"):
        ambiguity.score("margin_spread", probs, np.array([1]))


def test_one_recording_and_ties_between_examples():
    one = PROBS[:1]
    np.testing.assert_allclose(ambiguity.score("variability", one, LABELS), [0, 0, 0])
    np.testing.assert_allclose(ambiguity.score("mean_entropy", one, LABELS), [0, LN2_LN3, 1])
    np.testing.assert_allclose(ambiguity.score("forgetting", one, LABELS), [0, 0, 0])


def test_scores_picks_names_and_leaves_out_logit_scores_without_logits():
    out = ambiguity.scores(PROBS, LABELS)
    assert tuple(out) == ambiguity.MAP_SCORES
    out = ambiguity.scores(PROBS, LABELS, names=("mean_entropy", "margin_spread"))
    assert list(out) == ["mean_entropy"]


def test_unknown_name_and_bad_shapes_are_one_error():
    with pytest.raises(DataError, match="unknown ambiguity score 'spread'.*variability"):
        ambiguity.score("spread", PROBS, LABELS)
    with pytest.raises(DataError, match=r"\[E, N, C\]"):
        ambiguity.score("mean_entropy", PROBS[0], LABELS)
    with pytest.raises(DataError, match="no recordings"):
        ambiguity.score("mean_entropy", PROBS[:0], LABELS)


def test_higher_is_more_ambiguous_for_every_score():
    """A is sure and right at every recording, C undecided at every one: every score ranks C at least as
    ambiguous as A, and every bounded score stays in its range."""
    logits = np.log(np.clip(PROBS, 1e-9, 1))
    for name, entry in ambiguity.SCORES.items():
        values = ambiguity.score(name, PROBS, LABELS, logits)
        assert values[2] >= values[0], name
        if entry.range is not None:
            assert entry.range[0] - 1e-12 <= values.min() and values.max() <= entry.range[1] + 1e-12, name
