import itertools
import math

import numpy as np
import pandas as pd
import pytest

from cartomap.errors import DataError
from cartomap.scores import reports as r

# ----------------------------------------------------------------------------- classification scores
#
# Confusion matrix (rows = gold, columns = predicted), 10 examples:
#   gold 0: [3, 1, 0]   support 4
#   gold 1: [1, 2, 1]   support 4
#   gold 2: [0, 0, 2]   support 2
#   predicted totals: 4, 3, 3
# class 0: P = 3/4, R = 3/4, F1 = 3/4
# class 1: P = 2/3, R = 2/4, F1 = 2 (1/3) / (7/6) = 4/7
# class 2: P = 2/3, R = 2/2, F1 = 2 (2/3) / (5/3) = 4/5
# micro P = R = F1 = accuracy = 7/10
# macro P = (3/4 + 2/3 + 2/3) / 3 = 25/36, macro R = (3/4 + 1/2 + 1) / 3 = 3/4,
# macro F1 = (3/4 + 4/7 + 4/5) / 3 = (105 + 80 + 112) / 420 = 99/140
Y_TRUE = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
Y_PRED = [0, 0, 0, 1, 0, 1, 1, 2, 2, 2]
NAMES = ["entailment", "neutral", "contradiction"]


def test_classification_table_matches_hand_computed_confusion():
    table = r.classification_table(Y_TRUE, Y_PRED, NAMES)
    assert list(table.index) == [*NAMES, "micro", "macro"]
    assert list(table.columns) == ["precision", "recall", "f1", "support"]
    expected = {
        "entailment": (3 / 4, 3 / 4, 3 / 4, 4),
        "neutral": (2 / 3, 1 / 2, 4 / 7, 4),
        "contradiction": (2 / 3, 1.0, 4 / 5, 2),
        "micro": (0.7, 0.7, 0.7, 10),
        "macro": (25 / 36, 3 / 4, 99 / 140, 10),
    }
    for name, values in expected.items():
        np.testing.assert_allclose(table.loc[name].to_numpy(dtype=float), values, rtol=1e-12, err_msg=name)
    assert table["support"].dtype == np.int64


def test_classification_table_absent_and_never_predicted_classes_score_zero():
    # class 3 ("reasoning") absent from gold and predictions: scores 0 and counts in the macro mean
    table = r.classification_table(Y_TRUE, Y_PRED, [*NAMES, "reasoning"])
    assert table.loc["reasoning"].tolist() == [0.0, 0.0, 0.0, 0]
    assert table.loc["macro", "f1"] == pytest.approx((3 / 4 + 4 / 7 + 4 / 5) / 4)
    # class 1 never predicted: precision 0/0 -> 0 (zero_division=0), recall 0
    table = r.classification_table([0, 1, 1], [0, 0, 0], ["a", "b"])
    assert table.loc["b"].tolist() == [0.0, 0.0, 0.0, 2]
    assert table.loc["a", "precision"] == pytest.approx(1 / 3)


def test_summary_scores_micro_f1_equals_accuracy():
    scores = r.summary_scores(Y_TRUE, Y_PRED, n_classes=3)
    assert scores == pytest.approx({"accuracy": 0.7, "micro_f1": 0.7, "macro_f1": 99 / 140})
    assert r.summary_scores([0, 1], [0, 1], 2) == {"accuracy": 1.0, "micro_f1": 1.0, "macro_f1": 1.0}


def test_score_validation_names_the_argument():
    with pytest.raises(DataError, match="y_pred.*outside \\[0, 3\\)"):
        r.classification_table([0, 1], [0, 3], NAMES)
    with pytest.raises(DataError, match="y_true.*y_true=3, y_pred=2"):
        r.summary_scores([0, 1, 2], [0, 1], 3)
    with pytest.raises(DataError, match="y_true.*integer"):
        r.summary_scores([0.5, 1], [0, 1], 3)
    with pytest.raises(DataError, match="label_names"):
        r.classification_table([0], [0], ["a", "a"])
    with pytest.raises(ValueError, match="n_classes"):
        r.summary_scores([0], [0], 0)
    with pytest.raises(DataError, match="at least one example"):
        r.summary_scores([], [], 3)
    # whole floats are accepted as class indices
    assert r.summary_scores(np.array([0.0, 1.0]), [0, 1], 2)["accuracy"] == 1.0


