"""The agreement and ranking statistics pinned to the values of cartomap's own first implementations.

The numbers below were computed by the hand-written Fleiss' kappa, Krippendorff's alpha, Cohen's kappa,
AP, AUROC and percentile bootstrap that cartomap had before it took them from statsmodels,
krippendorff, scikit-learn and scipy: the libraries give the same values to 1e-12 (the bootstrap the
same resamples and intervals) on these fixtures (ties in the scores, missing ratings, resamples
without a positive).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.scores import agreement
from cartomap.scores import truth as stats
from cartomap.wanli.review_rules import kappa_of

TOLERANCE = 1e-12


def fixtures() -> dict:
    rng = np.random.default_rng(33)
    out = {}
    for m, (n, c) in ((2, (25, 3)), (3, (40, 4)), (5, (60, 5))):  # items x categories, m ratings each
        probs = rng.dirichlet(np.ones(c) * 0.7, size=n)
        out[f"fleiss_m{m}"] = np.stack([rng.multinomial(m, p) for p in probs])
    cats = np.array(["keep", "remove", "relabel:a", "relabel:b"], dtype=object)
    nominal = cats[rng.integers(0, 4, size=(30, 4))].astype(object)  # units x coders, 30 % missing
    nominal[rng.random((30, 4)) < 0.3] = None
    out["alpha_nominal"] = nominal
    numeric = rng.integers(1, 6, size=(40, 3)).astype(float)
    numeric[rng.random((40, 3)) < 0.25] = np.nan
    out["alpha_numeric"] = numeric
    labels = np.array(["entailment", "neutral", "contradiction"], dtype=object)
    a = labels[rng.integers(0, 3, size=80)]
    b = np.where(rng.random(80) < 0.6, a, labels[rng.integers(0, 3, size=80)])
    out["cohen"] = (a.tolist(), b.tolist())
    t = rng.random(300) < 0.2
    out["ranking"] = (t, np.round(rng.random(300) + 0.4 * t, 2))  # ties in the scores
    x = rng.normal(size=120)
    out["spearman"] = (x, 0.5 * x + rng.normal(size=120))
    return out


FIX = fixtures()


@pytest.mark.parametrize(
    ("m", "expected"), [(2, -0.17139334155363742), (3, 0.21509998131190425), (5, 0.2918024567560792)]
)
def test_fleiss_kappa_is_pinned(m, expected):
    assert abs(agreement.fleiss_kappa(FIX[f"fleiss_m{m}"]) - expected) <= TOLERANCE


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("nominal", 0.013621418506341021),
        ("ordinal", 0.1876303015801838),
        ("interval", 0.1777999530406199),
        ("ratio", 0.14732481461455016),
    ],
)
def test_krippendorff_alpha_is_pinned(level, expected):
    table = pd.DataFrame(FIX["alpha_nominal"]) if level == "nominal" else FIX["alpha_numeric"]
    assert abs(agreement.krippendorff_alpha(table, level) - expected) <= TOLERANCE


def test_cohen_kappa_is_pinned():
    assert abs(kappa_of(*FIX["cohen"]) - 0.4771241830065359) <= TOLERANCE


def test_ap_and_auroc_are_pinned():
    t, s = FIX["ranking"]
    assert abs(stats.average_precision(t, s) - 0.6648458340618296) <= TOLERANCE
    assert abs(stats.auroc(t, s) - 0.8056768558951966) <= TOLERANCE


def _close(row: dict, expected: dict) -> None:
    assert set(row) == set(expected)
    for key, value in expected.items():
        assert abs(row[key] - value) <= TOLERANCE, (key, row[key], value)


def test_bootstrap_intervals_are_pinned():
    t, s = FIX["ranking"]
    _close(
        stats.ranking_row(t, s, [10, 50], n_boot=200, seed=3),
        {
            "n": 300,
            "n_errors": 71,
            "ap": 0.6648458340618296,
            "ap_low": 0.5713622891552862,
            "ap_high": 0.7448228860324392,
            "auroc": 0.8056768558951966,
            "auroc_low": 0.7486915885196661,
            "auroc_high": 0.8557096824392839,
            "p@10": 1.0,
            "p@10_low": 1.0,
            "p@10_high": 1.0,
            "p@50": 0.64,
            "p@50_low": 0.48,
            "p@50_high": 0.82,
        },
    )
    _close(
        stats.spearman_row(*FIX["spearman"], n_boot=200, seed=5),
        {"n": 120, "spearman": 0.5043891936940065, "low": 0.382377839734548, "high": 0.6211806232316257},
    )


def test_bootstrap_leaves_out_resamples_without_a_positive():
    """2 errors in 15: about one resample in nine draws neither, where AP and AUROC are undefined."""
    t = np.zeros(15, dtype=bool)
    t[[3, 11]] = True
    s = np.array([0.6, 0.9, 0.8, 0.2, 0.3, 0.9, 0.0, 0.8, 0.8, 0.5, 0.3, 0.3, 0.3, 0.4, 0.5])
    _close(
        stats.ranking_row(t, s, [5], n_boot=300, seed=1),
        {
            "n": 15,
            "n_errors": 2,
            "ap": 0.10989010989010989,
            "ap_low": 0.06666666666666667,
            "ap_high": 0.2864285714285713,
            "auroc": 0.1346153846153846,
            "auroc_low": 0.0,
            "auroc_high": 0.35714285714285715,
            "p@5": 0.0,
            "p@5_low": 0.0,
            "p@5_high": 0.0,
        },
    )


def test_ap_and_auroc_are_scikit_learns():
    """The report's AP and AUROC are scikit-learn's numbers on the pinned fixture and its resamples, ties too."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    t, s = FIX["ranking"]
    rng = np.random.default_rng(0)
    for idx in [np.arange(t.size), *(rng.integers(0, t.size, t.size) for _ in range(20))]:
        assert abs(stats.average_precision(t[idx], s[idx]) - average_precision_score(t[idx], s[idx])) <= 1e-12
        assert abs(stats.auroc(t[idx], s[idx]) - roc_auc_score(t[idx], s[idx])) <= 1e-12
