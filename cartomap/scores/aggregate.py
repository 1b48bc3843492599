"""Aggregating unit scores to groups, picked by name: a sentence scored from its words (token runs,
:mod:`cartomap.scores.tokens`), an example from its labels (multi-label runs,
:mod:`cartomap.scores.multilabel`), as cleanlab scores a sentence from its tokens and a multi-label
example from its per-class scores.

Pure functions on numpy arrays. The units come in one of two layouts:

* flat: ``values`` [M] with ``group`` [M], each unit's 0-based group index (groups of any size, units in
  any order; ``n_groups`` defaults to 1 + the largest index, a group without units scores NaN);
* rows: ``values`` [G, K] with no ``group``: row g holds the K units of group g (every example has
  every label).

``counted`` (bool, the shape of ``values``; None: every unit) says which units count towards their
group's score; a group with no counted unit scores NaN. Scores are any per-unit score where lower = worse (a confidence, a
correctness, a label quality score); every aggregation keeps that direction, and lies between the
lowest and the highest counted unit of its group. Sums run over a group's units in the order they
come (flat: in order within the group, one after another; rows: numpy's row sums, which pair the
terms), so another order or layout can change the last bit of a mean; each kind keeps its layout, and
so its results to the last bit (sentences: flat, words from the lowest score up; examples: rows, label
by label).

:data:`AGGREGATIONS` is the registry: name -> :class:`Aggregation`, which says for which unit kinds it
is offered (``word``: a sentence from its words; ``label``: an example from its labels) with that
kind's default options (cleanlab's defaults differ between its token and multi-label modules), and
whether it needs the units marked present (``present_only``: a multi-label example's gold labels).
:func:`aggregate` runs one by name; :func:`register` adds one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from cartomap.errors import DataError
from cartomap.tasks.units import Unit

#: The unit kinds an aggregation can be offered for (:class:`cartomap.tasks.units.Unit`: every unit that
#: comes in groups), with what the group is called for each.
UNIT_KINDS: Mapping[str, str] = MappingProxyType({unit: unit.group for unit in Unit if unit.group})
#: The unit kinds whose units carry a present mark (a multi-label example's gold labels): the only ones
#: an aggregation that ``needs_present`` can be offered for.
MARKED_UNITS: frozenset[str] = frozenset(unit for unit in Unit if unit.label_sets)
#: cleanlab's default temperature of ``softmin`` for a sentence (``token_classification.rank``).
WORD_SOFTMIN_TEMPERATURE = 0.05
#: cleanlab's default temperature of ``softmin`` for a multi-label example (``multilabel_classification``).
LABEL_SOFTMIN_TEMPERATURE = 0.1
#: cleanlab's default forgetting factor of ``ema`` (its default multi-label aggregation).
EMA_ALPHA = 0.8
#: Smallest temperature divided by (cleanlab's ``EPSILON``): t = 0 would divide by zero.
MIN_TEMPERATURE = 1e-6


# --------------------------------------------------------------------------- layouts


class _Rows:
    """Group g = row g of a [G, K] matrix; reductions along the rows."""

    def __init__(self, values: np.ndarray):
        self.n_groups, self.width = values.shape
        self.ids = np.arange(self.n_groups)

    def sum(self, v: np.ndarray) -> np.ndarray:
        return v.sum(axis=1)

    def max(self, v: np.ndarray) -> np.ndarray:
        return v.max(axis=1)

    def min(self, v: np.ndarray) -> np.ndarray:
        return v.min(axis=1)

    def count(self, counted: np.ndarray | None) -> np.ndarray:
        if counted is None:
            return np.full(self.n_groups, self.width, dtype=np.int64)
        return counted.sum(axis=1)

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        return per_group[:, None]

    def descending(self, v: np.ndarray, counted: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(each group's counted values from highest to lowest, padded [G, K]; how many each has)."""
        if counted is not None:
            v = np.where(counted, v, -np.inf)
        return -np.sort(-v, axis=1), self.count(counted)


