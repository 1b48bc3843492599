"""Per-example training-dynamics metrics: data maps (Swayamdipta et al., 2020) and friends.

Every function is a small pure function on numpy arrays. Shapes used throughout:

* ``logits`` / ``probs``: ``[E, N, C]`` (epochs, examples, classes)
* ``labels``: ``[N]`` integer gold labels in ``[0, C)``
* ``gold_probs``: ``[E, N]`` probability of the gold label after each epoch

Each docstring gives the formula and the direction of the score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import ambiguity
from cartomap.tasks.base import softmax

EASY = "easy-to-learn"
AMBIGUOUS = "ambiguous"
HARD = "hard-to-learn"
REGIONS: tuple[str, str, str] = (EASY, AMBIGUOUS, HARD)

#: Fraction for :func:`regions_by_rank`; one of the reference fractions (0.01 ... 0.75).
DEFAULT_RANK_FRACTION = 0.33
#: :func:`region_partition` by rank: the share of examples called ambiguous, the highest-variability
#: third (Dataset Cartography selects the top 33 % by variability; WaNLI seeds the top 25 % per label).
DEFAULT_AMBIGUOUS_FRACTION = 1 / 3
#: How :func:`region_partition` draws the line of the ambiguous region.
REGION_METHODS = ("rank", "threshold")
#: The map's second axis by default: the ambiguity score (:mod:`cartomap.scores.ambiguity`) the ambiguous
#: region is ranked by and the map draws across. The mean predictive entropy, chosen by the study in
#: docs/stability.md: with the default recording two seeds agree on it with Spearman 0.87 (SNLI) and 0.74
#: (MultiNLI) against variability's 0.59 and 0.63, and 79 % / 62 % of the examples keep their region in all
#: three seeds (variability: 56 % / 53 %). Cartography's variability stays one click away.
DEFAULT_AXIS = "mean_entropy"
#: :func:`regions_by_threshold`: easy needs confidence >= this (and low variability).
DEFAULT_EASY_CONF = 0.75
#: :func:`regions_by_threshold`: hard needs confidence <= this (and low variability).
DEFAULT_HARD_CONF = 0.25
#: Variability at or above which an example counts as ambiguous (the std of a
#: probability is at most 0.5, so 0.2 is already a strongly fluctuating example).
DEFAULT_AMBIGUOUS_VAR = 0.2
#: :func:`region_partition`: non-ambiguous examples split into easy / hard at this confidence.
DEFAULT_CONF_SPLIT = 0.5

#: The metrics of a unit's training dynamics that every task kind's table has (an example, a word of a
#: sentence, a label of an example), in :data:`METRIC_COLUMNS`' order; the others need the unit's class
#: logits (AUM, EL2N) or are the curricula's (threshold closeness, difficulty).
UNIT_METRICS: tuple[str, ...] = (
    "confidence",
    "variability",
    "correctness",
    "correct_count",
    "forgetfulness",
    "never_learned",
)
#: The columns of a run's metrics file (:func:`compute_metrics`), in order: every other list of metric
#: columns is taken from it.
METRIC_COLUMNS: tuple[str, ...] = (
    "id",
    "index",
    "label",
    "predicted",
    *UNIT_METRICS,
    "threshold_closeness",
    "aum",
    "el2n",
    "difficulty",
    "difficulty_code",
    *(name for name in ambiguity.MAP_SCORES if name != ambiguity.VARIABILITY),
    "region",
)


def metric_columns() -> tuple[str, ...]:
    """The columns of a metrics file written now: :data:`METRIC_COLUMNS`, with every ambiguity score
    registered on the map since (:func:`cartomap.scores.ambiguity.map_scores`) before ``region``."""
    extra = tuple(name for name in ambiguity.map_scores() if name not in METRIC_COLUMNS)
    return (*METRIC_COLUMNS[:-1], *extra, METRIC_COLUMNS[-1])


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
    return hit_columns(_correct(probs, labels))["correct_count"]


def correctness(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """correctness = (1/E) * sum_e [argmax_k p_e,k == y*], in [0, 1], shape [N]. Higher = easier."""
    return hit_columns(_correct(probs, labels))["correctness"]


def forgetfulness(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forgetting events (Toneva et al., 2019).

    counts[i] = #{e : correct_e(i) and not correct_{e+1}(i)} (correct -> incorrect transitions between
    consecutive epochs); never_learned[i] = example never predicted correctly. Higher counts = less
    stable / harder. The reference code writes 1000 for never-learned examples; here they get
    count 0 and ``never_learned=True``.
    """
    learned = hit_columns(_correct(probs, labels))
    return learned["forgetfulness"], learned["never_learned"]


