"""What is drawn over a data map figure: the selection's paths over the recordings
(:func:`add_trajectories`), the focused example and its neighbours (:func:`add_neighbour_overlay`) and a
WaNLI batch's generated pairs (:func:`add_generated_overlay`), from the frames of
:mod:`cartomap.analysis.epochs` and :mod:`cartomap.analysis.overlays`; and every id a figure draws as a
point of the map (:func:`figure_ids`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import AXIS_COLUMNS, id_array, sample_rows
from cartomap.analysis.map_points import axis_title, hover_template
from cartomap.analysis.selection import MAIN_XREF, MAIN_YREF
from cartomap.analysis.style import escape, escape_text
from cartomap.scores import ambiguity
from cartomap.scores.metrics import RegionRule

#: Name of the trace :func:`add_trajectories` draws (tests and checks find it by this).
TRAJECTORY_TRACE = "paths of the selection"


def paths_axis(traj: pd.DataFrame) -> str:
    """The map's axis a frame of :func:`cartomap.analysis.epochs.trajectories` places its points on: the
    ambiguity score it has a column of besides variability (which every such frame has), else variability."""
    others = [c for c in AXIS_COLUMNS if c != ambiguity.VARIABILITY and c in traj.columns]
    return others[0] if len(others) == 1 else ambiguity.VARIABILITY


def add_trajectories(fig, traj: pd.DataFrame, current_k: int | None = None, axis: str | None = None):
    """Draw :func:`cartomap.analysis.epochs.trajectories` (id, k, confidence, the map's ``axis``, by default
    the one the frame is on: :func:`paths_axis`) over a data map ``fig`` on its main axes: one dark line with markers per example (markers grow with k, so a path
    reads from its small first point to its large last one), the point of the map after ``current_k``
    recordings ringed in red. One Scattergl trace (paths split by gaps) without ``customdata``: a lasso
    over a path selects no example by it. Hover: the escaped id, k and the point. Returns ``fig``."""
    import plotly.graph_objects as go

    if traj.empty:
        return fig
    axis = axis or paths_axis(traj)
    xs, ys, sizes, hover = [], [], [], []
    k_hi = max(int(traj["k"].max()), 1)
    for example_id, path in traj.groupby("id", sort=False):
        path = path.sort_values("k")
        label = escape_text(example_id)
        for k, conf, var in zip(path["k"], path["confidence"], path[axis], strict=True):
            xs.append(float(var))
            ys.append(float(conf))
            sizes.append(4 + 6 * int(k) / k_hi)
            hover.append(
                f"id: {label}<br>after {int(k)} recordings<br>confidence {conf:.3f} · {axis_title(axis)} {var:.3f}"
            )
        xs.append(None)
        ys.append(None)
        sizes.append(0)
        hover.append("")
    fig.add_trace(
        go.Scattergl(
            x=xs,
            y=ys,
            mode="lines+markers",
            name=f"{TRAJECTORY_TRACE} ({traj['id'].nunique():,})",
            legendgroup="paths",
            connectgaps=False,
            line=dict(color="rgba(20,20,20,0.55)", width=1.2),
            marker=dict(size=sizes, color="rgba(20,20,20,0.8)"),
            hovertext=hover,
            hoverinfo="text",
            xaxis=MAIN_XREF,
            yaxis=MAIN_YREF,
        )
    )
    if current_k is not None:
        now = traj[traj["k"] == int(current_k)]
        if len(now):
            fig.add_trace(
                go.Scattergl(
                    x=now[axis].to_numpy(dtype=np.float64),
                    y=now["confidence"].to_numpy(dtype=np.float64),
                    mode="markers",
                    name=f"after {int(current_k)} recordings",
                    legendgroup="paths",
                    hoverinfo="skip",
                    marker=dict(size=12, color="rgba(0,0,0,0)", line=dict(color="crimson", width=2)),
                    xaxis=MAIN_XREF,
                    yaxis=MAIN_YREF,
                )
            )
    x_hi = float(np.nanmax(traj[axis].to_numpy(dtype=np.float64))) * 1.05
    shown = fig.layout.xaxis.range
    if shown is not None and x_hi > shown[1]:
        fig.update_layout(xaxis=dict(range=[shown[0], x_hi]))
    return fig


#: Names of the traces :func:`add_neighbour_overlay` and :func:`add_generated_overlay` draw.
NEIGHBOUR_TRACE = "focused example and neighbours"


GENERATED_TRACE = "generated pairs"


#: Generated pairs drawn at most (a random sample above; the caption says so).
GENERATED_MAX_POINTS = 5_000


GENERATED_COLORS = {"kept": "#2ca02c"}  # every removal rule grey-red


GENERATED_REMOVED_COLOR = "#d62728"


#: The strip above the map where pairs without a confidence are drawn (fraction of the figure's height).
STRIP_DOMAIN = (0.745, 0.83)


def add_neighbour_overlay(fig, overlay: pd.DataFrame, axis: str | None = None):
    """Draw :func:`cartomap.analysis.overlays.neighbour_overlay` over a data map ``fig``: the focused example
    a large star, its neighbours diamonds (filled: the seed's gold label; open: another label), outlined in
    black so they stand out of any colouring. Hover: the escaped id, role and label only (never text), and
    the point on the map's ``axis`` (default: the overlay's, ``attrs["axis"]``, else the default rule's).
    ``customdata`` is the example id, so a click on a marker selects that example. Returns ``fig``."""
    import plotly.graph_objects as go

    if overlay.empty:
        return fig
    axis = axis or overlay.attrs.get("axis") or RegionRule().axis
    seed = overlay["role"].to_numpy() == "seed"
    same = overlay["same_label"].to_numpy(dtype=bool)
    symbols = np.where(seed, "star", np.where(same, "diamond", "diamond-open"))
    sizes = np.where(seed, 20, 13)
    roles = np.where(
        seed, "focused example", np.where(same, "neighbour, same label", "neighbour, other label")
    )
    hover = (
        "id: "
        + escape(overlay["id"])
        + "<br>"
        + pd.Series(roles, dtype=object)
        + " · label "
        + escape(overlay["label"])
    ).to_numpy(dtype=object)
    fig.add_trace(
        go.Scattergl(
            x=overlay["x"].to_numpy(dtype=np.float64),
            y=overlay["y"].to_numpy(dtype=np.float64),
            mode="markers",
            name=f"{NEIGHBOUR_TRACE} ({len(overlay) - int(seed.sum())})",
            customdata=id_array(overlay["id"]),
            hovertext=hover,
            hovertemplate=hover_template(axis),
            marker=dict(
                symbol=symbols.tolist(),
                size=sizes.tolist(),
                color=np.where(seed, "#ffd700", "#ff7f0e").tolist(),
                line=dict(color="black", width=1.5),
            ),
            xaxis=MAIN_XREF,
            yaxis=MAIN_YREF,
        )
    )
    x_hi = float(np.nanmax(overlay["x"].to_numpy(dtype=np.float64))) * 1.05
    shown_range = fig.layout.xaxis.range
    if shown_range is not None and x_hi > shown_range[1]:  # a neighbour filtered out of the map's range
        fig.update_layout(xaxis=dict(range=[shown_range[0], x_hi]))
    return fig


def add_generated_overlay(fig, overlay: pd.DataFrame, seed: int = 0):
    """Draw :func:`cartomap.analysis.overlays.generated_overlay` over a data map ``fig``, coloured by status
    (kept green, removed red, ``status`` in the hover). Pairs with a confidence go on the map; pairs without
    one (what Stage 3 writes) on a strip of their own above the map (axis ``y3``, the main axes shortened to
    make room): x is their estimated variability, the height within the strip only separates kept (upper
    row) from removed (lower row) and spreads the points. At most :data:`GENERATED_MAX_POINTS` are drawn (a
    random sample). No ``customdata``: a lasso over them selects no example. Hover: the escaped pair id,
    intended label and status. Returns ``fig``."""
    import plotly.graph_objects as go

    if overlay.empty:
        return fig
    shown = sample_rows(overlay.reset_index(drop=True), GENERATED_MAX_POINTS, seed)
    on_map = np.isfinite(shown["y"].to_numpy(dtype=np.float64))
    kept = shown["status"].to_numpy() == "kept"
    rng = np.random.default_rng(seed)
    strip_y = np.where(kept, 0.7, 0.3) + rng.uniform(-0.18, 0.18, len(shown))
    if (~on_map).any():
        fig.update_layout(
            yaxis=dict(domain=[0, STRIP_DOMAIN[0] - 0.015]),
            yaxis3=dict(
                domain=list(STRIP_DOMAIN),
                anchor="x",
                range=[0, 1],
                showticklabels=False,
                showgrid=False,
                zeroline=False,
                title=dict(text="generated", font=dict(size=10)),
            ),
        )
    for is_kept, name, colour in (
        (True, "kept", GENERATED_COLORS["kept"]),
        (False, "removed", GENERATED_REMOVED_COLOR),
    ):
        for placed in (True, False):
            part = (kept == is_kept) & (on_map == placed)
            if not part.any():
                continue
            rows = shown[part]
            hover = (
                "generated "
                + escape(rows["gen_id"])
                + "<br>intended "
                + escape(rows["label"])
                + " · "
                + escape(rows["status"])
            ).to_numpy(dtype=object)
            fig.add_trace(
                go.Scattergl(
                    x=rows["x"].to_numpy(dtype=np.float64),
                    y=rows["y"].to_numpy(dtype=np.float64) if placed else strip_y[part],
                    mode="markers",
                    name=f"{GENERATED_TRACE}: {name} ({int(part.sum()):,})",
                    legendgroup=f"generated-{name}",
                    hovertext=hover,
                    hovertemplate=(
                        hover_template(ambiguity.VARIABILITY)  # drawn on a map whose x is variability
                        if placed
                        else "%{hovertext}<br>estimated max variability %{x:.3f}<extra></extra>"
                    ),
                    marker=dict(
                        symbol="triangle-up" if is_kept else "triangle-down",
                        size=9,
                        color=colour,
                        opacity=0.85,
                        line=dict(color="white", width=0.5),
                    ),
                    xaxis=MAIN_XREF,
                    yaxis=MAIN_YREF if placed else "y3",
                )
            )
    x_hi = float(np.nanmax(overlay["x"].to_numpy(dtype=np.float64))) * 1.05
    shown_range = fig.layout.xaxis.range
    if shown_range is not None and x_hi > shown_range[1]:
        fig.update_layout(xaxis=dict(range=[shown_range[0], x_hi]))
    return fig


def figure_ids(fig) -> list[str]:
    """Every id drawn as a point of the map's scatter traces (for tests and checks; the markers of
    :func:`add_neighbour_overlay`, drawn over points of the map, are not counted again)."""
    return [
        str(i)
        for t in fig.data
        if t.type == "scattergl"
        and t.customdata is not None
        and not str(t.name or "").startswith(NEIGHBOUR_TRACE)
        for i in t.customdata
    ]
