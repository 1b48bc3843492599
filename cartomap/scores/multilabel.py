"""Training dynamics of multi-label classification (one sigmoid output per label): per (example, label)
and per example.

Small pure functions on numpy arrays. Every example has every label, present or absent, so the
dynamics are dense; the per-pair table is **long**: one row per (example, label), keyed by
(``example``, ``label``), the 0-based example index and the 0-based label index, rows example by
example and inside an example label by label (:func:`flat_keys`). Shapes used throughout:

* ``logits``: ``[E, N, L]`` one logit per label per epoch and example; ``probs = sigmoid(logits)``
* ``gold``: ``[N, L]`` bool, label j applies to example i (the indicator matrix of
  :mod:`cartomap.data.multilabel`)
* ``gold_probs``: ``[E, N, L]`` the probability of the gold state of each label: p if the label is
  present, 1 - p if it is absent (:func:`gold_probabilities`)
* ``correct``: ``[E, N, L]`` bool, the label's prediction (present iff p > threshold) was its gold
  state at that epoch

Each (example, label) is scored as a binary example of the one-vs-rest problem of its label: the
sequence-level data-map metrics of :mod:`cartomap.scores.metrics` on its p(gold) series
(:func:`label_metrics`); the table filtered to one label is that label's data map
(:func:`label_map`). An example is then scored from its labels' scores by an aggregation picked by
name (:data:`cartomap.scores.label_examples.EXAMPLE_METHODS`: ``min``, the default, as a sentence is as good as its worst word in
:mod:`cartomap.scores.tokens`; ``mean``; ``present_only``, the mean over the example's gold labels;
cleanlab's ``softmin`` and ``ema``; the ones of :mod:`cartomap.scores.aggregate` offered for labels),
and placed on a combined map (:func:`cartomap.scores.label_examples.example_metrics`). Each
docstring gives the formula and the direction of the score.

A run can keep each epoch's outputs as a long table keyed by (id, label) (:func:`dynamics_long`) and
read them back as ``[E, N, L]`` in its examples' order (:func:`dynamics_array`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import aggregate, ambiguity, metrics
from cartomap.scores.columns import score_columns
from cartomap.tasks.base import sigmoid
from cartomap.tasks.units import Unit

#: A label is predicted present when its probability is above this (logit > 0).
DEFAULT_THRESHOLD = 0.5
#: cleanlab's default temperature of the multi-label ``softmin`` aggregation.
DEFAULT_SOFTMIN_TEMPERATURE = aggregate.LABEL_SOFTMIN_TEMPERATURE
#: cleanlab's default forgetting factor of the multi-label ``ema`` aggregation (its default method).
DEFAULT_EMA_ALPHA = aggregate.EMA_ALPHA
#: Over which pairs :func:`label_metrics` ranks variability for the regions: each label's own
#: examples (``label``: every label's map has its own ambiguous third), or all pairs at once (``all``).
REGION_SCOPES: tuple[str, ...] = ("label", "all")

PAIR_COLUMNS: tuple[str, ...] = (
    "example",
    "label",
    "id",
    "label_name",
    "present",
    "predicted",
    *metrics.UNIT_METRICS,
    *(name for name in ambiguity.MAP_SCORES if name != ambiguity.VARIABILITY),  # where the units have them
    "region",
)


# --------------------------------------------------------------------------- basics


def flat_keys(n_examples: int, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """(example [N*L], label [N*L]): example i repeats L times, label counts 0 .. L - 1 inside it, the
    order of ``array.reshape(N * L)`` on an [N, L] array."""
    if int(n_examples) < 0 or int(n_labels) < 0:
        raise DataError("expected counts >= 0", field="n_examples")
    example = np.repeat(np.arange(int(n_examples), dtype=np.int64), int(n_labels))
    label = np.tile(np.arange(int(n_labels), dtype=np.int64), int(n_examples))
    return example, label


def check_gold(gold: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    gold = np.asarray(gold)
    if gold.shape != shape:
        raise DataError(
            f"expected a matrix of shape {shape} [examples, labels], got {gold.shape}", field="gold"
        )
    if gold.dtype != bool:
        if gold.size and not (np.issubdtype(gold.dtype, np.number) and np.isin(gold, (0, 1)).all()):
            raise DataError("expected a bool (or 0/1) matrix", field="gold")
        gold = gold.astype(bool)
    return gold


def _check_probs(probs: np.ndarray, name: str = "probs") -> np.ndarray:
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 3 or probs.shape[0] == 0:
        raise DataError(
            f"expected a 3-d array [epochs >= 1, examples, labels], got shape {probs.shape}", field=name
        )
    if not np.all(np.isfinite(probs)):
        e, i, j = np.argwhere(~np.isfinite(probs))[0]
        raise DataError(
            f"non-finite value for example {int(i)}, label {int(j)} at epoch index {int(e)}", field=name
        )
    if probs.size and (probs.min() < 0 or probs.max() > 1):
        raise DataError("expected probabilities in [0, 1] (apply sigmoid to logits)", field=name)
    return probs


def _check_threshold(threshold: float) -> float:
    t = float(threshold)
    if not 0.0 < t < 1.0:
        raise DataError(f"expected a threshold in (0, 1), got {threshold}", field="threshold")
    return t


def gold_probabilities(probs: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """p_e(gold)[i, j] = probs[e, i, j] if label j applies to example i, else 1 - probs[e, i, j]:
    the probability the model gives the gold state of each label, [E, N, L]. Higher = easier; the
    per-label self-confidence of cleanlab's multi-label scores. Flipping a label's presence and its
    probabilities (p -> 1 - p) leaves it unchanged."""
    probs = _check_probs(probs)
    gold = check_gold(gold, probs.shape[1:])
    return np.where(gold[None], probs, 1.0 - probs)


def predicted_present(probs: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """predicted[..] = probs > threshold, bool, same shape. Strictly above: at p = 0.5 (logit 0) the
    label is predicted absent, as the argmax of a two-class softmax over (absent 0, present z) picks
    the first class on a tie."""
    return np.asarray(probs) > _check_threshold(threshold)


def correct_from_probs(
    probs: np.ndarray, gold: np.ndarray, threshold: float = DEFAULT_THRESHOLD
) -> np.ndarray:
    """correct[e, i, j] = (probs[e, i, j] > threshold) == gold[i, j], bool [E, N, L]: the label's
    predicted state was its gold state after epoch e."""
    probs = _check_probs(probs)
    gold = check_gold(gold, probs.shape[1:])
    return predicted_present(probs, threshold) == gold[None]


# --------------------------------------------------------------------------- recorded dynamics


def dynamics_long(values: np.ndarray, ids: Sequence, *, column: str = "logit") -> pd.DataFrame:
    """One epoch's per-label outputs ``values`` [N, L] (logits, or probabilities) as a long table, one
    row per (example, label) in :func:`flat_keys` order: ``id`` (of the example, a string), ``label`` (the
    0-based label index) and ``column``; the shape a run can store an epoch of multi-label dynamics
    in, keyed by (id, label) as word dynamics are by (id, word)."""
    values = np.asarray(values)
    if values.ndim != 2:
        raise DataError(f"expected a matrix [examples, labels], got shape {values.shape}", field=column)
    n, n_labels = values.shape
    id_arr = _ids(ids, n, "ids")
    example, label = flat_keys(n, n_labels)
    return pd.DataFrame(
        {"id": _repeat_strings(id_arr, example), "label": label, column: values.reshape(n * n_labels)}
    )


def dynamics_array(
    tables: Sequence[pd.DataFrame], ids: Sequence, n_labels: int, *, column: str = "logit"
) -> np.ndarray:
    """[E, N, L] float64 from one long table per epoch (:func:`dynamics_long`'s shape, rows in any
    order): entry [e, i, j] = ``column`` of the row (ids[i], j) of table e. Every table must hold every
    (id, label) of ``ids`` x 0 .. L - 1 exactly once; a missing, repeated or unknown key raises
    DataError naming the epoch index and the key."""
    id_list = [str(x) for x in ids]
    position = pd.Index(id_list)
    if not position.is_unique:
        raise DataError("expected unique ids", field="ids")
    n, n_labels = len(id_list), int(n_labels)
    out = np.empty((len(tables), n, n_labels), dtype=np.float64)
    for e, table in enumerate(tables):
        for name in ("id", "label", column):
            if name not in table.columns:
                raise DataError(
                    f"epoch index {e}: missing; the table has columns {list(table.columns)}", field=name
                )
        codes, found = pd.factorize(table["id"].astype(str))  # hash each distinct id once
        rows = position.get_indexer(found)[codes]
        labels = table["label"].to_numpy()
        if (rows < 0).any():
            k = int(np.flatnonzero(rows < 0)[0])
            raise DataError(f"epoch index {e}: unknown id {table['id'].iloc[k]!r}", field="id")
        if len(labels) and (labels.min() < 0 or labels.max() >= n_labels):
            raise DataError(f"epoch index {e}: label indices must be in [0, {n_labels})", field="label")
        seen = np.bincount(rows * n_labels + labels.astype(np.int64), minlength=n * n_labels)
        seen = seen.reshape(n, n_labels)
        if not (seen == 1).all():
            i, j = np.argwhere(seen != 1)[0]
            what = "missing" if seen[i, j] == 0 else f"{int(seen[i, j])} rows"
            raise DataError(
                f"epoch index {e}: key (id {id_list[i]!r}, label {int(j)}) is {what}; expected one row each",
                field="label",
            )
        out[e, rows, labels.astype(np.int64)] = table[column].to_numpy(dtype=np.float64)
    return out


# --------------------------------------------------------------------------- per (example, label)


def _ids(ids: Sequence | None, n: int, field: str) -> np.ndarray:
    if ids is None:
        return np.arange(n).astype(str).astype(object)
    out = np.asarray(list(ids), dtype=object)
    if out.shape != (n,):
        raise DataError(f"expected {n} entries, got {len(out)}", field=field)
    return out


def _repeat_strings(values: np.ndarray, index: np.ndarray) -> pd.Series:
    """``values[index]`` as a string Series; taken after the conversion to strings, so each distinct
    value is converted once (the long table repeats every id L times)."""
    return pd.Series(values).astype(str).take(index).reset_index(drop=True)


def label_metrics(
    gold_probs: np.ndarray,
    correct: np.ndarray,
    gold: np.ndarray,
    *,
    ids: Sequence | None = None,
    label_names: Sequence[str] | None = None,
    regions: metrics.RegionRule | None = None,
    regions_by: str = "label",
) -> pd.DataFrame:
    """One row per (example, label) (the columns of :data:`PAIR_COLUMNS`, rows in :func:`flat_keys`
    order) from ``gold_probs`` [E, N, L], ``correct`` [E, N, L] and ``gold`` [N, L].

    Per pair, the sequence-level definitions (Swayamdipta et al., 2020; Toneva et al., 2019) on its
    p(gold) series: confidence = mean_e p_e(gold) (higher = easier); variability = std_e p_e(gold),
    ddof 0 (higher = more ambiguous); correctness = (1/E) sum_e correct_e (higher = easier);
    correct_count = sum_e correct_e; forgetfulness = #{e : correct_e and not correct_e+1} (higher =
    less stable); never_learned = no epoch correct. present = gold; predicted = the predicted state
    after the last epoch. region = :func:`cartomap.scores.metrics.region_partition` by ``regions``
    (default by rank), ranked inside each label (``regions_by="label"``) or over all pairs (``"all"``).
    ``ids`` (one per example) and ``label_names`` are written as strings; they default to the example
    index and the label index.
    """
    gold_p = _check_probs(gold_probs, "gold_probs")
    hits = np.asarray(correct)
    if hits.shape != gold_p.shape:
        raise DataError(f"expected shape {gold_p.shape} like gold_probs, got {hits.shape}", field="correct")
    if hits.dtype != bool:
        raise DataError(f"expected a bool array, got dtype {hits.dtype}", field="correct")
    if regions_by not in REGION_SCOPES:
        raise DataError(
            f"unknown region scope {regions_by!r}; expected one of {', '.join(REGION_SCOPES)}",
            field="regions_by",
        )
    n_epochs, n, n_labels = gold_p.shape
    present = check_gold(gold, (n, n_labels))
    id_arr = _ids(ids, n, "ids")
    name_arr = _ids(label_names, n_labels, "label_names")
    flat = gold_p.reshape(n_epochs, n * n_labels)
    hits = hits.reshape(n_epochs, n * n_labels)
    conf = metrics.confidence(flat)
    var = metrics.variability(flat)
    # every ambiguity score of a yes/no unit from p(gold) alone: its two-class row (1 - p, p), gold = 1
    axes = ambiguity.scores(np.stack([1.0 - flat, flat], axis=-1), np.ones(flat.shape[1], dtype=np.int64))
    rule = regions or metrics.RegionRule()
    region = _regions_by(conf, axes[rule.axis], rule, regions_by, n_labels)
    example, label = flat_keys(n, n_labels)
    gold_flat = present.reshape(n * n_labels)
    frame = pd.DataFrame(
        {
            "example": example,
            "label": label,
            "id": _repeat_strings(id_arr, example),
            "label_name": _repeat_strings(name_arr, label),
            "present": gold_flat,
            "predicted": np.where(hits[-1], gold_flat, ~gold_flat),
            "confidence": conf,
            "variability": var,
            **metrics.hit_columns(hits),
            **{name: values for name, values in axes.items() if name != ambiguity.VARIABILITY},
            "region": region,
        },
        columns=list(PAIR_COLUMNS),
    )
    frame.attrs["n_epochs"] = int(n_epochs)
    frame.attrs["regions"] = rule.to_dict()
    frame.attrs["regions_by"] = regions_by
    return frame


def label_metrics_from_probs(
    probs: np.ndarray,
    gold: np.ndarray,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    ids: Sequence | None = None,
    label_names: Sequence[str] | None = None,
    regions: metrics.RegionRule | None = None,
    regions_by: str = "label",
) -> pd.DataFrame:
    """:func:`label_metrics` from the sigmoid probabilities ``probs`` [E, N, L] and ``gold`` [N, L]:
    p(gold) by :func:`gold_probabilities`, correct by :func:`correct_from_probs` at ``threshold``."""
    probs = _check_probs(probs)
    gold = check_gold(gold, probs.shape[1:])
    return label_metrics(
        gold_probabilities(probs, gold),
        correct_from_probs(probs, gold, threshold),
        gold,
        ids=ids,
        label_names=label_names,
        regions=regions,
        regions_by=regions_by,
    )


def label_metrics_from_logits(logits: np.ndarray, gold: np.ndarray, **options) -> pd.DataFrame:
    """:func:`label_metrics_from_probs` on sigmoid(``logits``) [E, N, L] (the options are its)."""
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim == 3 and not np.all(np.isfinite(z)):
        e, i, j = np.argwhere(~np.isfinite(z))[0]
        raise DataError(
            f"non-finite logit for example {int(i)}, label {int(j)} at epoch index {int(e)}", field="logits"
        )
    return label_metrics_from_probs(sigmoid(z), gold, **options)


def pair_grid(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(example, label, N, L) of a long table that holds every (example, label) exactly once."""
    for column in ("example", "label"):
        if column not in pairs.columns:
            raise DataError(f"missing; the table has columns {list(pairs.columns)}", field=column)
    example = pairs["example"].to_numpy(dtype=np.int64)
    label = pairs["label"].to_numpy(dtype=np.int64)
    if not len(pairs):
        return example, label, 0, 0
    if example.min() < 0 or label.min() < 0:
        raise DataError("expected indices >= 0", field="example")
    n, n_labels = int(example.max()) + 1, int(label.max()) + 1
    seen = np.bincount(example * n_labels + label, minlength=n * n_labels).reshape(n, n_labels)
    if not (seen == 1).all():
        i, j = np.argwhere(seen != 1)[0]
        count = int(seen[i, j])
        raise DataError(
            f"key (example {int(i)}, label {int(j)}) appears {count} times; expected one row per example and label",
            field="label",
        )
    return example, label, n, n_labels


