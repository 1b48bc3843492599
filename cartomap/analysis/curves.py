"""Training curves of one run, live while it trains: loss and accuracy per epoch, the loss every k steps
(smoothed) and the current epoch's loss so far.

* :func:`training_curves`: the run's per-epoch records (``history.json``) and its status (``status.json``)
  as one tidy frame, one row per point;
* :func:`step_curve`: the run's step log (:mod:`cartomap.runs.steps`) as the training loss by fractional
  epoch, with its exponential moving average (:func:`smoothed`);
* :func:`training_curves_figure`: both drawn as two panels, loss and accuracy, the point of the epoch in
  progress hollow, the per-step loss faint with its moving average over it.

Pure functions of plain dicts (no run, no streamlit): the job panel calls them on every poll.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.runs.state import State
from cartomap.scores import entities

#: Columns of :func:`training_curves`.
CURVE_COLUMNS = ("epoch", "metric", "panel", "value", "live")
#: Columns of :func:`step_curve`.
STEP_COLUMNS = ("epoch", "global_step", "loss", "smoothed")
LOSS, ACCURACY = "loss", "accuracy"
#: The names of the step curve's two lines.
STEP_LOSS, STEP_SMOOTHED = "train loss per step", "train loss per step (moving average)"
#: The moving average's span, in log points: a tenth of an epoch's points, within these bounds.
SPAN_MIN, SPAN_MAX = 2, 50


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if np.isfinite(value) else None


def _metrics_of(record: Mapping[str, Any], test_names: Sequence[str]) -> list[tuple[str, str, float]]:
    """(metric name, panel, value) of one epoch record: train loss, dev loss, dev accuracy (and a token run's
    dev entity F1) and test accuracy."""
    out = []
    for key, name, panel in (
        ("train_loss", "train loss", LOSS),
        ("dev_loss", "dev loss", LOSS),
        ("dev_accuracy", "dev accuracy", ACCURACY),
        (entities.f1_key("dev"), "dev entity F1", ACCURACY),  # named entities: F1 of whole entities
    ):
        value = _number(record.get(key))
        if value is not None:
            out.append((name, panel, value))
    tests = sorted(
        (
            k
            for k in record
            if k.startswith("test_") and k.endswith("_accuracy") and k.split("_")[1].isdigit()
        ),
        key=lambda k: int(k.split("_")[1]),
    )
    for key in tests:
        k = int(key.split("_")[1])
        value = _number(record.get(key))
        if value is not None:
            name = f"test accuracy ({test_names[k]})" if k < len(test_names) else f"test {k} accuracy"
            out.append((name, ACCURACY, value))
    return out


def training_curves(
    history: Sequence[Mapping[str, Any]],
    status: Mapping[str, Any] | None = None,
    test_names: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per point of the run's curves: columns :data:`CURVE_COLUMNS`.

    Every completed epoch k (1-based, record k of ``history``) gives its train loss, dev loss, dev
    accuracy and test accuracies at ``epoch`` = k (``live`` False). While the run is ``running`` in an
    epoch not yet in the history, its status adds the mean train loss of that epoch so far at
    ``epoch`` = (epoch - 1) + step / steps_per_epoch (``metric`` "train loss", ``live`` True)."""
    rows = []
    for position, record in enumerate(history, start=1):
        epoch = _number(record.get("epoch")) or position
        for name, panel, value in _metrics_of(record, test_names):
            rows.append((float(epoch), name, panel, value, False))
    status = status or {}
    epoch, step, per_epoch = status.get("epoch"), status.get("step"), status.get("steps_per_epoch")
    loss = _number(status.get("loss"))
    if (
        status.get("state") == State.RUNNING
        and loss is not None
        and _number(epoch) is not None
        and int(epoch) > len(history)
        and _number(step) is not None
        and _number(per_epoch)
    ):
        x = int(epoch) - 1 + min(1.0, float(step) / float(per_epoch))
        rows.append((x, "train loss", LOSS, loss, True))
    frame = pd.DataFrame(rows, columns=list(CURVE_COLUMNS))
    return frame.astype({"epoch": np.float64, "value": np.float64, "live": bool})


