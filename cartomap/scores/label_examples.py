"""A multi-label example scored from its labels, pure numpy: the per-example side of
:mod:`cartomap.scores.multilabel`'s per-(example, label) metrics.

An example's score is an aggregation of its labels' scores picked by name (:data:`EXAMPLE_METHODS`:
``min``, the default, as a sentence is as good as its worst word in token classification; ``mean``;
``present_only``; cleanlab's ``softmin`` and ``ema``), with its worst label; the combined map of a run
(:func:`example_metrics`, :func:`combined_map`) puts each example where its worst label is (``min``) or
at its labels' centroid.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import aggregate, ambiguity, metrics
from cartomap.scores.columns import score_columns
from cartomap.scores.multilabel import (
    DEFAULT_EMA_ALPHA,
    DEFAULT_SOFTMIN_TEMPERATURE,
    check_gold,
    dense_values,
    pair_grid,
    pairs_from_units,
)
from cartomap.tasks.units import Unit

SCORE_COLUMNS: tuple[str, ...] = ("example", "n_scored", "score", "worst_label", "worst_score")
EXAMPLE_COLUMNS: tuple[str, ...] = (
    "example",
    "id",
    "n_labels",
    "n_present",
    "n_scored",
    "confidence",
    "variability",
    "correctness",
    "forgetfulness",
    "worst_label",
    "worst_label_name",
    "worst_confidence",
    *(name for name in ambiguity.MAP_SCORES if name != ambiguity.VARIABILITY),  # where the pairs have them
    "region",
)


def _by_example(
    method: str, scores: np.ndarray, present: np.ndarray, **options
) -> tuple[np.ndarray, np.ndarray]:
    """(the scores [N] of the examples by the aggregation ``method`` of :mod:`cartomap.scores.aggregate`
    over the rows of ``scores`` [N, L], label by label; the labels counted [N, L] bool)."""
    return aggregate.aggregate(scores, method=method, unit=Unit.LABEL, present=present, **options)


def min_score(scores: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """score(i) = min over the labels j of score(i, j): an example is as good as its worst label
    (cleanlab's token default, here for labels; :func:`cartomap.scores.aggregate.group_min`). Lower =
    more suspect / harder.

    Like every aggregation of :data:`EXAMPLE_METHODS` it takes the scores [N, L] and the gold matrix
    [N, L] and returns (the scores [N], the labels counted [N, L] bool)."""
    return _by_example("min", scores, present)


def mean_score(scores: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """score(i) = (1/L) sum_j score(i, j) (:func:`cartomap.scores.aggregate.group_mean`). Lower = more
    suspect / harder; with many labels the usual "absent and rightly so" labels pull it up, so one bad
    label moves it little."""
    return _by_example("mean", scores, present)


def present_only_score(scores: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """score(i) = mean over the gold labels j of example i of score(i, j)
    (:func:`cartomap.scores.aggregate.group_mean` counting the present labels only): how well the labels
    the example has are learned, the absent ones left out. Lower = more suspect / harder; NaN for an
    example with no label."""
    return _by_example("present_only", scores, present)


def softmin_score(
    scores: np.ndarray, present: np.ndarray, temperature: float = DEFAULT_SOFTMIN_TEMPERATURE
) -> tuple[np.ndarray, np.ndarray]:
    """score(i) = sum_j score(i, j) * softmax_j((1 - score(i, j)) / t), cleanlab's multi-label
    ``softmin`` aggregation (default t = 0.1; :func:`cartomap.scores.aggregate.group_softmin`): a
    weighted mean whose weights grow as a label's score falls; t = 0 is :func:`min_score`, t = inf
    :func:`mean_score`. Lower = more suspect / harder."""
    return _by_example("softmin", scores, present, temperature=temperature)


def ema_score(
    scores: np.ndarray, present: np.ndarray, alpha: float = DEFAULT_EMA_ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """cleanlab's default multi-label aggregation (:func:`cartomap.scores.aggregate.group_ema`): the
    label scores of an example sorted from highest to lowest, s_(1) >= ... >= s_(L); EMA_1 = s_(1),
    EMA_k = alpha * s_(k) + (1 - alpha) * EMA_k-1; score = EMA_L (default alpha 0.8): mostly the lowest
    scores. Lower = more suspect / harder."""
    return _by_example("ema", scores, present, alpha=alpha)


#: The example aggregations (:func:`cartomap.scores.aggregate.names` for ``"label"``) as functions:
#: f(label scores [N, L], gold [N, L], **options) -> (scores [N], labels counted [N, L]).
EXAMPLE_METHODS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "min": min_score,
    "mean": mean_score,
    "present_only": present_only_score,
    "softmin": softmin_score,
    "ema": ema_score,
}


def example_method(name: str) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The aggregation ``name`` offered for examples (:func:`cartomap.scores.aggregate.aggregation`) as
    f(label scores, gold, **options) -> (scores, labels counted): the function of :data:`EXAMPLE_METHODS`
    for a built-in name; DataError listing the names otherwise."""
    aggregate.aggregation(name, Unit.LABEL)
    return EXAMPLE_METHODS.get(name) or functools.partial(_by_example, name)


def example_scores(
    label_scores: np.ndarray, gold: np.ndarray | None = None, *, method: str = "min", **options
) -> pd.DataFrame:
    """One row per example (:data:`SCORE_COLUMNS`): its score by ``method`` (:data:`EXAMPLE_METHODS`;
    ``options`` such as ``temperature`` or ``alpha`` go to it) over its labels' scores, how many labels
    the method counted, and its worst label: the label index with the lowest score among those counted
    (the lowest index among equals) and that score; -1 and NaN when none is counted.

    ``label_scores`` [N, L] is any per-(example, label) score where lower = worse (confidence,
    correctness, a label quality score; :func:`cartomap.scores.multilabel.to_dense` makes the matrix from the long table); the
    example score keeps that direction. ``gold`` [N, L] is needed by ``present_only``.
    """
    score_by = example_method(method)
    scores = np.asarray(label_scores, dtype=np.float64)
    if scores.ndim != 2:
        raise DataError(
            f"expected a matrix [examples, labels], got shape {scores.shape}", field="label_scores"
        )
    if not np.all(np.isfinite(scores)):
        raise DataError(
            "expected finite scores (a label without a score cannot be ranked)", field="label_scores"
        )
    if gold is None:
        if aggregate.aggregation(method, Unit.LABEL).needs_present:
            raise DataError(f"{method} needs the gold labels", field="gold")
        present = np.zeros(scores.shape, dtype=bool)
    else:
        present = check_gold(gold, scores.shape)
    values, counted = score_by(scores, present, **options)
    rows = np.arange(len(scores))
    any_counted = counted.any(axis=1)
    worst = np.full(len(scores), -1, dtype=np.int64)
    worst_score = np.full(len(scores), np.nan)
    if scores.shape[1]:
        masked = np.where(counted, scores, np.inf)
        lowest = np.argmin(masked, axis=1)  # the first minimum: the lowest label index among equals
        worst[any_counted] = lowest[any_counted]
        worst_score[any_counted] = masked[rows, lowest][any_counted]
    return pd.DataFrame(
        {
            "example": rows.astype(np.int64),
            "n_scored": counted.sum(axis=1).astype(np.int64),
            "score": np.asarray(values, dtype=np.float64),
            "worst_label": worst,
            "worst_score": worst_score,
        },
        columns=list(SCORE_COLUMNS),
    )


def example_metrics(
    pairs: pd.DataFrame, *, method: str = "min", regions: metrics.RegionRule | None = None, **options
) -> pd.DataFrame:
    """The combined data map, one row per example (:data:`EXAMPLE_COLUMNS`), from the table of
    :func:`cartomap.scores.multilabel.label_metrics` (rows in any order).

    confidence = the example score of ``method`` (:func:`example_scores`) over its labels'
    confidences; worst_label = the counted label with the lowest confidence. With ``min`` the example
    sits exactly where its worst label does: variability, correctness, forgetfulness and every other
    score column of a label unit's map the pairs have (:func:`cartomap.scores.columns.score_columns`) are
    that label's. With any other method they are the means over the labels the method counts (all labels,
    or the gold ones for ``present_only``), so the example sits at the centroid of its labels' points.
    region = :func:`cartomap.scores.metrics.region_partition` over the examples (by ``regions``);
    an example with no counted label (``present_only``, no gold label) has NaN metrics and no region.
    """
    grid = pair_grid(pairs)
    n, n_labels = grid[2], grid[3]

    def to_dense(column: str) -> np.ndarray:  # the table's column as [N, L], keys checked once
        return dense_values(pairs, column, *grid)

    conf = to_dense("confidence").astype(np.float64)
    present = to_dense("present").astype(bool)
    table = example_scores(conf, present, method=method, **options)
    counted_any = table["worst_label"].to_numpy() >= 0
    worst = np.maximum(table["worst_label"].to_numpy(), 0)
    rows = np.arange(n)
    # the labels each example's score counted, for the means (min: its worst label alone)
    counted = None if method == "min" else example_method(method)(conf, present, **options)[1]
    out: dict[str, np.ndarray] = {}
    own = ("confidence", ambiguity.VARIABILITY, "correctness", "forgetfulness")
    axes = [c for c in score_columns(Unit.LABEL) if c not in own and c in pairs.columns]
    for column in (*own[1:], *axes):
        values = to_dense(column).astype(np.float64)
        if method == "min":
            picked = values[rows, worst] if n_labels else np.full(n, np.nan)
        else:
            picked = aggregate.group_mean(values, counted=counted)
        out[column] = np.where(counted_any, picked, np.nan)
    names = to_dense("label_name") if "label_name" in pairs.columns else None
    ids = to_dense("id")[:, 0] if "id" in pairs.columns and n_labels else rows.astype(str).astype(object)
    confidence = table["score"].to_numpy()
    region = np.full(n, None, dtype=object)
    rule = regions or metrics.RegionRule()
    if rule.axis not in out:
        raise DataError(f"the pairs have no {rule.axis} column to draw regions on", field=rule.axis)
    if counted_any.any():
        region[counted_any] = metrics.region_partition(
            confidence[counted_any], out[rule.axis][counted_any], rule
        )
    frame = pd.DataFrame(
        {
            "example": rows.astype(np.int64),
            "id": ids,
            "n_labels": np.full(n, n_labels, dtype=np.int64),
            "n_present": present.sum(axis=1).astype(np.int64),
            "n_scored": table["n_scored"].to_numpy(),
            "confidence": confidence,
            "variability": out["variability"],
            "correctness": out["correctness"],
            "forgetfulness": out["forgetfulness"],
            "worst_label": table["worst_label"].to_numpy(),
            "worst_label_name": pd.Series(
                np.where(counted_any, names[rows, worst] if names is not None else worst.astype(str), None),
                dtype=object,
            ),
            "worst_confidence": table["worst_score"].to_numpy(),
            **{column: out[column] for column in axes},  # the worst label's (or the mean) other score columns
            "region": pd.Series(region, dtype=object),
        },
    )
    order = dict.fromkeys((*EXAMPLE_COLUMNS[:-1], *axes, "region"))
    frame = frame[[c for c in order if c in frame.columns]]
    frame.attrs["regions"] = rule.to_dict()
    return frame


def combined_map(
    units: pd.DataFrame, example_ids: Sequence, label_names: Sequence[str], method: str = "min"
) -> pd.DataFrame:
    """A multi-label run's combined map, one row per example (:func:`example_metrics` by ``method``:
    "min", at its worst label), from its per-unit metrics ``units`` (:func:`pairs_from_units`' input,
    every label of every example in order); ``attrs``: ``n_epochs`` and ``method``."""
    pairs = pairs_from_units(units, len(label_names), ids=example_ids, label_names=label_names)
    out = example_metrics(pairs, method=method)
    out.attrs["n_epochs"] = pairs.attrs["n_epochs"]
    out.attrs["method"] = method
    return out