def to_dense(pairs: pd.DataFrame, column: str) -> np.ndarray:
    """The long table's ``column`` as a matrix [N, L] by its (example, label) keys (rows in any
    order); the table must hold every pair exactly once."""
    return dense_values(pairs, column, *pair_grid(pairs))


def dense_values(
    pairs: pd.DataFrame, column: str, example: np.ndarray, label: np.ndarray, n: int, n_labels: int
):
    if column not in pairs.columns:
        raise DataError(f"missing; the table has columns {list(pairs.columns)}", field=column)
    values = pairs[column].to_numpy()
    out = np.empty((n, n_labels), dtype=values.dtype)
    out[example, label] = values
    return out


def label_map(pairs: pd.DataFrame, label: int | str) -> pd.DataFrame:
    """One label's data map: the rows of :func:`label_metrics`' table for ``label`` (its index, or its
    name in ``label_name``), one per example in example order, index reset."""
    if isinstance(label, str):
        mask = pairs["label_name"] == label
        known = list(dict.fromkeys(pairs["label_name"]))
    else:
        mask = pairs["label"] == int(label)
        known = sorted(set(pairs["label"].tolist()))
    if not mask.any():
        raise DataError(f"unknown label {label!r}; expected one of {known}", field="label")
    return pairs[mask].sort_values("example", kind="stable").reset_index(drop=True)


