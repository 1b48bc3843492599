"""Statistics of a truth report: how a score ranks known errors, and how it follows human disagreement.

Pure numerics on [N] arrays: :func:`average_precision` and :func:`auroc` (scikit-learn's
``average_precision_score`` / ``roc_auc_score``, NaN where a class is missing; their cost in a report's
bootstrap: docs/benchmarks.md), :func:`precision_at_k`, :func:`spearman` (scipy's ``spearmanr``), and
:func:`bootstrap` 95 % percentile intervals (``scipy.stats.bootstrap``: items resampled with
replacement, a fixed seed: every statistic of one report sees the same resamples).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cartomap.errors import DataError

N_BOOT = 1000
#: The k of precision@k: 50, 100 and 1 % of N (:func:`default_ks`).
FIXED_KS: tuple[int, ...] = (50, 100)


def default_ks(n: int) -> list[int]:
    """k = 50, 100 and 1 % of n (at least 1), those at most n, without repeats, in order."""
    ks = [*FIXED_KS, max(1, int(round(0.01 * n)))]
    return sorted({k for k in ks if k <= n})


def _pair(truth, scores) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(truth, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if t.ndim != 1 or t.shape != s.shape:
        raise DataError(f"truth {t.shape} and scores {s.shape} must be 1-d of one length", field="scores")
    return t, s


def average_precision(truth, scores) -> float:
    """AP = sum_n (R_n - R_{n-1}) P_n over the distinct score thresholds, highest first: scikit-learn's
    ``average_precision_score(truth, scores)``; NaN without positives (scikit-learn would warn and give
    0). Higher = the errors come first."""
    t, s = _pair(truth, scores)
    if not t.any():
        return float("nan")
    from sklearn.metrics import average_precision_score  # sklearn.metrics takes ~1 s to import

    return float(average_precision_score(t, s))


def auroc(truth, scores) -> float:
    """AUROC = P(score of an error > score of a clean example) + half the ties (Mann-Whitney U / (P N)):
    scikit-learn's ``roc_auc_score(truth, scores)``; NaN unless both kinds are present (one class only:
    scikit-learn would raise). 0.5 = chance, higher = the errors score higher."""
    t, s = _pair(truth, scores)
    if t.all() or not t.any():
        return float("nan")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(t, s))


def precision_at_k(truth, scores, k: int) -> float:
    """|top-k ∩ errors| / k, top-k = the k highest scores (ties by position); NaN when k > N."""
    t, s = _pair(truth, scores)
    if k < 1 or k > t.size:
        return float("nan")
    top = np.argsort(-s, kind="stable")[:k]
    return float(t[top].mean())


def spearman(a, b) -> float:
    """Spearman's rho of a and b over the rows where both are finite (scipy ``spearmanr``); NaN when
    fewer than 3 such rows or a constant column."""
    from scipy.stats import spearmanr

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return float("nan")
    return float(spearmanr(x[ok], y[ok]).statistic)


def bootstrap(
    stat: Callable[[np.ndarray], float], n: int, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of ``stat(idx)`` over ``n_boot`` resamples ``idx`` of range(n) drawn with
    replacement (``scipy.stats.bootstrap`` with ``rng=np.random.default_rng(seed)``: the same resamples
    for every statistic of one seed); resamples where the statistic is NaN (no error drawn) are left
    out of the percentiles. (NaN, NaN) when none is finite."""
    if n_boot < 1 or n < 1:
        return float("nan"), float("nan")
    if n == 1:  # every resample is the one item (scipy needs two)
        value = float(stat(np.zeros(1, dtype=np.int64)))
        return (value, value) if np.isfinite(value) else (float("nan"), float("nan"))
    import warnings

    from scipy.stats import bootstrap as resample  # scipy.stats takes ~1 s to import: only where used

    with warnings.catch_warnings():  # scipy's own interval is NaN with a NaN resample: taken below
        warnings.simplefilter("ignore")
        result = resample(
            (np.arange(n),),
            stat,
            n_resamples=int(n_boot),
            vectorized=False,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    values = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if not finite.size:
        return float("nan"), float("nan")
    if finite.size == values.size:
        return float(result.confidence_interval.low), float(result.confidence_interval.high)
    alpha = (1.0 - level) / 2
    return float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha))


def ranking_row(truth, scores, ks: Sequence[int], n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """AP, AUROC and P@k of ``scores`` for ``truth``, each with its bootstrap interval (``<stat>_low``,
    ``<stat>_high``)."""
    t, s = _pair(truth, scores)
    stats: dict[str, Callable] = {
        "ap": lambda i: average_precision(t[i], s[i]),
        "auroc": lambda i: auroc(t[i], s[i]),
    }
    for k in ks:
        stats[f"p@{k}"] = lambda i, k=k: precision_at_k(t[i], s[i], k)
    row: dict = {"n": int(t.size), "n_errors": int(t.sum())}
    whole = np.arange(t.size)
    for name, fn in stats.items():
        row[name] = fn(whole)
        row[f"{name}_low"], row[f"{name}_high"] = bootstrap(fn, t.size, n_boot, seed)
    return row


def spearman_row(a, b, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Spearman's rho of a and b with its bootstrap interval."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rho = spearman(x, y)
    low, high = bootstrap(lambda i: spearman(x[i], y[i]), x.size, n_boot, seed)
    return {"n": int(np.sum(np.isfinite(x) & np.isfinite(y))), "spearman": rho, "low": low, "high": high}
