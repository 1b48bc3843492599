import numpy as np
import pandas as pd
import pytest

from cartomap.errors import DataError
from cartomap.scores import metrics as m

# 3 epochs, 2 examples, 3 classes, given as probabilities; logits = log(probs) so softmax(logits) = probs.
# example 0 (gold 0): correct, wrong, correct -> 2 correct, 1 forgetting event
# example 1 (gold 2): never correct
PROBS = np.array(
    [
        [[0.5, 0.25, 0.25], [0.6, 0.2, 0.2]],
        [[0.25, 0.5, 0.25], [0.1, 0.6, 0.3]],
        [[0.8, 0.1, 0.1], [0.4, 0.4, 0.2]],
    ]
)
LOGITS = np.log(PROBS)
LABELS = np.array([0, 2])


def test_softmax_is_stable_and_normalised():
    p = m.softmax(np.array([[1000.0, 1000.0, -1000.0], [0.0, 0.0, 0.0]]))
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(axis=-1), 1.0)
    np.testing.assert_allclose(p[0], [0.5, 0.5, 0.0], atol=1e-12)
    np.testing.assert_allclose(m.softmax(LOGITS), PROBS, rtol=1e-12)
    assert m.softmax(np.zeros((2, 2), dtype=np.float32)).dtype == np.float32
    np.testing.assert_allclose(m.softmax(np.array([[0, 1], [0, 1]]), axis=0), 0.5)


def test_gold_confidence_variability():
    gold = m.gold_probabilities(PROBS, LABELS)
    np.testing.assert_allclose(gold, [[0.5, 0.2], [0.25, 0.3], [0.8, 0.2]])
    np.testing.assert_allclose(m.confidence(gold), [1.55 / 3, 0.7 / 3])
    np.testing.assert_allclose(m.variability(gold), [0.2248456, 0.0471405], atol=1e-7)
    np.testing.assert_allclose(m.variability(gold), np.std(gold, axis=0, ddof=0))


def test_correctness_and_forgetfulness():
    np.testing.assert_allclose(m.correctness(PROBS, LABELS), [2 / 3, 0.0])
    counts = m.correct_counts(PROBS, LABELS)
    assert counts.tolist() == [2, 0] and counts.dtype.kind == "i"
    forget, never = m.forgetfulness(PROBS, LABELS)
    assert forget.tolist() == [1, 0]
    assert never.tolist() == [False, True]


def test_forgetfulness_counts_transitions_only():
    # correct pattern per example over 5 epochs, class 0 is gold; correct -> [1, 0] logits
    patterns = np.array([[1, 0, 1, 0, 1], [0, 1, 1, 1, 1], [1, 1, 1, 1, 0], [0, 0, 0, 0, 0]]).T
    logits = np.stack([patterns, 1 - patterns], axis=-1).astype(float)
    forget, never = m.forgetfulness(logits, np.zeros(4, dtype=int))
    assert forget.tolist() == [2, 0, 1, 0]
    assert never.tolist() == [False, False, False, True]


def test_threshold_closeness():
    np.testing.assert_allclose(m.threshold_closeness(np.array([0.0, 0.5, 0.9])), [0.0, 0.25, 0.09])


def test_aum_and_el2n():
    np.testing.assert_allclose(m.aum(LOGITS, LABELS), [np.log(2), -0.8283022], atol=1e-7)
    np.testing.assert_allclose(m.el2n(PROBS, LABELS), [np.sqrt(0.375), np.sqrt(1.04)])
    np.testing.assert_allclose(m.el2n(PROBS, LABELS, epoch=-1), [np.sqrt(0.06), np.sqrt(0.16 + 0.16 + 0.64)])


def test_cartcl_difficulties():
    conf = np.array([0.9, 0.5, 0.2])
    var = np.array([0.1, 0.2, 0.05])
    np.testing.assert_allclose(m.cartcl_pp_difficulty(conf, var), [0.2, 2.3, 2.75])
    corr = np.array([1.0, 0.5, 0.0])
    np.testing.assert_allclose(
        m.cartcl_pp_difficulty_code(corr, np.array([0.1, 0.5, 0.2])), [0.9, 0.5 + 0.5, 1.0 + 0.8]
    )


