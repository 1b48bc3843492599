"""The data map over epochs, as pure functions on a run's recorded dynamics (no streamlit here).

* :func:`map_at`: the metrics of every example from the first ``k`` recordings only (what the map looked
  like after recording k; :func:`cartomap.scores.metrics.compute_metrics` on a slice, so the same numbers
  as the reference's ``--burn_out k``).
* :func:`trajectories`: the path of a few examples through (variability, confidence) as recordings are
  added: the point each has on the map of the first 2, 3, ..., E recordings, as a tidy frame.
* :func:`burn_ins`: how many early recordings each of those maps leaves out (the run's ``skip_epochs``).
* :func:`run_map_at`: :func:`map_at` of a run's recorded units (words of a token run, (example, label)
  units of a multi-label run), with the run's burn-in.
* :func:`grouped_trajectories`: the paths of points made of several units (a sentence of its words, an
  example of its labels): :func:`map_at` of their units for every k, aggregated by a given function.

Shapes: ``logits`` [E, N, C] (recordings, examples, classes), ``labels`` [N], ``ids`` [N].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from cartomap.config import MAIN_METRICS
from cartomap.errors import DataError
from cartomap.scores import ambiguity
from cartomap.scores.metrics import RegionRule, compute_metrics, gold_probabilities, softmax

#: Columns of :func:`trajectories` (and the map's axis, when it is another score).
TRAJECTORY_COLUMNS = ("id", "k", "confidence", "variability")
#: The selection's paths drawn over the map at most (a path per example; more is a tangle).
MAX_TRAJECTORIES = 50
#: The selection's paths drawn by default: a few that can still be told apart (up to
#: :data:`MAX_TRAJECTORIES` on request).
DEFAULT_TRAJECTORIES = 10


def _burn_in_at(burn_in: Mapping[int, int] | None, k: int) -> int:
    """How many of the first ``k`` recordings the map at ``k`` leaves out (0 unless ``burn_in`` says);
    a DataError naming the field when that leaves none."""
    b = int((burn_in or {}).get(k, 0))
    if not 0 <= b < k:
        raise DataError(f"the map of the first {k} recordings cannot leave out {b}", field="burn_in")
    return b


def _check_k(k: int, n_recorded: int) -> int:
    if not 1 <= int(k) <= n_recorded:
        raise DataError(f"must be between 1 and {n_recorded} (the recordings), got {k}", field="k")
    return int(k)


def map_at(
    logits: np.ndarray,
    labels: np.ndarray,
    k: int,
    ids: Sequence | None = None,
    *,
    regions: RegionRule | None = None,
    burn_in: int = 0,
) -> pd.DataFrame:
    """:func:`~cartomap.scores.metrics.compute_metrics` over the first ``k`` recordings of ``logits``
    (``burn_in`` of them left out first); ``attrs["n_epochs"]`` is the recordings used,
    ``attrs["epochs_recorded"]`` all of them. DataError for a ``k`` outside [1, E]."""
    logits = np.asarray(logits)
    if logits.ndim != 3:
        raise DataError(
            f"expected a 3-d array [epochs, examples, classes], got shape {logits.shape}", field="logits"
        )
    k = _check_k(k, logits.shape[0])
    return compute_metrics(logits, labels, ids, regions=regions, burn_out=k, burn_in=burn_in)


def burn_ins(train_config, source: str, epochs: Sequence[int]) -> dict[int, int]:
    """{k: recordings the map of the first k leaves out} for k = 1..len(epochs): the run's
    ``skip_epochs`` as :meth:`cartomap.config.TrainConfig.map_burn_in` counts them."""
    epochs = [int(e) for e in epochs]
    return {k: int(train_config.map_burn_in(source, epochs[:k])) for k in range(1, len(epochs) + 1)}


def run_map_at(run, k: int, *, source: str = MAIN_METRICS, dynamics=None, regions: RegionRule | None = None):
    """:func:`map_at` over the first ``k`` recordings of ``run``'s recorded ``source`` (its units: a word
    of a token run, an (example, label) of a multi-label run), leaving out the recordings the run's
    ``skip_epochs`` leaves out of that map (:meth:`cartomap.config.TrainConfig.map_burn_in`), regions by
    ``regions`` (default: the run's rule, :meth:`cartomap.runs.store.Run.region_rule`).
    ``dynamics``: (ids, logits [E, N, C], labels) of that source already read (else read here)."""
    recorded = run.recorded_source(source)
    if dynamics is None:
        ids, logits = run.dynamics(recorded)
        labels = run.unit_labels(recorded)[1]
    else:
        ids, logits, labels = dynamics
    k = _check_k(k, np.asarray(logits).shape[0])
    burn_in = run.config.train.map_burn_in(recorded, run.dynamics_epochs(recorded)[:k])
    return map_at(logits, labels, k, list(ids), regions=regions or run.region_rule(), burn_in=burn_in)


def _checked(logits, labels, ids) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """(logits [E, N, C], labels [N] int64, ids as an Index) of the recorded dynamics; DataError for
    logits that are not 3-d or ids and labels that are not one per row. ``ids`` may be an Index made once."""
    logits = np.asarray(logits)
    if logits.ndim != 3:
        raise DataError(
            f"expected a 3-d array [epochs, examples, classes], got shape {logits.shape}", field="logits"
        )
    n = logits.shape[1]
    labels = np.asarray(labels, dtype=np.int64)
    index = ids if isinstance(ids, pd.Index) else pd.Index(np.asarray([str(i) for i in ids], dtype=object))
    if len(index) != n or len(labels) != n:
        raise DataError(f"expected {n} ids and labels, got {len(index)} and {len(labels)}", field="ids")
    return logits, labels, index


def trajectories(
    logits: np.ndarray,
    labels: np.ndarray,
    ids: Sequence,
    selected: Iterable,
    *,
    burn_in: Mapping[int, int] | None = None,
    start: int = 2,
    limit: int | None = MAX_TRAJECTORIES,
    axis: str = ambiguity.VARIABILITY,
) -> pd.DataFrame:
    """The path of each ``selected`` example through the map: one row per (example, k) for
    k = ``start``..E with the confidence and variability it has on the map of the first k recordings
    (mean and population std of its gold-label probability over recordings ``burn_in[k]``..k-1), and its
    value on the map's ``axis`` (a score of :mod:`cartomap.scores.ambiguity`) over those recordings when
    that is another score (a column of its own).

    ``ids`` (str) may be a ``pd.Index`` made once (550k ids take a tenth of a second to index).
    Columns id, k, confidence, variability; examples in selection order (repeats and ids not in ``ids``
    dropped, the first ``limit`` kept), k ascending. The last point of a path is the example's point on
    the map of every recording. Empty (with those columns) when nothing is left or E < ``start``."""
    logits, labels, index = _checked(logits, labels, ids)
    n_recorded = logits.shape[0]
    wanted = list(dict.fromkeys(str(i) for i in selected))
    positions = index.get_indexer(wanted) if wanted else np.zeros(0, dtype=np.int64)
    keep = positions >= 0
    chosen = [i for i, ok in zip(wanted, keep.tolist(), strict=True) if ok]
    positions = positions[keep]
    if limit is not None:
        chosen, positions = chosen[:limit], positions[:limit]
    ks = list(range(max(1, int(start)), n_recorded + 1))
    if not chosen or not ks:
        return _empty_paths(axis)
    part = logits[:, positions, :].astype(np.float64)
    probs = softmax(part)
    chosen_labels = labels[positions]
    gold = gold_probabilities(probs, chosen_labels)  # [E, n]
    conf = np.empty((len(chosen), len(ks)))
    var = np.empty_like(conf)
    other = np.empty_like(conf)
    for j, k in enumerate(ks):
        b = _burn_in_at(burn_in, k)
        window = gold[b:k]
        conf[:, j] = window.mean(axis=0)
        var[:, j] = window.std(axis=0, ddof=0)
        if axis != ambiguity.VARIABILITY:
            other[:, j] = ambiguity.score(axis, probs[b:k], chosen_labels, part[b:k])
    return _paths(chosen, ks, conf, var, axis, other)


def _paths(chosen, ks, conf, var, axis, other) -> pd.DataFrame:
    columns = {
        "id": np.repeat(np.asarray(chosen, dtype=object), len(ks)),
        "k": np.tile(np.asarray(ks, dtype=np.int64), len(chosen)),
        "confidence": conf.ravel(),
        "variability": var.ravel(),
    }
    if axis != ambiguity.VARIABILITY:
        columns[axis] = other.ravel()
    return pd.DataFrame(columns)


def _empty_paths(axis: str = ambiguity.VARIABILITY) -> pd.DataFrame:
    columns = [*TRAJECTORY_COLUMNS, *([axis] if axis not in TRAJECTORY_COLUMNS else [])]
    return pd.DataFrame({c: [] for c in columns}).astype(
        {c: (object if c == "id" else np.int64 if c == "k" else np.float64) for c in columns}
    )


def grouped_trajectories(
    logits: np.ndarray,
    labels: np.ndarray,
    ids: Sequence,
    groups: Mapping[str, Sequence[str]],
    aggregate: Callable[[pd.DataFrame], pd.DataFrame],
    *,
    burn_in: Mapping[int, int] | None = None,
    start: int = 2,
    limit: int | None = MAX_TRAJECTORIES,
    axis: str = ambiguity.VARIABILITY,
) -> pd.DataFrame:
    """:func:`trajectories` of points that are each made of several units (a sentence of its words, an
    example of its labels): for k = ``start``..E, :func:`map_at` of the first k recordings (``burn_in[k]``
    left out) of the units of ``groups`` ({point id: its unit ids}, in selection order), then
    ``aggregate`` (that metrics frame, ids = unit ids -> a frame with a row per point: id, confidence,
    variability, and the map's ``axis`` when that is another score) places each point on that map.

    Same columns and order as :func:`trajectories`: points in the order of ``groups`` (a point none of
    whose units is in ``ids`` dropped, the first ``limit`` kept), k ascending. A point keeps only its
    units found in ``ids``. Empty when nothing is left or E < ``start``."""
    logits, labels, index = _checked(logits, labels, ids)
    n_recorded = logits.shape[0]
    chosen, positions = [], []
    for point, units in groups.items():
        if limit is not None and len(chosen) >= limit:
            break
        found = index.get_indexer([str(u) for u in units]) if len(units) else np.zeros(0, dtype=np.int64)
        found = found[found >= 0]
        if len(found):
            chosen.append(str(point))
            positions.append(found)
    ks = list(range(max(1, int(start)), n_recorded + 1))
    if not chosen or not ks:
        return _empty_paths(axis)
    rows = np.concatenate(positions)
    part, part_labels = logits[:, rows, :], labels[rows]
    part_ids = index[rows].tolist()
    conf = np.empty((len(chosen), len(ks)))
    var = np.empty_like(conf)
    other = np.empty_like(conf)
    for j, k in enumerate(ks):
        b = _burn_in_at(burn_in, k)
        points = aggregate(map_at(part, part_labels, k, part_ids, burn_in=b))
        points = points.set_index(points["id"].astype(str)).reindex(chosen)
        conf[:, j] = points["confidence"].to_numpy(dtype=np.float64)
        var[:, j] = points["variability"].to_numpy(dtype=np.float64)
        if axis != ambiguity.VARIABILITY:
            other[:, j] = points[axis].to_numpy(dtype=np.float64)
    return _paths(chosen, ks, conf, var, axis, other)
