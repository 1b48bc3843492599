"""Every data-map figure cartomap draws, and the one way dataset text goes into a figure.

* :func:`escape` / :func:`escape_text`: dataset text is untrusted; plotly renders a subset of HTML in
  hover text, trace names and titles, so every string from the data goes through these.
* :data:`PALETTE`, :data:`REGION_COLORS`, :func:`bucket_colors`: the colours of every figure.
* :func:`data_map_figure`: the interactive data map (plotly WebGL), the same for the dashboard and
  for ``cartomap map --out map.html``; above ``max_points`` a density layer of every point under a
  random sample.
* :func:`data_map_matplotlib`: the static reference-style map with side histograms (PNG).
* :func:`save_data_map`, :func:`map_html_bytes`, :func:`map_png_bytes`, :func:`trajectory_figure`.

x = variability, y = confidence, colour = correctness bucket ("k/E": correct in k of E epochs; or label /
region / genre). Region labels sit at the median point of their region's examples (the rule that drew
the regions is :func:`cartomap.analysis.datamap.rule_of`); without regions at the reference's places:
"easy-to-learn" top left, "ambiguous" middle right, "hard-to-learn" bottom left. No pyplot:
matplotlib figures are built on ``Figure`` with the Agg canvas, so nothing leaks into global state.
"""

from __future__ import annotations

import html
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib import colormaps

from cartomap.analysis import colourings
from cartomap.analysis.datamap import (
    DEFAULT_MAX_POINTS,
    MAIN_XREF,
    MAIN_YREF,
    SENTENCE,
    as_map_frame,
    frame_memo,
    id_array,
    n_epochs_of,
    positions_of,
    sample_rows,
    str_array,
    unique_ids,
)
from cartomap.errors import DataError
from cartomap.io import atomic_save
from cartomap.scores.metrics import AMBIGUOUS, EASY, HARD, bucket_order, bucket_value, correctness_bucket
from cartomap.tasks import registry as task_kinds

if TYPE_CHECKING:  # the static figure's classes are imported where it is drawn (font caches take ~0.3 s)
    from matplotlib.figure import Figure

#: The qualitative colours of every figure (labels, genres, runs), in order.
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880")


def palette_color(i: int) -> str:
    """The ``i``-th qualitative colour (cycling)."""
    return PALETTE[i % len(PALETTE)]


SAVE_SUFFIXES = (".png", ".html")


REGION_COLORS = {EASY: "#d62728", AMBIGUOUS: "#2c2c2c", HARD: "#1f77b4"}


ANNOTATIONS = (
    (AMBIGUOUS, 0.9, 0.5, 350, "black"),
    (EASY, 0.27, 0.85, 0, "r"),
    (HARD, 0.35, 0.25, 0, "b"),
)
#: The legend title of the correctness colours.
CORRECTNESS_TITLE = "correct in k of E epochs"