# ----------------------------------------------------------------------------- Cochran's Q
#
# 6 examples x 3 methods. Row totals R = 3, 1, 2, 0, 2, 2; column totals C = 5, 3, 2; T = 10.
# Q = (k-1) [k sum C^2 - T^2] / (k T - sum R^2) = 2 (3*38 - 100) / (30 - 22) = 2 * 14 / 8 = 3.5
# chi-square with 2 df: p = exp(-Q/2) = exp(-1.75)
CORRECT = np.array(
    [
        [1, 1, 1],
        [1, 0, 0],
        [1, 1, 0],
        [0, 0, 0],
        [1, 0, 1],
        [1, 1, 0],
    ],
    dtype=bool,
)


def textbook_q(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=float)
    n_rows, k = x.shape
    col, row = x.sum(axis=0), x.sum(axis=1)
    total = x.sum()
    return (k - 1) * (k * np.sum(col**2) - total**2) / (k * total - np.sum(row**2))


def test_cochrans_q_hand_computed():
    res = r.cochrans_q(CORRECT)
    assert res["q"] == pytest.approx(3.5, rel=1e-12)
    assert res["df"] == 2
    assert res["p_value"] == pytest.approx(math.exp(-1.75), rel=1e-12)
    assert (res["n_examples"], res["n_methods"], res["n_discordant"]) == (6, 3, 4)
    assert textbook_q(CORRECT) == pytest.approx(3.5)


def test_cochrans_q_two_methods_is_mcnemar():
    # methods 0 and 1: only-0-right on 2 examples, only-1-right on 0 -> Q = (2 - 0)^2 / (2 + 0) = 2
    # chi-square with 1 df: p = erfc(sqrt(Q / 2)) = erfc(1)
    res = r.cochrans_q(CORRECT[:, :2].astype(int))
    assert res["q"] == pytest.approx(2.0)
    assert res["df"] == 1
    assert res["p_value"] == pytest.approx(math.erfc(1.0), rel=1e-12)


def test_cochrans_q_agrees_with_textbook_formula_on_random_tables():
    rng = np.random.default_rng(0)
    for _ in range(5):
        table = rng.random((40, 4)) < [0.5, 0.6, 0.7, 0.4]
        assert r.cochrans_q(table)["q"] == pytest.approx(textbook_q(table), rel=1e-10)


def test_cochrans_q_without_discordant_examples_is_no_evidence():
    same = np.array([[1, 1], [0, 0], [1, 1]], dtype=bool)
    assert r.cochrans_q(same) == {
        "q": 0.0,
        "p_value": 1.0,
        "df": 1,
        "n_examples": 3,
        "n_methods": 2,
        "n_discordant": 0,
    }
    # all wrong everywhere: statsmodels alone would count the zeros as successes and divide 0 by 0
    assert r.cochrans_q(np.zeros((4, 3), dtype=bool))["p_value"] == 1.0


def test_cochrans_q_validation():
    with pytest.raises(DataError, match="at least 2 methods"):
        r.cochrans_q(np.ones((5, 1), dtype=bool))
    with pytest.raises(DataError, match="2-d"):
        r.cochrans_q(np.ones(5, dtype=bool))
    with pytest.raises(DataError, match="0/1"):
        r.cochrans_q(np.array([[1, 2], [0, 1]]))
    with pytest.raises(DataError, match="at least one example"):
        r.cochrans_q(np.zeros((0, 2), dtype=bool))


# ----------------------------------------------------------------------------- Mann-Whitney U


