"""The data maps of a multi-label run, as map frames (:func:`cartomap.analysis.datamap.build_map_frame`).

A multi-label run records one unit per (example, label) (:mod:`cartomap.tasks.multilabel`), so it has
several maps, each a *view* (:func:`views`):

* ``label:<j>``: one label's map, a point per example for label j: its unit's metrics, gold "present" or
  "absent", regions ranked among that label's points (every label its own ambiguous share);
* ``combined``: a point per example at its worst label (the run's saved combined map,
  :func:`cartomap.scores.label_examples.example_metrics` with method ``min``), gold and prediction the label
  sets ("politics, sports"; "(none)" for an empty set);
* ``units``: every (example, label) on one map.

Each view also has its map after the first k recordings (``burn_out``): the units' metrics over those
recordings (:func:`cartomap.analysis.epochs.run_map_at`), the combined view aggregated from them as the
run's saved combined map is (:func:`cartomap.scores.label_examples.combined_map`); and the paths of selected
points as recordings are added (:func:`view_trajectories`).

Rows of a label view keep the unit ids (``<id>#<j>``, the keys of the recorded dynamics); the combined
view has the example ids. Both carry :data:`LABEL_COLUMNS` for the selection table. A point's label
by epoch: :func:`unit_trajectory` (a combined point: its worst label's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.analysis import epochs
from cartomap.analysis.datamap import (
    AXIS_COLUMNS,
    LABEL_COLUMNS,
    build_map_frame,
    map_metric_columns,
    n_epochs_of,
    with_regions,
)
from cartomap.config import MAIN_METRICS
from cartomap.errors import DataError, RunError
from cartomap.scores.columns import score_columns
from cartomap.scores.label_examples import combined_map
from cartomap.scores.metrics import RegionRule
from cartomap.tasks.base import LABEL_UNIT_CLASSES, sigmoid, unit_id_of, word_key

COMBINED = "combined"
UNITS = "units"
LABEL_PREFIX = "label:"
#: The multi-label columns of a view's map frame (:data:`cartomap.analysis.datamap.LABEL_COLUMNS`): the
#: label a point is about (label views), the example's label set, the worst label (the combined view).
__all__ = [
    "COMBINED",
    "LABEL_COLUMNS",
    "UNITS",
    "combined_frame",
    "combined_points",
    "unit_of",
    "unit_trajectory",
    "view_frame",
    "view_title",
    "view_trajectories",
    "views",
]
#: How an empty label set reads.
NO_LABEL = "(none)"


def views(label_names: Sequence[str]) -> list[str]:
    """The views of a run with these labels: the combined map, one per label, every unit."""
    return [COMBINED, *(f"{LABEL_PREFIX}{j}" for j in range(len(label_names))), UNITS]


def view_title(view: str, label_names: Sequence[str]) -> str:
    """How a view reads in a picker: "All labels: each example at its worst label", "One label: sports"."""
    if view == COMBINED:
        return "All labels: each example at its worst label"
    if view == UNITS:
        return "Every (example, label): one point per label of each example"
    return f"One label: {label_names[_label_of(view, label_names)]}"


def _label_of(view: str, label_names: Sequence[str]) -> int:
    if view.startswith(LABEL_PREFIX):
        text = view[len(LABEL_PREFIX) :]
        if text.isdigit() and int(text) < len(label_names):
            return int(text)
    raise RunError(f"unknown view {view!r}; expected one of {', '.join(views(label_names))}")


def _check(run) -> None:
    if not run.task_kind.unit.label_sets:
        raise RunError(
            f"run {run.id}: label views are for multi-label runs; this run's task is {run.task_kind.name}"
        )


def label_sets(label_lists, label_names: Sequence[str] | None = None) -> list[str]:
    """Each row's label names joined by ", " (in label-space order when ``label_names`` is given), or
    :data:`NO_LABEL`."""
    order = {str(n): k for k, n in enumerate(label_names or ())}
    out = []
    for names in label_lists:
        names = sorted((str(n) for n in names), key=lambda n: order.get(n, len(order)))
        out.append(", ".join(names) if names else NO_LABEL)
    return out


def view_frame(
    run, view: str, regions: RegionRule | None = None, burn_out: int | None = None, *, dynamics=None
) -> pd.DataFrame:
    """The map frame of ``view`` (:func:`views`) of a multi-label ``run``, regions drawn by ``regions``
    (default: the run's rule, :meth:`cartomap.runs.store.Run.region_rule`) over the view's own points.
    ``burn_out``: the map after that many recordings (the units' metrics over the first ``burn_out``
    recordings, :func:`cartomap.analysis.epochs.run_map_at`, from ``dynamics`` (ids, logits, labels) of the
    recorded source when given, else read here)."""
    _check(run)
    regions = regions or run.region_rule()
    names = run.label_names
    label = None if view in (COMBINED, UNITS) else _label_of(view, names)
    units = None if burn_out is None else epochs.run_map_at(run, burn_out, dynamics=dynamics)
    if view == COMBINED:
        return combined_frame(run, regions, units=units)
    if units is None:
        units = run.metrics(
            columns=(*map_metric_columns(run.task_kind.unit), "example_id", "label_index", "label_name")
        )
    examples = run.examples(columns=("id", *run.task_kind.text_fields, run.task_kind.label_field))
    n_labels = len(names)
    rows = np.arange(len(units)) if label is None else np.arange(label, len(units), n_labels)
    part = with_regions(units.iloc[rows].reset_index(drop=True), regions)
    part.attrs.setdefault("n_epochs", n_epochs_of(units, run))
    example_rows = rows // n_labels
    text = run.task_kind.text_fields[0]
    unit_examples = pd.DataFrame(
        {"id": part["id"].astype(str).to_numpy(), text: examples[text].to_numpy()[example_rows]}
    )
    out = build_map_frame(part, unit_examples, LABEL_UNIT_CLASSES, unit=run.task_kind.unit)
    out["label_name"] = np.asarray(names, dtype=object)[rows % n_labels]
    out["label_set"] = np.asarray(label_sets(examples[run.task_kind.label_field], names), dtype=object)[
        example_rows
    ]
    return out


def combined_frame(
    run, regions: RegionRule | None = None, *, units: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The combined view: the run's saved combined map (:meth:`cartomap.runs.store.Run.example_metrics`),
    a point per example; gold = its label set, predicted = the labels predicted present after the last
    recording, worst_label = the label it sits at. ``units``: per-unit metrics (every label of every
    example, in order; e.g. over the first k recordings) to aggregate instead
    (:func:`cartomap.scores.label_examples.combined_map`, the saved map's aggregation). Regions by ``regions``
    (default: the run's rule) on its axis, a column of the frame with every other ambiguity axis."""
    _check(run)
    regions = regions or run.region_rule()
    names = run.label_names
    examples = run.examples(columns=("id", *run.task_kind.text_fields, run.task_kind.label_field))
    example_ids = examples["id"].astype(str).tolist()
    if units is None:
        combined = run.example_metrics()
        units = run.metrics(columns=("predicted",))
        if any(axis not in combined.columns for axis in AXIS_COLUMNS):
            # saved before these ambiguity scores existed: aggregated again from the units' metrics (which
            # :meth:`cartomap.runs.store.Run.metrics` computes again from the dynamics)
            combined = combined_map(run.metrics(), example_ids, names)
    else:
        combined = combined_map(units, example_ids, names)
    predicted = units["predicted"].to_numpy(dtype=np.int64).reshape(len(examples), len(names)) == 1
    gold_sets = label_sets(examples[run.task_kind.label_field], names)
    predicted_sets = label_sets([[names[j] for j in np.flatnonzero(row)] for row in predicted], names)
    set_names = sorted(set(gold_sets) | set(predicted_sets))
    code = {name: k for k, name in enumerate(set_names)}
    correctness = combined["correctness"].to_numpy(dtype=np.float64)
    n_epochs = int(
        combined.attrs.get("n_epochs")
        or n_epochs_of(run.metrics(columns=("correctness", "correct_count")), run)
        or 0
    )
    metrics = pd.DataFrame(
        {
            "id": combined["id"].astype(str).to_numpy(),
            "label": np.asarray([code[s] for s in gold_sets], dtype=np.int64),
            "predicted": np.asarray([code[s] for s in predicted_sets], dtype=np.int64),
            "confidence": combined["confidence"].to_numpy(dtype=np.float64),
            **{  # every ambiguity axis the worst labels have: the regions and the map's x are drawn on one
                axis: combined[axis].to_numpy(dtype=np.float64)
                for axis in AXIS_COLUMNS
                if axis in combined.columns
            },
            "correctness": correctness,
            "correct_count": np.round(correctness * n_epochs).astype(np.int64),
            "forgetfulness": combined["forgetfulness"].to_numpy(dtype=np.float64).round().astype(np.int64),
            "region": combined["region"].to_numpy(),
        }
    )
    for column in score_columns(run.task_kind.unit):  # the worst label's other score columns (aum, ...)
        if column in combined.columns and column not in metrics.columns:
            metrics.insert(len(metrics.columns) - 1, column, combined[column].to_numpy())
    metrics.attrs["n_epochs"] = n_epochs
    if "epochs_recorded" in units.attrs:  # a map after k recordings
        metrics.attrs["epochs_recorded"] = units.attrs["epochs_recorded"]
    metrics = with_regions(metrics, regions)
    out = build_map_frame(
        metrics, examples[["id", *run.task_kind.text_fields]], set_names, n_epochs, unit=run.task_kind.unit
    )
    out["worst_label"] = combined["worst_label_name"].to_numpy()
    return out


def unit_of(run, point_id: str, worst_label: str | None = None) -> str:
    """The unit a point of a view is about: a label view's point is its unit (``<id>#<j>``); a point of the
    combined view (an example id) is its worst label's unit: ``worst_label`` (a label name: where the map
    shown puts it, e.g. the map after k recordings) when given, else the run's saved combined map's. RunError
    for an id of neither, or an unknown label."""
    _check(run)
    point_id = str(point_id)
    combined = run.example_metrics()
    row = combined.loc[combined["id"].astype(str) == point_id]
    if not row.empty:
        if worst_label is not None:
            names = [str(n) for n in run.label_names]
            if str(worst_label) not in names:
                raise RunError(f"run {run.id} has no label {worst_label!r}; its labels: {', '.join(names)}")
            return unit_id_of(point_id, names.index(str(worst_label)))
        j = int(row["worst_label"].iloc[0])
        if j < 0:
            raise RunError(f"run {run.id}: example {point_id!r} has no scored label")
        return unit_id_of(point_id, j)
    try:
        example, label = word_key(point_id)
    except DataError:
        example, label = "", len(run.label_names)
    if label >= len(run.label_names) or not (combined["id"].astype(str) == example).any():
        raise RunError(f"run {run.id} has no example or (example, label) {point_id!r}")
    return point_id


def unit_trajectory(
    run, point_id: str, source: str = MAIN_METRICS, worst_label: str | None = None
) -> pd.DataFrame:
    """A label's probability by epoch for a point of a view (:func:`unit_of`: a combined point's worst
    label, ``worst_label`` when given): columns epoch (1-based), gold_prob (of the label's gold state),
    prob_absent and prob_present (sigmoid of its logit), the shape of
    :func:`cartomap.analysis.datamap.gold_trajectory`. Reads only that unit's row of each epoch file.
    attrs: ``unit``, ``label`` (its name) and ``present`` (its gold state)."""
    unit = unit_of(run, point_id, worst_label)
    example, j = word_key(unit)
    examples = run.examples(columns=("id", run.task_kind.label_field))
    labels = examples.loc[examples["id"].astype(str) == example, run.task_kind.label_field].iloc[0]
    present = run.label_names[j] in {str(n) for n in labels}
    source = run.recorded_source(source)
    rows = []
    for epoch in run.dynamics_epochs(source):
        part = pd.read_parquet(run.epoch_path(source, epoch), filters=[("id", "==", unit)])
        if part.empty:
            raise RunError(f"run {run.id}: epoch {epoch} of {source} dynamics lacks {unit!r}")
        logits = part[[c for c in part.columns if c.startswith("logit_")]].to_numpy(dtype=np.float64)[0]
        p = float(sigmoid(logits[1] - logits[0]))  # the row is (0, z)
        rows.append(
            {
                "epoch": epoch + 1,
                "gold_prob": p if present else 1 - p,
                "prob_absent": 1 - p,
                "prob_present": p,
            }
        )
    if not rows:
        raise RunError(f"run {run.id} has no recorded {source} dynamics")
    out = pd.DataFrame(rows)
    out.attrs["unit"] = unit
    out.attrs["label"] = run.label_names[j]
    out.attrs["present"] = present
    return out


def combined_points(units: pd.DataFrame, label_names: Sequence[str]) -> pd.DataFrame:
    """Examples placed on the combined map from their units' metrics ``units`` (a frame of
    :func:`cartomap.scores.metrics.compute_metrics` whose ids are ``<id>#<j>``, every label of each example
    in order): :func:`cartomap.scores.label_examples.combined_map` with the example ids."""
    unit_ids = units["id"].astype(str).to_numpy()
    n_labels = len(label_names)
    example_ids = [word_key(u)[0] for u in unit_ids[::n_labels]] if n_labels else []
    return combined_map(units, example_ids, label_names)


def view_trajectories(
    logits: np.ndarray,
    labels: np.ndarray,
    ids,
    view: str,
    selected,
    label_names: Sequence[str],
    *,
    burn_in=None,
    start: int = 2,
    limit: int | None = epochs.MAX_TRAJECTORIES,
    axis: str = "variability",
) -> pd.DataFrame:
    """The paths of the ``selected`` points of ``view`` as recordings are added, from a multi-label run's
    unit dynamics (``logits`` [E, N * L, 2], ``labels``, unit ``ids``): a label view's point (or a unit of
    the every-pair view) is a unit, its path :func:`cartomap.analysis.epochs.trajectories`; a combined
    point is an example, after k recordings :func:`combined_points` of its labels' metrics over those
    recordings (:func:`cartomap.analysis.epochs.grouped_trajectories`). Columns id, k, confidence,
    variability (and the map's ``axis``, another ambiguity score)."""
    if view != COMBINED:
        return epochs.trajectories(
            logits, labels, ids, selected, burn_in=burn_in, start=start, limit=limit, axis=axis
        )
    groups = {
        str(e): [unit_id_of(e, j) for j in range(len(label_names))]
        for e in dict.fromkeys(str(s) for s in selected)
    }
    return epochs.grouped_trajectories(
        logits,
        labels,
        ids,
        groups,
        lambda units: combined_points(units, label_names),
        burn_in=burn_in,
        start=start,
        limit=limit,
        axis=axis,
    )
