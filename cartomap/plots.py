"""Data-map figures: a static matplotlib figure like the reference one, and an interactive plotly one.

x = variability, y = confidence, colour = correctness bucket (or label / region). Region labels:
"easy-to-learn" top left, "ambiguous" middle right, "hard-to-learn" bottom left.
No pyplot: figures are built on ``matplotlib.figure.Figure`` with the Agg canvas, so nothing leaks
into global state and no display is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from cartomap.errors import DataError
from cartomap.io import atomic_save
from cartomap.metrics import AMBIGUOUS, EASY, HARD, bucket_order, correctness_bucket, region_partition

DEFAULT_MAX_POINTS = 50_000
SAVE_SUFFIXES = (".png", ".html")
COLOR_MODES = ("correctness", "label", "region")
REGION_COLORS = {EASY: "#d62728", AMBIGUOUS: "#2c2c2c", HARD: "#1f77b4"}
# (text, x, y in axes fraction, rotation, edge colour): positions of the reference figure
_ANNOTATIONS = (
    (AMBIGUOUS, 0.9, 0.5, 350, "black"),
    (EASY, 0.27, 0.85, 0, "r"),
    (HARD, 0.35, 0.25, 0, "b"),
)


def _check_frame(metrics: pd.DataFrame) -> None:
    missing = [c for c in ("confidence", "variability", "correctness") if c not in metrics.columns]
    if missing:
        raise DataError(
            f"metrics frame lacks columns {missing}; build it with cartomap.metrics.compute_metrics",
            field=missing[0],
        )


def _n_epochs(metrics: pd.DataFrame) -> int | None:
    """E from frame attrs, else inferred from correct_count / correctness."""
    n = metrics.attrs.get("n_epochs")
    if n:
        return int(n)
    if "correct_count" in metrics.columns:
        frac = metrics["correctness"].to_numpy(dtype=np.float64)
        count = metrics["correct_count"].to_numpy(dtype=np.float64)
        ok = frac > 0
        if ok.any():
            return int(np.round(np.median(count[ok] / frac[ok])))
    return None


def _buckets(metrics: pd.DataFrame) -> np.ndarray:
    return correctness_bucket(metrics["correctness"].to_numpy(dtype=np.float64), _n_epochs(metrics))


def _sample(metrics: pd.DataFrame, max_points: int, seed) -> pd.DataFrame:
    """At most ``max_points`` rows, drawn uniformly without replacement, original order kept."""
    if len(metrics) <= max_points:
        return metrics
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(metrics), size=max_points, replace=False))
    return metrics.iloc[keep]


def _bucket_colors(levels: Sequence[str]) -> dict[str, tuple]:
    """Discrete blue (never correct) -> red (always correct) palette over the correctness buckets."""
    cmap = colormaps["coolwarm"]
    values = [float(v) for v in levels]
    return {lvl: cmap(v) for lvl, v in zip(levels, values, strict=True)}


def data_map_matplotlib(
    metrics: pd.DataFrame, title: str = "", max_points: int = DEFAULT_MAX_POINTS, seed=0
) -> Figure:
    """The reference data map: scatter (x = variability, y = confidence, colour = correctness bucket)
    with region annotations, plus histograms of confidence, variability and correctness.

    The scatter shows at most ``max_points`` randomly sampled examples; histograms use all of them.
    """
    _check_frame(metrics)
    fig = Figure(figsize=(14, 10))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(3, 2, width_ratios=[5, 1])
    ax = fig.add_subplot(grid[:, 0])

    shown = _sample(metrics, max_points, seed)
    buckets = _buckets(shown)
    levels = bucket_order(_buckets(metrics))
    colors = _bucket_colors(levels)
    x = shown["variability"].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    size = 30 if len(shown) < 5_000 else 8
    for level in levels:
        sel = buckets == level
        if sel.any():
            ax.scatter(x[sel], y[sel], s=size, color=colors[level], label=level, alpha=0.8, edgecolors="none")
    for text, ax_x, ax_y, rotation, edge in _ANNOTATIONS:
        ax.annotate(
            text,
            xy=(ax_x, ax_y),
            xycoords="axes fraction",
            fontsize=15,
            color="black",
            va="center",
            ha="center",
            rotation=rotation,
            bbox=dict(boxstyle="round,pad=0.3", ec=edge, lw=2, fc="white"),
        )
    if levels:
        ax.legend(title="correctness", loc="upper right", fancybox=True, markerscale=1.5)
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
    cax.set_xlabel("correctness")
    cax.set_ylabel("count")
    cax.set_title("correctness")
    cax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


def _label_text(labels: np.ndarray, label_names: Sequence[str] | Mapping | None) -> np.ndarray:
    """Label indices -> names (list indexed by label, or mapping); unknown ones stay as numbers."""
    labels = np.asarray(labels)
    if label_names is None:
        return labels.astype(str).astype(object)
    mapping = dict(label_names) if isinstance(label_names, Mapping) else dict(enumerate(label_names))
    series = pd.Series(labels)
    return series.map(mapping).fillna(series.astype(str)).astype(str).to_numpy(dtype=object)


def _fmt(series: pd.Series, fmt: str) -> pd.Series:
    return series.map(fmt.format).astype(str)


def _escape(values: pd.Series) -> pd.Series:
    """Dataset strings are untrusted: plotly renders hover text as HTML, so escape &, < and >."""
    return values.str.replace("&", "&amp;").str.replace("<", "&lt;").str.replace(">", "&gt;")


def _hover_text(shown: pd.DataFrame, label_text: np.ndarray | None) -> np.ndarray:
    """One hover string per row: id, label and metrics, joined by <br> (vectorised string ops)."""
    text = "confidence: " + _fmt(shown["confidence"], "{:.3f}")
    if label_text is not None:
        text = "label: " + _escape(pd.Series(label_text, index=shown.index, dtype=str)) + "<br>" + text
    if "id" in shown.columns:
        text = "id: " + _escape(shown["id"].astype(str)) + "<br>" + text
    text = text + "<br>variability: " + _fmt(shown["variability"], "{:.3f}")
    text = text + "<br>correctness: " + _fmt(shown["correctness"], "{:.2f}")
    for column, fmt in (("forgetfulness", "{:d}"), ("aum", "{:.3f}"), ("region", "{}")):
        if column in shown.columns:
            text = text + f"<br>{column}: " + _fmt(shown[column], fmt)
    return text.to_numpy(dtype=object)


def data_map_plotly(
    metrics: pd.DataFrame,
    color: str = "correctness",
    label_names: Sequence[str] | Mapping | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
    seed=0,
    title: str = "",
):
    """Interactive data map: Scattergl (x = variability, y = confidence), one trace per colour group.

    ``color``: "correctness" (bucket), "label" or "region". Each point's ``customdata`` is the
    example id (so a selection / click event gives ids back); hover shows its metrics. Marginal
    histograms of variability (top) and confidence (right) are computed on all examples.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    _check_frame(metrics)
    if color not in COLOR_MODES:
        raise ValueError(f"color must be one of {COLOR_MODES}, got {color!r}")
    if color == "label" and "label" not in metrics.columns:
        raise DataError("metrics frame has no 'label' column to colour by", field="label")

    shown = _sample(metrics, max_points, seed)
    label_text = _label_text(shown["label"].to_numpy(), label_names) if "label" in shown.columns else None
    hover = _hover_text(shown, label_text)
    ids = (
        shown["id"].astype(str).to_numpy(dtype=object)
        if "id" in shown.columns
        else shown.index.astype(str).to_numpy(dtype=object)
    )

    if color == "correctness":
        groups = _buckets(shown)
        levels = bucket_order(_buckets(metrics))
        palette = {
            k: "rgba({:.0f},{:.0f},{:.0f},1)".format(*(255 * np.array(c[:3])))
            for k, c in _bucket_colors(levels).items()
        }
        legend_title = "correctness"
    elif color == "region":
        if "region" in shown.columns:
            groups = shown["region"].astype(str).to_numpy(dtype=object)
        else:
            groups = region_partition(shown["confidence"].to_numpy(), shown["variability"].to_numpy())
        levels = [r for r in (EASY, AMBIGUOUS, HARD) if np.any(groups == r)]
        levels += sorted(set(groups) - set(levels))
        palette = dict(REGION_COLORS)
        legend_title = "region"
    else:
        groups = label_text
        raw = shown["label"].to_numpy()
        order = pd.DataFrame({"raw": raw, "name": groups}).drop_duplicates("name").sort_values("raw")
        levels = order["name"].tolist()
        qualitative = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880"]
        palette = {lvl: qualitative[i % len(qualitative)] for i, lvl in enumerate(levels)}
        legend_title = "label"

    fig = make_subplots(
        rows=2,
        cols=2,
        column_widths=[0.82, 0.18],
        row_heights=[0.18, 0.82],
        shared_xaxes=True,
        shared_yaxes=True,
        horizontal_spacing=0.01,
        vertical_spacing=0.01,
    )
    x = shown["variability"].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    marker_size = 7 if len(shown) < 5_000 else 4
    for level in levels:
        sel = groups == level
        if not np.any(sel):
            continue
        fig.add_trace(
            go.Scattergl(
                x=x[sel],
                y=y[sel],
                mode="markers",
                name=str(level),
                customdata=ids[sel],
                hovertext=hover[sel],
                hoverinfo="text",
                marker=dict(size=marker_size, color=palette.get(level), opacity=0.8),
            ),
            row=2,
            col=1,
        )

    for column, row, col, colour in (("variability", 1, 1, "teal"), ("confidence", 2, 2, "#622a87")):
        values = metrics[column].to_numpy(dtype=np.float64)
        values = values[np.isfinite(values)]
        counts, edges = np.histogram(values, bins=40) if values.size else (np.zeros(0), np.zeros(1))
        centers = (edges[:-1] + edges[1:]) / 2
        width = np.diff(edges)
        bar = (
            go.Bar(x=centers, y=counts, width=width, marker_color=colour, name=column, showlegend=False)
            if column == "variability"
            else go.Bar(
                y=centers,
                x=counts,
                width=width,
                orientation="h",
                marker_color=colour,
                name=column,
                showlegend=False,
            )
        )
        value, count = ("x", "y") if column == "variability" else ("y", "x")
        bar.hovertemplate = f"{column} %{{{value}:.3f}}: %{{{count}}} examples<extra></extra>"
        fig.add_trace(bar, row=row, col=col)

    main = fig.get_subplot(2, 1)
    xref = main.xaxis.plotly_name.replace("axis", "")
    yref = main.yaxis.plotly_name.replace("axis", "")
    for text, ax_x, ax_y, rotation, edge in _ANNOTATIONS:
        fig.add_annotation(
            text=text,
            x=ax_x,
            y=ax_y,
            xref=f"{xref} domain",
            yref=f"{yref} domain",
            showarrow=False,
            textangle=(360 - rotation) % 360,  # plotly angles are clockwise
            font=dict(size=14, color="black"),
            bgcolor="white",
            bordercolor={"r": "red", "b": "blue"}.get(edge, edge),
            borderwidth=2,
            borderpad=4,
        )
    fig.update_xaxes(title_text="variability", row=2, col=1)
    fig.update_yaxes(title_text="confidence", range=[-0.02, 1.02], row=2, col=1)
    sampled = f" ({len(shown):,} of {len(metrics):,} examples shown)" if len(shown) < len(metrics) else ""
    fig.update_layout(
        title=f"{title} Data Map{sampled}".strip(),
        legend_title_text=legend_title,
        template="plotly_white",
        height=700,
        bargap=0,
        dragmode="lasso",
    )
    return fig


def save_data_map(
    metrics: pd.DataFrame,
    out_path: str | Path,
    title: str = "",
    label_names: Sequence[str] | Mapping | None = None,
) -> Path:
    """Save a data map, the format chosen by suffix: .png (matplotlib, dpi 150) or .html (plotly,
    plotly.js embedded so the file works offline). Written atomically; returns the path."""
    out_path = Path(out_path)
    suffix = out_path.suffix.lower()
    if suffix == ".png":
        fig = data_map_matplotlib(metrics, title=title)
        return atomic_save(out_path, lambda tmp: fig.savefig(tmp, format="png", dpi=150))
    if suffix == ".html":
        fig = data_map_plotly(metrics, label_names=label_names, title=title)
        return atomic_save(
            out_path, lambda tmp: fig.write_html(str(tmp), include_plotlyjs=True, full_html=True)
        )
    raise ValueError(
        f"unsupported file type {out_path.suffix!r} for {out_path.name}; use one of {SAVE_SUFFIXES}"
    )
