"""Aggregating unit scores to groups: a sentence from its words (token runs), an example from its
labels (multi-label runs). The pins below fix the exact floats the two kinds give on small hand fixtures
(the last bit included: sums run in a fixed order, so a refactoring that reorders them shows here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cartomap.scores import multilabel, tokens

# ----------------------------------------------------------------------------- the word table
#
# Three sentences; word confidences (lower = worse):
#   sentence 0: 0.6, 0.9
#   sentence 1: 0.7
#   sentence 2: 0.3, 0.1, 0.2   (0.1 + 0.2 + 0.3 is 0.6 or 0.6000000000000001 by the order of the sums)
WORD_CONF = np.array([0.6, 0.9, 0.7, 0.3, 0.1, 0.2])
SENTENCE = np.array([0, 0, 1, 2, 2, 2])
WORD = np.array([0, 1, 0, 0, 1, 2])

# ----------------------------------------------------------------------------- the label tables
#
# Two labels (toxic, insult), three examples; label confidences and gold labels:
#   example 0: 0.65 (present), 0.5 (absent)
#   example 1: 0.5 (present), 0.3 (present)
#   example 2: 0.9 (absent), 0.65 (absent)   no gold label
LABEL_CONF = np.array([[0.65, 0.5], [0.5, 0.3], [0.9, 0.65]])
LABEL_GOLD = np.array([[True, False], [True, True], [False, False]])
# Four labels, two examples: sums of three or four floats, whose order shows in the last bit.
WIDE_CONF = np.array([[0.3, 0.1, 0.2, 0.4], [0.7, 0.1, 0.1, 0.2]])
WIDE_GOLD = np.array([[True, True, True, False], [False, True, True, True]])


def _sentence(method: str, **options) -> list[float]:
    return tokens.sentence_scores(WORD_CONF, SENTENCE, WORD, method=method, **options)["score"].tolist()


def _example(method: str, conf=LABEL_CONF, gold=LABEL_GOLD, **options) -> list[float]:
    return multilabel.example_scores(conf, gold, method=method, **options)["score"].tolist()


def test_sentence_scores_pinned():
    e = math.exp
    assert _sentence("min") == [0.6, 0.7, 0.1]
    # mean: sentence 2 sums its words from the lowest score up, 0.1 + (0.2 + 0.3) = 0.6, / 3
    assert _sentence("mean") == pytest.approx([0.75, 0.7, 0.2])
    assert _sentence("mean") == [0.75, 0.7, 0.19999999999999998]
    # softmin, t = 0.05: weights exp((1 - s) / t) relative to the worst word's: s0 1, e^-6; s2 1, e^-2, e^-4
    soft = [(0.6 + 0.9 * e(-6)) / (1 + e(-6)), 0.7, (0.1 + 0.2 * e(-2) + 0.3 * e(-4)) / (1 + e(-2) + e(-4))]
    assert _sentence("softmin") == pytest.approx(soft)
    assert _sentence("softmin") == [0.6007417869469904, 0.7, 0.1149062907779132]
    hot = [(0.6 * e(0.4) + 0.9 * e(0.1)) / (e(0.4) + e(0.1)), 0.7]
    assert _sentence("softmin", temperature=1.0)[:2] == pytest.approx(hot)
    assert _sentence("softmin", temperature=1.0) == [0.7276672449565024, 0.7, 0.1933444204244802]
    assert _sentence("softmin", temperature=0) == _sentence("min")
    assert _sentence("softmin", temperature=math.inf) == _sentence("mean")
    table = tokens.sentence_scores(WORD_CONF, SENTENCE, WORD)
    assert table["worst_word"].tolist() == [0, 0, 1] and table["worst_score"].tolist() == [0.6, 0.7, 0.1]
    assert table["n_words"].tolist() == [2, 1, 3]


def test_sentence_functions_keep_their_signature():
    # f(word scores, sentence, **options) -> (the sentence ids that have words, their scores)
    for method, expected in (("min", [0.6, 0.1]), ("mean", [0.75, 0.19999999999999998])):
        ids, values = tokens.SENTENCE_METHODS[method](WORD_CONF[[0, 1, 3, 4, 5]], SENTENCE[[0, 1, 3, 4, 5]])
        assert ids.tolist() == [0, 2] and values.tolist() == expected
    ids, values = tokens.softmin_score(WORD_CONF, SENTENCE, temperature=1.0)
    assert ids.tolist() == [0, 1, 2] and values.tolist() == [0.7276672449565024, 0.7, 0.1933444204244802]
    assert tokens.sentence_method("mean") is tokens.mean_score
    assert set(tokens.SENTENCE_METHODS) == {"min", "mean", "softmin"}


def test_sentence_scores_agree_with_cleanlab_on_the_word_table():
    from cleanlab.token_classification.rank import _softmin_sentence_score

    parts = tokens.split_flat(WORD_CONF, [2, 1, 3])
    for t in (0.05, 1.0):
        assert _sentence("softmin", temperature=t) == pytest.approx(
            _softmin_sentence_score(parts, temperature=t)
        ), t
    assert _sentence("min") == [float(min(p)) for p in parts]


def test_example_scores_pinned():
    e = math.exp
    assert _example("min") == [0.5, 0.3, 0.65]
    assert _example("mean") == [0.575, 0.4, 0.775]
    present = _example("present_only")
    assert present[:2] == [0.65, 0.4] and math.isnan(present[2])  # no gold label: no score
    # softmin, t = 0.1: weights exp((1 - s) / t) relative to the worst label's: e^-1.5, e^-2, e^-2.5
    soft = [(0.5 + 0.65 * e(-1.5)) / (1 + e(-1.5)), (0.3 + 0.5 * e(-2)) / (1 + e(-2))]
    soft.append((0.65 + 0.9 * e(-2.5)) / (1 + e(-2.5)))
    assert _example("softmin") == pytest.approx(soft)
    assert _example("softmin") == [0.5273638285709535, 0.32384058440442354, 0.668964545005311]
    # ema, alpha 0.8, scores high to low: 0.8 * low + 0.2 * high
    assert _example("ema") == pytest.approx([0.53, 0.34, 0.7])
    assert _example("ema") == [0.53, 0.33999999999999997, 0.7]
    table = multilabel.example_scores(LABEL_CONF, LABEL_GOLD, method="present_only")
    assert table["n_scored"].tolist() == [1, 2, 0] and table["worst_label"].tolist() == [0, 1, -1]


def test_wide_example_scores_pinned():
    # sums run label by label: (0.3 + 0.1) + 0.2 = 0.6000000000000001, / 3
    assert _example("present_only", WIDE_CONF, WIDE_GOLD) == pytest.approx([0.2, 0.4 / 3])
    assert _example("present_only", WIDE_CONF, WIDE_GOLD) == [0.20000000000000004, 0.13333333333333333]
    assert _example("mean", WIDE_CONF, WIDE_GOLD) == [0.25, 0.27499999999999997]
    assert _example("min", WIDE_CONF, WIDE_GOLD) == [0.1, 0.1]
    assert _example("softmin", WIDE_CONF, WIDE_GOLD) == [0.150734726541423, 0.11614743102141906]
    # ema, alpha 0.8: (0.4, 0.3, 0.2, 0.1) -> 0.4, 0.32, 0.224, 0.1248
    assert _example("ema", WIDE_CONF, WIDE_GOLD) == pytest.approx([0.1248, 0.108])
    assert _example("ema", WIDE_CONF, WIDE_GOLD) == [0.12480000000000001, 0.10800000000000001]


def test_example_scores_agree_with_cleanlab_on_the_label_table():
    from cleanlab.multilabel_classification.rank import get_label_quality_scores

    for conf, gold in ((LABEL_CONF, LABEL_GOLD), (WIDE_CONF, WIDE_GOLD)):
        labels = [np.flatnonzero(row).tolist() for row in gold]
        pred_probs = np.where(gold, conf, 1.0 - conf)  # cleanlab's self-confidence of label j is conf
        assert _example("ema", conf, gold) == pytest.approx(get_label_quality_scores(labels, pred_probs))
        for t in (0.1, 1.0):
            kwargs = {"method": "softmin", "temperature": t}
            reference = get_label_quality_scores(labels, pred_probs, aggregator_kwargs=kwargs)
            assert _example("softmin", conf, gold, temperature=t) == pytest.approx(reference), t


def test_example_functions_keep_their_signature():
    # f(label scores [N, L], gold [N, L], **options) -> (scores [N], the labels counted [N, L])
    values, counted = multilabel.EXAMPLE_METHODS["present_only"](WIDE_CONF, WIDE_GOLD)
    assert values.tolist() == [0.20000000000000004, 0.13333333333333333]
    assert counted.tolist() == WIDE_GOLD.tolist()
    values, counted = multilabel.ema_score(WIDE_CONF, WIDE_GOLD, alpha=0.5)
    assert values.tolist() == pytest.approx([0.1875, 0.1875]) and counted.all()
    values, counted = multilabel.mean_score(np.zeros((2, 0)), np.zeros((2, 0), dtype=bool))
    assert np.isnan(values).all() and counted.shape == (2, 0)
    assert multilabel.example_method("ema") is multilabel.ema_score
    assert set(multilabel.EXAMPLE_METHODS) == {"min", "mean", "present_only", "softmin", "ema"}
