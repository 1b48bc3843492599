"""Tests for cartomap.scores.tokens: sub-token alignment, word metrics, sentence scores."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cartomap.errors import DataError
from cartomap.scores import ambiguity, metrics
from cartomap.scores.tokens import (
    IGNORE_INDEX,
    SENTENCE_METHODS,
    align_labels,
    first_subword_alignment,
    flat_keys,
    gather_words,
    sentence_metrics,
    sentence_scores,
    split_flat,
    word_metrics,
    word_metrics_from_probs,
)

# ----------------------------------------------------------------------------- the hand fixture
#
# Tags 0 = O, 1 = B-PER, 2 = I-PER. Three sentences, 2 epochs:
#   sentence 0 "Ann sings"   gold [B-PER, O]
#   sentence 1 "Hi"          gold [O]
#   sentence 2 "Bo Li left"  gold [B-PER, I-PER, O]
# Rows: the six words in order (s0w0, s0w1, s1w0, s2w0, s2w1, s2w2); columns: p(O), p(B), p(I).
EPOCH_0 = [
    [0.6, 0.4, 0.0],  # s0w0 p(gold)=0.4, argmax O     -> wrong
    [0.8, 0.1, 0.1],  # s0w1 p(gold)=0.8               -> right
    [0.9, 0.1, 0.0],  # s1w0 p(gold)=0.9               -> right
    [0.3, 0.4, 0.3],  # s2w0 p(gold)=0.4, argmax B     -> right (below one half, still the largest)
    [0.2, 0.6, 0.2],  # s2w1 p(gold)=0.2, argmax B     -> wrong
    [0.5, 0.25, 0.25],  # s2w2 p(gold)=0.5             -> right
]
EPOCH_1 = [
    [0.2, 0.8, 0.0],  # s0w0 p(gold)=0.8 -> right
    [1.0, 0.0, 0.0],  # s0w1 p(gold)=1.0 -> right
    [0.3, 0.7, 0.0],  # s1w0 p(gold)=0.3 -> wrong (forgotten)
    [0.5, 0.2, 0.3],  # s2w0 p(gold)=0.2 -> wrong (forgotten)
    [0.15, 0.15, 0.7],  # s2w1 p(gold)=0.7 -> right
    [0.5, 0.25, 0.25],  # s2w2 p(gold)=0.5 -> right
]
PROBS = np.array([EPOCH_0, EPOCH_1])  # [E=2, M=6, C=3]
GOLD = np.array([1, 0, 0, 1, 2, 0])
LENGTHS = [2, 1, 3]
# By hand, per word: confidence = mean of the two p(gold); variability = |p1 - p0| / 2 (the
# population std of two values); correctness = right epochs / 2; forgetfulness = right then wrong.
#            conf   var    correctness  count  forgot  never
# s0w0  (0.4, 0.8) 0.6    0.2    0.5    1      0       no
# s0w1  (0.8, 1.0) 0.9    0.1    1.0    2      0       no
# s1w0  (0.9, 0.3) 0.6    0.3    0.5    1      1       no
# s2w0  (0.4, 0.2) 0.3    0.1    0.5    1      1       no
# s2w1  (0.2, 0.7) 0.45   0.25   0.5    1      0       no
# s2w2  (0.5, 0.5) 0.5    0.0    1.0    2      0       no
CONF = [0.6, 0.9, 0.6, 0.3, 0.45, 0.5]
VAR = [0.2, 0.1, 0.3, 0.1, 0.25, 0.0]
CORRECTNESS = [0.5, 1.0, 0.5, 0.5, 0.5, 1.0]
COUNT = [1, 2, 1, 1, 1, 2]
FORGOT = [0, 0, 1, 1, 0, 0]
# Regions (Cartography's rule: the third of words with the highest variability is ambiguous, round(6/3) = 2:
# s1w0 (0.3) and s2w1 (0.25); of the rest, confidence >= 0.5 is easy).
REGIONS = [metrics.EASY, metrics.EASY, metrics.AMBIGUOUS, metrics.HARD, metrics.AMBIGUOUS, metrics.EASY]
#: Dataset Cartography's rule (ranked on variability), the one :data:`REGIONS` is worked out by hand for.
CARTOGRAPHY = metrics.RegionRule(axis=ambiguity.VARIABILITY)


def hand_words(**options) -> pd.DataFrame:
    sentence, word = flat_keys(LENGTHS)
    return word_metrics_from_probs(PROBS, GOLD, sentence, word, **options)


def test_flat_keys_and_split():
    sentence, word = flat_keys(LENGTHS)
    assert sentence.tolist() == [0, 0, 1, 2, 2, 2]
    assert word.tolist() == [0, 1, 0, 0, 1, 2]
    parts = split_flat(np.arange(6), LENGTHS)
    assert [p.tolist() for p in parts] == [[0, 1], [2], [3, 4, 5]]
    assert flat_keys([]) == (pytest.approx([]), pytest.approx([]))


def test_word_metrics_by_hand():
    words = hand_words()
    assert words["sentence"].tolist() == [0, 0, 1, 2, 2, 2]
    assert words["word"].tolist() == [0, 1, 0, 0, 1, 2]
    assert words["confidence"].tolist() == pytest.approx(CONF)
    assert words["variability"].tolist() == pytest.approx(VAR)
    assert words["correctness"].tolist() == pytest.approx(CORRECTNESS)
    assert words["correct_count"].tolist() == COUNT
    assert words["forgetfulness"].tolist() == FORGOT
    assert words["never_learned"].tolist() == [False] * 6
    assert hand_words(regions=CARTOGRAPHY)["region"].tolist() == REGIONS
    # by default on the default axis, a column of the words (every ambiguity score of the map is)
    axis = metrics.RegionRule().axis
    assert all(name in words.columns for name in ambiguity.MAP_SCORES)
    assert words[axis].tolist() == pytest.approx(ambiguity.score(axis, PROBS, GOLD).tolist())
    assert words["region"].tolist() == metrics.region_partition(CONF, words[axis].to_numpy()).tolist()


def test_word_metrics_from_gold_probabilities_and_correctness():
    gold = np.array([[0.4, 0.8, 0.9, 0.4, 0.2, 0.5], [0.8, 1.0, 0.3, 0.2, 0.7, 0.5]])
    correct = np.array([[False, True, True, True, False, True], [True, True, False, False, True, True]])
    sentence, word = flat_keys(LENGTHS)
    # p(gold) alone gives Cartography's axis: its rule draws the same words as the tag probabilities do
    words = word_metrics(gold, correct, sentence, word, regions=CARTOGRAPHY)
    pd.testing.assert_frame_equal(words, hand_words(regions=CARTOGRAPHY)[list(words.columns)])
    # the other axes need every tag's probability: with their scores, the same frame as from the probabilities
    axes = ambiguity.scores(PROBS, GOLD)
    pd.testing.assert_frame_equal(word_metrics(gold, correct, sentence, word, axes=axes), hand_words())
    with pytest.raises(DataError, match=metrics.RegionRule().axis):
        word_metrics(gold, correct, sentence, word)  # the default axis, which p(gold) alone does not give


def test_word_never_learned_and_single_epoch():
    words = word_metrics(
        np.array([[0.1, 0.9]]), np.array([[False, True]]), [0, 0], [0, 1], regions=CARTOGRAPHY
    )
    assert words["never_learned"].tolist() == [True, False]
    assert words["variability"].tolist() == [0.0, 0.0]
    assert words["forgetfulness"].tolist() == [0, 0]


def test_one_word_sentences_have_the_sequence_metrics_of_the_same_probabilities():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 40, 4)) * 2
    labels = rng.integers(0, 4, size=40)
    sequence = metrics.compute_metrics(logits, labels)
    sentence, word = flat_keys([1] * 40)
    words = word_metrics_from_probs(metrics.softmax(logits), labels, sentence, word)
    for column in ("confidence", "variability", "correctness"):
        assert words[column].to_numpy() == pytest.approx(sequence[column].to_numpy(), abs=1e-12), column
    for column in ("correct_count", "forgetfulness", "never_learned", "region"):
        assert words[column].tolist() == sequence[column].tolist(), column
    # and a one-word sentence's score is its word's, whatever the aggregation
    for method in SENTENCE_METHODS:
        table = sentence_scores(words["confidence"].to_numpy(), sentence, word, method=method)
        assert table["score"].to_numpy() == pytest.approx(sequence["confidence"].to_numpy()), method


def test_rows_in_any_order_give_the_same_scores_per_key():
    words = hand_words()
    shuffled = words.sample(frac=1.0, random_state=1)
    order = shuffled.index.to_numpy()
    again = word_metrics_from_probs(
        PROBS[:, order], GOLD[order], shuffled["sentence"].to_numpy(), shuffled["word"].to_numpy()
    )
    merged = again.merge(words, on=["sentence", "word"], suffixes=("", "_ref"))
    assert merged["confidence"].tolist() == pytest.approx(merged["confidence_ref"].tolist())
    table = sentence_scores(
        again["confidence"].to_numpy(), again["sentence"], again["word"], method="softmin"
    )
    reference = sentence_scores(
        words["confidence"].to_numpy(), words["sentence"], words["word"], method="softmin"
    )
    pd.testing.assert_frame_equal(table, reference)


# ----------------------------------------------------------------------------- sentence scores


def test_sentence_scores_by_hand():
    words = hand_words()
    conf, sentence, word = words["confidence"].to_numpy(), words["sentence"], words["word"]
    table = sentence_scores(conf, sentence, word)  # min
    assert table["sentence"].tolist() == [0, 1, 2]
    assert table["n_words"].tolist() == [2, 1, 3]
    assert table["score"].tolist() == pytest.approx(
        [0.6, 0.6, 0.3]
    )  # min(0.6, 0.9), 0.6, min(0.3, 0.45, 0.5)
    assert table["worst_word"].tolist() == [0, 0, 0]
    assert table["worst_score"].tolist() == pytest.approx([0.6, 0.6, 0.3])
    mean = sentence_scores(conf, sentence, word, method="mean")["score"]
    assert mean.tolist() == pytest.approx([0.75, 0.6, 1.25 / 3])
    # softmin, t = 0.05: weights exp((1 - s) / t), relative to the worst word's: s0 1 and e^-6
    # ((0.9 - 0.6) / 0.05 = 6); s2 1, e^-3, e^-4.
    e = math.exp
    softmin = sentence_scores(conf, sentence, word, method="softmin")["score"]
    assert softmin.tolist() == pytest.approx(
        [
            (0.6 + 0.9 * e(-6)) / (1 + e(-6)),
            0.6,
            (0.3 + 0.45 * e(-3) + 0.5 * e(-4)) / (1 + e(-3) + e(-4)),
        ]
    )
    hot = sentence_scores(conf, sentence, word, method="softmin", temperature=1.0)["score"][0]
    assert hot == pytest.approx((0.6 * e(0.4) + 0.9 * e(0.1)) / (e(0.4) + e(0.1)))
    assert sentence_scores(conf, sentence, word, method="softmin", temperature=0)["score"].tolist() == (
        pytest.approx([0.6, 0.6, 0.3])
    )
    assert sentence_scores(conf, sentence, word, method="softmin", temperature=math.inf)[
        "score"
    ].tolist() == (pytest.approx(mean.tolist()))


def test_sentence_scores_agree_with_cleanlab():
    from cleanlab.token_classification.rank import _softmin_sentence_score, get_label_quality_scores

    rng = np.random.default_rng(3)
    lengths = [1, 4, 2, 7, 3]
    probs = [rng.dirichlet(np.ones(3), size=n) for n in lengths]
    labels = [rng.integers(0, 3, size=n) for n in lengths]
    sentence, word = flat_keys(lengths)
    token_scores = np.concatenate([p[np.arange(len(y)), y] for p, y in zip(probs, labels, strict=True)])
    # cleanlab's self-confidence token score is p(given label): the sentence scores must agree
    reference, _ = get_label_quality_scores([y.tolist() for y in labels], probs)
    assert sentence_scores(token_scores, sentence, word)["score"].to_numpy() == pytest.approx(reference)
    for t in (0.05, 0.3, 2.0):
        expected = _softmin_sentence_score(split_flat(token_scores, lengths), temperature=t)
        table = sentence_scores(token_scores, sentence, word, method="softmin", temperature=t)
        assert table["score"].to_numpy() == pytest.approx(expected), t


def test_worst_word_ties_take_the_first_word_and_empty_sentences_are_nan():
    table = sentence_scores(np.array([0.5, 0.2, 0.2, 0.9]), [0, 0, 0, 2], [0, 2, 1, 0], n_sentences=4)
    assert table["worst_word"].tolist() == [1, -1, 0, -1]  # word 1 and word 2 tie: word 1
    assert table["n_words"].tolist() == [3, 0, 1, 0]
    assert np.isnan(table["score"][1]) and np.isnan(table["score"][3])


def test_sentence_metrics_put_a_sentence_where_its_worst_word_is():
    table = sentence_metrics(hand_words())
    assert table["confidence"].tolist() == pytest.approx([0.6, 0.6, 0.3])
    assert table["worst_word"].tolist() == [0, 0, 0]
    assert table["variability"].tolist() == pytest.approx([0.2, 0.3, 0.1])
    assert table["correctness"].tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert table["forgetfulness"].tolist() == [0, 1, 1]
    # the worst word's value on every ambiguity axis the words have
    for axis in ambiguity.MAP_SCORES:
        assert table[axis].tolist() == pytest.approx(hand_words()[axis].iloc[[0, 2, 3]].tolist()), axis
    padded = sentence_metrics(hand_words(), n_sentences=4)  # sentence 3 has no words
    # no score on any metric: confidence, worst_confidence, variability, correctness, forgetfulness, other axes
    empty = padded.iloc[3]
    assert padded["worst_word"].tolist() == [0, 0, 0, -1] and empty["n_words"] == 0
    assert empty.drop(["sentence", "n_words", "worst_word"]).isna().all()
    mean = sentence_metrics(hand_words(), method="mean")
    assert mean["confidence"].tolist() == pytest.approx([0.75, 0.6, 1.25 / 3])
    assert mean["worst_word"].tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: sentence_scores(np.array([0.1]), [0], [0], method="max"), "method"),
        (lambda: sentence_scores(np.array([0.1, 0.2]), [0, 0], [1, 1]), "word"),
        (lambda: sentence_scores(np.array([np.nan]), [0], [0]), "word_scores"),
        (lambda: sentence_scores(np.array([0.1]), [0], [0], method="softmin", temperature=-1), "temperature"),
        (lambda: sentence_scores(np.array([0.1]), [3], [0], n_sentences=2), "sentence"),
        (lambda: word_metrics(np.array([[0.5]]), np.array([[1]]), [0], [0]), "correct"),
        (lambda: word_metrics(np.array([[1.5]]), np.array([[True]]), [0], [0]), "gold_probs"),
        (lambda: word_metrics(np.array([[0.5, 0.5]]), np.array([[True, True]]), [0], [0]), "sentence"),
        (lambda: word_metrics_from_probs(PROBS, np.array([0, 0, 0, 0, 0, 3]), *flat_keys(LENGTHS)), "labels"),
        (lambda: word_metrics(np.array([[0.5]]), np.array([[True]]), [0], [0], axes={"nope": [0.1]}), "nope"),
        (
            lambda: word_metrics(
                np.array([[0.5]]), np.array([[True]]), [0], [0], axes={"margin_gap": [0.1, 0.2]}
            ),
            "margin_gap",
        ),
    ],
)
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(DataError) as caught:
        call()
    assert caught.value.field == field


# ----------------------------------------------------------------------------- alignment


def test_alignment_by_hand():
    word_ids = [None, 0, 1, 1, 1, 2, None]
    assert first_subword_alignment(word_ids).tolist() == [1, 2, 5]
    assert align_labels(word_ids, [4, 5, 6]).tolist() == [
        IGNORE_INDEX,
        4,
        5,
        IGNORE_INDEX,
        IGNORE_INDEX,
        6,
        IGNORE_INDEX,
    ]
    # truncation cut word 3 away: it has no sub-token, and its label is lost
    assert first_subword_alignment([None, 0, 1, 2, None], n_words=4).tolist() == [1, 2, 3, -1]
    logits = np.arange(10.0).reshape(5, 2)
    gathered = gather_words(logits, np.array([1, 3, -1]))
    assert gathered[:2].tolist() == [[2.0, 3.0], [6.0, 7.0]] and np.isnan(gathered[2]).all()
    with pytest.raises(DataError, match="must not decrease"):
        first_subword_alignment([None, 0, 1, 0, None])
    with pytest.raises(DataError, match="outside a sentence of 2 words"):
        first_subword_alignment([None, 0, 2, None], n_words=2)


def test_alignment_against_the_default_encoders_fast_tokenizer():
    from transformers import AutoTokenizer

    from cartomap.training.models import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    assert tokenizer.is_fast
    words = ["Blackburn", "unbelievably", "visited", "Düsseldorf", ",", "EU", "2026"]
    encoding = tokenizer(words, is_split_into_words=True)
    word_ids = encoding.word_ids()
    first = first_subword_alignment(word_ids)
    pieces = encoding.tokens()
    assert len(first) == len(words)
    for w in range(len(words)):
        # the tokenizer's own span of the word starts at the first sub-token
        assert first[w] == encoding.word_to_tokens(w).start
        assert not pieces[first[w]].startswith("##")
    assert any(
        encoding.word_to_tokens(w).end - encoding.word_to_tokens(w).start > 1 for w in range(len(words))
    )
    labels = align_labels(word_ids, list(range(10, 10 + len(words))))
    assert labels[0] == IGNORE_INDEX and labels[-1] == IGNORE_INDEX  # [CLS], [SEP]
    assert sorted(labels[labels != IGNORE_INDEX].tolist()) == list(range(10, 10 + len(words)))
    assert (labels != IGNORE_INDEX).sum() == len(words)
    # truncated: the words past max_length get -1
    short = tokenizer(words, is_split_into_words=True, truncation=True, max_length=6)
    cut = first_subword_alignment(short.word_ids(), n_words=len(words))
    assert cut[0] == 1 and (cut[-3:] == -1).all()
    kept = [w for w in range(len(words)) if short.word_to_tokens(w) is not None]
    assert cut[kept].tolist() == [short.word_to_tokens(w).start for w in kept]
