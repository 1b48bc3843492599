"""Synthetic label noise and how well a suspect score ranks the planted flips.

Flip a known set of labels (:func:`flip_labels`), score every example with a method turned into
"higher = more suspect" (:func:`margin_scores`, :func:`datamap_scores`, :func:`aum_scores`,
:func:`cleanlab_scores`), and measure the ranking against the flipped mask (:func:`ranking_report`).
All functions are pure; nothing here trains a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cartomap.errors import DataError
from cartomap.scores.consensus import as_labels, check_logits
from cartomap.scores.truth import average_precision

SYMMETRIC = "symmetric"
ASYMMETRIC = "asymmetric"
#: Default asymmetric pairs ``(from, to)``: neutral -> entailment and entailment -> neutral.
DEFAULT_PAIRS: tuple[tuple[int, int], ...] = ((1, 0), (0, 1))


# --------------------------------------------------------------------------- planting noise


def n_to_flip(n: int, fraction: float) -> int:
    """round(fraction * n) with Python's ``round`` (halves go to the even integer)."""
    return int(round(float(fraction) * int(n)))


def flip_labels(
    labels,
    fraction: float,
    n_classes: int,
    mode: str = SYMMETRIC,
    pairs: Sequence[tuple[int, int]] = DEFAULT_PAIRS,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Flip exactly ``round(fraction * N)`` labels; return ``(noisy_labels, flipped_mask)``.

    The flipped examples are drawn uniformly without replacement by ``np.random.default_rng(seed)``.

    * ``symmetric``: every example is eligible; a flipped label becomes a uniformly random *other* class.
    * ``asymmetric``: only examples whose label is the source of a pair ``(from, to)`` are eligible,
      and their label becomes ``to`` (e.g. ``((1, 0), (0, 1))``: neutral <-> entailment).

    Every flipped label differs from the original, so ``flipped_mask == (noisy != labels)``.
    DataError (a ValueError) if there are fewer eligible examples than flips.
    """
    if int(n_classes) != n_classes or n_classes < 2:
        raise DataError(f"n_classes must be an integer >= 2, got {n_classes!r}", field="n_classes")
    n_classes = int(n_classes)
    y = as_labels(labels, "labels", n_classes=n_classes)
    if not 0.0 <= float(fraction) <= 1.0:
        raise DataError(f"fraction must be in [0, 1], got {fraction!r}", field="fraction")
    n_flip = n_to_flip(y.size, fraction)
    rng = np.random.default_rng(seed)

    if mode == SYMMETRIC:
        eligible = np.arange(y.size)
        mapping = None
    elif mode == ASYMMETRIC:
        mapping: dict[int, int] = {}
        for pair in pairs:
            src, dst = (int(v) for v in pair)
            if not (0 <= src < n_classes and 0 <= dst < n_classes) or src == dst:
                raise DataError(
                    f"pair {pair!r} must name two different classes in [0, {n_classes})", field="pairs"
                )
            if src in mapping and mapping[src] != dst:
                raise DataError(f"class {src} has two targets ({mapping[src]} and {dst})", field="pairs")
            mapping[src] = dst
        eligible = np.flatnonzero(np.isin(y, list(mapping)))
    else:
        raise DataError(f"mode must be {SYMMETRIC!r} or {ASYMMETRIC!r}, got {mode!r}", field="mode")

    if n_flip > eligible.size:
        raise DataError(
            f"cannot flip {n_flip} labels ({fraction} of {y.size}): only {eligible.size} eligible examples"
            + (f" with a label in pairs {tuple(pairs)}" if mode == ASYMMETRIC else ""),
            field="fraction",
        )
    chosen = np.sort(rng.choice(eligible, size=n_flip, replace=False)) if n_flip else np.array([], np.int64)
    noisy = y.copy()
    if mapping is None:
        offsets = rng.integers(1, n_classes, size=chosen.size)  # uniform over the n_classes - 1 others
        noisy[chosen] = (y[chosen] + offsets) % n_classes
    else:
        noisy[chosen] = [mapping[int(c)] for c in y[chosen]]
    flipped = np.zeros(y.size, dtype=bool)
    flipped[chosen] = True
    return noisy, flipped


# --------------------------------------------------------------------------- evaluating a ranking


def ranking_report(scores, flipped_mask) -> dict:
    """How well ``scores`` (higher = more suspect) rank the flipped examples first.

    With k = number flipped and top-k = the k highest scores (ties broken by index order):

    * ``precision_at_k`` = |top-k ∩ flipped| / k
    * ``recall_at_k`` = |top-k ∩ flipped| / #flipped (equal to precision since k = #flipped)
    * ``average_precision``: :func:`cartomap.scores.truth.average_precision` (the one definition:
      ``sklearn.metrics.average_precision_score(flipped, scores)``)

    All three in [0, 1], higher = better detector; NaN when nothing (or everything) is flipped
    for AP, NaN for precision/recall when nothing is flipped.
    """
    s = np.asarray(scores, dtype=np.float64)
    f = np.asarray(flipped_mask, dtype=bool)
    if s.ndim != 1 or f.shape != s.shape:
        raise DataError(
            f"scores {s.shape} and flipped_mask {f.shape} must be 1-d of the same length", field="scores"
        )
    if not np.all(np.isfinite(s)):
        raise DataError("scores must be finite", field="scores")
    k = int(f.sum())
    if k == 0:
        p_at_k = r_at_k = float("nan")
    else:
        top = np.argsort(-s, kind="stable")[:k]
        hits = int(f[top].sum())
        p_at_k = hits / k
        r_at_k = hits / k
    ap = average_precision(f, s) if 0 < k < f.size else float("nan")
    return {
        "n": int(f.size),
        "n_flipped": k,
        "k": k,
        "precision_at_k": p_at_k,
        "recall_at_k": r_at_k,
        "average_precision": ap,
    }


# --------------------------------------------------------------------------- suspect scores


def margin_scores(logits, labels) -> np.ndarray:
    """s_i = max_{k != y_i} z_i,k - z_i[y_i] on raw (k-fold held-out) logits, float [N].

    Higher = more suspect. On a mismatch this equals :func:`cartomap.scores.consensus.model_confidence`
    (> 0: the predicted class beats the gold one by that much); on a correct prediction it is the
    negated margin (<= 0), so the score is one monotone ranking over all examples.
    """
    z, y = check_logits(logits, labels)
    rows = np.arange(z.shape[0])
    gold = z[rows, y]
    others = z.copy()
    others[rows, y] = -np.inf
    return np.max(others, axis=1) - gold


def datamap_scores(conf) -> np.ndarray:
    """s = 1 - confidence (mean gold-label probability over epochs). Higher = more suspect."""
    return 1.0 - np.asarray(conf, dtype=np.float64)


def aum_scores(aum_values) -> np.ndarray:
    """s = -AUM (area under the margin). Higher = more suspect (AUM low / negative)."""
    return -np.asarray(aum_values, dtype=np.float64)


def _check_pred_probs(pred_probs, noisy_labels) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pred_probs, dtype=np.float64)
    if p.ndim != 2:
        raise DataError(f"expected a 2-d array [examples, classes], got shape {p.shape}", field="pred_probs")
    y = as_labels(noisy_labels, "noisy_labels", n=p.shape[0], n_classes=p.shape[1])
    return p, y


def cleanlab_scores(pred_probs, noisy_labels) -> np.ndarray:
    """s = 1 - cleanlab.rank.get_label_quality_scores(labels, pred_probs) (self-confidence by default).

    ``pred_probs`` should be out-of-sample (k-fold held-out) probabilities. Higher = more suspect.
    """
    from cleanlab.rank import get_label_quality_scores

    p, y = _check_pred_probs(pred_probs, noisy_labels)
    return 1.0 - np.asarray(get_label_quality_scores(y, p), dtype=np.float64)


def cleanlab_issues(pred_probs, noisy_labels) -> np.ndarray:
    """Bool mask [N]: ``cleanlab.filter.find_label_issues(labels, pred_probs)``; True = likely mislabelled.

    One job: cleanlab's default forks a process pool, and a fork of a process with threads (a Ray driver,
    torch's pools, a dashboard) can hang for ever on a lock another thread held; the work is small."""
    from cleanlab.filter import find_label_issues

    p, y = _check_pred_probs(pred_probs, noisy_labels)
    return np.asarray(find_label_issues(y, p, n_jobs=1), dtype=bool)
