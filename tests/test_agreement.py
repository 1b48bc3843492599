"""Agreement between several reviewers of suspected label errors (cartomap.scores.agreement): Fleiss' kappa
against statsmodels, Krippendorff's alpha against the krippendorff package, and the per-annotator and
per-item tables on a hand-checked decisions table."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats import inter_rater

from cartomap.errors import DataError
from cartomap.scores import agreement as A


def decisions(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["item", "annotator", "decision", "new_label"])


#: a: 3 keep, 1 remove; b: two relabels to neutral and an unsure; c: keep vs remove; d: one annotator.
TABLE = decisions(
    [
        ("a", "x", "keep", None),
        ("a", "y", "keep", None),
        ("a", "z", "remove", None),
        ("a", "w", "keep", None),
        ("b", "x", "relabel", "neutral"),
        ("b", "y", "relabel", "neutral"),
        ("b", "z", "unsure", None),
        ("c", "x", "keep", None),
        ("c", "y", "remove", None),
        ("d", "x", "keep", None),
    ]
)


# --------------------------------------------------------------------------- Fleiss' kappa


def test_fleiss_kappa_matches_statsmodels_on_random_counts():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n_items, n_cats, raters = rng.integers(2, 40), rng.integers(2, 6), rng.integers(2, 8)
        counts = np.stack(
            [np.bincount(rng.integers(0, n_cats, raters), minlength=n_cats) for _ in range(n_items)]
        )
        if np.count_nonzero(counts.sum(axis=0)) < 2:
            continue  # a single category: undefined (tested below)
        assert A.fleiss_kappa(counts) == pytest.approx(inter_rater.fleiss_kappa(counts, method="fleiss"))


def test_fleiss_kappa_by_hand():
    assert A.fleiss_kappa([[3, 0], [0, 3]]) == pytest.approx(1.0)  # P = 1, Pe = 0.5
    # P_i = (2^2 + 1^2 - 3) / (3 * 2) = 1/3, Pe = 0.5: (1/3 - 1/2) / (1/2) = -1/3
    assert A.fleiss_kappa([[2, 1], [1, 2]]) == pytest.approx(-1 / 3)


def test_fleiss_kappa_undefined_is_nan_with_a_reason():
    value, reason = A.fleiss_kappa(pd.DataFrame({"keep": [3, 3], "remove": [0, 0]}), with_reason=True)
    assert math.isnan(value) and "'keep'" in reason and "undefined" in reason
    value, reason = A.fleiss_kappa([[1, 0], [0, 1]], with_reason=True)  # one annotator
    assert math.isnan(value) and "at least 2" in reason
    value, reason = A.fleiss_kappa(np.zeros((0, 3)), with_reason=True)
    assert math.isnan(value) and reason == "no items"
    assert A.fleiss_kappa([[2, 1], [1, 2]], with_reason=True) == (pytest.approx(-1 / 3), None)


def test_fleiss_kappa_rejects_unequal_raters_and_bad_counts():
    with pytest.raises(DataError, match="same number of ratings.*2 to 3"):
        A.fleiss_kappa([[2, 1], [1, 1]])
    with pytest.raises(DataError, match="negative"):
        A.fleiss_kappa([[2, -1], [1, 0]])
    with pytest.raises(DataError, match="whole numbers"):
        A.fleiss_kappa([[1.5, 0.5], [1, 1]])


# --------------------------------------------------------------------------- Krippendorff's alpha


@pytest.mark.parametrize("level", A.ALPHA_LEVELS)
def test_krippendorff_alpha_matches_the_package_on_random_data(level):
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(25):
        units, coders = rng.integers(2, 30), rng.integers(2, 6)
        x = rng.integers(1, 6, (units, coders)).astype(float)
        x[rng.random((units, coders)) < 0.3] = np.nan
        if np.count_nonzero(np.sum(~np.isnan(x), axis=1) >= 2) == 0 or len(np.unique(x[~np.isnan(x)])) < 2:
            continue
        expected = krippendorff.alpha(reliability_data=x.T, level_of_measurement=level)  # coders x units
        assert A.krippendorff_alpha(x, level) == pytest.approx(expected)
        checked += 1
    assert checked >= 20


def test_krippendorff_alpha_reference_example():
    """The krippendorff package's README data (3 coders x 15 units): nominal 0.691, interval 0.811."""
    nan = np.nan
    coders = [
        [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
        [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
        [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
    ]
    units = np.array(coders).T
    assert A.krippendorff_alpha(units, "nominal") == pytest.approx(0.691, abs=5e-4)
    assert A.krippendorff_alpha(units, "interval") == pytest.approx(0.811, abs=5e-4)


def test_krippendorff_alpha_on_strings_equals_alpha_on_codes():
    table = A.units_by_coders(TABLE)
    codes = table.apply(lambda col: col.map({"keep": 1.0, "remove": 2.0, "relabel:neutral": 3.0}))
    assert A.krippendorff_alpha(table) == pytest.approx(A.krippendorff_alpha(codes.to_numpy(dtype=float)))
    expected = krippendorff.alpha(
        reliability_data=codes.to_numpy(dtype=float).T, level_of_measurement="nominal"
    )
    assert A.krippendorff_alpha(table) == pytest.approx(expected)


def test_krippendorff_alpha_undefined_is_nan_with_a_reason():
    value, reason = A.krippendorff_alpha([["keep"], ["remove"]], with_reason=True)  # one coder
    assert math.isnan(value) and "two or more values" in reason
    value, reason = A.krippendorff_alpha([["keep", "keep"], ["keep", None]], with_reason=True)
    assert math.isnan(value) and "'keep'" in reason
    value, reason = A.krippendorff_alpha(np.full((2, 2), np.nan), with_reason=True)
    assert math.isnan(value) and reason == "no values"
    with pytest.raises(DataError, match="level"):
        A.krippendorff_alpha([[1, 2]], level="cardinal")
    with pytest.raises(DataError, match="numeric"):
        A.krippendorff_alpha([["keep", "remove"]], level="interval")


# --------------------------------------------------------------------------- the decisions table


def test_decision_values_joins_relabel_targets():
    values = A.decision_values(TABLE)
    assert list(values.columns) == list(A.VALUE_COLUMNS)
    assert values["value"].tolist()[4:7] == ["relabel:neutral", "relabel:neutral", "unsure"]
    plain = A.decision_values(TABLE, with_new_label=False)
    assert plain["value"].tolist()[4] == "relabel"
    # a table with a value column is taken as it is
    assert A.decision_values(values).equals(values)
    assert A.decision_values(values, with_new_label=False)["value"].tolist()[4] == "relabel"


def test_decision_values_rejects_bad_tables():
    with pytest.raises(DataError, match="row 1: unknown decision 'maybe'"):
        A.decision_values(decisions([("a", "x", "keep", None), ("a", "y", "maybe", None)]))
    with pytest.raises(DataError, match="row 1: annotator 'x' decided item 'a' twice"):
        A.decision_values(decisions([("a", "x", "keep", None), ("a", "x", "remove", None)]))
    with pytest.raises(DataError, match="no column 'annotator'"):
        A.decision_values(pd.DataFrame({"item": ["a"], "value": ["keep"]}))
    with pytest.raises(DataError, match="row 0: no item"):
        A.decision_values(decisions([(None, "x", "keep", None)]))
    with pytest.raises(DataError, match="unsure must be"):
        A.count_matrix(TABLE, unsure="drop")


def test_split_value():
    assert A.split_value("relabel:neutral") == ("relabel", "neutral")
    assert A.split_value("relabel") == ("relabel", None)
    assert A.split_value("keep") == ("keep", None)
    assert A.split_value(None) == (None, None)


def test_count_matrix_and_unsure():
    counts = A.count_matrix(TABLE)
    assert list(counts.columns) == ["keep", "relabel:neutral", "remove"]
    assert counts.index.tolist() == ["a", "b", "c", "d"]
    assert counts.to_numpy().tolist() == [[3, 0, 1], [0, 2, 0], [1, 0, 1], [1, 0, 0]]
    with_unsure = A.count_matrix(TABLE, unsure="category")
    assert with_unsure.loc["b"].to_dict() == {"keep": 0, "relabel:neutral": 2, "remove": 0, "unsure": 1}
    fixed = A.count_matrix(TABLE, categories=["keep", "remove", "relabel:neutral", "relabel:entailment"])
    assert fixed.loc["a"].tolist() == [3, 1, 0, 0]
    with pytest.raises(DataError, match="not among the categories"):
        A.count_matrix(TABLE, categories=["keep", "remove"])


def test_units_by_coders():
    table = A.units_by_coders(TABLE)
    assert table.columns.tolist() == ["x", "y", "z", "w"]
    assert table.loc["b"].tolist()[:2] == ["relabel:neutral", "relabel:neutral"]
    assert pd.isna(table.loc["b", "z"])  # unsure: as if not decided
    assert A.units_by_coders(TABLE, unsure="category").loc["b", "z"] == "unsure"


# --------------------------------------------------------------------------- per annotator, per item


def test_annotator_agreement_leave_one_out():
    table = A.annotator_agreement(TABLE).set_index("annotator")
    assert list(A.annotator_agreement(TABLE).columns) == list(A.ANNOTATOR_COLUMNS)
    # x: a (others keep 2 : remove 1) agrees, b (others neutral) agrees, c (others remove) not, d alone
    assert table.loc["x"].to_dict() == {
        "n_items": 4,
        "n_unsure": 0,
        "n_compared": 3,
        "n_ties": 0,
        "n_agree": 2,
        "agreement": pytest.approx(2 / 3),
    }
    assert table.loc["y", "agreement"] == pytest.approx(2 / 3)
    # z: removes a where the others keep; its unsure on b is not compared
    assert table.loc["z", ["n_items", "n_unsure", "n_compared", "n_agree"]].tolist() == [1, 1, 1, 0]
    assert table.loc["z", "agreement"] == 0.0
    assert table.loc["w", "agreement"] == 1.0


def test_annotator_agreement_ties_and_unsure_as_category():
    table = A.annotator_agreement(TABLE, unsure="category").set_index("annotator")
    # x on b: the others are y (neutral) and z (unsure): a tie, left out of the share
    assert table.loc["x", ["n_compared", "n_ties", "n_agree"]].tolist() == [3, 1, 1]
    assert table.loc["x", "agreement"] == pytest.approx(1 / 2)
    assert table.loc["z", ["n_items", "n_compared", "n_agree"]].tolist() == [2, 2, 0]
    alone = A.annotator_agreement(decisions([("a", "x", "keep", None)]))
    assert alone["n_compared"].tolist() == [0] and math.isnan(alone["agreement"].iloc[0])


def test_item_consensus():
    table = A.item_consensus(TABLE)
    assert list(table.columns) == list(A.CONSENSUS_COLUMNS)
    a, b, c, d = (table.iloc[i] for i in range(4))
    assert (a["majority"], a["n_annotators"], a["majority_share"], a["strict_majority"]) == (
        "keep",
        4,
        0.75,
        True,
    )
    assert a["entropy"] == pytest.approx(-(0.75 * np.log2(0.75) + 0.25 * np.log2(0.25)))
    assert (b["majority"], b["n_annotators"], b["n_unsure"], b["entropy"]) == ("relabel:neutral", 2, 1, 0.0)
    assert (
        c["majority"] is None and c["tie"] and not c["strict_majority"] and c["entropy"] == pytest.approx(1.0)
    )
    assert (d["majority"], d["n_annotators"]) == ("keep", 1)
    assert [tuple(r) for r in table[["decision", "new_label"]].itertuples(index=False)] == [
        ("keep", None),
        ("relabel", "neutral"),
        (None, None),
        ("keep", None),
    ]
    assert A.item_consensus(TABLE, min_annotators=2)["item"].tolist() == ["a", "b", "c"]
    only_unsure = decisions([("e", "x", "unsure", None)])
    assert A.item_consensus(only_unsure).empty
    assert A.item_consensus(only_unsure, unsure="category")["majority"].tolist() == ["unsure"]
    with pytest.raises(DataError, match="min_annotators"):
        A.item_consensus(TABLE, min_annotators=0)


def test_agreement_summary():
    summary = A.agreement_summary(TABLE)
    assert (summary["n_items"], summary["n_annotators"], summary["n_decisions"], summary["n_unsure"]) == (
        4,
        4,
        10,
        1,
    )
    # agreeing pairs: a 3*2, b 2*1 over all pairs a 4*3, b 2*1, c 2*1
    assert summary["observed_agreement"] == pytest.approx(8 / 16)
    assert summary["krippendorff_alpha"] == pytest.approx(A.krippendorff_alpha(A.units_by_coders(TABLE)))
    # items have 1 to 4 counted decisions: kappa on the two with 2 (b, c), and the note says so
    equal = TABLE[TABLE["item"].isin(["b", "c"]) & (TABLE["decision"] != "unsure")]
    assert summary["fleiss_kappa"] == pytest.approx(A.fleiss_kappa(A.count_matrix(equal)))
    assert summary["fleiss_kappa_items"] == 2 and "2 of 4 items with 2" in summary["fleiss_kappa_note"]
    summary = A.agreement_summary(equal)
    assert summary["fleiss_kappa"] == pytest.approx(A.fleiss_kappa(A.count_matrix(equal)))
    assert summary["fleiss_kappa_reason"] is None and summary["fleiss_kappa_note"] is None
    assert summary["fleiss_kappa_items"] == 2


def test_two_annotators_and_one_unsure_decision_still_give_kappa():
    """Two people reviewed 10 items; one was unsure about one: 9 items have two counted decisions. Fleiss'
    kappa is statsmodels' on those 9 (never undefined because of the tenth), Krippendorff's alpha the
    package's on all 10 (unequal counts are its case)."""
    rng = np.random.default_rng(34)
    values = ["keep", "remove", "relabel"]
    rows = []
    for k in range(10):
        first = values[rng.integers(0, 3)]
        second = first if rng.random() < 0.7 else values[rng.integers(0, 3)]
        rows += [
            (f"i{k}", "ann", first, "neutral"),
            (f"i{k}", "bob", "unsure" if k == 4 else second, "neutral"),
        ]
    table = decisions(rows)
    summary = A.agreement_summary(table)
    counts = A.count_matrix(table)
    nine = counts[counts.sum(axis=1) == 2].to_numpy()
    assert len(nine) == 9 and summary["fleiss_kappa_items"] == 9
    assert summary["fleiss_kappa"] == pytest.approx(
        inter_rater.fleiss_kappa(nine, method="fleiss"), abs=1e-12
    )
    assert not math.isnan(summary["fleiss_kappa"]) and summary["fleiss_kappa_reason"] is None
    assert "9 of 10 items" in summary["fleiss_kappa_note"]
    coders = A.units_by_coders(table)  # items x annotators, bob's unsure item missing
    codes = {v: i for i, v in enumerate(sorted(set(coders.stack().dropna())))}
    data = coders.apply(lambda col: col.map(codes)).to_numpy(dtype=float).T  # coders x units
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert summary["krippendorff_alpha"] == pytest.approx(expected, abs=1e-12)


def test_edge_cases_never_crash():
    empty = TABLE.iloc[:0]
    summary = A.agreement_summary(empty)
    assert (
        summary["n_items"] == 0
        and math.isnan(summary["fleiss_kappa"])
        and math.isnan(summary["krippendorff_alpha"])
    )
    assert A.item_consensus(empty).empty and A.annotator_agreement(empty).empty
    one = TABLE[TABLE["annotator"] == "x"]
    summary = A.agreement_summary(one)
    assert (
        math.isnan(summary["krippendorff_alpha"]) and "one annotator" in summary["krippendorff_alpha_reason"]
    )
    same = decisions([(i, a, "keep", None) for i in "ab" for a in "xy"])
    summary = A.agreement_summary(same)
    assert summary["observed_agreement"] == 1.0
    assert math.isnan(summary["fleiss_kappa"]) and "undefined" in summary["fleiss_kappa_reason"]
    assert math.isnan(summary["krippendorff_alpha"]) and "undefined" in summary["krippendorff_alpha_reason"]