def region_label_points(frame: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Where each region's label goes, in data coordinates (variability, confidence): the median of the
    region's examples, for every region present in ``frame``'s region column ({} without one)."""
    if "region" not in frame.columns or frame.empty:
        return {}
    regions = str_array(frame["region"])
    x = frame["variability"].to_numpy(dtype=np.float64)
    y = frame["confidence"].to_numpy(dtype=np.float64)
    out = {}
    for region in (EASY, AMBIGUOUS, HARD):
        sel = (regions == region) & np.isfinite(x) & np.isfinite(y)
        if sel.any():
            out[region] = (float(np.median(x[sel])), float(np.median(y[sel])))
    return out


def _legend_title(levels: Sequence[str]) -> str:
    return CORRECTNESS_TITLE if any("/" in str(v) for v in levels) else "correctness"


def _check_frame(metrics: pd.DataFrame) -> None:
    missing = [c for c in ("confidence", "variability", "correctness") if c not in metrics.columns]
    if missing:
        raise DataError(
            f"metrics frame lacks columns {missing}; build it with cartomap.scores.metrics.compute_metrics",
            field=missing[0],
        )


def _buckets(metrics: pd.DataFrame) -> np.ndarray:
    return correctness_bucket(metrics["correctness"].to_numpy(dtype=np.float64), n_epochs_of(metrics))


def bucket_colors(levels: Sequence[str]) -> dict[str, tuple]:
    """Discrete blue (never correct) -> red (always correct) palette over the correctness buckets."""
    cmap = colormaps["coolwarm"]
    values = [bucket_value(v) for v in levels]
    return {lvl: cmap(v) for lvl, v in zip(levels, values, strict=True)}


def data_map_matplotlib(
    metrics: pd.DataFrame, title: str = "", max_points: int = DEFAULT_MAX_POINTS, seed=0
) -> Figure:
    """The reference data map: scatter (x = variability, y = confidence, colour = correctness bucket)
    with region annotations, plus histograms of confidence, variability and correctness.

    The scatter shows at most ``max_points`` randomly sampled examples; histograms use all of them.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    _check_frame(metrics)
    fig = Figure(figsize=(14, 10))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(3, 2, width_ratios=[5, 1])
    ax = fig.add_subplot(grid[:, 0])

    shown = sample_rows(metrics, max_points, seed)
    buckets = _buckets(shown)
    levels = bucket_order(_buckets(metrics))
    colors = bucket_colors(levels)
    x = shown["variability"].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    size = 30 if len(shown) < 5_000 else 8
    for level in levels:
        sel = buckets == level
        if sel.any():
            ax.scatter(x[sel], y[sel], s=size, color=colors[level], label=level, alpha=0.8, edgecolors="none")
    points = region_label_points(metrics)
    for text, ax_x, ax_y, rotation, edge in ANNOTATIONS:
        at = points.get(text)
        if points and at is None:
            continue  # regions drawn, none of this one
        ax.annotate(
            text,
            xy=at if at is not None else (ax_x, ax_y),
            xycoords="data" if at is not None else "axes fraction",
            fontsize=15,
            color="black",
            va="center",
            ha="center",
            rotation=rotation,
            bbox=dict(boxstyle="round,pad=0.3", ec=edge, lw=2, fc="white"),
        )
    if levels:
        ax.legend(title=_legend_title(levels), loc="upper right", fancybox=True, markerscale=1.5)
    ax.set_xlabel("variability", fontsize=13)
    ax.set_ylabel("confidence", fontsize=13)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(left=-0.01)
    sampled = f" ({len(shown):,} of {len(metrics):,} examples shown)" if len(shown) < len(metrics) else ""
    ax.set_title(f"{title} Data Map{sampled}".strip(), fontsize=17)

    hist_specs = (("confidence", "#622a87"), ("variability", "teal"))
    for row, (column, color) in enumerate(hist_specs):
        hax = fig.add_subplot(grid[row, 1])
        hax.hist(metrics[column].to_numpy(dtype=np.float64), bins=30, color=color, edgecolor="white")
        hax.set_xlabel(column)
        hax.set_ylabel("count")
        hax.set_title(column)
    cax = fig.add_subplot(grid[2, 1])
    all_buckets = _buckets(metrics)
    counts = [int(np.sum(all_buckets == lvl)) for lvl in levels]
    cax.bar(levels, counts, color=[colors[lvl] for lvl in levels], edgecolor="white")
    cax.set_xlabel(_legend_title(levels))
    cax.set_ylabel("count")
    cax.set_title("correctness")
    cax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


def save_data_map(
    frame: pd.DataFrame,
    out_path: str | Path,
    title: str = "",
    label_names: Sequence[str] | None = None,
) -> Path:
    """Save a data map, the format chosen by suffix: .png (:func:`data_map_matplotlib`, dpi 150) or
    .html (:func:`data_map_figure`, plotly.js embedded so the file works offline).

    ``frame``: a map frame (:func:`cartomap.analysis.datamap.map_frame`: hover shows the texts) or a
    metrics frame (``label_names`` name its classes). Written atomically; returns the path."""
    out_path = Path(out_path)
    suffix = out_path.suffix.lower()
    if suffix == ".png":
        fig = data_map_matplotlib(frame, title=title)
        return atomic_save(out_path, lambda tmp: fig.savefig(tmp, format="png", dpi=150))
    if suffix == ".html":
        fig = data_map_figure(as_map_frame(frame, label_names), title=title)
        return atomic_save(out_path, lambda tmp: tmp.write_bytes(map_html_bytes(fig)))
    raise ValueError(
        f"unsupported file type {out_path.suffix!r} for {out_path.name}; use one of {SAVE_SUFFIXES}"
    )


COLOR_BY = ("correctness", "label", "region", "genre")
#: Colours of a map whose data has votes: human entropy (bits, in 4 bins) and gold vs the majority.
HUMAN_ENTROPY = "human entropy"
GOLD_VS_MAJORITY = "gold vs majority"
HUMAN_COLOR_BY = (HUMAN_ENTROPY, GOLD_VS_MAJORITY)
#: Colour of a map over seeds (:func:`cartomap.analysis.datamap.seed_map_frame`): how many seeds agree
#: on an example's region ("3/3", "2/3", ...).
AGREEMENT = "region agreement"


DENSITY_BINS = 80


HIGHLIGHT_MAX_POINTS = 5_000


HOVER_TEXT_CHARS = 70


def escape_text(text) -> str:
    """One string HTML-escaped (``& < >``) for a plotly name, title or label."""
    return html.escape(str(text), quote=False)


def escape(values) -> pd.Series:
    """HTML-escape ``& < >`` of every string: plotly renders tags in hover text and names (it decodes
    &amp; &lt; &gt; back to text, but not &quot;, and quotes are harmless once no tag can open)."""
    series = pd.Series(values, dtype=object).astype(str)
    return (
        series.str.replace("&", "&amp;", regex=False)
        .str.replace("<", "&lt;", regex=False)
        .str.replace(">", "&gt;", regex=False)
    )


def _shorten(series: pd.Series, n: int = HOVER_TEXT_CHARS) -> pd.Series:
    text = series.astype(str).str.slice(0, 2 * n).str.replace(r"\s+", " ", regex=True)
    long = text.str.len() > n
    return text.where(~long, text.str.slice(0, n - 1) + "…")


def hover_text(shown: pd.DataFrame) -> np.ndarray:
    """One escaped hover string per row: id, gold / predicted label, correctness and the start of
    the texts. Confidence and variability are added by :data:`HOVER_TEMPLATE` from the coordinates
    (formatted in the browser: a smaller payload)."""
    idx = shown.index
    text = "id: " + escape(shown["id"]).set_axis(idx)
    text = text + "<br>gold " + escape(shown["gold"]).set_axis(idx) + " · predicted "
    text = text + escape(shown["predicted"]).set_axis(idx)
    text = text + " · correctness " + shown["correctness"].map("{:.2f}".format)
    if "bucket" in shown.columns:
        buckets = shown["bucket"].astype(str)
        text = text + np.where(buckets.str.contains("/"), " (" + buckets + " epochs)", "")
    for col in task_kinds.text_fields_in(shown.columns):  # each text by its initial: P, H; T
        text = text + f"<br>{col[0].upper()}: " + escape(_shorten(shown[col])).set_axis(idx)
    return text.to_numpy(dtype=object)


HOVER_TEMPLATE = "%{hovertext}<br>confidence %{y:.3f} · variability %{x:.3f}<extra></extra>"


def _groups(frame: pd.DataFrame, color_by: str) -> tuple[np.ndarray, list[str], dict[str, str], str]:
    """(group of every row, ordered levels, colour per level, legend title)."""
    if color_by == "correctness":
        groups = str_array(frame["bucket"])
        levels = bucket_order(pd.unique(groups))  # distinct values only: 550k rows, a handful of buckets
        palette = {
            k: "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(c[:3])))
            for k, c in bucket_colors(levels).items()
        }
        return groups, levels, palette, _legend_title(levels)
    if color_by == "region":
        groups = str_array(frame["region"])
        present = set(groups)
        levels = [r for r in (EASY, AMBIGUOUS, HARD) if r in present] + sorted(
            present - {EASY, AMBIGUOUS, HARD}
        )
        palette = dict(REGION_COLORS)
        for i, lvl in enumerate(levels):
            palette.setdefault(lvl, palette_color(i))
        return groups, levels, palette, "region"
    if color_by == "label":
        groups = str_array(frame["gold"])
        order = frame[["label", "gold"]].drop_duplicates("gold").sort_values("label")
        levels = [str(v) for v in order["gold"]]
    elif color_by == AGREEMENT:
        if "region_votes" not in frame.columns:
            raise ValueError("only a map over seeds can be coloured by region agreement")
        groups = str_array(frame["region_votes"])
        levels = sorted(set(groups), key=lambda v: bucket_value(v), reverse=True)  # all seeds agree first
        cmap = colormaps["RdYlGn"]
        values = [bucket_value(v) for v in levels]
        palette = {
            lvl: "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(cmap(0.1 + 0.8 * v)[:3])))
            for lvl, v in zip(levels, values, strict=True)
        }
        return groups, levels, palette, "seeds agreeing on the region"
    elif color_by == GOLD_VS_MAJORITY:
        if "agreement" not in frame.columns:
            raise ValueError("only a map of data with votes can be coloured by gold vs majority")
        groups = str_array(frame["agreement"])
        levels = [v for v in ("gold = majority", "gold ≠ majority", "no majority (tie)") if v in set(groups)]
        palette = {"gold = majority": "#1a9850", "gold ≠ majority": "#d73027", "no majority (tie)": "#fdae61"}
        return groups, levels, palette, "gold label vs the annotators' majority"
    elif color_by == "genre":
        if "genre" not in frame.columns:
            raise ValueError("this dataset has no genre column to colour by")
        groups = str_array(frame["genre"])
        levels = sorted(set(groups))
    else:
        raise ValueError(f"color_by must be one of {COLOR_BY}, got {color_by!r}")
    palette = {lvl: palette_color(i) for i, lvl in enumerate(levels)}
    return groups, levels, palette, color_by


def _check_color_by(color_by: str) -> None:
    if color_by not in colourings.BUILT_IN and not str(color_by).startswith(colourings.DETECTOR_PREFIX):
        raise ValueError(
            f"color_by must be one of {(*colourings.BUILT_IN, colourings.DETECTOR_PREFIX + '<title>')}, "
            f"got {color_by!r}"
        )


def _colouring_of(frame: pd.DataFrame, color_by: str) -> colourings.Colouring:
    """The colouring ``color_by`` of ``frame``: a categorical one as it is (its levels say what is
    missing), a continuous one only when the frame holds it (ValueError otherwise)."""
    _check_color_by(color_by)
    built_in = colourings.BUILT_IN.get(color_by)
    if built_in is not None and not built_in.continuous:
        return built_in
    return colourings.get(frame, color_by)


def _finite_range(values: np.ndarray) -> tuple[float, float]:
    """The colour range of a continuous score: its 1st to 99th percentile (one far outlier, such as the
    forgetting detector's 1000 for a never-learned example, does not flatten every other colour)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = (float(v) for v in np.percentile(finite, [1, 99]))
    if hi <= lo:
        lo, hi = float(finite.min()), float(finite.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


NO_VALUE_COLOR = "rgb(170,170,170)"


def point_traces(
    frame: pd.DataFrame,
    shown: pd.DataFrame,
    color_by: str,
    marker_size: int,
    *,
    xaxis: str = MAIN_XREF,
    yaxis: str = MAIN_YREF,
    showlegend: bool = True,
    colour_range: tuple[float, float] | None = None,
    counts: pd.Series | None = None,
    colorbar_x: float = 0.415,
    colorbar_y: float = -0.13,
) -> tuple[list, str]:
    """The Scattergl traces of the points of ``shown`` (a sample of ``frame``) coloured by ``color_by``,
    and the legend title. Categorical: one trace per level, named "<level> (<count in frame>)".
    Continuous: one trace with a colour scale over ``colour_range`` (default: the score's 1st to 99th
    percentile over ``frame``) and its colour bar (shown with ``showlegend``), plus a grey trace of the
    rows without a value. Each point's ``customdata`` is its example id, its hover text escaped."""
    import plotly.graph_objects as go

    colouring = _colouring_of(frame, color_by)
    x = shown["variability"].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    ids = id_array(shown["id"])
    hover = frame_memo(shown, "hover", lambda: hover_text(shown))  # the same sample on every rerun
    common = dict(mode="markers", xaxis=xaxis, yaxis=yaxis, hovertemplate=HOVER_TEMPLATE)
    traces = []
    if colouring.continuous:
        values = colourings.values(shown, colouring)
        lo, hi = colour_range or _finite_range(colourings.values(frame, colouring))
        ok = np.isfinite(values)
        title = escape_text(colouring.title)
        if ok.any():
            traces.append(
                go.Scattergl(
                    x=x[ok],
                    y=y[ok],
                    name=escape_text(colouring.name),
                    legendgroup="scored",
                    showlegend=False,
                    customdata=ids[ok],
                    hovertext=hover[ok]
                    + f"<br>{title}: "
                    + pd.Series(values[ok]).map("{:.3f}".format).to_numpy(),
                    marker=dict(
                        size=marker_size,
                        color=values[ok],
                        colorscale=colouring.scale,
                        cmin=lo,
                        cmax=hi,
                        opacity=0.85,
                        showscale=showlegend,
                        colorbar=dict(
                            title=dict(text=title, side="top"),
                            orientation="h",
                            x=colorbar_x,
                            xanchor="center",
                            y=colorbar_y,
                            yanchor="top",
                            len=0.6,
                            thickness=12,
                        ),
                    ),
                    **common,
                )
            )
        if (~ok).any():
            traces.append(
                go.Scattergl(
                    x=x[~ok],
                    y=y[~ok],
                    name=f"no value ({int((~ok).sum()):,})",
                    legendgroup="no value",
                    showlegend=showlegend,
                    customdata=ids[~ok],
                    hovertext=hover[~ok],
                    marker=dict(size=marker_size, color=NO_VALUE_COLOR, opacity=0.6),
                    **common,
                )
            )
        return traces, colouring.title
    groups, levels, palette, legend_title = _groups(shown, color_by)
    if counts is None:
        counts = pd.Series(_groups(frame, color_by)[0] if len(shown) < len(frame) else groups).value_counts()
    for level in levels:
        sel = groups == level
        if not np.any(sel):
            continue
        traces.append(
            go.Scattergl(
                x=x[sel],
                y=y[sel],
                name=escape_text(f"{level} ({int(counts.get(level, 0)):,})"),
                legendgroup=escape_text(str(level)),
                showlegend=showlegend,
                customdata=ids[sel],
                hovertext=hover[sel],
                marker=dict(size=marker_size, color=palette.get(level), opacity=0.8),
                **common,
            )
        )
    return traces, legend_title


#: Names of the marginal histograms' traces (:func:`marginal_traces`): every row, and the selection.
MARGINAL_ALL = "all examples"
MARGINAL_SELECTED = "selected"
MARGINAL_BINS = 40
MARGINAL_COLORS = {"variability": "teal", "confidence": "#622a87"}
SELECTED_HIST_COLOR = "rgba(230,120,0,0.75)"


def _examples(n: int) -> str:
    return f"{n:,} example" + ("" if n == 1 else "s")


def marginal_traces(frame: pd.DataFrame, selected_positions: np.ndarray | None = None) -> list:
    """The data map's marginal histograms: variability on top (axes ``x``/``y2``), confidence on the right
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
        edges = np.histogram_bin_edges(everything, bins=MARGINAL_BINS)
        return edges, np.histogram(everything, bins=edges)[0], everything.size

    traces = []
    for column, colour in MARGINAL_COLORS.items():
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
        along = "x" if column == "variability" else "y"
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
                name=escape_text(f"{column}: {name}"),
                showlegend=False,
                marker_color=fill,
                hovertemplate=f"{name}<br>{column} %{{{along}:.3f}}: %{{hovertext}}<extra></extra>",
            )
            if column == "variability":
                bar.update(x=centers, y=height, xaxis="x", yaxis="y2")
            else:
                bar.update(y=centers, x=height, orientation="h", xaxis="x2", yaxis="y")
            traces.append(bar)
    return traces


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

    Main axes ``x``/``y`` (variability / confidence): one Scattergl trace per colour group, each
    point's ``customdata`` its example id, escaped hover text. Marginal histograms of variability
    (top, axes x/y2) and confidence (right, axes x2/y) over every row, and of the selection
    (``highlight_ids``) over them (:func:`marginal_traces`). Above ``max_points`` rows a
    heatmap of the binned counts of every row is drawn under a random sample of ``max_points``
    points, and ``layout.meta`` says so (``{"n_total", "n_shown", "sampled"}``).
    ``highlight_ids`` (the current selection) are ringed in black (at most
    :data:`HIGHLIGHT_MAX_POINTS` rings, sampled). ``dragmode`` is lasso.
    """
    import plotly.graph_objects as go

    _check_color_by(color_by)
    _check_frame(frame)
    frame = as_map_frame(frame)
    n_total = len(frame)
    shown = frame_memo(frame, ("sample", max_points, seed), lambda: sample_rows(frame, max_points, seed))
    sampled = len(shown) < n_total
    colouring = _colouring_of(frame, color_by)

    fig = go.Figure()
    all_x = frame["variability"].to_numpy(dtype=np.float64)
    all_y = frame["confidence"].to_numpy(dtype=np.float64)
    x_hi = max(0.05, float(np.nanmax(all_x)) * 1.05) if n_total else 0.5
    if sampled:

        def density():  # log10(count + 1) of every point in bins, empty bins NaN; rows = y
            ok = np.isfinite(all_x) & np.isfinite(all_y)
            bins = int(np.clip(np.sqrt(ok.sum()) / 4, 20, DENSITY_BINS))
            z, xe, ye = np.histogram2d(all_x[ok], all_y[ok], bins=bins, range=[[0, x_hi], [-0.02, 1.02]])
            return np.where(z > 0, np.log10(z + 1), np.nan).T, xe, ye

        z, xe, ye = frame_memo(frame, ("density", x_hi), density)
        fig.add_trace(
            go.Heatmap(
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
        )
    marker_size = 7 if len(shown) < 5_000 else 4
    traces, legend_title = point_traces(frame, shown, color_by, marker_size)
    for trace in traces:
        fig.add_trace(trace)
    high_pos = None
    if highlight_ids is not None:
        wanted = unique_ids(highlight_ids)
        high_pos = positions_of(frame, wanted)
        n_high = len(high_pos)
        cap = min(max_points, HIGHLIGHT_MAX_POINTS)
        if n_high > cap:  # the rings of a sample (as sample_rows draws it): only their rows taken
            high_pos_drawn = high_pos[
                np.sort(np.random.default_rng(seed).choice(n_high, size=cap, replace=False))
            ]
        else:
            high_pos_drawn = high_pos
        high = frame.iloc[high_pos_drawn][["id", "variability", "confidence"]]
        if len(high):
            fig.add_trace(
                go.Scattergl(
                    x=high["variability"].to_numpy(dtype=np.float64),
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
            )

    for trace in marginal_traces(frame, high_pos):
        fig.add_trace(trace)

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
    note = (
        f"{len(shown):,} of {n_total:,} examples drawn, shading = all" if sampled else f"{n_total:,} examples"
    )
    fig.update_layout(
        title=dict(
            text=escape_text(f"{title} data map · {note}".strip(" ·")),
            font=dict(size=14),
            x=0.01,
            y=0.99,
            yanchor="top",
        ),
        template="plotly_white",
        height=height,
        margin=dict(l=60, r=20, t=70, b=130 if colouring.continuous else 50),
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
        xaxis=dict(domain=[0, 0.83], title=dict(text="variability"), range=[-0.01, x_hi], zeroline=False),
        yaxis=dict(domain=[0, 0.83], title=dict(text="confidence"), range=[-0.03, 1.03], zeroline=False),
        yaxis2=dict(domain=[0.85, 1], anchor="x", showticklabels=False, showgrid=False),
        xaxis2=dict(domain=[0.85, 1], anchor="y", showticklabels=False, showgrid=False),
        meta={"n_total": n_total, "n_shown": len(shown), "sampled": sampled, "color_by": color_by},
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
    rows of :data:`FACET_COLUMNS`, every panel on the same axes (x = variability, y = confidence) and
    colour scale. Subplot k (0-based, row-major) is on axes ``x{k+1}``/``y{k+1}`` (``x``/``y`` for the
    first); ``layout.meta["facets"]`` lists the panels' values in that order, so a box or lasso drawn on
    one panel is resolved against that panel's rows (:func:`cartomap.analysis.datamap.resolve_facet_selection`).
    Above ``max_points`` rows a random sample is drawn (``layout.meta["sampled"]``)."""
    from plotly.subplots import make_subplots

    _check_color_by(color_by)
    _check_frame(frame)
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
    colouring = _colouring_of(frame, color_by)
    shown = frame_memo(frame, ("sample", max_points, seed), lambda: sample_rows(frame, max_points, seed))
    sampled = len(shown) < len(frame)
    colour_range = _finite_range(colourings.values(frame, colouring)) if colouring.continuous else None
    counts = None if colouring.continuous else pd.Series(_groups(frame, color_by)[0]).value_counts()
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
                    go_scatter_rings(high, marker_size, showlegend=k == 0),
                    row=row,
                    col=col,
                )
    x_hi = (
        max(0.05, float(np.nanmax(frame["variability"].to_numpy(dtype=np.float64))) * 1.05)
        if len(frame)
        else 0.5
    )
    fig.update_xaxes(range=[-0.01, x_hi], zeroline=False)
    fig.update_yaxes(range=[-0.03, 1.03], zeroline=False)
    for r in range(1, n_rows + 1):
        fig.update_yaxes(title_text="confidence", row=r, col=1)
    for c in range(1, n_cols + 1):
        fig.update_xaxes(title_text="variability", row=n_rows, col=c)
    note = f"{len(shown):,} of {len(frame):,} examples drawn" if sampled else f"{len(frame):,} examples"
    fig.update_layout(
        title=dict(
            text=escape_text(
                f"{title} data map by {'gold label' if facet == 'gold' else facet} · {note}".strip(" ·")
            ),
            font=dict(size=14),
        ),
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


def go_scatter_rings(high: pd.DataFrame, marker_size: int, showlegend: bool = True):
    """Black rings around the selected points ``high`` (hover off: the points under them have it)."""
    import plotly.graph_objects as go

    return go.Scattergl(
        x=high["variability"].to_numpy(dtype=np.float64),
        y=high["confidence"].to_numpy(dtype=np.float64),
        mode="markers",
        name="selected",
        legendgroup="selected",
        showlegend=showlegend,
        customdata=id_array(high["id"]),
        hoverinfo="skip",
        marker=dict(size=marker_size + 4, color="rgba(0,0,0,0)", line=dict(color="black", width=1.5)),
    )


#: Name of the trace :func:`add_trajectories` draws (tests and checks find it by this).
TRAJECTORY_TRACE = "paths of the selection"


def add_trajectories(fig, traj: pd.DataFrame, current_k: int | None = None):
    """Draw :func:`cartomap.analysis.epochs.trajectories` (id, k, confidence, variability) over a data map
    ``fig`` on its main axes: one dark line with markers per example (markers grow with k, so a path
    reads from its small first point to its large last one), the point of the map after ``current_k``
    recordings ringed in red. One Scattergl trace (paths split by gaps) without ``customdata``: a lasso
    over a path selects no example by it. Hover: the escaped id, k and the point. Returns ``fig``."""
    import plotly.graph_objects as go

    if traj.empty:
        return fig
    xs, ys, sizes, hover = [], [], [], []
    k_hi = max(int(traj["k"].max()), 1)
    for example_id, path in traj.groupby("id", sort=False):
        path = path.sort_values("k")
        label = escape_text(example_id)
        for k, conf, var in zip(path["k"], path["confidence"], path["variability"], strict=True):
            xs.append(float(var))
            ys.append(float(conf))
            sizes.append(4 + 6 * int(k) / k_hi)
            hover.append(
                f"id: {label}<br>after {int(k)} recordings<br>confidence {conf:.3f} · variability {var:.3f}"
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
                    x=now["variability"].to_numpy(dtype=np.float64),
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
    x_hi = float(np.nanmax(traj["variability"].to_numpy(dtype=np.float64))) * 1.05
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


def add_neighbour_overlay(fig, overlay: pd.DataFrame):
    """Draw :func:`cartomap.analysis.overlays.neighbour_overlay` over a data map ``fig``: the focused example
    a large star, its neighbours diamonds (filled: the seed's gold label; open: another label), outlined in
    black so they stand out of any colouring. Hover: the escaped id, role and label only (never text).
    ``customdata`` is the example id, so a click on a marker selects that example. Returns ``fig``."""
    import plotly.graph_objects as go

    if overlay.empty:
        return fig
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
            hovertemplate=HOVER_TEMPLATE,
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
                        HOVER_TEMPLATE
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


def map_html_bytes(fig) -> bytes:
    """A standalone HTML file of the figure with plotly.js embedded (works offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def map_png_bytes(frame: pd.DataFrame, title: str = "") -> bytes:
    """The static reference-style data map (matplotlib) of ``frame`` as PNG bytes."""
    fig = data_map_matplotlib(frame, title=title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


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
    (:func:`cartomap.analysis.datamap.seed_trajectories`), and their mean (thick, black); y from 0 to 1."""
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