def test_regions_by_rank_exact_counts_and_ties():
    conf = np.array([0.9, 0.1, 0.5, 0.1, 0.9, 0.3])
    var = np.array([0.1, 0.3, 0.3, 0.0, 0.2, 0.3])
    regions = m.regions_by_rank(conf, var, fraction=0.5)
    assert set(regions) == {"easy-to-learn", "ambiguous", "hard-to-learn"}
    assert all(mask.sum() == 3 for mask in regions.values())
    assert np.flatnonzero(regions["easy-to-learn"]).tolist() == [0, 2, 4]
    assert np.flatnonzero(regions["hard-to-learn"]).tolist() == [1, 3, 5]
    assert np.flatnonzero(regions["ambiguous"]).tolist() == [1, 2, 5]  # ties -> lower index first
    small = m.regions_by_rank(conf, var, fraction=0.25)  # 1.5 -> 2 (half up)
    assert all(mask.sum() == 2 for mask in small.values())
    assert all(mask.sum() == 0 for mask in m.regions_by_rank(conf, var, fraction=0.0).values())
    with pytest.raises(ValueError):
        m.regions_by_rank(conf, var, fraction=1.5)


def test_regions_by_threshold_and_partition():
    conf = np.array([0.9, 0.1, 0.5, 0.75, 0.25, 0.6])
    var = np.array([0.05, 0.05, 0.05, 0.19, 0.1, 0.2])
    r = m.regions_by_threshold(conf, var)
    assert r["easy-to-learn"].tolist() == [True, False, False, True, False, False]
    assert r["hard-to-learn"].tolist() == [False, True, False, False, True, False]
    assert r["ambiguous"].tolist() == [False, False, False, False, False, True]
    none = ~(r["easy-to-learn"] | r["hard-to-learn"] | r["ambiguous"])
    assert none.tolist() == [False, False, True, False, False, False]
    # Cartography's variability by threshold: the earlier default, kept as an option
    threshold = m.RegionRule(method="threshold", axis="variability")
    part = m.region_partition(conf, var, threshold)
    assert part.tolist() == [
        "easy-to-learn",
        "hard-to-learn",
        "easy-to-learn",
        "easy-to-learn",
        "hard-to-learn",
        "ambiguous",
    ]
    assert m.region_partition(conf, var, threshold, ambiguous_var=0.1, conf_split=0.8).tolist()[:4] == [
        "easy-to-learn",
        "hard-to-learn",
        "hard-to-learn",
        "ambiguous",
    ]


def test_region_partition_by_rank_is_the_default():
    # 9 examples; variability ranks: 8 > 7 > 0 = 3 (tie: lower index first) > ...
    conf = np.array([0.9, 0.2, 0.6, 0.4, 0.95, 0.1, 0.5, 0.3, 0.7])
    var = np.array([0.10, 0.01, 0.02, 0.10, 0.03, 0.04, 0.05, 0.30, 0.31])
    part = m.region_partition(conf, var)
    # a third of 9 = 3 ambiguous: indices 8, 7 and 0 (0 before 3 at the tie); the rest split at confidence 0.5
    assert np.flatnonzero(part == "ambiguous").tolist() == [0, 7, 8]
    assert np.flatnonzero(part == "easy-to-learn").tolist() == [2, 4, 6]
    assert np.flatnonzero(part == "hard-to-learn").tolist() == [1, 3, 5]
    assert (
        m.region_partition(conf, var, m.RegionRule(fraction=0.5)).tolist().count("ambiguous") == 5
    )  # 4.5 up
    assert m.region_partition(conf, var, fraction=0.0).tolist().count("ambiguous") == 0
    # independent of the scale of variability (a longer run has smaller std): the same partition
    np.testing.assert_array_equal(m.region_partition(conf, var / 7), part)
    # the fixed threshold is not: with var / 7 nothing reaches variability's 0.2
    cartography = m.RegionRule(method="threshold", axis="variability")
    assert "ambiguous" not in m.region_partition(conf, var / 7, cartography).tolist()
    rule = m.RegionRule()
    name = rule.axis_label  # the default axis's name on the map
    assert f"the 33% of examples with the highest {name} ({name} ≥ 0.100 here)" in rule.describe(var)
    assert "the 33% of examples with the highest variability (variability ≥ 0.100 here)" in m.RegionRule(
        axis="variability"
    ).describe(var)
    assert "variability ≥ 0.2" in cartography.describe(var)
    with pytest.raises(DataError):
        m.RegionRule(method="quantile")


