"""Per-example training-dynamics metrics: data maps (Swayamdipta et al., 2020) and friends.

Every function is a small pure function on numpy arrays. Shapes used throughout:

* ``logits`` / ``probs``: ``[E, N, C]`` (epochs, examples, classes)
* ``labels``: ``[N]`` integer gold labels in ``[0, C)``
* ``gold_probs``: ``[E, N]`` probability of the gold label after each epoch

Each docstring gives the formula and the direction of the score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError

EASY = "easy-to-learn"
AMBIGUOUS = "ambiguous"
HARD = "hard-to-learn"
REGIONS: tuple[str, str, str] = (EASY, AMBIGUOUS, HARD)

#: Fraction for :func:`regions_by_rank`; one of the reference fractions (0.01 ... 0.75).
DEFAULT_RANK_FRACTION = 0.33
#: :func:`regions_by_threshold`: easy needs confidence >= this (and low variability).
DEFAULT_EASY_CONF = 0.75
#: :func:`regions_by_threshold`: hard needs confidence <= this (and low variability).
DEFAULT_HARD_CONF = 0.25
#: Variability at or above which an example counts as ambiguous (the std of a
#: probability is at most 0.5, so 0.2 is already a strongly fluctuating example).
DEFAULT_AMBIGUOUS_VAR = 0.2
#: :func:`region_partition`: non-ambiguous examples split into easy / hard at this confidence.
DEFAULT_CONF_SPLIT = 0.5

METRIC_COLUMNS: tuple[str, ...] = (
    "id",
    "index",
    "label",
    "predicted",
    "confidence",
    "variability",
    "correctness",
    "correct_count",
    "forgetfulness",
    "never_learned",
    "threshold_closeness",
    "aum",
    "el2n",
    "difficulty",
    "difficulty_code",
    "region",
)


# --------------------------------------------------------------------------- validation


def _check_dynamics(values: np.ndarray, labels: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(values as float array [E, N, C], labels as int64 [N])`` or raise DataError."""
    values = np.asarray(values)
    if values.ndim != 3:
        raise DataError(
            f"expected a 3-d array [epochs, examples, classes], got shape {values.shape}", field=name
        )
    if not np.issubdtype(values.dtype, np.floating):
        values = values.astype(np.float64)
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != values.shape[1]:
        raise DataError(
            f"expected {values.shape[1]} labels (one per example), got shape {labels.shape}", field="labels"
        )
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.equal(np.mod(labels, 1), 0)):
            raise DataError("labels must be integer class indices", field="labels")
        labels = labels.astype(np.int64)
    labels = labels.astype(np.int64, copy=False)
    n_classes = values.shape[2]
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        bad = int(np.flatnonzero((labels < 0) | (labels >= n_classes))[0])
        raise DataError(
            f"label {int(labels[bad])} of example {bad} is outside [0, {n_classes}) for {n_classes} classes",
            field="labels",
        )
    return values, labels


# --------------------------------------------------------------------------- basics


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax(z)_k = exp(z_k - max z) / sum_j exp(z_j - max z); numerically stable.

    Integer input is computed in float64; float input keeps its dtype.
    """
    z = np.asarray(logits)
    if not np.issubdtype(z.dtype, np.floating):
        z = z.astype(np.float64)
    shifted = z - np.max(z, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)


def gold_probabilities(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """p_e(y*) = probs[e, i, labels[i]]: the gold-label probability, shape [E, N]."""
    probs = np.asarray(probs)
    labels = np.asarray(labels, dtype=np.int64)
    idx = np.broadcast_to(labels[None, :, None], (probs.shape[0], probs.shape[1], 1))
    return np.take_along_axis(probs, idx, axis=-1)[..., 0]


def confidence(gold_probs: np.ndarray) -> np.ndarray:
    """confidence = mean_e p_e(y*), shape [N]. Higher = easier (model sure of the gold label)."""
    return np.mean(np.asarray(gold_probs), axis=0)


def variability(gold_probs: np.ndarray) -> np.ndarray:
    """variability = std_e p_e(y*) (population std, ddof=0), shape [N]. Higher = more ambiguous.

    Zero when there is a single epoch.
    """
    return np.std(np.asarray(gold_probs), axis=0, ddof=0)


def _correct(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[E, N] bool: argmax_k probs[e, i, k] == labels[i] (first maximum wins ties, as np.argmax)."""
    return np.argmax(np.asarray(probs), axis=-1) == np.asarray(labels)[None, :]


