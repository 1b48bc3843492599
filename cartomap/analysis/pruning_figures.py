"""The figures of a pruning experiment's results (:mod:`cartomap.experiments.pruning`): the model
confidence of the out-of-fold mismatches by category, and the test mismatches' change in confidence from
Model 0 to Model 1 by mismatch type.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from cartomap.analysis.style import escape
from cartomap.scores.consensus import TYPE_NAMES, category_label


def confidence_histogram(
    oof: pd.DataFrame, label_names: Sequence[str], threshold: float | None = None, categories=None
):
    """Plotly histogram of model confidence of the OOF mismatches, one colour per category
    (only ``categories`` when given), with the threshold as a dashed line. Higher = more suspect."""
    import plotly.graph_objects as go

    wrong = oof[oof["category"] != ""]
    cats = sorted(wrong["category"].unique()) if categories is None else list(categories)
    fig = go.Figure()
    for c in cats:
        values = wrong.loc[wrong["category"] == c, "confidence"]
        name = escape([category_label(c, label_names)])[0]  # label names are data: plotly renders tags
        fig.add_trace(go.Histogram(x=values, name=name, opacity=0.65, nbinsx=40))
    fig.update_layout(
        barmode="overlay",
        xaxis_title="model confidence |z[pred] − z[gold]|",
        yaxis_title="examples",
        legend_title="category",
        margin={"t": 30, "b": 40},
    )
    if threshold is not None:
        fig.add_vline(x=float(threshold), line_dash="dash", annotation_text=f"threshold {threshold:g}")
    return fig


def change_scatter(test: pd.DataFrame, column: str = "type"):
    """Plotly scatter of the test mismatches: x = Model 0's confidence, y = change (Model 1 − Model 0),
    colour = mismatch type (``column``: "type" or "type_chosen")."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for t, name in TYPE_NAMES.items():
        part = test[test[column] == t]
        fig.add_trace(
            go.Scattergl(
                x=part["conf0"],
                y=part["change"],
                mode="markers",
                name=f"{name} ({len(part)})",
                hovertext=escape(part["id"].astype(str)),
                hovertemplate="%{hovertext}<br>Model 0 %{x:.2f} · change %{y:+.2f}<extra></extra>",
                marker={"size": 6, "opacity": 0.7},
            )
        )
    fig.add_hline(y=0, line_color="grey", line_width=1)
    fig.update_layout(
        xaxis_title="Model 0 confidence",
        yaxis_title="change in confidence (Model 1 − Model 0)",
        margin={"t": 30, "b": 40},
    )
    return fig