def label_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per label: how many examples have it (n_present), the means of confidence,
    variability and correctness over its examples, and how many of them fall in each region."""
    grouped = pairs.groupby("label", sort=True)
    out = pd.DataFrame(
        {
            "label": np.asarray(list(grouped.groups), dtype=np.int64),
            "label_name": grouped["label_name"].first().to_numpy(),
            "n_examples": grouped.size().to_numpy(dtype=np.int64),
            "n_present": grouped["present"].sum().to_numpy(dtype=np.int64),
            "confidence": grouped["confidence"].mean().to_numpy(),
            "variability": grouped["variability"].mean().to_numpy(),
            "correctness": grouped["correctness"].mean().to_numpy(),
        }
    )
    counts = pd.crosstab(pairs["label"], pairs["region"]).reindex(columns=list(metrics.REGIONS), fill_value=0)
    for region in metrics.REGIONS:
        out[region] = counts[region].to_numpy(dtype=np.int64)
    return out


def pairs_from_units(
    units: pd.DataFrame,
    n_labels: int,
    *,
    ids: Sequence | None = None,
    label_names: Sequence[str] | None = None,
    regions: metrics.RegionRule | None = None,
    regions_by: str = "label",
) -> pd.DataFrame:
    """:func:`label_metrics`' table (:data:`PAIR_COLUMNS` and every other score column of a label unit's
    map the units have, :func:`cartomap.scores.columns.score_columns`) from a run's per-unit metrics: the frame
    :func:`cartomap.scores.metrics.compute_metrics` gives for the two-class rows (0, z) of every (example,
    label), in :func:`flat_keys` order (row i * L + j = label j of example i; its ``label`` 1 = present,
    ``predicted`` 1 = predicted present). softmax((0, z))[1] = sigmoid(z) and its argmax is 1 iff z > 0, so
    the metrics are those :func:`label_metrics_from_logits` gives on z; regions are drawn again
    (``regions``, ranked inside each label by default). ``ids`` (one per example) and ``label_names``
    default to the indices."""
    n_labels = int(n_labels)
    if n_labels < 1 or len(units) % n_labels:
        raise DataError(f"expected {n_labels} rows per example, got {len(units)} rows", field="n_labels")
    for column in ("label", "predicted", "confidence", "variability", "correctness", "forgetfulness"):
        if column not in units.columns:
            raise DataError(f"missing; the table has columns {list(units.columns)}", field=column)
    n = len(units) // n_labels
    example, label = flat_keys(n, n_labels)
    present = units["label"].to_numpy(dtype=np.int64) == 1
    correctness = units["correctness"].to_numpy(dtype=np.float64)
    n_epochs = int(units.attrs.get("n_epochs") or 0)
    counts = (
        units["correct_count"].to_numpy(dtype=np.int64)
        if "correct_count" in units.columns
        else np.round(correctness * n_epochs).astype(np.int64)
    )
    conf = units["confidence"].to_numpy(dtype=np.float64)
    var = units["variability"].to_numpy(dtype=np.float64)
    if regions_by not in REGION_SCOPES:
        raise DataError(
            f"unknown region scope {regions_by!r}; expected one of {', '.join(REGION_SCOPES)}",
            field="regions_by",
        )
    rule = regions or metrics.RegionRule()
    region = _regions_by(conf, rule.values(units), rule, regions_by, n_labels)
    own = ("label", "predicted", *metrics.UNIT_METRICS)
    extra = [c for c in score_columns(Unit.LABEL) if c in units.columns and c not in own]
    frame = pd.DataFrame(
        {
            "example": example,
            "label": label,
            "id": _repeat_strings(_ids(ids, n, "ids"), example),
            "label_name": _repeat_strings(_ids(label_names, n_labels, "label_names"), label),
            "present": present,
            "predicted": units["predicted"].to_numpy(dtype=np.int64) == 1,
            "confidence": conf,
            "variability": var,
            "correctness": correctness,
            "correct_count": counts,
            "forgetfulness": units["forgetfulness"].to_numpy(dtype=np.int64),
            "never_learned": counts == 0,
            **{  # the units' other score columns (ambiguity scores, what the detectors read)
                name: units[name].to_numpy(dtype=np.float64) for name in extra
            },
            "region": region,
        },
    )
    order = dict.fromkeys((*PAIR_COLUMNS[:-1], *extra, "region"))
    frame = frame[[c for c in order if c in frame.columns]]
    frame.attrs["n_epochs"] = n_epochs
    frame.attrs["regions"] = rule.to_dict()
    frame.attrs["regions_by"] = regions_by
    return frame


def _regions_by(
    conf: np.ndarray, values: np.ndarray, rule: metrics.RegionRule, regions_by: str, n_labels: int
) -> np.ndarray:
    """Regions of (example, label) pairs in :func:`flat_keys` order by ``rule`` on the axis ``values``:
    over all pairs (``regions_by="all"``) or ranked inside each label."""
    if regions_by == "all":
        return metrics.region_partition(conf, values, rule)
    region = np.empty(len(conf), dtype=object)
    label = np.arange(len(conf)) % max(n_labels, 1)
    for j in range(n_labels):
        rows = label == j
        region[rows] = metrics.region_partition(conf[rows], values[rows], rule)
    return region