class _Flat:
    """Groups of a flat [M] array sorted by group (units in order within a group); reductions by
    ``reduceat`` over the groups that have units (``ids``)."""

    def __init__(self, group: np.ndarray):
        first = np.r_[True, group[1:] != group[:-1]] if len(group) else np.zeros(0, dtype=bool)
        self.starts = np.flatnonzero(first)
        self.ids = group[self.starts]
        self.local = np.cumsum(first) - 1  # each unit's position among the groups that have units
        self.sizes = np.diff(np.r_[self.starts, len(group)])

    def sum(self, v: np.ndarray) -> np.ndarray:
        return np.add.reduceat(v, self.starts)

    def max(self, v: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(v, self.starts)

    def min(self, v: np.ndarray) -> np.ndarray:
        return np.minimum.reduceat(v, self.starts)

    def count(self, counted: np.ndarray | None) -> np.ndarray:
        return self.sizes if counted is None else np.add.reduceat(counted.astype(np.int64), self.starts)

    def spread(self, per_group: np.ndarray) -> np.ndarray:
        return per_group[self.local]

    def descending(self, v: np.ndarray, counted: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        keep = np.ones(len(v), dtype=bool) if counted is None else counted
        order = np.lexsort((-v[keep], self.local[keep]))
        local, kept = self.local[keep][order], v[keep][order]
        lengths = np.bincount(local, minlength=len(self.ids))
        padded = np.full((len(self.ids), int(lengths.max(initial=0))), -np.inf)
        padded[local, np.arange(len(local)) - (np.cumsum(lengths) - lengths)[local]] = kept
        return padded, lengths


def _layout(values, group, n_groups, counted):
    """(values, counted, layout, n_groups) checked; flat units sorted by group, keeping their order."""
    values = np.asarray(values)
    if counted is not None:
        counted = np.asarray(counted, dtype=bool)
        if counted.shape != values.shape:
            raise DataError(
                f"expected shape {values.shape} like the scores, got {counted.shape}", field="counted"
            )
    if group is None:
        if values.ndim != 2:
            raise DataError(
                f"expected a matrix [groups, units] (or flat scores with a group index), got shape {values.shape}",
                field="values",
            )
        if n_groups is not None and int(n_groups) != values.shape[0]:
            raise DataError(
                f"expected {values.shape[0]} groups (one per row), got {n_groups}", field="n_groups"
            )
        return values, counted, _Rows(values), values.shape[0]
    group = np.asarray(group)
    if values.ndim != 1 or group.shape != values.shape:
        raise DataError(
            f"expected flat scores [M] and one group index per score, got shapes {values.shape} and {group.shape}",
            field="group",
        )
    if len(group) and (not np.issubdtype(group.dtype, np.integer) or group.min() < 0):
        raise DataError("expected integer group indices >= 0", field="group")
    largest = int(group.max()) + 1 if len(group) else 0
    count = largest if n_groups is None else int(n_groups)
    if largest > count:
        raise DataError(f"group index {largest - 1} is outside {count} groups", field="group")
    if len(group) > 1 and (np.diff(group) < 0).any():
        order = np.argsort(group, kind="stable")
        values, group = values[order], group[order]
        counted = None if counted is None else counted[order]
    return values, counted, _Flat(group), count


def _reduce(body: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """The public form of a reduction ``body(values, counted, layout, **options)`` -> scores of the
    groups that have units: f(values, group=None, n_groups=None, *, counted=None, **options) ->
    scores [n_groups], NaN for a group with no counted unit."""

    def reduction(values, group=None, n_groups=None, *, counted=None, **options) -> np.ndarray:
        values, counted, layout, count = _layout(values, group, n_groups, counted)
        out = np.full(count, np.nan)
        if layout.ids.size and values.size:
            scores = np.asarray(body(values, counted, layout, **options), dtype=np.float64)
            has = layout.count(counted) > 0
            out[layout.ids[has]] = scores[has]
        return out

    reduction.__name__ = reduction.__qualname__ = "group" + body.__name__
    reduction.__doc__ = body.__doc__
    return reduction


# --------------------------------------------------------------------------- reductions


def _min(values, counted, layout) -> np.ndarray:
    """score(g) = min over the counted units u of g of score(u): a group is as good as its worst unit
    (cleanlab's token default, ``sentence_score_method="min"``). Lower = more suspect / harder."""
    return layout.min(values if counted is None else np.where(counted, values, np.inf))


group_min = _reduce(_min)


def _mean(values, counted, layout) -> np.ndarray:
    """score(g) = (1/n) sum over the n counted units u of g of score(u). Lower = more suspect / harder;
    one bad unit in a large group moves it little."""
    total = layout.sum(values if counted is None else np.where(counted, values, 0.0))
    return total / np.maximum(layout.count(counted), 1)


group_mean = _reduce(_mean)


def _softmin(values, counted, layout, temperature: float = WORD_SOFTMIN_TEMPERATURE) -> np.ndarray:
    """score(g) = sum_u score(u) * softmax_u((1 - score(u)) / t) over the counted units of g, cleanlab's
    ``softmin``: a weighted mean whose weights grow as a unit's score falls. t = 0 is exactly
    :func:`group_min`, t = inf exactly :func:`group_mean`. Lower = more suspect / harder; unlike min,
    every unit counts a little. Not monotone: raising a unit well above the group's score lowers its
    weight, and can lower the score."""
    t = float(temperature)
    if not t >= 0:
        raise DataError(f"expected a temperature >= 0, got {temperature}", field="temperature")
    if t == 0:
        return _min(values, counted, layout)
    if np.isinf(t):
        return _mean(values, counted, layout)
    x = (1.0 - values) / max(t, MIN_TEMPERATURE)
    if counted is not None:
        x = np.where(counted, x, -np.inf)
    top = layout.max(x)
    weights = np.exp(x - layout.spread(np.where(np.isfinite(top), top, 0.0)))
    with np.errstate(invalid="ignore"):  # 0 / 0 for a group with no counted unit: NaN, as it should
        return layout.sum(values * weights) / layout.sum(weights)


group_softmin = _reduce(_softmin)


def _ema(values, counted, layout, alpha: float = EMA_ALPHA) -> np.ndarray:
    """cleanlab's default multi-label aggregation: a group's counted scores sorted from highest to
    lowest, s_(1) >= ... >= s_(n); EMA_1 = s_(1), EMA_k = alpha * s_(k) + (1 - alpha) * EMA_k-1; score
    = EMA_n (default alpha 0.8): mostly the lowest scores. Lower = more suspect / harder; the units'
    order does not matter."""
    a = float(alpha)
    if not 0.0 <= a <= 1.0:
        raise DataError(f"expected alpha in [0, 1], got {alpha}", field="alpha")
    ordered, lengths = layout.descending(values, counted)
    if not ordered.shape[1]:  # no counted unit anywhere
        return np.full(len(ordered), np.nan)
    out = ordered[:, 0].copy()
    for k in range(1, ordered.shape[1]):
        out = np.where(lengths > k, a * ordered[:, k] + (1.0 - a) * out, out)
    return out


group_ema = _reduce(_ema)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Aggregation:
    """A registered aggregation: ``function(values, group=None, n_groups=None, *, counted=None,
    **options)`` -> scores [n_groups] (the reductions of this module); ``units``: the unit kinds of
    :data:`UNIT_KINDS` it is offered for, each with its default options there; ``needs_present``: it
    scores only the units marked present (and is offered only where units have that mark);
    ``monotone``: raising one unit's score never lowers its group's (softmin's is not)."""

    name: str
    function: Callable[..., np.ndarray]
    description: str
    units: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: MappingProxyType({kind: MappingProxyType({}) for kind in UNIT_KINDS})
    )
    needs_present: bool = False
    monotone: bool = True

    def __post_init__(self):
        if not self.name or not self.name.replace("_", "").isalnum():
            raise DataError(f"expected a name of letters, digits and _, got {self.name!r}", field="name")
        unknown = sorted(set(self.units) - set(UNIT_KINDS))
        if not self.units or unknown:
            raise DataError(
                f"aggregation {self.name!r}: unit kinds {unknown or '(none)'}; expected some of "
                f"{', '.join(UNIT_KINDS)}",
                field="units",
            )
        if self.needs_present and set(self.units) - MARKED_UNITS:
            raise DataError(
                f"aggregation {self.name!r} needs the units marked present, which only "
                f"{', '.join(sorted(MARKED_UNITS))} units are; not {', '.join(sorted(set(self.units) - MARKED_UNITS))}",
                field="units",
            )
        frozen = {kind: MappingProxyType(dict(options)) for kind, options in self.units.items()}
        object.__setattr__(self, "units", MappingProxyType(frozen))


#: Aggregations by name (:func:`register` adds one).
AGGREGATIONS: dict[str, Aggregation] = {}


def register(aggregation: Aggregation) -> Aggregation:
    """Add ``aggregation`` to :data:`AGGREGATIONS`; DataError if its name is taken."""
    if aggregation.name in AGGREGATIONS:
        raise DataError(f"an aggregation named {aggregation.name!r} is already registered", field="name")
    AGGREGATIONS[aggregation.name] = aggregation
    return aggregation


def names(unit: str | None = None) -> tuple[str, ...]:
    """The registered names offered for ``unit`` (a kind of :data:`UNIT_KINDS`; None: all), in order
    of registration."""
    if unit is not None and unit not in UNIT_KINDS:
        raise DataError(f"unknown unit kind {unit!r}; expected one of {', '.join(UNIT_KINDS)}", field="unit")
    return tuple(name for name, a in AGGREGATIONS.items() if unit is None or unit in a.units)


def aggregation(name: str, unit: str | None = None) -> Aggregation:
    """The aggregation ``name`` offered for ``unit`` (None: any); DataError listing the names
    otherwise."""
    offered = names(unit)
    if name not in offered:
        group = UNIT_KINDS[unit] if unit else "group"
        why = ""
        if name in AGGREGATIONS:
            kinds = " or ".join(f"{UNIT_KINDS[k]}s from their {k}s" for k in AGGREGATIONS[name].units)
            why = f" ({name} scores {kinds} only)"
        raise DataError(
            f"unknown {group} score {name!r}{why}; expected one of {', '.join(offered)}", field="method"
        )
    return AGGREGATIONS[name]


def aggregate(
    values: np.ndarray,
    group: np.ndarray | None = None,
    n_groups: int | None = None,
    *,
    method: str = "min",
    unit: str | None = None,
    present: np.ndarray | None = None,
    **options,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores [n_groups] by the aggregation ``method``, the units it counted: bool like ``values``).

    ``unit`` (a kind of :data:`UNIT_KINDS`) limits the names to those offered for it and supplies its
    default options; ``options`` (``temperature``, ``alpha``) override them. ``present`` (bool like
    ``values``) marks the units that an aggregation with ``needs_present`` counts; the others count
    every unit."""
    chosen = aggregation(method, unit)
    kwargs = {**(chosen.units[unit] if unit else {}), **options}
    if chosen.needs_present:
        if present is None:
            raise DataError(f"{method} needs the units marked present", field="present")
        counted = np.asarray(present, dtype=bool)
        if counted.shape != np.shape(values):
            raise DataError(
                f"expected shape {np.shape(values)} like the scores, got {counted.shape}", field="present"
            )
        return chosen.function(values, group, n_groups, counted=counted, **kwargs), counted
    counted = np.ones(np.shape(values), dtype=bool)
    return chosen.function(values, group, n_groups, **kwargs), counted


register(Aggregation("min", group_min, "its worst unit"))
register(Aggregation("mean", group_mean, "the mean of its units"))
register(
    Aggregation(
        "present_only",
        group_mean,
        "the mean of its gold labels, the absent ones left out",
        units={Unit.LABEL: {}},
        needs_present=True,
    )
)
register(
    Aggregation(
        "softmin",
        group_softmin,
        "a mean weighted towards its worst units",
        units={
            Unit.WORD: {"temperature": WORD_SOFTMIN_TEMPERATURE},
            Unit.LABEL: {"temperature": LABEL_SOFTMIN_TEMPERATURE},
        },
        monotone=False,
    )
)
register(
    Aggregation(
        "ema",
        group_ema,
        "a moving average of its units from the best to the worst (cleanlab's multi-label default)",
        units={Unit.LABEL: {"alpha": EMA_ALPHA}},
    )
)