def smoothed(values: Sequence[float], span: float) -> np.ndarray:
    """The exponential moving average of ``values`` with bias correction (pandas ``ewm(span=span,
    adjust=True)``: s_t = sum_i w^(t-i) v_i / sum_i w^(t-i), w = 1 - 2 / (span + 1)), so the first points
    are not pulled towards 0 as a plain EMA started at 0 would be (TensorBoard's smoothing does the same)."""
    return (
        pd.Series(np.asarray(values, dtype=np.float64)).ewm(span=float(span), adjust=True).mean().to_numpy()
    )


def step_span(records: Sequence[Mapping[str, Any]]) -> float:
    """The moving average's span for a step log: a tenth of its points per epoch, within
    [:data:`SPAN_MIN`, :data:`SPAN_MAX`]."""
    per_epoch = pd.Series([int(r["epoch"]) for r in records]).value_counts().max() if records else 0
    return float(min(max(per_epoch / 10, SPAN_MIN), SPAN_MAX))


def step_curve(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The training loss every k steps (the records of :func:`cartomap.runs.steps.read`) as columns
    :data:`STEP_COLUMNS`: ``epoch`` = epoch - 1 + step / steps_per_epoch (fractional, on the epoch curves'
    axis), ``loss`` as logged, ``smoothed`` its moving average (:func:`smoothed`, :func:`step_span`),
    over the whole log (it runs on across epochs)."""
    rows = [
        (
            int(r["epoch"]) - 1 + min(1.0, float(r["step"]) / float(r["steps_per_epoch"])),
            int(r["global_step"]),
            float(r["loss"]),
        )
        for r in records
        if _number(r.get("loss")) is not None and _number(r.get("steps_per_epoch"))
    ]
    frame = pd.DataFrame(rows, columns=list(STEP_COLUMNS[:3]))
    frame["smoothed"] = (
        smoothed(frame["loss"], step_span(records)) if len(frame) else np.array([], dtype=float)
    )
    return frame.astype(
        {"epoch": np.float64, "global_step": np.int64, "loss": np.float64, "smoothed": np.float64}
    )


def training_curves_figure(frame: pd.DataFrame, height: int = 300, steps: pd.DataFrame | None = None):
    """Two panels side by side, loss and accuracy by epoch, one line per metric; the live point (the
    epoch in progress) hollow, joined to its metric's last epoch by a dotted line. With ``steps``
    (:func:`step_curve`), the loss every k steps is drawn in the loss panel, faint, with its moving average
    over it."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from cartomap.analysis.style import escape_text, palette_color

    fig = make_subplots(rows=1, cols=2, subplot_titles=("loss", "accuracy"), horizontal_spacing=0.1)
    names = list(dict.fromkeys(frame["metric"]))
    if steps is not None and len(steps):
        colour = palette_color(len(names))
        for name, column, style in (
            (STEP_LOSS, "loss", dict(color=colour, width=1)),
            (STEP_SMOOTHED, "smoothed", dict(color=colour, width=2.5)),
        ):
            fig.add_trace(
                go.Scatter(
                    x=steps["epoch"],
                    y=steps[column],
                    mode="lines",
                    name=name,
                    legendgroup="steps",
                    line=style,
                    opacity=0.35 if column == "loss" else 1.0,
                    customdata=steps["global_step"],
                    hovertemplate="step %{customdata}: %{y:.4f}<extra></extra>",
                ),
                row=1,
                col=1,
            )
    for i, name in enumerate(names):
        part = frame[frame["metric"] == name].sort_values("epoch")
        col = 1 if part["panel"].iloc[0] == LOSS else 2
        done, live = part[~part["live"]], part[part["live"]]
        colour = palette_color(i)
        if len(done):
            fig.add_trace(
                go.Scatter(
                    x=done["epoch"],
                    y=done["value"],
                    mode="lines+markers",
                    name=escape_text(name),
                    legendgroup=escape_text(name),
                    line=dict(color=colour),
                ),
                row=1,
                col=col,
            )
        if len(live):
            joined = pd.concat([done.tail(1), live])
            fig.add_trace(
                go.Scatter(
                    x=joined["epoch"],
                    y=joined["value"],
                    mode="lines+markers",
                    name=escape_text(f"{name} (this epoch so far)"),
                    legendgroup=escape_text(name),
                    line=dict(color=colour, dash="dot"),
                    marker=dict(symbol="circle-open", size=9),
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="epoch", rangemode="tozero")
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=50, r=10, t=30, b=40),
        legend=dict(orientation="h", y=-0.25),
        hovermode="x unified",
        meta={"metrics": names, "steps": 0 if steps is None else int(len(steps))},
    )
    return fig
