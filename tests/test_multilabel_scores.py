"""Tests for cartomap.scores.multilabel: per (example, label) dynamics, per-label maps, example scores."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from cartomap.errors import DataError
from cartomap.scores import ambiguity, metrics
from cartomap.scores.label_examples import EXAMPLE_METHODS, example_metrics, example_scores
from cartomap.scores.multilabel import (
    PAIR_COLUMNS,
    correct_from_probs,
    dynamics_array,
    dynamics_long,
    flat_keys,
    gold_probabilities,
    label_map,
    label_metrics,
    label_metrics_from_logits,
    label_metrics_from_probs,
    label_summary,
    sigmoid,
    to_dense,
)

EASY, AMBIGUOUS, HARD = metrics.EASY, metrics.AMBIGUOUS, metrics.HARD
#: Dataset Cartography's rule (ranked on variability), the one the regions below are worked out by hand for.
CARTOGRAPHY = metrics.RegionRule(axis=ambiguity.VARIABILITY)

# ----------------------------------------------------------------------------- the hand fixture
#
# Labels 0 = toxic, 1 = insult. Three comments, 2 epochs of sigmoid outputs p(label present):
#   example "a": toxic, not an insult
#   example "b": toxic and an insult
#   example "c": neither ("none apply")
GOLD = np.array([[True, False], [True, True], [False, False]])
PROBS = np.array(
    [
        [[0.6, 0.3], [0.4, 0.2], [0.1, 0.5]],  # epoch 0
        [[0.7, 0.7], [0.6, 0.4], [0.1, 0.2]],  # epoch 1
    ]
)  # [E=2, N=3, L=2]
IDS = ["a", "b", "c"]
NAMES = ["toxic", "insult"]
# p(gold) = p when present, 1 - p when absent; correct = (p > 0.5) == present (p = 0.5 is "absent").
# Rows in key order (a,toxic) (a,insult) (b,toxic) (b,insult) (c,toxic) (c,insult):
#              p(gold) e0, e1   conf   var    correct e0, e1  correctness  count  forgot  never  predicted
# a toxic   P  0.6, 0.7        0.65   0.05   yes, yes        1.0          2      0       no     present
# a insult  A  0.7, 0.3        0.5    0.2    yes, no         0.5          1      1       no     present
# b toxic   P  0.4, 0.6        0.5    0.1    no,  yes        0.5          1      0       no     present
# b insult  P  0.2, 0.4        0.3    0.1    no,  no         0.0          0      0       yes    absent
# c toxic   A  0.9, 0.9        0.9    0.0    yes, yes        1.0          2      0       no     absent
# c insult  A  0.5, 0.8        0.65   0.15   yes (tie), yes  1.0          2      0       no     absent
CONF = [0.65, 0.5, 0.5, 0.3, 0.9, 0.65]
VAR = [0.05, 0.2, 0.1, 0.1, 0.0, 0.15]
CORRECTNESS = [1.0, 0.5, 0.5, 0.0, 1.0, 1.0]
COUNT = [2, 1, 1, 0, 2, 2]
FORGOT = [0, 1, 0, 0, 0, 0]
NEVER = [False, False, False, True, False, False]
PREDICTED = [True, True, True, False, False, False]
# Regions, Cartography's rule (the third with the highest variability is ambiguous; else easy iff conf >= 0.5):
# per label (round(3/3) = 1 each): toxic vars (0.05, 0.1, 0) -> b; insult vars (0.2, 0.1, 0.15) -> a;
# b insult (conf 0.3) is hard. Over all six pairs (round(6/3) = 2): a insult (0.2) and c insult (0.15).
REGIONS_BY_LABEL = [EASY, AMBIGUOUS, AMBIGUOUS, HARD, EASY, EASY]
REGIONS_ALL = [EASY, AMBIGUOUS, EASY, HARD, EASY, AMBIGUOUS]


def hand_pairs(**options) -> pd.DataFrame:
    return label_metrics_from_probs(PROBS, GOLD, ids=IDS, label_names=NAMES, **options)


def test_pairs_by_hand():
    pairs = hand_pairs(regions=CARTOGRAPHY)
    assert list(pairs.columns) == list(PAIR_COLUMNS)
    assert pairs["example"].tolist() == [0, 0, 1, 1, 2, 2] and pairs["label"].tolist() == [0, 1, 0, 1, 0, 1]
    assert pairs["id"].tolist() == ["a", "a", "b", "b", "c", "c"]
    assert pairs["label_name"].tolist() == NAMES * 3
    assert pairs["present"].tolist() == [True, False, True, True, False, False]
    assert pairs["predicted"].tolist() == PREDICTED
    assert pairs["confidence"].tolist() == pytest.approx(CONF)
    assert pairs["variability"].tolist() == pytest.approx(VAR)
    assert pairs["correctness"].tolist() == CORRECTNESS
    assert pairs["correct_count"].tolist() == COUNT
    assert pairs["forgetfulness"].tolist() == FORGOT
    assert pairs["never_learned"].tolist() == NEVER
    assert pairs["region"].tolist() == REGIONS_BY_LABEL
    assert hand_pairs(regions=CARTOGRAPHY, regions_by="all")["region"].tolist() == REGIONS_ALL
    assert pairs.attrs["n_epochs"] == 2 and pairs.attrs["regions_by"] == "label"
    # the default rule's axis is a column of the pairs, as is every axis they can be ranked on
    default = hand_pairs()
    assert metrics.RegionRule().axis in default.columns
    assert all(axis in default.columns for axis in ambiguity.MAP_SCORES)
    assert default.attrs["regions"] == metrics.RegionRule().to_dict()


def test_gold_probabilities_and_correct_by_hand():
    gold = gold_probabilities(PROBS, GOLD)
    assert gold[0].ravel().tolist() == pytest.approx([0.6, 0.7, 0.4, 0.2, 0.9, 0.5])
    assert gold[1].ravel().tolist() == pytest.approx([0.7, 0.3, 0.6, 0.4, 0.9, 0.8])
    correct = correct_from_probs(PROBS, GOLD)
    assert correct[0].tolist() == [[True, True], [False, False], [True, True]]
    assert correct[1].tolist() == [[True, False], [True, False], [True, True]]
    # threshold 0.65: a toxic at 0.6 (epoch 0) and b toxic at 0.6 (epoch 1) are now predicted absent,
    # wrongly; a insult at 0.7 (epoch 1) is still predicted present, wrongly
    high = correct_from_probs(PROBS, GOLD, threshold=0.65)
    assert high[0].tolist() == [[False, True], [False, False], [True, True]]
    assert high[1].tolist() == [[True, False], [False, False], [True, True]]
    assert hand_pairs(threshold=0.65)["correctness"].tolist() == [0.5, 0.5, 0.0, 0.0, 1.0, 1.0]


def test_label_maps_and_summary():
    insult = label_map(hand_pairs(regions=CARTOGRAPHY), "insult")
    assert insult["id"].tolist() == IDS and insult["confidence"].tolist() == pytest.approx([0.5, 0.3, 0.65])
    assert insult["region"].tolist() == [AMBIGUOUS, HARD, EASY]
    assert label_map(hand_pairs(), 0)["confidence"].tolist() == pytest.approx([0.65, 0.5, 0.9])
    shuffled = hand_pairs().sample(frac=1.0, random_state=0)
    assert label_map(shuffled, 1)["example"].tolist() == [0, 1, 2]
    with pytest.raises(DataError, match="unknown label 'spam'"):
        label_map(hand_pairs(), "spam")
    summary = label_summary(hand_pairs(regions=CARTOGRAPHY))
    assert summary["label_name"].tolist() == NAMES and summary["n_present"].tolist() == [2, 1]
    assert summary["confidence"].tolist() == pytest.approx([2.05 / 3, 1.45 / 3])
    assert summary["correctness"].tolist() == pytest.approx([2.5 / 3, 1.5 / 3])
    assert summary[[EASY, AMBIGUOUS, HARD]].to_numpy().tolist() == [[2, 1, 0], [1, 1, 1]]


def test_example_view_min_puts_an_example_where_its_worst_label_is():
    table = example_metrics(hand_pairs(), regions=CARTOGRAPHY)
    # worst label = the lower confidence: insult in every example (0.5 < 0.65, 0.3 < 0.5, 0.65 < 0.9)
    assert table["id"].tolist() == IDS
    assert table["confidence"].tolist() == pytest.approx([0.5, 0.3, 0.65])
    assert table["worst_label"].tolist() == [1, 1, 1] and table["worst_label_name"].tolist() == ["insult"] * 3
    assert table["variability"].tolist() == pytest.approx([0.2, 0.1, 0.15])
    assert table["correctness"].tolist() == [0.5, 0.0, 1.0]
    assert table["forgetfulness"].tolist() == [1.0, 0.0, 0.0]
    assert table["n_labels"].tolist() == [2, 2, 2] and table["n_present"].tolist() == [1, 2, 0]
    # one of three ambiguous (a, var 0.2); b (0.3) hard, c (0.65) easy
    assert table["region"].tolist() == [AMBIGUOUS, HARD, EASY]
    # by default on the default axis, which the examples carry (their worst label's value)
    default = example_metrics(hand_pairs())
    axis = metrics.RegionRule().axis
    pairs = hand_pairs()
    assert default[axis].tolist() == pytest.approx(pairs.loc[pairs["label"] == 1, axis].tolist())
    assert (
        default["region"].tolist()
        == metrics.region_partition(default["confidence"].to_numpy(), default[axis].to_numpy()).tolist()
    )


def test_example_view_mean_is_the_centroid_of_the_labels():
    table = example_metrics(hand_pairs(), method="mean")
    assert table["confidence"].tolist() == pytest.approx([0.575, 0.4, 0.775])
    assert table["variability"].tolist() == pytest.approx([0.125, 0.1, 0.075])
    assert table["correctness"].tolist() == pytest.approx([0.75, 0.25, 1.0])
    assert table["forgetfulness"].tolist() == pytest.approx([0.5, 0.0, 0.0])
    assert table["worst_label"].tolist() == [1, 1, 1]


def test_example_view_present_only_leaves_out_absent_labels():
    table = example_metrics(hand_pairs(), method="present_only", regions=CARTOGRAPHY)
    # a: toxic only (0.65); b: both ((0.5 + 0.3) / 2); c: no gold label -> no score, no region
    assert table["n_scored"].tolist() == [1, 2, 0]
    assert table["confidence"].tolist()[:2] == pytest.approx([0.65, 0.4]) and np.isnan(table["confidence"][2])
    assert table["worst_label"].tolist() == [0, 1, -1]
    assert table["worst_label_name"].tolist() == ["toxic", "insult", None]
    assert table["variability"].tolist()[:2] == pytest.approx([0.05, 0.1]) and np.isnan(
        table["variability"][2]
    )
    # regions over a and b (round(2/3) = 1 ambiguous: b, var 0.1); a easy
    assert table["region"].tolist() == [EASY, AMBIGUOUS, None]


def test_example_scores_by_hand_ties_and_temperatures():
    scores = np.array([[0.2, 0.2, 0.9], [1.0, 0.0, 0.5]])
    table = example_scores(scores)
    assert table["score"].tolist() == [0.2, 0.0]
    assert table["worst_label"].tolist() == [0, 1]  # labels 0 and 1 tie: label 0
    assert table["worst_score"].tolist() == [0.2, 0.0]
    assert example_scores(scores, method="mean")["score"].tolist() == pytest.approx([1.3 / 3, 0.5])
    assert example_scores(scores, method="softmin", temperature=0)["score"].tolist() == [0.2, 0.0]
    assert example_scores(scores, method="softmin", temperature=np.inf)["score"].tolist() == pytest.approx(
        [1.3 / 3, 0.5]
    )
    # ema, alpha 0.5, scores sorted high to low: (0.9, 0.2, 0.2) -> 0.9, 0.55, 0.375; (1, .5, 0) -> 0.375
    ema = example_scores(scores, method="ema", alpha=0.5)["score"].tolist()
    assert ema == pytest.approx([0.375, 0.375])
    assert set(EXAMPLE_METHODS) == {"min", "mean", "present_only", "softmin", "ema"}


# ----------------------------------------------------------------------------- invariants


def test_one_present_label_is_a_single_label_example():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=(4, 10))  # [E=4, N=10, C=3] a single-label run's softmax
    labels = rng.integers(0, 3, size=10)
    gold_p = metrics.gold_probabilities(probs, labels)
    pairs = label_metrics_from_probs(gold_p[..., None], np.ones((10, 1), dtype=bool))
    assert pairs["confidence"].to_numpy() == pytest.approx(metrics.confidence(gold_p))
    assert pairs["variability"].to_numpy() == pytest.approx(metrics.variability(gold_p))


def test_a_sigmoid_label_is_a_two_class_softmax_example():
    rng = np.random.default_rng(1)
    z = rng.normal(0, 2, size=(5, 12))
    z[0, 0] = 0.0  # p = 0.5 exactly: the two-class argmax takes class 0, the sigmoid says "absent"
    labels = rng.integers(0, 2, size=12)
    logits2 = np.stack([np.zeros_like(z), z], axis=-1)  # softmax(0, z)[1] = sigmoid(z)
    single = metrics.compute_metrics(logits2, labels)
    pairs = label_metrics_from_logits(z[..., None], (labels == 1)[:, None])
    for column in ("confidence", "variability", "correctness"):
        assert pairs[column].to_numpy() == pytest.approx(single[column].to_numpy()), column
    for column in ("correct_count", "forgetfulness", "never_learned", "region"):
        assert pairs[column].tolist() == single[column].tolist(), column
    assert pairs["predicted"].tolist() == (single["predicted"] == 1).tolist()


def test_shuffling_examples_and_labels_changes_nothing_per_key():
    rng = np.random.default_rng(2)
    probs = rng.uniform(size=(3, 9, 4))
    gold = rng.uniform(size=(9, 4)) < 0.4
    ids = [f"x{i}" for i in range(9)]
    names = ["w", "x", "y", "z"]
    base = label_metrics_from_probs(probs, gold, ids=ids, label_names=names)
    rows, cols = rng.permutation(9), rng.permutation(4)
    moved = label_metrics_from_probs(
        probs[:, rows][:, :, cols],
        gold[rows][:, cols],
        ids=[ids[i] for i in rows],
        label_names=[names[j] for j in cols],
    )
    keep = ["id", "label_name", *PAIR_COLUMNS[4:]]
    left = base[keep].sort_values(["id", "label_name"]).reset_index(drop=True)
    right = moved[keep].sort_values(["id", "label_name"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right)
    for method in EXAMPLE_METHODS:
        a = example_metrics(base, method=method).set_index("id").sort_index()
        b = example_metrics(moved, method=method).set_index("id").sort_index()
        for column in ("confidence", "variability", "correctness", "forgetfulness"):
            np.testing.assert_allclose(a[column], b[column], err_msg=f"{method} {column}")
        for column in ("worst_label_name", "region", "n_scored"):
            assert a[column].tolist() == b[column].tolist(), (method, column)


def test_flipping_a_label_and_its_probabilities_keeps_p_gold():
    rng = np.random.default_rng(3)
    probs = rng.uniform(0.01, 0.99, size=(4, 6, 3))
    gold = rng.uniform(size=(6, 3)) < 0.5
    flipped_probs, flipped_gold = probs.copy(), gold.copy()
    flipped_probs[..., 1] = 1.0 - probs[..., 1]
    flipped_gold[:, 1] = ~gold[:, 1]
    assert gold_probabilities(flipped_probs, flipped_gold) == pytest.approx(gold_probabilities(probs, gold))
    a = label_metrics_from_probs(probs, gold)
    b = label_metrics_from_probs(flipped_probs, flipped_gold)
    for column in ("confidence", "variability", "correctness"):
        assert b[column].to_numpy() == pytest.approx(a[column].to_numpy())
    assert b["region"].tolist() == a["region"].tolist()
    assert (b["present"] != a["present"]).tolist() == [j == 1 for j in a["label"]]


def test_correctness_is_sklearns_accuracy_per_label_and_hamming_overall():
    from sklearn.metrics import accuracy_score, hamming_loss

    rng = np.random.default_rng(4)
    probs = rng.uniform(size=(5, 20, 3))
    gold = rng.uniform(size=(20, 3)) < 0.3
    pairs = label_metrics_from_probs(probs, gold)
    predicted = probs > 0.5
    for j in range(3):
        per_epoch = [accuracy_score(gold[:, j], predicted[e, :, j]) for e in range(5)]
        assert label_map(pairs, j)["correctness"].mean() == pytest.approx(np.mean(per_epoch))
    overall = np.mean([1.0 - hamming_loss(gold, predicted[e]) for e in range(5)])
    assert pairs["correctness"].mean() == pytest.approx(overall)
    # the per-example share of labels right at the last epoch: sklearn's subset view, one row at a time
    last = pairs[pairs["predicted"] == pairs["present"]].groupby("example").size()
    assert last.reindex(range(20), fill_value=0).tolist() == (predicted[-1] == gold).sum(axis=1).tolist()


def test_one_epoch_confidence_and_example_scores_agree_with_cleanlab():
    from cleanlab.multilabel_classification.rank import (
        get_label_quality_scores,
        get_label_quality_scores_per_class,
    )

    rng = np.random.default_rng(5)
    probs = rng.uniform(size=(1, 15, 4))
    gold = rng.uniform(size=(15, 4)) < 0.4
    gold[0] = False  # an example with no label
    labels = [np.flatnonzero(row).tolist() for row in gold]
    conf = to_dense(label_metrics_from_probs(probs, gold), "confidence")
    assert conf == pytest.approx(get_label_quality_scores_per_class(labels, probs[0]))  # self-confidence
    assert example_scores(conf, method="ema")["score"].to_numpy() == pytest.approx(
        get_label_quality_scores(labels, probs[0])  # cleanlab's default: EMA, alpha 0.8
    )
    for t in (0.05, 0.1, 1.0):
        reference = get_label_quality_scores(
            labels, probs[0], aggregator_kwargs={"method": "softmin", "temperature": t}
        )
        assert example_scores(conf, method="softmin", temperature=t)["score"].to_numpy() == pytest.approx(
            reference
        ), t


def test_sigmoid_is_stable_and_matches_the_formula():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = sigmoid(np.array([-1000.0, -30.0, 0.0, 30.0, 1000.0]))
    assert values[0] == 0.0 and values[2] == 0.5 and values[4] == 1.0
    z = np.linspace(-8, 8, 33)
    assert sigmoid(z) == pytest.approx(1.0 / (1.0 + np.exp(-z)), rel=1e-12)
    assert sigmoid(-z) == pytest.approx(1.0 - sigmoid(z), abs=1e-15)
    assert sigmoid(np.zeros(2, dtype=np.float32)).dtype == np.float32
    assert sigmoid(np.array([0, 2])).dtype == np.float64


def test_dense_from_the_long_table_in_any_order():
    pairs = hand_pairs().iloc[::-1]
    assert to_dense(pairs, "confidence").ravel().tolist() == pytest.approx([0.65, 0.5, 0.5, 0.3, 0.9, 0.65])
    assert to_dense(pairs, "present").tolist() == GOLD.tolist()
    example, label = flat_keys(2, 3)
    assert example.tolist() == [0, 0, 0, 1, 1, 1] and label.tolist() == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: label_metrics_from_probs(PROBS[0], GOLD), "probs"),
        (lambda: label_metrics_from_probs(PROBS * 2, GOLD), "probs"),
        (lambda: label_metrics_from_probs(np.full((1, 1, 1), np.nan), [[True]]), "probs"),
        (lambda: label_metrics_from_probs(PROBS, GOLD[:2]), "gold"),
        (lambda: label_metrics_from_probs(PROBS, GOLD * 2), "gold"),
        (lambda: label_metrics_from_probs(PROBS, GOLD, threshold=1.0), "threshold"),
        (lambda: label_metrics_from_probs(PROBS, GOLD, ids=["a"]), "ids"),
        (lambda: label_metrics_from_probs(PROBS, GOLD, label_names=["x"]), "label_names"),
        (lambda: label_metrics_from_probs(PROBS, GOLD, regions_by="example"), "regions_by"),
        (lambda: label_metrics_from_logits(np.full((1, 1, 1), np.inf), [[True]]), "logits"),
        (lambda: label_metrics(PROBS, PROBS, GOLD), "correct"),
        (lambda: example_scores(np.ones((2, 2)), method="max"), "method"),
        (lambda: example_scores(np.ones((2, 2)), method="present_only"), "gold"),
        (lambda: example_scores(np.array([[np.nan]])), "label_scores"),
        (lambda: example_scores(np.ones((1, 2)), method="softmin", temperature=-1), "temperature"),
        (lambda: example_scores(np.ones((1, 2)), method="ema", alpha=2), "alpha"),
        (lambda: to_dense(pd.concat([hand_pairs(), hand_pairs().iloc[:1]]), "confidence"), "label"),
        (lambda: to_dense(hand_pairs(), "nope"), "nope"),
    ],
)
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(DataError) as caught:
        call()
    assert caught.value.field == field


def test_recorded_dynamics_round_trip_through_long_tables():
    logits = np.log(PROBS / (1.0 - PROBS))  # the fixture's probabilities as logits
    tables = [dynamics_long(logits[e], IDS) for e in range(2)]
    assert tables[0].columns.tolist() == ["id", "label", "logit"]
    assert (
        tables[0]["id"].tolist() == ["a", "a", "b", "b", "c", "c"]
        and tables[0]["label"].tolist() == [0, 1] * 3
    )
    shuffled = [t.sample(frac=1.0, random_state=e) for e, t in enumerate(tables)]
    back = dynamics_array(shuffled, IDS, 2)
    np.testing.assert_allclose(back, logits)
    pairs = label_metrics_from_logits(back, GOLD, ids=IDS, label_names=NAMES)
    np.testing.assert_allclose(pairs["confidence"], CONF)
    with pytest.raises(DataError, match=r"epoch index 1: key \(id 'b', label 1\) is missing"):
        dynamics_array([tables[0], tables[1].drop(index=3)], IDS, 2)
    with pytest.raises(DataError, match=r"epoch index 0: key \(id 'a', label 0\) is 2 rows"):
        dynamics_array([pd.concat([tables[0], tables[0].iloc[:1]])], IDS, 2)
    with pytest.raises(DataError, match="unknown id 'a'"):
        dynamics_array(tables, ["b", "c"], 2)
    with pytest.raises(DataError, match=r"label indices must be in \[0, 1\)"):
        dynamics_array(tables, IDS, 1)


def test_read_data_feeds_the_scores_by_its_indicator_ids_and_label_space():
    from cartomap.data.multilabel import from_frame

    data = from_frame(
        pd.DataFrame({"comment": ["x", "y", "z"], "labels": [["toxic"], ["insult", "toxic"], []]})
    )
    assert data.label_names == ("insult", "toxic")  # sorted: the fixture's columns in the other order
    probs = PROBS[:, :, ::-1]
    pairs = label_metrics_from_probs(
        probs, data.indicator, ids=data.frame["id"], label_names=data.label_names
    )
    assert to_dense(pairs, "present").tolist() == GOLD[:, ::-1].tolist()
    assert label_map(pairs, "insult")["confidence"].tolist() == pytest.approx([0.5, 0.3, 0.65])
    assert example_metrics(pairs)["worst_label_name"].tolist() == ["insult"] * 3
    assert example_metrics(pairs)["id"].tolist() == ["ex-0", "ex-1", "ex-2"]