def test_compute_metrics_regions_by_rank_with_exact_counts():
    rng = np.random.default_rng(1)
    frame = m.compute_metrics(rng.normal(size=(4, 300, 3)), rng.integers(0, 3, 300))
    counts = frame["region"].value_counts()
    assert counts["ambiguous"] == 100  # the third highest on the default axis
    assert counts["easy-to-learn"] + counts["hard-to-learn"] == 200
    assert (frame.loc[frame["region"] == "easy-to-learn", "confidence"] >= 0.5).all()
    assert (frame.loc[frame["region"] == "hard-to-learn", "confidence"] < 0.5).all()
    axis = m.RegionRule().axis
    cut = frame.loc[frame["region"] == "ambiguous", axis].min()
    assert (frame.loc[frame["region"] != "ambiguous", axis] <= cut).all()
    assert frame.attrs["regions"]["method"] == "rank"
    assert frame.attrs["regions"]["axis"] == m.DEFAULT_AXIS
    # Cartography's rule by threshold, the earlier default
    old = m.compute_metrics(
        rng.normal(size=(4, 300, 3)),
        rng.integers(0, 3, 300),
        regions=m.RegionRule("threshold", axis="variability"),
    )
    assert old.attrs["regions"]["method"] == "threshold"
    np.testing.assert_array_equal(
        old["region"] == "ambiguous", old["variability"].to_numpy() >= m.DEFAULT_AMBIGUOUS_VAR
    )


def test_correctness_bucket_shows_exact_fractions():
    # 4 epochs: the reference's one-decimal labels would read 0.0 / 0.2 / 0.5 / 0.8 / 1.0
    b = m.correctness_bucket(np.array([0.0, 0.25, 0.5, 0.75, 1.0]), 4)
    assert b.tolist() == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert m.correctness_bucket(np.array([0.0, 1 / 3, 2 / 3, 1.0]), 3).tolist() == [
        "0/3",
        "1/3",
        "2/3",
        "3/3",
    ]
    assert m.correctness_bucket(np.array([0.6000000001]), 5).tolist() == ["3/5"]
    assert m.correctness_bucket(np.array([0.2, 0.25, 0.8])).tolist() == ["0.20", "0.25", "0.80"]
    assert m.bucket_order(["4/4", "1/4", "0/4", "1/4"]) == ["0/4", "1/4", "4/4"]
    assert m.bucket_order(["10/12", "9/12", "2/12"]) == ["2/12", "9/12", "10/12"]  # numeric, not by text
    assert m.bucket_value("3/4") == 0.75 and m.bucket_value("0.25") == 0.25


def test_burn_out_uses_the_first_epochs_only():
    # a hand-made 4-epoch fixture: the 4th epoch flips example 0 to wrong
    probs = np.array(
        [
            [[0.6, 0.2, 0.2], [0.2, 0.2, 0.6]],
            [[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]],
            [[0.7, 0.2, 0.1], [0.2, 0.2, 0.6]],
            [[0.1, 0.8, 0.1], [0.1, 0.1, 0.8]],
        ]
    )
    labels = np.array([0, 2])
    full = m.compute_metrics(np.log(probs), labels)
    burnt = m.compute_metrics(np.log(probs), labels, burn_out=3)
    np.testing.assert_allclose(burnt["confidence"], [0.7, (0.6 + 0.8 + 0.6) / 3])
    np.testing.assert_allclose(full["confidence"], [0.55, 0.7])
    np.testing.assert_allclose(burnt["variability"], [np.std([0.6, 0.8, 0.7]), np.std([0.6, 0.8, 0.6])])
    assert burnt["correct_count"].tolist() == [3, 3] and full["correct_count"].tolist() == [3, 4]
    assert burnt["forgetfulness"].tolist() == [0, 0] and full["forgetfulness"].tolist() == [1, 0]
    assert burnt["predicted"].tolist() == [0, 2]  # at the last epoch used
    assert burnt.attrs["n_epochs"] == 3 and burnt.attrs["epochs_recorded"] == 4
    pd.testing.assert_frame_equal(m.compute_metrics(np.log(probs), labels, burn_out=9), full)
    with pytest.raises(DataError):
        m.compute_metrics(np.log(probs), labels, burn_out=0)