def pair_count_u(a, b) -> float:
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def test_mann_whitney_exact_tiny_samples():
    # a entirely below b: U = 0 pairs; exact null: 1 of C(6, 3) = 20 rank arrangements is this extreme
    res = r.mann_whitney([1, 2, 3], [4, 5, 6])
    assert res == pytest.approx({"u": 0.0, "p_value": 2 / 20, "n_a": 3, "n_b": 3})
    assert r.mann_whitney([1, 2, 3], [4, 5, 6], alternative="less")["p_value"] == pytest.approx(1 / 20)
    assert r.mann_whitney([1, 2, 3], [4, 5, 6], alternative="greater")["p_value"] == pytest.approx(1.0)
    assert r.mann_whitney([4, 5, 6], [1, 2, 3])["u"] == 9.0


def test_mann_whitney_u_counts_pairs_and_exact_p_by_enumeration():
    a, b = [3, 5, 8], [1, 4, 6, 7]
    # pairs with a > b: 3>1; 5>1, 5>4; 8>1, 8>4, 8>6, 8>7 -> U = 7
    assert pair_count_u(a, b) == 7
    res = r.mann_whitney(a, b)
    assert res["u"] == 7.0
    # exact two-sided p: share of the C(7, 3) = 35 rank sets of a whose U is at least as far from
    # the null mean 12 / 2 = 6 as 7 is
    pooled = sorted(a + b)
    extreme = 0
    for chosen in itertools.combinations(range(7), 3):
        ua = pair_count_u([pooled[i] for i in chosen], [pooled[i] for i in range(7) if i not in chosen])
        extreme += abs(ua - 6) >= 1
    assert res["p_value"] == pytest.approx(extreme / 35)


def test_mann_whitney_ties_count_half():
    res = r.mann_whitney([1, 2, 2], [2, 3])
    assert res["u"] == pair_count_u([1, 2, 2], [2, 3]) == 1.0
    assert 0.0 < res["p_value"] <= 1.0


def test_mann_whitney_validation():
    with pytest.raises(DataError, match="'a'.*at least one value"):
        r.mann_whitney([], [1.0])
    with pytest.raises(DataError, match="'b'.*finite"):
        r.mann_whitney([1.0], [float("nan")])
    with pytest.raises(DataError, match="'b'.*numbers"):
        r.mann_whitney([1.0], ["x"])
    with pytest.raises(ValueError, match="alternative"):
        r.mann_whitney([1.0], [2.0], alternative="bigger")


# ----------------------------------------------------------------------------- significance report


def test_significance_report_combines_both_tests():
    correct = {"baseline": CORRECT[:, 1], "cart": CORRECT[:, 0], "length": CORRECT[:, 2]}
    scores = {"baseline": [0.50, 0.52, 0.51], "cart": [0.60, 0.58, 0.59]}
    rep = r.significance_report(correct, scores, a="cart", b="baseline")
    assert rep["methods"] == ["baseline", "cart", "length"]
    assert rep["n_examples"] == 6
    assert rep["accuracy"] == pytest.approx({"baseline": 3 / 6, "cart": 5 / 6, "length": 2 / 6})
    # all three methods: the same table as CORRECT with columns permuted -> Q = 3.5
    assert rep["cochran"]["q"] == pytest.approx(3.5)
    assert rep["cochran"]["df"] == 2
    # cart vs baseline alone: McNemar with 2 vs 0 discordant examples -> Q = 2
    assert rep["cochran_pair"]["q"] == pytest.approx(2.0)
    # every cart run beats every baseline run: U = 3 * 3 = 9, exact two-sided p = 2 / 20
    assert rep["mann_whitney"] == pytest.approx({"u": 9.0, "p_value": 0.1, "n_a": 3, "n_b": 3})
    assert rep["mean_score_a"] == pytest.approx(0.59)
    assert rep["mean_score_b"] == pytest.approx(0.51)


