"""The data maps of a multi-label run, as map frames (:func:`cartomap.analysis.datamap.build_map_frame`).

A multi-label run records one unit per (example, label) (:mod:`cartomap.tasks.multilabel`), so it has
several maps, each a *view* (:func:`views`):

* ``label:<j>``: one label's map, a point per example for label j: its unit's metrics, gold "present" or
  "absent", regions ranked among that label's points (every label its own ambiguous share);
* ``combined``: a point per example at its worst label (the run's saved combined map,
  :func:`cartomap.scores.multilabel.example_metrics` with method ``min``), gold and prediction the label
  sets ("politics, sports"; "(none)" for an empty set);
* ``units``: every (example, label) on one map.

Rows of a label view keep the unit ids (``<id>#<j>``, the keys of the recorded dynamics); the combined
view has the example ids. Both carry :data:`LABEL_COLUMNS` for the selection table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import (
    LABEL_COLUMNS,
    MAP_METRIC_COLUMNS,
    build_map_frame,
    n_epochs_of,
    with_regions,
)
from cartomap.errors import RunError
from cartomap.scores.metrics import RegionRule
from cartomap.tasks.base import LABEL_UNIT_CLASSES

COMBINED = "combined"
UNITS = "units"
LABEL_PREFIX = "label:"
#: The multi-label columns of a view's map frame (:data:`cartomap.analysis.datamap.LABEL_COLUMNS`): the
#: label a point is about (label views), the example's label set, the worst label (the combined view).
__all__ = ["COMBINED", "LABEL_COLUMNS", "UNITS", "combined_frame", "view_frame", "views", "view_title"]
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
    if run.task_kind.unit != "label":
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


def view_frame(run, view: str, regions: RegionRule | None = None) -> pd.DataFrame:
    """The map frame of ``view`` (:func:`views`) of a multi-label ``run``, regions drawn by ``regions``
    (default by rank) over the view's own points."""
    _check(run)
    names = run.label_names
    if view == COMBINED:
        return combined_frame(run, regions)
    label = None if view == UNITS else _label_of(view, names)
    units = run.metrics(columns=(*MAP_METRIC_COLUMNS, "example_id", "label_index", "label_name"))
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
    out = build_map_frame(part, unit_examples, LABEL_UNIT_CLASSES)
    out["label_name"] = np.asarray(names, dtype=object)[rows % n_labels]
    out["label_set"] = np.asarray(label_sets(examples[run.task_kind.label_field], names), dtype=object)[
        example_rows
    ]
    return out


def combined_frame(run, regions: RegionRule | None = None) -> pd.DataFrame:
    """The combined view: the run's saved combined map (:meth:`cartomap.runs.store.Run.example_metrics`),
    a point per example; gold = its label set, predicted = the labels predicted present after the last
    recording, worst_label = the label it sits at."""
    _check(run)
    names = run.label_names
    combined = run.example_metrics()
    examples = run.examples(columns=("id", *run.task_kind.text_fields, run.task_kind.label_field))
    units = run.metrics(columns=("predicted",))
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
            "variability": combined["variability"].to_numpy(dtype=np.float64),
            "correctness": correctness,
            "correct_count": np.round(correctness * n_epochs).astype(np.int64),
            "forgetfulness": combined["forgetfulness"].to_numpy(dtype=np.float64).round().astype(np.int64),
            "region": combined["region"].to_numpy(),
        }
    )
    metrics.attrs["n_epochs"] = n_epochs
    metrics = with_regions(metrics, regions)
    out = build_map_frame(metrics, examples[["id", *run.task_kind.text_fields]], set_names, n_epochs)
    out["worst_label"] = combined["worst_label_name"].to_numpy()
    return out