def test_compute_metrics_columns_and_values():
    frame = m.compute_metrics(LOGITS.astype(np.float32), LABELS, ids=["a", "b"])
    assert list(frame.columns) == list(m.METRIC_COLUMNS)
    assert frame["id"].tolist() == ["a", "b"]
    assert frame["index"].tolist() == [0, 1]
    assert frame["predicted"].tolist() == [0, 0]
    np.testing.assert_allclose(frame["confidence"], [1.55 / 3, 0.7 / 3], atol=1e-6)
    np.testing.assert_allclose(frame["variability"], [0.2248456, 0.0471405], atol=1e-6)
    assert frame["correct_count"].tolist() == [2, 0]
    assert frame["forgetfulness"].tolist() == [1, 0]
    assert frame["never_learned"].tolist() == [False, True]
    np.testing.assert_allclose(frame["difficulty"], [0.708179, 2.719526], atol=1e-6)
    # the public RoNLI code's score on the *count* of correct epochs: (1 - 2) + (1 - 0.2248), (1 - 0) + (1 - 0.0471)
    np.testing.assert_allclose(frame["difficulty_code"], [-0.2248456, 1.9528595], atol=1e-6)
    # the default rule: a third of 2 rounds to 1, the example higher on the default axis; the other by
    # its confidence (example 0: 0.517, easy; example 1: 0.233, hard)
    expected = ["easy-to-learn", "hard-to-learn"]
    expected[int(np.argmax(frame[m.DEFAULT_AXIS].to_numpy()))] = "ambiguous"
    assert frame["region"].tolist() == expected
    assert frame.attrs["n_epochs"] == 3
    # Cartography's rule: example 0's gold probability swings more (variability 0.225 against 0.047)
    cartography = m.compute_metrics(
        LOGITS.astype(np.float32), LABELS, ids=["a", "b"], regions=m.RegionRule(axis="variability")
    )
    assert cartography["region"].tolist() == ["ambiguous", "hard-to-learn"]


def test_compute_metrics_single_epoch_and_default_ids():
    rng = np.random.default_rng(0)
    frame = m.compute_metrics(rng.normal(size=(1, 50, 4)), rng.integers(0, 4, 50))
    assert len(frame) == 50
    assert (frame["variability"] == 0).all()
    assert (frame["forgetfulness"] == 0).all()
    assert frame["id"].tolist() == [str(i) for i in range(50)]
    assert set(frame["correctness"].unique()) <= {0.0, 1.0}
    assert isinstance(frame, pd.DataFrame)


@pytest.mark.parametrize(
    "logits, labels",
    [
        (np.zeros((2, 3)), np.zeros(3, dtype=int)),  # not 3-d
        (np.zeros((2, 3, 2)), np.zeros(4, dtype=int)),  # wrong label count
        (np.zeros((2, 3, 2)), np.array([0, 1, 2])),  # label out of range
        (np.full((2, 3, 2), np.nan), np.zeros(3, dtype=int)),  # non-finite
    ],
)
def test_compute_metrics_rejects_bad_input(logits, labels):
    with pytest.raises(DataError):
        m.compute_metrics(logits, labels)


def test_a_forms_ambiguous_shares_hold_the_rules_own_default():
    from cartomap.scores.metrics import DEFAULT_AMBIGUOUS_FRACTION, RegionRule, ambiguous_shares

    shares = ambiguous_shares()
    assert len(shares) == 71 and shares[0] == 0.05 and shares[-1] == 0.75 and shares == sorted(shares)
    assert DEFAULT_AMBIGUOUS_FRACTION in shares and 0.33 not in shares and 0.34 in shares
    assert RegionRule().fraction in shares
