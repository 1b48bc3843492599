"""The interactive data map figures (plotly) and the charts of an example's probability by epoch.

* :func:`data_map_figure`: the interactive data map (plotly WebGL), the same for the dashboard and
  for ``cartomap map --out map.html``; above ``max_points`` a density layer of every point under a
  random sample; marginal histograms of every row and of the selection (:func:`marginal_traces`).
* :func:`facet_map_figure`: the map split into panels, one per gold label.
* :func:`trajectory_figure`, :func:`seed_trajectory_figure`: an example's probability by epoch.

Their points come from :mod:`cartomap.analysis.map_points`, their colours and the escape of dataset text
from :mod:`cartomap.analysis.style`; what is drawn over a map is :mod:`cartomap.analysis.overlay_figures`,
a map as a file (the static matplotlib map, PNG, HTML) :mod:`cartomap.analysis.map_files`.

x = the map's ambiguity axis (:func:`cartomap.analysis.datamap.axis_of`: the axis its regions were drawn
on; Cartography's variability or another score of :mod:`cartomap.scores.ambiguity`), y = confidence,
colour = correctness bucket ("k/E": correct in k of E epochs; or label /
region / genre). Region labels sit at the median point of their region's examples (the rule that drew
the regions is :func:`cartomap.analysis.datamap.rule_of`); without regions at the reference's places:
"easy-to-learn" top left, "ambiguous" middle right, "hard-to-learn" bottom left.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from cartomap.analysis import colourings
from cartomap.analysis.datamap import (
    DEFAULT_MAX_POINTS,
    SENTENCE,
    as_map_frame,
    axis_of,
    frame_memo,
    id_array,
    positions_of,
    sample_rows,
    str_array,
    unique_ids,
)
from cartomap.analysis.map_points import (
    axis_title,
    check_color_by,
    check_map_columns,
    colour_groups,
    colouring_of,
    finite_range,
    go_scatter_rings,
    point_traces,
)
from cartomap.analysis.selection import MAIN_XREF, MAIN_YREF
from cartomap.analysis.style import escape_text, palette_color
from cartomap.scores.metrics import AMBIGUOUS, EASY, HARD
from cartomap.tasks import registry as task_kinds

#: The region labels: (region, x and y in the axes' fractions without regions, rotation, edge colour).
ANNOTATIONS = (
    (AMBIGUOUS, 0.9, 0.5, 350, "black"),
    (EASY, 0.27, 0.85, 0, "r"),
    (HARD, 0.35, 0.25, 0, "b"),
)


#: A region label's box in the fractions of the map's axes: width per character plus padding, and height
#: (a little larger than the labels of either figure: 15 pt on the PNG, 13 px on the interactive map).
LABEL_CHAR_WIDTH, LABEL_PAD, LABEL_HEIGHT = 0.0125, 0.025, 0.07
#: Cells per axis of the grid a label's place is searched on.
LABEL_GRID = 50
#: The confidence range every data map draws.
CONFIDENCE_RANGE = (-0.02, 1.02)


def map_x_range(x: np.ndarray) -> tuple[float, float]:
    """The x range a data map draws for the axis values ``x``: -0.01 (or below) to 1.05 times the largest."""
    finite = np.asarray(x, dtype=np.float64)[np.isfinite(x)]
    if not finite.size:
        return 0.0, 0.5
    return min(-0.01, float(finite.min())), max(0.05, float(finite.max()) * 1.05)


def label_box(text: str) -> tuple[float, float]:
    """(width, height) of a region label's box in the fractions of the map's axes."""
    return LABEL_PAD + LABEL_CHAR_WIDTH * len(text), LABEL_HEIGHT


def region_label_points(frame: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Where each region's label goes, in data coordinates (the map's axis, confidence), for every region
    present in ``frame``'s region column ({} without one): the centre of the place nearest the median of
    the region's examples where the label's box (:func:`label_box`) covers no point of ``frame`` and no
    label placed before it, on a :data:`LABEL_GRID` grid over the map's ranges (:func:`map_x_range`,
    :data:`CONFIDENCE_RANGE`); where no place is free, the one covering the fewest points. A label never
    hides the points of a crowded corner (a token map's easy words)."""
    if "region" not in frame.columns or frame.empty:
        return {}
    regions = str_array(frame["region"])
    x = frame[axis_of(frame)].to_numpy(dtype=np.float64)
    y = frame["confidence"].to_numpy(dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x_range = map_x_range(x)
    counts, _, _ = np.histogram2d(x[ok], y[ok], bins=LABEL_GRID, range=[x_range, CONFIDENCE_RANGE])
    out = {}
    for region in (EASY, AMBIGUOUS, HARD):
        sel = (regions == region) & ok
        if not sel.any():
            continue
        anchor = (float(np.median(x[sel])), float(np.median(y[sel])))
        box = free_place(counts, anchor, label_box(region), x_range)
        i, j, w, h = box
        counts[i : i + w, j : j + h] += len(frame) + 1  # taken: no later label goes over it
        out[region] = (
            x_range[0] + (i + w / 2) / LABEL_GRID * (x_range[1] - x_range[0]),
            CONFIDENCE_RANGE[0] + (j + h / 2) / LABEL_GRID * (CONFIDENCE_RANGE[1] - CONFIDENCE_RANGE[0]),
        )
    return out


def free_place(
    counts: np.ndarray, anchor: tuple[float, float], size: tuple[float, float], x_range: tuple[float, float]
) -> tuple[int, int, int, int]:
    """(i, j, w, h): the w x h block of cells of ``counts`` (points per cell [G, G], x then y) for a box of
    ``size`` (axes fractions) that holds the fewest points, nearest ``anchor`` (data coordinates) among
    those: sum over the block, by a summed-area table; distance in axes fractions from the block's centre."""
    g = counts.shape[0]
    w, h = (min(g, int(np.ceil(f * g))) for f in size)
    table = np.zeros((g + 1, g + 1))
    table[1:, 1:] = counts.cumsum(0).cumsum(1)
    inside = table[w:, h:] - table[:-w, h:] - table[w:, :-h] + table[:-w, :-h]  # [g - w + 1, g - h + 1]
    ax = (anchor[0] - x_range[0]) / (x_range[1] - x_range[0]) * g
    ay = (anchor[1] - CONFIDENCE_RANGE[0]) / (CONFIDENCE_RANGE[1] - CONFIDENCE_RANGE[0]) * g
    ci = np.arange(inside.shape[0])[:, None] + w / 2
    cj = np.arange(inside.shape[1])[None, :] + h / 2
    distance = np.hypot(ci - ax, cj - ay)
    fewest = inside <= inside.min()
    i, j = np.unravel_index(np.argmin(np.where(fewest, distance, np.inf)), inside.shape)
    return int(i), int(j), w, h


DENSITY_BINS = 80


HIGHLIGHT_MAX_POINTS = 5_000


#: Names of the marginal histograms' traces (:func:`marginal_traces`): every row, and the selection.
MARGINAL_ALL = "all examples"
MARGINAL_SELECTED = "selected"
MARGINAL_BINS = 40
#: The marginal histograms' colours: the map's axis (top) and confidence (right).
AXIS_COLOR, CONFIDENCE_COLOR = "teal", "#622a87"
SELECTED_HIST_COLOR = "rgba(230,120,0,0.75)"


def _examples(n: int) -> str:
    return f"{n:,} example" + ("" if n == 1 else "s")


def marginal_traces(frame: pd.DataFrame, selected_positions: np.ndarray | None = None) -> list:
    """The data map's marginal histograms: the map's axis on top (axes ``x``/``y2``), confidence on the right
    (``x2``/``y``), :data:`MARGINAL_BINS` bins over every row of ``frame``. With a selection
    (``selected_positions``: row positions in ``frame``; None or empty: none) the selection's histogram is
    drawn over each one on the same bins, and both give the share of their own examples (%), so that 40
    selected of 550,000 show their shape beside the whole one; the hover gives each bar's count and share.
    No ``customdata``: a click on a bar selects no example. Traces are named "<column>: all examples" and
    "<column>: selected (<n>)"."""
    import plotly.graph_objects as go

    chosen = None if selected_positions is None or not len(selected_positions) else selected_positions

    def whole(values: np.ndarray):  # (bin edges, counts, size) of every finite value; None if none
        everything = values[np.isfinite(values)]
        if not everything.size:
            return None
        lo, hi = float(everything.min()), float(everything.max())
        edges = np.linspace(lo, hi, MARGINAL_BINS + 1)  # numpy's equal bins over the values' range
        if not np.all(np.diff(edges) > 0):  # one value, or values a rounding error apart (numpy refuses
            # those): numpy's range for a single value, one unit wide around it
            edges = np.linspace(lo - 0.5, hi + 0.5, MARGINAL_BINS + 1)
        return edges, np.histogram(everything, bins=edges)[0], everything.size

    traces = []
    axis = axis_of(frame)
    for column, colour in ((axis, AXIS_COLOR), ("confidence", CONFIDENCE_COLOR)):
        values = frame[column].to_numpy(dtype=np.float64)
        summary = frame_memo(frame, ("marginal", column), lambda values=values: whole(values))
        if summary is None:
            continue
        edges, all_counts, n_all = summary
        parts = [(MARGINAL_ALL, all_counts, n_all, colour)]
        if chosen is not None:
            picked = values[chosen]
            picked = picked[np.isfinite(picked)]
            parts.append(
                (
                    f"{MARGINAL_SELECTED} ({len(chosen):,})",
                    np.histogram(picked, bins=edges)[0],
                    picked.size,
                    SELECTED_HIST_COLOR,
                )
            )
        centers, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
        along = "x" if column == axis else "y"
        title = axis_title(column) if column == axis else column
        for name, counts, size, fill in parts:
            if chosen is None:
                height = counts
                hover = [_examples(n) for n in counts.tolist()]
            else:
                height = 100.0 * counts / max(size, 1)
                whom = name.split(" (")[0]
                hover = [
                    f"{_examples(n)}, {h:.1f} % of {whom}"
                    for n, h in zip(counts.tolist(), height, strict=True)
                ]
            bar = go.Bar(  # no customdata: a click on a bar selects no example
                width=width,
                hovertext=hover,
                name=escape_text(f"{title}: {name}"),
                showlegend=False,
                marker_color=fill,
                hovertemplate=f"{name}<br>{title} %{{{along}:.3f}}: %{{hovertext}}<extra></extra>",
            )
            if column == axis:
                bar.update(x=centers, y=height, xaxis="x", yaxis="y2")
            else:
                bar.update(y=centers, x=height, orientation="h", xaxis="x2", yaxis="y")
            traces.append(bar)
    return traces


def _density_trace(frame: pd.DataFrame, all_x: np.ndarray, all_y: np.ndarray, x_hi: float):
    """The grey heatmap under a sampled map: log10(count + 1) of every point of ``frame`` in square-root
    bins over [0, ``x_hi``] x [-0.02, 1.02] (empty bins NaN; more points, darker)."""
    import plotly.graph_objects as go

    def density():  # log10(count + 1) of every point in bins, empty bins NaN; rows = y
        ok = np.isfinite(all_x) & np.isfinite(all_y)
        bins = int(np.clip(np.sqrt(ok.sum()) / 4, 20, DENSITY_BINS))
        z, xe, ye = np.histogram2d(all_x[ok], all_y[ok], bins=bins, range=[[0, x_hi], [-0.02, 1.02]])
        return np.where(z > 0, np.log10(z + 1), np.nan).T, xe, ye

    z, xe, ye = frame_memo(frame, ("density", x_hi), density)
    return go.Heatmap(
        x=(xe[:-1] + xe[1:]) / 2,
        y=(ye[:-1] + ye[1:]) / 2,
        z=z,
        colorscale="Greys",
        showscale=False,
        opacity=0.55,
        hoverinfo="skip",
        name="density (all points)",
        xaxis=MAIN_XREF,
        yaxis=MAIN_YREF,
    )


def _selection_rings(
    frame: pd.DataFrame, highlight_ids: Iterable[str], max_points: int, seed: int, marker_size: int
):
    """(rings trace or None, positions of every selected row of ``frame``): black rings around the
    selection, a sample of min(``max_points``, :data:`HIGHLIGHT_MAX_POINTS`) of them (as
    :func:`sample_rows` draws it) when more; rings and lines thinner above 1,000 selected."""
    import plotly.graph_objects as go

    axis = axis_of(frame)
    high_pos = positions_of(frame, unique_ids(highlight_ids))
    n_high = len(high_pos)
    cap = min(max_points, HIGHLIGHT_MAX_POINTS)
    if n_high > cap:  # the rings of a sample (as sample_rows draws it): only their rows taken
        high_pos_drawn = high_pos[
            np.sort(np.random.default_rng(seed).choice(n_high, size=cap, replace=False))
        ]
    else:
        high_pos_drawn = high_pos
    high = frame.iloc[high_pos_drawn][["id", axis, "confidence"]]
    if not len(high):
        return None, high_pos
    rings = go.Scattergl(
        x=high[axis].to_numpy(dtype=np.float64),
        y=high["confidence"].to_numpy(dtype=np.float64),
        mode="markers",
        name=f"selected ({n_high:,})",
        customdata=id_array(high["id"]),
        hoverinfo="skip",  # the points under the rings have the hover text
        marker=dict(
            size=marker_size + (5 if n_high <= 1_000 else 2),
            color="rgba(0,0,0,0)",
            line=dict(color="black", width=1.5 if n_high <= 1_000 else 0.8),
        ),
        xaxis=MAIN_XREF,
        yaxis=MAIN_YREF,
    )
    return rings, high_pos


def _add_region_labels(fig, frame: pd.DataFrame) -> None:
    """The region names of :data:`ANNOTATIONS` on ``fig``: at their region's label point when regions
    are drawn (a region without points gets none), else at the corners of the axes' domain."""
    points = frame_memo(frame, "region labels", lambda: region_label_points(frame))
    for text, ax_x, ax_y, rotation, edge in ANNOTATIONS:
        at = points.get(text)
        if points and at is None:
            continue  # regions drawn, none of this one
        fig.add_annotation(
            text=text,
            x=at[0] if at is not None else ax_x,
            y=at[1] if at is not None else ax_y,
            xref="x" if at is not None else "x domain",
            yref="y" if at is not None else "y domain",
            showarrow=False,
            textangle=(360 - rotation) % 360,
            font=dict(size=13, color="black"),
            bgcolor="rgba(255,255,255,0.85)",
            bordercolor={"r": "red", "b": "blue"}.get(edge, edge),
            borderwidth=2,
            borderpad=3,
        )


def _data_map_layout(
    *,
    title: str,
    note: str,
    height: int,
    continuous: bool,
    legend_title: str,
    axis: str,
    x_hi: float,
    meta: dict,
) -> dict:
    """The layout of :func:`data_map_figure`: the main axes on the lower left 83% (x in [-0.01, ``x_hi``],
    confidence in [-0.03, 1.03]), the marginals' axes above and right, lasso, the legend above, room
    below for a colour bar when ``continuous``."""
    return dict(
        title=dict(
            text=escape_text(f"{title} data map · {note}".strip(" ·")),
            font=dict(size=14),
            x=0.01,
            y=0.99,
            yanchor="top",
        ),
        template="plotly_white",
        height=height,
        margin=dict(l=60, r=20, t=70, b=130 if continuous else 50),
        dragmode="lasso",
        hovermode="closest",
        bargap=0,
        barmode="overlay",
        legend=dict(
            title=dict(text=legend_title),
            orientation="h",
            yanchor="bottom",
            y=1.005,
            x=1,
            xanchor="right",
            bgcolor="rgba(255,255,255,0.6)",
        ),
        xaxis=dict(domain=[0, 0.83], title=dict(text=axis_title(axis)), range=[-0.01, x_hi], zeroline=False),
        yaxis=dict(domain=[0, 0.83], title=dict(text="confidence"), range=[-0.03, 1.03], zeroline=False),
        yaxis2=dict(domain=[0.85, 1], anchor="x", showticklabels=False, showgrid=False),
        xaxis2=dict(domain=[0.85, 1], anchor="y", showticklabels=False, showgrid=False),
        meta=meta,
    )


def data_map_figure(
    frame: pd.DataFrame,
    color_by: str = "correctness",
    max_points: int = DEFAULT_MAX_POINTS,
    seed: int = 0,
    *,
    highlight_ids: Iterable[str] | None = None,
    title: str = "",
    height: int = 680,
):
    """The data map of ``frame`` (from :func:`cartomap.analysis.datamap.map_frame`, possibly filtered,
    or a metrics frame) as a plotly figure.

    Main axes ``x``/``y`` (the map's axis, :func:`cartomap.analysis.datamap.axis_of` / confidence): one
    Scattergl trace per colour group, each point's ``customdata`` its example id, escaped hover text.
    Marginal histograms of the axis (top, axes x/y2) and confidence (right, axes x2/y) over every row,
    and of the selection (``highlight_ids``) over them (:func:`marginal_traces`). Above ``max_points`` rows a
    heatmap of the binned counts of every row is drawn under a random sample of ``max_points``
    points, and ``layout.meta`` says so (``{"n_total", "n_shown", "sampled"}``).
    ``highlight_ids`` (the current selection) are ringed in black (at most
    :data:`HIGHLIGHT_MAX_POINTS` rings, sampled). ``dragmode`` is lasso.
    """
    import plotly.graph_objects as go

    check_color_by(color_by)
    check_map_columns(frame)
    frame = as_map_frame(frame)
    n_total = len(frame)
    shown = frame_memo(frame, ("sample", max_points, seed), lambda: sample_rows(frame, max_points, seed))
    sampled = len(shown) < n_total
    colouring = colouring_of(frame, color_by)

    fig = go.Figure()
    axis = axis_of(frame)
    all_x = frame[axis].to_numpy(dtype=np.float64)
    all_y = frame["confidence"].to_numpy(dtype=np.float64)
    x_hi = max(0.05, float(np.nanmax(all_x)) * 1.05) if n_total else 0.5
    if sampled:
        fig.add_trace(_density_trace(frame, all_x, all_y, x_hi))
    marker_size = 7 if len(shown) < 5_000 else 4
    traces, legend_title = point_traces(frame, shown, color_by, marker_size)
    for trace in traces:
        fig.add_trace(trace)
    high_pos = None
    if highlight_ids is not None:
        rings, high_pos = _selection_rings(frame, highlight_ids, max_points, seed, marker_size)
        if rings is not None:
            fig.add_trace(rings)

    for trace in marginal_traces(frame, high_pos):
        fig.add_trace(trace)

    _add_region_labels(fig, frame)
    note = (
        f"{len(shown):,} of {n_total:,} examples drawn, shading = all" if sampled else f"{n_total:,} examples"
    )
    fig.update_layout(
        **_data_map_layout(
            title=title,
            note=note,
            height=height,
            continuous=colouring.continuous,
            legend_title=legend_title,
            axis=axis,
            x_hi=x_hi,
            meta={"n_total": n_total, "n_shown": len(shown), "sampled": sampled, "color_by": color_by},
        )
    )
    return fig


#: Facets of :func:`facet_map_figure` in one row at most.
FACET_COLUMNS = 3


def facet_levels(frame: pd.DataFrame, column: str = "gold") -> list[str]:
    """The facets of :func:`facet_map_figure`: the classes present, in class order (gold label), else
    the distinct values sorted."""
    if column == "gold" and "label" in frame.columns:
        order = frame[["label", "gold"]].drop_duplicates("gold").sort_values("label")
        return [str(v) for v in order["gold"]]
    return sorted({str(v) for v in str_array(frame[column])})


def _facet_axes(fig, frame: pd.DataFrame, n_rows: int, n_cols: int) -> None:
    """The shared axes of :func:`facet_map_figure`: x in [-0.01, 1.05 * max of the map's axis] (at least
    0.05; 0.5 for no rows), confidence in [-0.03, 1.03]; "confidence" on the first column, the axis's
    title on the bottom row."""
    x_hi = (
        max(0.05, float(np.nanmax(frame[axis_of(frame)].to_numpy(dtype=np.float64))) * 1.05)
        if len(frame)
        else 0.5
    )
    fig.update_xaxes(range=[-0.01, x_hi], zeroline=False)
    fig.update_yaxes(range=[-0.03, 1.03], zeroline=False)
    for r in range(1, n_rows + 1):
        fig.update_yaxes(title_text="confidence", row=r, col=1)
    for c in range(1, n_cols + 1):
        fig.update_xaxes(title_text=axis_title(axis_of(frame)), row=n_rows, col=c)


def _facet_title(title: str, facet: str, note: str) -> str:
    """The escaped title of :func:`facet_map_figure`: "<title> data map by <gold label | facet> · <note>"."""
    return escape_text(
        f"{title} data map by {'gold label' if facet == 'gold' else facet} · {note}".strip(" ·")
    )


def facet_map_figure(
    frame: pd.DataFrame,
    color_by: str = "correctness",
    max_points: int = DEFAULT_MAX_POINTS,
    seed: int = 0,
    *,
    highlight_ids: Iterable[str] | None = None,
    title: str = "",
    facet: str = "gold",
    height_per_row: int = 380,
):
    """Small multiples of the data map: one panel per value of ``facet`` (default the gold label), in
    rows of :data:`FACET_COLUMNS`, every panel on the same axes (x = the map's axis, y = confidence) and
    colour scale. Subplot k (0-based, row-major) is on axes ``x{k+1}``/``y{k+1}`` (``x``/``y`` for the
    first); ``layout.meta["facets"]`` lists the panels' values in that order, so a box or lasso drawn on
    one panel is resolved against that panel's rows (:func:`cartomap.analysis.selection.resolve_facet_selection`).
    Above ``max_points`` rows a random sample is drawn (``layout.meta["sampled"]``)."""
    from plotly.subplots import make_subplots

    check_color_by(color_by)
    check_map_columns(frame)
    frame = as_map_frame(frame)
    if facet not in frame.columns:
        raise ValueError(f"cannot split the map by {facet!r}: the frame has no such column")
    levels = facet_levels(frame, facet)
    n_cols = max(1, min(FACET_COLUMNS, len(levels)))
    n_rows = max(1, -(-len(levels) // n_cols))
    fig = make_subplots(
        rows=n_rows,
        cols=n_cols,
        shared_xaxes="all",
        shared_yaxes="all",
        subplot_titles=[escape_text(f"{facet}: {v}") for v in levels] or None,
        horizontal_spacing=0.04,
        vertical_spacing=0.12 if n_rows > 1 else 0.08,
    )
    colouring = colouring_of(frame, color_by)
    shown = frame_memo(frame, ("sample", max_points, seed), lambda: sample_rows(frame, max_points, seed))
    sampled = len(shown) < len(frame)
    colour_range = finite_range(colourings.values(frame, colouring)) if colouring.continuous else None
    counts = None if colouring.continuous else pd.Series(colour_groups(frame, color_by)[0]).value_counts()
    facet_all, facet_shown = str_array(frame[facet]), str_array(shown[facet])
    marker_size = 6 if len(shown) < 5_000 else 3
    wanted = None if highlight_ids is None else set(unique_ids(highlight_ids).tolist())
    legend_title = ""
    texts = [c for c in (*task_kinds.text_fields_in(frame.columns), SENTENCE) if c in frame.columns]
    numbers = frame.drop(columns=texts)  # a panel's rows without their texts: only the sample's are drawn
    for k, level in enumerate(levels):
        row, col = k // n_cols + 1, k % n_cols + 1
        part = shown[facet_shown == level]
        whole = numbers[facet_all == level]
        axis = "" if k == 0 else str(k + 1)
        traces, legend_title = point_traces(
            whole,
            part,
            color_by,
            marker_size,
            xaxis=f"x{axis}",
            yaxis=f"y{axis}",
            showlegend=k == 0,
            colour_range=colour_range,
            counts=counts,
            colorbar_x=0.5,
            colorbar_y=-70 / max(100, height_per_row * n_rows + 120 - 220),  # below the axis titles
        )
        for trace in traces:
            fig.add_trace(trace, row=row, col=col)
        if wanted:
            high = part[np.asarray([i in wanted for i in id_array(part["id"])], dtype=bool)]
            if len(high):
                fig.add_trace(
                    go_scatter_rings(high, marker_size, showlegend=k == 0, axis=axis_of(frame)),
                    row=row,
                    col=col,
                )
    _facet_axes(fig, frame, n_rows, n_cols)
    note = f"{len(shown):,} of {len(frame):,} examples drawn" if sampled else f"{len(frame):,} examples"
    fig.update_layout(
        title=dict(text=_facet_title(title, facet, note), font=dict(size=14)),
        template="plotly_white",
        height=height_per_row * n_rows + 120,
        margin=dict(l=60, r=20, t=90, b=130 if colouring.continuous else 50),
        dragmode="lasso",
        hovermode="closest",
        legend=dict(
            title=dict(text=legend_title), orientation="h", yanchor="bottom", y=1.04, x=1, xanchor="right"
        ),
        meta={
            "n_total": len(frame),
            "n_shown": len(shown),
            "sampled": sampled,
            "color_by": color_by,
            "facet": facet,
            "facets": levels,
        },
    )
    return fig


def trajectory_figure(traj: pd.DataFrame, gold: str | None = None, height: int = 260):
    """A small line chart of :func:`gold_trajectory`: the gold-label probability (thick) and every
    class's probability (thin, dashed) per epoch; y from 0 to 1."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for col in [c for c in traj.columns if c.startswith("prob_")]:
        fig.add_trace(
            go.Scatter(
                x=traj["epoch"],
                y=traj[col],
                mode="lines+markers",
                name=escape_text(f"p({col[5:]})"),
                line=dict(width=1, dash="dot"),
                marker=dict(size=4),
            )
        )
    _gold_line(fig, traj["epoch"], traj["gold_prob"], f"gold ({gold})" if gold else "gold label")
    return _probability_layout(fig, height, "probability")


def _gold_line(fig, x, y, name: str) -> None:
    """The thick black line of the gold label's probability (one run's, or the mean of seeds)."""
    import plotly.graph_objects as go

    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            mode="lines+markers",
            name=escape_text(name),
            line=dict(width=3, color="black"),
            marker=dict(size=7),
        )
    )


def _probability_layout(fig, height: int, y_title: str):
    """The layout of a probability-by-epoch chart: y from 0 to 1, one tick an epoch, legend below."""
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=50, r=10, t=10, b=40),
        xaxis=dict(title=dict(text="epoch"), dtick=1),
        yaxis=dict(title=dict(text=y_title), range=[-0.02, 1.02]),
        legend=dict(orientation="h", y=-0.3),
        hovermode="x unified",
    )
    return fig


def seed_trajectory_figure(traj: pd.DataFrame, gold: str | None = None, height: int = 260):
    """One line per seed of the gold-label probability by epoch
    (:func:`cartomap.analysis.seed_maps.seed_trajectories`), and their mean (thick, black); y from 0 to 1."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for k, (seed, part) in enumerate(traj.groupby("seed", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=part["epoch"],
                y=part["gold_prob"],
                mode="lines+markers",
                name=escape_text(f"seed {seed}"),
                line=dict(width=1.5, color=palette_color(k)),
                marker=dict(size=5),
            )
        )
    if len(traj):
        mean = traj.groupby("epoch", as_index=False)["gold_prob"].mean()
        _gold_line(
            fig, mean["epoch"], mean["gold_prob"], f"mean, gold ({gold})" if gold else "mean over seeds"
        )
    return _probability_layout(fig, height, "probability of the gold label")