def test_significance_report_validation():
    ok = {"a": [True, False], "b": [True, True]}
    scores = {"a": [0.1], "b": [0.2]}
    with pytest.raises(DataError, match="correct_by_method.*at least 2 methods"):
        r.significance_report({"a": [True]}, scores, "a", "b")
    with pytest.raises(DataError, match="same examples"):
        r.significance_report({"a": [True, False], "b": [True]}, scores, "a", "b")
    with pytest.raises(DataError, match="scores_by_method.*'b' missing"):
        r.significance_report(ok, {"a": [0.1]}, "a", "b")
    with pytest.raises(DataError, match="scores_by_method\\['b'\\].*at least one value"):
        r.significance_report(ok, {"a": [0.1], "b": []}, "a", "b")
    with pytest.raises(ValueError, match="two different methods"):
        r.significance_report(ok, scores, "a", "a")


# ----------------------------------------------------------------------------- runs


def test_best_on_validation_takes_first_of_ties_and_skips_missing():
    results = pd.DataFrame(
        {
            "method": ["A", "B", "A", "A", "B", "B"],
            "seed": [0, 0, 1, 2, 1, 2],
            "dev_accuracy": [0.80, np.nan, 0.85, 0.85, 0.70, 0.65],
            "micro_f1": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        },
        index=[10, 11, 12, 13, 14, 15],
    )
    best = r.best_on_validation(results)
    assert best["method"].tolist() == ["A", "B"]
    assert best["seed"].tolist() == [1, 1]  # A: seeds 1 and 2 tie at 0.85 -> the first; B: NaN skipped
    assert best.index.tolist() == [12, 14]
    assert best["micro_f1"].tolist() == [0.3, 0.5]
    renamed = results.rename(columns={"method": "m", "dev_accuracy": "val"})
    assert r.best_on_validation(renamed, method_col="m", score_col="val")["seed"].tolist() == [1, 1]


def test_best_on_validation_errors():
    results = pd.DataFrame({"method": ["A", "C"], "dev_accuracy": [0.5, np.nan]})
    with pytest.raises(DataError, match="'C' has no run"):
        r.best_on_validation(results)
    with pytest.raises(DataError, match="missing column.*dev_f1"):
        r.best_on_validation(results, score_col="dev_f1")
    with pytest.raises(DataError, match="dev_accuracy.*not a number"):
        r.best_on_validation(pd.DataFrame({"method": ["A"], "dev_accuracy": ["high"]}))


def test_aggregate_runs():
    results = pd.DataFrame(
        {
            "method": ["B", "A", "A", "A"],
            "micro_f1": [0.5, 0.7, 0.8, 0.9],
            "macro_f1": [0.4, 0.6, 0.6, 0.9],
        }
    )
    agg = r.aggregate_runs(results)
    assert agg.index.tolist() == ["B", "A"]
    assert agg.index.name == "method"
    assert agg.columns.tolist() == [
        *(f"micro_f1_{s}" for s in ("mean", "std", "min", "max")),
        *(f"macro_f1_{s}" for s in ("mean", "std", "min", "max")),
        "n",
    ]
    np.testing.assert_allclose(
        agg.loc["A", ["micro_f1_mean", "micro_f1_std", "micro_f1_min", "micro_f1_max"]], [0.8, 0.1, 0.7, 0.9]
    )
    assert agg.loc["A", "macro_f1_mean"] == pytest.approx(0.7)
    assert agg.loc["A", "n"] == 3 and agg.loc["B", "n"] == 1
    assert np.isnan(agg.loc["B", "micro_f1_std"])  # sample std of one run
    with pytest.raises(DataError, match="missing column"):
        r.aggregate_runs(results, metrics=("accuracy",))