def correct_counts(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Number of epochs with argmax == gold, int [N] (what the reference stores as "correctness")."""
    return _correct(probs, labels).sum(axis=0).astype(np.int64)


def correctness(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """correctness = (1/E) * sum_e [argmax_k p_e,k == y*], in [0, 1], shape [N]. Higher = easier."""
    return _correct(probs, labels).mean(axis=0)


def forgetfulness(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forgetting events (Toneva et al., 2019).

    counts[i] = #{e : correct_e(i) and not correct_{e+1}(i)} (correct -> incorrect transitions between
    consecutive epochs); never_learned[i] = example never predicted correctly. Higher counts = less
    stable / harder. The reference code writes 1000 for never-learned examples; here they get
    count 0 and ``never_learned=True``.
    """
    correct = _correct(probs, labels)
    counts = np.sum(correct[:-1] & ~correct[1:], axis=0).astype(np.int64)
    never_learned = ~np.any(correct, axis=0)
    return counts, never_learned


def threshold_closeness(conf: np.ndarray) -> np.ndarray:
    """threshold_closeness = c * (1 - c); maximal (0.25) at c = 0.5. Higher = closer to the decision."""
    conf = np.asarray(conf, dtype=np.float64)
    return conf * (1.0 - conf)


def aum(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Area under the margin (Pleiss et al., 2020).

    AUM_i = mean_e (z_e,i[y_i] - max_{k != y_i} z_e,i[k]) on raw logits, shape [N].
    Lower (especially negative) = more likely mislabelled.
    """
    logits, labels = _check_dynamics(logits, labels, "logits")
    if logits.shape[2] < 2:
        raise DataError("AUM needs at least 2 classes", field="logits")
    logits = logits.astype(np.float64, copy=False)
    gold = gold_probabilities(logits, labels)
    mask = np.zeros(logits.shape[1:], dtype=bool)
    mask[np.arange(logits.shape[1]), labels] = True
    others = np.where(mask[None], -np.inf, logits)
    return np.mean(gold - np.max(others, axis=-1), axis=0)


def el2n(probs: np.ndarray, labels: np.ndarray, epoch: int = 0) -> np.ndarray:
    """EL2N (Paul et al., 2021): ||softmax_e - onehot(y)||_2 at epoch index ``epoch``, shape [N].

    Default the first logged epoch ("early in training"); negative indices count from the end.
    Higher = harder / more important to keep.
    """
    probs = np.asarray(probs)
    labels = np.asarray(labels, dtype=np.int64)
    p = probs[epoch]
    onehot = np.zeros_like(p)
    onehot[np.arange(p.shape[0]), labels] = 1.0
    return np.linalg.norm(p - onehot, axis=-1)


def cartcl_pp_difficulty(conf: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Cart-CL++ difficulty (RoNLI paper): s = 1 - c + v if c > 0.5 else 3 - c - v.

    Range [0.5, 3]; lower = easier (trained on first). Confident examples score in [0.5, 1.5],
    the rest in (1.5, 3]: within the low-confidence half, *lower* variability is harder.
    """
    conf = np.asarray(conf, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    return np.where(conf > 0.5, 1.0 - conf + var, 3.0 - conf - var)


def cartcl_pp_difficulty_code(correct_fraction: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Cart-CL++ difficulty as in the public RoNLI code: s = (1 - correctness) + (1 - v if v < 0.5 else v).

    Lower = easier. Note v < 0.5 for any probability std except the extreme 0/1 flip, so in practice
    s = 2 - correctness - v.
    """
    correct_fraction = np.asarray(correct_fraction, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    return (1.0 - correct_fraction) + np.where(var < 0.5, 1.0 - var, var)


# --------------------------------------------------------------------------- regions


def _rank_count(fraction: float, n: int) -> int:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    return min(n, int(np.floor(fraction * n + 0.5)))  # round half up, deterministic


def regions_by_rank(
    conf: np.ndarray, var: np.ndarray, fraction: float = DEFAULT_RANK_FRACTION
) -> dict[str, np.ndarray]:
    """Reference selection by rank: n = round(fraction * N) examples per region (round half up).

    hard-to-learn = the n lowest confidence; ambiguous = the n highest variability;
    easy-to-learn = the n highest confidence. Ties are broken by index (stable sort), exactly n each.
    Regions may overlap and do not cover the data. Returns {region: bool mask [N]}.
    """
    conf = np.asarray(conf, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    n_total = conf.shape[0]
    n = _rank_count(fraction, n_total)

    def pick(order: np.ndarray) -> np.ndarray:
        mask = np.zeros(n_total, dtype=bool)
        mask[order[:n]] = True
        return mask

    return {
        EASY: pick(np.argsort(-conf, kind="stable")),
        AMBIGUOUS: pick(np.argsort(-var, kind="stable")),
        HARD: pick(np.argsort(conf, kind="stable")),
    }


def regions_by_threshold(
    conf: np.ndarray,
    var: np.ndarray,
    *,
    easy_conf: float = DEFAULT_EASY_CONF,
    hard_conf: float = DEFAULT_HARD_CONF,
    ambiguous_var: float = DEFAULT_AMBIGUOUS_VAR,
) -> dict[str, np.ndarray]:
    """Regions by fixed thresholds; disjoint, but examples in between belong to none.

    easy-to-learn: c >= easy_conf and v < ambiguous_var; hard-to-learn: c <= hard_conf and
    v < ambiguous_var; ambiguous: v >= ambiguous_var. Returns {region: bool mask [N]}.
    """
    conf = np.asarray(conf, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    low_var = var < ambiguous_var
    return {
        EASY: (conf >= easy_conf) & low_var,
        AMBIGUOUS: var >= ambiguous_var,
        HARD: (conf <= hard_conf) & low_var,
    }


def region_partition(
    conf: np.ndarray,
    var: np.ndarray,
    *,
    ambiguous_var: float = DEFAULT_AMBIGUOUS_VAR,
    conf_split: float = DEFAULT_CONF_SPLIT,
) -> np.ndarray:
    """Every example in exactly one region (str array [N]).

    ambiguous if v >= ambiguous_var; else easy-to-learn if c >= conf_split; else hard-to-learn.
    """
    conf = np.asarray(conf, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    out = np.where(conf >= conf_split, EASY, HARD).astype(object)
    out[var >= ambiguous_var] = AMBIGUOUS
    return out


def correctness_bucket(correct_fraction: np.ndarray, n_epochs: int | None = None) -> np.ndarray:
    """Correctness as a label for colouring, as in the reference plot: f"{fraction:.1f}" ("0.0" ... "1.0").

    With ``n_epochs`` the fraction is first snapped to the nearest k / n_epochs (removes float noise
    from stored fractions). Returns a str (object) array [N]; sort with :func:`bucket_order`.
    """
    frac = np.asarray(correct_fraction, dtype=np.float64)
    if n_epochs:
        frac = np.round(frac * n_epochs) / n_epochs
    return np.char.mod("%.1f", frac).astype(object)


def bucket_order(buckets: Sequence[str]) -> list[str]:
    """Distinct correctness buckets sorted numerically (low correctness first)."""
    return sorted({str(b) for b in buckets}, key=float)


# --------------------------------------------------------------------------- everything at once


def compute_metrics(
    logits: np.ndarray,
    labels: np.ndarray,
    ids: Sequence | None = None,
    *,
    ambiguous_var: float = DEFAULT_AMBIGUOUS_VAR,
    conf_split: float = DEFAULT_CONF_SPLIT,
    el2n_epoch: int = 0,
) -> pd.DataFrame:
    """One row per example with every metric of this module.

    Columns: id, index, label, predicted (argmax at the last epoch), confidence, variability,
    correctness (fraction), correct_count, forgetfulness, never_learned, threshold_closeness, aum,
    el2n, difficulty (Cart-CL++ paper variant), difficulty_code (RoNLI code variant) and region
    (:func:`region_partition`). ``ids`` default to the example index as a string. Works for E == 1
    (variability 0, forgetfulness 0). ``frame.attrs["n_epochs"]`` holds E.
    """
    logits, labels = _check_dynamics(logits, labels, "logits")
    n_epochs, n_examples, _ = logits.shape
    if n_epochs == 0:
        raise DataError("no epochs: logits have shape [0, N, C]", field="logits")
    if not np.all(np.isfinite(logits)):
        e, i = np.argwhere(~np.all(np.isfinite(logits), axis=-1))[0]
        raise DataError(f"non-finite logit for example {int(i)} at epoch index {int(e)}", field="logits")
    if ids is None:
        ids_arr = np.arange(n_examples).astype(str).astype(object)
    else:
        ids_arr = np.asarray(list(ids), dtype=object)
        if ids_arr.shape != (n_examples,):
            raise DataError(f"expected {n_examples} ids, got {len(ids_arr)}", field="ids")

    probs = softmax(logits.astype(np.float64, copy=False))
    gold = gold_probabilities(probs, labels)
    conf = confidence(gold)
    var = variability(gold)
    corr = correctness(probs, labels)
    forget, never = forgetfulness(probs, labels)
    frame = pd.DataFrame(
        {
            "id": ids_arr,
            "index": np.arange(n_examples, dtype=np.int64),
            "label": labels,
            "predicted": np.argmax(probs[-1], axis=-1).astype(np.int64),
            "confidence": conf,
            "variability": var,
            "correctness": corr,
            "correct_count": correct_counts(probs, labels),
            "forgetfulness": forget,
            "never_learned": never,
            "threshold_closeness": threshold_closeness(conf),
            "aum": aum(logits, labels) if logits.shape[2] >= 2 else np.full(n_examples, np.nan),
            "el2n": el2n(probs, labels, epoch=el2n_epoch),
            "difficulty": cartcl_pp_difficulty(conf, var),
            "difficulty_code": cartcl_pp_difficulty_code(corr, var),
            "region": region_partition(conf, var, ambiguous_var=ambiguous_var, conf_split=conf_split),
        },
        columns=list(METRIC_COLUMNS),
    )
    frame.attrs["n_epochs"] = int(n_epochs)
    return frame
