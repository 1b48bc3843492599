"""Entity-level precision, recall and F1 (cartomap.scores.entities) on a hand-made fixture written in IOB1
and in IOB2, checked by hand and against seqeval's own functions.

Two sentences; the same entities in both schemes (IOB1: I- opens an entity, B- only between two adjacent
ones of one type; IOB2: B- opens every entity):

    S1  Ann   Lee   met  Bo    in   Paris  .        gold: PER(0-1) PER(3) LOC(5)
    S2  UN    NATO  sent Ann   Bo   .               gold: ORG(0) ORG(1) PER(3-4)

Predictions: S1 PER(0-1) right, Bo read as LOC(3), LOC(5) right; S2 UN NATO as one ORG(0-1), PER(3) alone.
Gold PER 3, LOC 1, ORG 2 (6); predicted PER 2, LOC 2, ORG 1 (5); right PER 1, LOC 1, ORG 0 (2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.scheme import IOB1, IOB2

from cartomap.scores.entities import entity_scores, entity_table, micro_f1, tags_by_sentence

GOLD_IOB2 = [
    ["B-PER", "I-PER", "O", "B-PER", "O", "B-LOC", "O"],
    ["B-ORG", "B-ORG", "O", "B-PER", "I-PER", "O"],
]
PRED_IOB2 = [
    ["B-PER", "I-PER", "O", "B-LOC", "O", "B-LOC", "O"],
    ["B-ORG", "I-ORG", "O", "B-PER", "O", "O"],
]
GOLD_IOB1 = [
    ["I-PER", "I-PER", "O", "I-PER", "O", "I-LOC", "O"],
    ["I-ORG", "B-ORG", "O", "I-PER", "I-PER", "O"],
]
PRED_IOB1 = [
    ["I-PER", "I-PER", "O", "I-LOC", "O", "I-LOC", "O"],
    ["I-ORG", "I-ORG", "O", "I-PER", "O", "O"],
]

# by hand: precision = right / predicted, recall = right / gold, F1 = 2PR / (P + R)
EXPECTED = {
    "LOC": (1 / 2, 1 / 1, 2 / 3, 1),
    "ORG": (0.0, 0.0, 0.0, 2),
    "PER": (1 / 2, 1 / 3, 0.4, 3),
    "micro": (2 / 5, 2 / 6, 4 / 11, 6),
    "macro": ((1 / 2 + 1 / 2 + 0) / 3, (1 / 3 + 1 + 0) / 3, (0.4 + 2 / 3 + 0) / 3, 6),
}


def _check(scores: dict) -> None:
    assert list(scores) == ["LOC", "ORG", "PER", "micro", "macro"]
    for name, (p, r, f1, support) in EXPECTED.items():
        row = scores[name]
        assert math.isclose(row["precision"], p, abs_tol=1e-12), name
        assert math.isclose(row["recall"], r, abs_tol=1e-12), name
        assert math.isclose(row["f1"], f1, abs_tol=1e-12), name
        assert row["support"] == support, name


@pytest.mark.parametrize(
    ("gold", "pred", "scheme"),
    [(GOLD_IOB2, PRED_IOB2, None), (GOLD_IOB1, PRED_IOB1, None), (GOLD_IOB2, PRED_IOB2, "IOB2")]
    + [(GOLD_IOB1, PRED_IOB1, "IOB1")],
    ids=["iob2-conlleval", "iob1-conlleval", "iob2-strict", "iob1-strict"],
)
def test_the_hand_counted_scores_in_both_schemes(gold, pred, scheme):
    _check(entity_scores(gold, pred, scheme=scheme))


@pytest.mark.parametrize(
    ("gold", "pred", "options"),
    [
        (GOLD_IOB2, PRED_IOB2, {}),
        (GOLD_IOB1, PRED_IOB1, {}),
        (GOLD_IOB2, PRED_IOB2, {"mode": "strict", "scheme": IOB2}),
        (GOLD_IOB1, PRED_IOB1, {"mode": "strict", "scheme": IOB1}),
    ],
    ids=["iob2", "iob1", "iob2-strict", "iob1-strict"],
)
def test_equals_seqeval(gold, pred, options):
    ours = entity_scores(gold, pred, scheme=options["scheme"].__name__ if options else None)
    report = classification_report(gold, pred, output_dict=True, zero_division=0, **options)
    for name in ("LOC", "ORG", "PER"):
        assert ours[name]["precision"] == report[name]["precision"]
        assert ours[name]["recall"] == report[name]["recall"]
        assert ours[name]["f1"] == report[name]["f1-score"]
        assert ours[name]["support"] == report[name]["support"]
    for ours_name, average in (("micro", "micro"), ("macro", "macro")):
        assert ours[ours_name]["precision"] == precision_score(gold, pred, average=average, **options)
        assert ours[ours_name]["recall"] == recall_score(gold, pred, average=average, **options)
        assert ours[ours_name]["f1"] == f1_score(gold, pred, average=average, **options)


def test_iob1_read_as_strict_iob2_loses_its_entities():
    """Why the scheme matters: IOB1 tags read strictly as IOB2 make no entity of an I- that opens one."""
    wrong = entity_scores(GOLD_IOB1, PRED_IOB1, scheme="IOB2")
    assert wrong["micro"]["support"] == 1  # only NATO's B-ORG, of the 6 gold entities
    assert wrong != entity_scores(GOLD_IOB1, PRED_IOB1)


def test_perfect_and_empty():
    perfect = entity_scores(GOLD_IOB2, GOLD_IOB2)
    assert all(row["f1"] == 1.0 for row in perfect.values())
    assert entity_scores([["O", "O"]], [["O", "O"]]) == {}  # no entity on either side: undefined
    assert entity_scores([], []) == {}
    nothing_found = entity_scores(GOLD_IOB2, [["O"] * len(s) for s in GOLD_IOB2])
    assert nothing_found["micro"]["f1"] == 0.0 and nothing_found["micro"]["support"] == 6


def test_bad_input():
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        entity_scores(GOLD_IOB2, PRED_IOB2[:1])
    with pytest.raises(ValueError, match="sentence 1: 6 gold tags but 5 predicted"):
        entity_scores(GOLD_IOB2, [PRED_IOB2[0], PRED_IOB2[1][:5]])
    with pytest.raises(ValueError, match="unknown tagging scheme"):
        entity_scores(GOLD_IOB2, PRED_IOB2, scheme="BIO")


def test_flat_codes_to_sentences_and_the_table():
    names = ("B-LOC", "B-ORG", "B-PER", "I-ORG", "I-PER", "O")
    codes = np.array([names.index(t) for s in PRED_IOB2 for t in s])
    assert tags_by_sentence(codes, [7, 6], names) == PRED_IOB2
    with pytest.raises(ValueError, match="13 tags for 12 words"):
        tags_by_sentence(codes, [7, 5], names)
    table = entity_table(entity_scores(GOLD_IOB2, PRED_IOB2))
    assert list(table.index) == ["LOC", "ORG", "PER", "micro", "macro"]
    assert list(table.columns) == ["precision", "recall", "f1", "support"]
    assert math.isclose(table.loc["micro", "f1"], 4 / 11)
    assert math.isclose(micro_f1(entity_scores(GOLD_IOB2, PRED_IOB2)), 4 / 11)
    assert math.isnan(micro_f1({}))