def hit_columns(hits: np.ndarray) -> dict[str, np.ndarray]:
    """The map's columns of whether each unit was right at each recording, ``hits`` bool [E, N] (argmax ==
    gold): ``correctness`` (the share of recordings right, higher = easier), ``correct_count`` (how many),
    ``forgetfulness`` (right then wrong at the next, :func:`forgetfulness`) and ``never_learned``."""
    hits = np.asarray(hits, dtype=bool)
    return {
        "correctness": hits.mean(axis=0),
        "correct_count": hits.sum(axis=0).astype(np.int64),
        "forgetfulness": np.sum(hits[:-1] & ~hits[1:], axis=0).astype(np.int64),
        "never_learned": ~hits.any(axis=0),
    }


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


def cartcl_pp_difficulty_code(correct_count: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Cart-CL++ difficulty as in the public RoNLI code: s = (1 - correctness) + (1 - v if v < 0.5 else v),
    where correctness is the reference's td_metrics correctness: the integer *count* of correct epochs
    (``compute_correctness`` = sum of the trend in the RoNLI fork of train_dy_filtering.py).

    Lower = easier. As v < 0.5 for any probability std but the extreme 0/1 flip, s = 2 - count - v: a
    whole correct epoch outweighs any variability, so the list sorts by count (most correct first), then
    by variability (highest first). The gap to the fraction-based score grows with the number of epochs.
    """
    correct_count = np.asarray(correct_count, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    return (1.0 - correct_count) + np.where(var < 0.5, 1.0 - var, var)


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


@dataclass(frozen=True)
class RegionRule:
    """How every example gets one region (:func:`region_partition`).

    ``axis``: the ambiguity score the ambiguous region is drawn on (a name of
    :data:`cartomap.scores.ambiguity.MAP_SCORES`; default :data:`DEFAULT_AXIS`; ``variability`` is Dataset
    Cartography's). ``method="rank"`` (default): ambiguous = the ``fraction`` of examples with the highest
    value on the axis (ties by index), as Dataset Cartography and WaNLI select by rank: a score's scale
    depends on the number of epochs and on the model, so a fixed threshold means something else on every
    run. ``method="threshold"``: ambiguous = value on the axis >= ``ambiguous_var`` (None: the axis's own
    default, 0.2 for variability). Either way the rest is easy-to-learn when confidence >= ``conf_split``
    (the model's mean probability of the gold label is at least one half), else hard-to-learn.
    """

    method: str = "rank"
    fraction: float = DEFAULT_AMBIGUOUS_FRACTION
    ambiguous_var: float | None = None
    conf_split: float = DEFAULT_CONF_SPLIT
    axis: str = DEFAULT_AXIS

    def __post_init__(self) -> None:
        if self.method not in REGION_METHODS:
            raise DataError(
                f"unknown region rule {self.method!r}; expected one of {REGION_METHODS}", field="regions"
            )
        if not 0.0 <= self.fraction <= 1.0:
            raise DataError(f"must be in [0, 1], got {self.fraction}", field="fraction")
        if self.axis not in ambiguity.MAP_SCORES:
            raise DataError(
                f"unknown ambiguity axis {self.axis!r}; expected one of {', '.join(ambiguity.MAP_SCORES)}",
                field="ambiguity",
            )
        if self.ambiguous_var is None:
            object.__setattr__(self, "ambiguous_var", ambiguity.get(self.axis).threshold)

    @classmethod
    def for_kind(cls, kind, **overrides) -> RegionRule:
        """The default rule of a task kind's maps (:class:`cartomap.tasks.base.TaskKind`'s ``region_method``:
        a token run's is by threshold), with ``overrides`` (None values ignored)."""
        chosen = {k: v for k, v in overrides.items() if v is not None}
        return cls(**{"method": getattr(kind, "region_method", "rank"), **chosen})

    @classmethod
    def from_dict(cls, saved: dict | None) -> RegionRule:
        """The rule :meth:`to_dict` wrote; a dict saved before the rule had an axis meant variability."""
        if not isinstance(saved, dict):
            return cls()
        known = {k: v for k, v in saved.items() if k in cls.__dataclass_fields__}
        return cls(**{"axis": ambiguity.VARIABILITY, **known})

    @property
    def axis_label(self) -> str:
        """What the axis is called on the map ("variability", "mean entropy", ...)."""
        return ambiguity.get(self.axis).label

    def values(self, frame) -> np.ndarray:
        """The axis's values in a metrics or map frame (float [N]); DataError naming the column when the frame
        has none (metrics written before that score existed: computed again from the dynamics)."""
        if self.axis not in frame.columns:
            raise DataError(
                f"this map has no {self.axis} column ({self.axis_label}); its metrics predate it",
                field=self.axis,
            )
        return np.asarray(frame[self.axis], dtype=np.float64)

    def regions(self, frame) -> np.ndarray:
        """:func:`region_partition` of a metrics or map frame's confidence and this rule's axis."""
        return region_partition(np.asarray(frame["confidence"], dtype=np.float64), self.values(frame), self)

    def describe(self, values: np.ndarray | None = None) -> str:
        """The rule in words, with the cut it gives on ``values`` (the axis's values) when ranked."""
        name = self.axis_label
        if self.method == "rank":
            ambiguous = f"the {self.fraction:.0%} of examples with the highest {name}"
            if values is not None and len(values):
                cut = ambiguous_cut(np.asarray(values, dtype=np.float64), self.fraction)
                if cut is not None:
                    ambiguous += f" ({name} ≥ {cut:.3f} here)"
        else:
            ambiguous = f"{name} ≥ {self.ambiguous_var:g}"
        return (
            f"ambiguous = {ambiguous}; of the rest, easy-to-learn = confidence ≥ {self.conf_split:g}, "
            "hard-to-learn = below"
        )

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "fraction": self.fraction,
            "ambiguous_var": self.ambiguous_var,
            "conf_split": self.conf_split,
            "axis": self.axis,
        }


def ambiguous_cut(var: np.ndarray, fraction: float) -> float | None:
    """The lowest variability inside the top ``fraction`` by rank (None when that is no example)."""
    n = _rank_count(fraction, var.shape[0])
    if n == 0:
        return None
    return float(-np.partition(-np.asarray(var, dtype=np.float64), n - 1)[n - 1])  # the n-th highest


def ambiguous_shares(low: float = 0.05, high: float = 0.75, step: float = 0.01) -> list[float]:
    """The ambiguous shares a form offers for the rank rule: every ``step`` from ``low`` to ``high``, with
    the rule's default (:data:`DEFAULT_AMBIGUOUS_FRACTION`, a third) itself in place of its rounded
    neighbour, so a form left at its default draws the regions every other page and command draws (0.33
    of 600 examples is 198 ambiguous, a third is 200)."""
    count = int(round((high - low) / step)) + 1
    shares = [round(low + k * step, 10) for k in range(count)]
    if low <= DEFAULT_AMBIGUOUS_FRACTION <= high:
        nearest = min(range(count), key=lambda k: abs(shares[k] - DEFAULT_AMBIGUOUS_FRACTION))
        shares[nearest] = DEFAULT_AMBIGUOUS_FRACTION
    return shares


def region_partition(
    conf: np.ndarray, var: np.ndarray, rule: RegionRule | None = None, **overrides
) -> np.ndarray:
    """Every example in exactly one region (str array [N]) by ``rule`` (default :class:`RegionRule`:
    by rank); keyword ``overrides`` replace fields of the rule (``method="threshold"``, ...). ``var`` holds
    the values on the rule's axis (variability for Cartography's map; :meth:`RegionRule.regions` reads them
    from a frame).

    rank: ambiguous = the n = round(fraction * N) highest values (round half up, ties by index, exactly
    n); threshold: ambiguous = value >= ambiguous_var. Then easy-to-learn if c >= conf_split, else
    hard-to-learn.
    """
    rule = rule or RegionRule()
    if overrides:
        rule = RegionRule(**{**rule.to_dict(), **overrides})
    conf = np.asarray(conf, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    names = np.asarray(REGIONS, dtype=object)
    code = np.where(conf >= rule.conf_split, REGIONS.index(EASY), REGIONS.index(HARD)).astype(np.int8)
    if rule.method == "rank":
        ambiguous = top_by_rank(var, _rank_count(rule.fraction, var.shape[0]))
    else:
        ambiguous = var >= rule.ambiguous_var
    code[ambiguous] = REGIONS.index(AMBIGUOUS)
    return names[code]


def top_by_rank(values: np.ndarray, n: int) -> np.ndarray:
    """Bool mask of exactly ``n`` entries of ``values``: the n highest, ties at the cut by lower index,
    NaN below every number: the first n of a stable sort of ``-values`` (``np.argsort(-values,
    kind="stable")[:n]``), found by a partition in O(N) instead of a sort."""
    values = np.asarray(values, dtype=np.float64)
    mask = np.zeros(values.shape[0], dtype=bool)
    if n <= 0:
        return mask
    if n >= values.shape[0]:
        mask[:] = True
        return mask
    key = -values  # ascending order of key = descending values; NaN sorts last in both
    cut = np.partition(key, n - 1)[n - 1]
    if np.isnan(cut):  # every number is in, and the first NaNs by index fill up to n
        mask = ~np.isnan(key)
        tie = np.flatnonzero(~mask)
    else:
        mask = key < cut
        tie = np.flatnonzero(key == cut)
    mask[tie[: n - int(mask.sum())]] = True
    return mask


def correctness_bucket(correct_fraction: np.ndarray, n_epochs: int | None = None) -> np.ndarray:
    """Correctness as a label for colouring: with ``n_epochs`` = E the exact fraction "k/E" (correct in
    k of E epochs: "0/4", "1/4", ... "4/4"; the reference plot rounds these to one decimal, which turns
    0.25 and 0.75 into "0.2" and "0.8"); without it the fraction to two decimals ("0.25").

    Returns a str (object) array [N]; sort with :func:`bucket_order`, read back with :func:`bucket_value`.
    """
    frac = np.asarray(correct_fraction, dtype=np.float64)
    if n_epochs:
        k = np.round(frac * n_epochs).astype(np.int64)
        return np.char.add(np.char.mod("%d", k), f"/{int(n_epochs)}").astype(object)
    return np.char.mod("%.2f", frac).astype(object)


def bucket_value(bucket: str) -> float:
    """The fraction a correctness bucket stands for: "3/4" -> 0.75, "0.25" -> 0.25."""
    text = str(bucket)
    if "/" in text:
        k, e = text.split("/", 1)
        return int(k) / int(e) if int(e) else 0.0
    return float(text)


def bucket_order(buckets: Sequence[str]) -> list[str]:
    """Distinct correctness buckets sorted numerically (low correctness first)."""
    return sorted({str(b) for b in buckets}, key=bucket_value)


def burn_out_epochs(n_epochs: int, burn_out: int | None) -> int:
    """How many epochs the metrics use: the first ``burn_out`` (the reference's ``--burn_out``), all when
    None or larger than the number recorded. DataError below 1."""
    if burn_out is None:
        return n_epochs
    if int(burn_out) < 1:
        raise DataError(f"must be at least 1 epoch, got {burn_out}", field="burn_out")
    return min(n_epochs, int(burn_out))


# --------------------------------------------------------------------------- everything at once


def compute_metrics(
    logits: np.ndarray,
    labels: np.ndarray,
    ids: Sequence | None = None,
    *,
    regions: RegionRule | None = None,
    burn_out: int | None = None,
    burn_in: int = 0,
    el2n_epoch: int = 0,
) -> pd.DataFrame:
    """One row per example with every metric of this module.

        Columns: id, index, label, predicted (argmax at the last epoch used), confidence, variability,
        correctness (fraction), correct_count, forgetfulness, never_learned, threshold_closeness, aum,
        el2n, difficulty (Cart-CL++ paper variant), difficulty_code (RoNLI code variant, on the count) and
        region (:func:`region_partition` by ``regions``, default by rank). ``burn_out``: use only the first
        that many epochs (the reference's ``--burn_out``; None = all); ``burn_in``: then leave out the first that
    many (recordings early in training say more about the seed than about the example). ``ids`` default to the example index
        as a string. Works for E == 1 (variability 0, forgetfulness 0). ``frame.attrs`` holds ``n_epochs``
        (the epochs used), ``epochs_recorded``, ``burn_in`` and ``regions`` (the rule, :meth:`RegionRule.to_dict`).
    """
    logits, labels = _check_dynamics(logits, labels, "logits")
    recorded = logits.shape[0]
    if recorded == 0:
        raise DataError("no epochs: logits have shape [0, N, C]", field="logits")
    logits = logits[: burn_out_epochs(recorded, burn_out)]
    if int(burn_in) < 0 or int(burn_in) >= logits.shape[0]:
        raise DataError(
            f"must leave at least one of {logits.shape[0]} epochs, got {burn_in}", field="burn_in"
        )
    logits = logits[int(burn_in) :]
    n_epochs, n_examples, _ = logits.shape
    rule = regions or RegionRule()
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
    axes = {name: ambiguity.score(name, probs, labels, logits) for name in ambiguity.map_scores()}
    learned = hit_columns(_correct(probs, labels))
    counts = learned["correct_count"]
    frame = pd.DataFrame(
        {
            "id": ids_arr,
            "index": np.arange(n_examples, dtype=np.int64),
            "label": labels,
            "predicted": np.argmax(probs[-1], axis=-1).astype(np.int64),
            "confidence": conf,
            "variability": var,
            **learned,
            "threshold_closeness": threshold_closeness(conf),
            "aum": aum(logits, labels) if logits.shape[2] >= 2 else np.full(n_examples, np.nan),
            "el2n": el2n(probs, labels, epoch=el2n_epoch),
            "difficulty": cartcl_pp_difficulty(conf, var),
            "difficulty_code": cartcl_pp_difficulty_code(counts, var),
            **{name: values for name, values in axes.items() if name != ambiguity.VARIABILITY},
            "region": region_partition(conf, axes[rule.axis], rule),
        },
        columns=list(metric_columns()),
    )
    frame.attrs["n_epochs"] = int(n_epochs)
    frame.attrs["epochs_recorded"] = int(recorded)
    frame.attrs["burn_in"] = int(burn_in)
    frame.attrs["regions"] = rule.to_dict()
    return frame