def test_learning_curves_long_frame_skips_missing():
    histories = {
        "r1": [{"epoch": 1, "dev_accuracy": 0.5, "train_loss": 1.0}, {"epoch": 2, "train_loss": 0.8}],
        "r2": [{"dev_accuracy": 0.6}, {"dev_accuracy": None}, {"dev_accuracy": 0.7}],
        "r3": [],
    }
    curves = r.learning_curves(histories)
    assert curves.columns.tolist() == ["run", "epoch", "dev_accuracy"]
    assert curves.values.tolist() == [["r1", 1, 0.5], ["r2", 1, 0.6], ["r2", 3, 0.7]]
    loss = r.learning_curves(histories, metric="train_loss")
    assert loss["train_loss"].tolist() == [1.0, 0.8]
    assert r.learning_curves({}).columns.tolist() == ["run", "epoch", "dev_accuracy"]


# ----------------------------------------------------------------------------- comparisons


def test_per_example_diff_outcomes():
    diff = r.per_example_diff(["p1", "p2", "p3", "p4"], [0, 1, 2, 1], [0, 1, 0, 0], [0, 2, 2, 0])
    assert diff.columns.tolist() == ["id", "gold", "pred_a", "pred_b", "outcome"]
    assert diff["outcome"].tolist() == ["both right", "only A right", "only B right", "both wrong"]
    assert list(diff["outcome"].cat.categories) == list(r.OUTCOMES)
    counts = r.per_example_diff([1, 2], [0, 0], [0, 0], [0, 0])["outcome"].value_counts()
    assert counts.to_dict() == {"both right": 2, "only A right": 0, "only B right": 0, "both wrong": 0}
    # string labels work too
    assert r.per_example_diff([1], ["neutral"], ["neutral"], ["entailment"])["outcome"][0] == "only A right"
    with pytest.raises(DataError, match="ids.*ids=2, gold=1"):
        r.per_example_diff([1, 2], [0], [0], [0])


def test_results_matrix_keeps_order_of_first_appearance():
    results = pd.DataFrame(
        {
            "train_set": ["WANLI", "WANLI", "MultiNLI", "MultiNLI", "ANLI"],
            "test_set": ["HANS", "Diagnostics", "Diagnostics", "HANS", "HANS"],
            "accuracy": [89.40, 72.55, 68.47, 78.08, 80.58],
        }
    )
    table = r.results_matrix(results)
    assert table.index.tolist() == ["WANLI", "MultiNLI", "ANLI"]
    assert table.columns.tolist() == ["HANS", "Diagnostics"]
    assert table.loc["MultiNLI", "HANS"] == 78.08
    assert table.loc["WANLI", "Diagnostics"] == 72.55
    assert np.isnan(table.loc["ANLI", "Diagnostics"])  # not run
    dup = pd.concat([results, results.iloc[[0]]])
    with pytest.raises(DataError, match="more than one value.*'WANLI', 'HANS'"):
        r.results_matrix(dup)


def test_mark_best_ties_nan_and_direction():
    frame = pd.DataFrame(
        {
            "tie": [0.7, 0.7, 0.5],
            "nan": [np.nan, 0.3, 0.2],
            "empty": [np.nan, np.nan, np.nan],
            "text": ["x", "y", "z"],
        },
        index=["a", "b", "c"],
    )
    best = r.mark_best(frame)
    assert best.index.tolist() == ["a", "b", "c"] and best.columns.tolist() == frame.columns.tolist()
    assert best["tie"].tolist() == [True, True, False]
    assert best["nan"].tolist() == [False, True, False]
    assert not best["empty"].any() and not best["text"].any()
    lowest = r.mark_best(frame, higher_is_better=False)
    assert lowest["tie"].tolist() == [False, False, True]
    assert lowest["nan"].tolist() == [False, False, True]
    # on a results matrix: one bold cell per column
    matrix = pd.DataFrame({"HANS": [78.08, 89.40], "QNLI": [52.69, 76.81]}, index=["MultiNLI", "WANLI"])
    assert r.mark_best(matrix).values.tolist() == [[False, False], [True, True]]
