"""A data map as a file: the static reference-style map with side histograms (matplotlib, PNG:
:func:`data_map_matplotlib`), and the map saved as PNG or standalone HTML (:func:`save_data_map`,
:func:`map_html_bytes`, :func:`map_png_bytes`).

No pyplot: matplotlib figures are built on ``Figure`` with the Agg canvas, so nothing leaks into global
state.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import DEFAULT_MAX_POINTS, as_map_frame, axis_of, n_epochs_of, sample_rows
from cartomap.analysis.figures import (
    ANNOTATIONS,
    CONFIDENCE_RANGE,
    DENSITY_BINS,
    data_map_figure,
    map_x_range,
    region_label_points,
)
from cartomap.analysis.map_points import axis_title, check_map_columns
from cartomap.analysis.style import bucket_colors, correctness_legend_title
from cartomap.io import atomic_save
from cartomap.scores.metrics import bucket_order, correctness_bucket

if TYPE_CHECKING:  # the static figure's classes are imported where it is drawn (font caches take ~0.3 s)
    from matplotlib.figure import Figure

SAVE_SUFFIXES = (".png", ".html")


def _buckets(metrics: pd.DataFrame) -> np.ndarray:
    return correctness_bucket(metrics["correctness"].to_numpy(dtype=np.float64), n_epochs_of(metrics))


def data_map_matplotlib(
    metrics: pd.DataFrame, title: str = "", max_points: int = DEFAULT_MAX_POINTS, seed=0
) -> Figure:
    """The reference data map: scatter (x = the map's axis, :func:`cartomap.analysis.datamap.axis_of`:
    variability on Cartography's map; y = confidence, colour = correctness bucket) with region annotations,
    plus histograms of confidence, the axis and correctness.

    The scatter shows every point up to ``max_points``; above, the density of every point (grey shading,
    log counts) under ``max_points`` of them (:func:`cartomap.analysis.datamap.sample_rows`: every point of
    the regions other than the largest and of sparse areas kept when they fit). Region labels sit where they
    hide no point (:func:`cartomap.analysis.figures.region_label_points`), the legend below the map;
    histograms use every point.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    check_map_columns(metrics)
    fig = Figure(figsize=(14, 10))
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(3, 2, width_ratios=[5, 1])
    ax = fig.add_subplot(grid[:, 0])

    shown = sample_rows(metrics, max_points, seed)
    buckets = _buckets(shown)
    levels = bucket_order(_buckets(metrics))
    colors = bucket_colors(levels)
    axis = axis_of(metrics)
    x = shown[axis].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    x_range = map_x_range(metrics[axis].to_numpy(dtype=np.float64))
    if len(shown) < len(metrics):
        _density(ax, metrics, axis, x_range)
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
    if levels:  # below the map: over it, it would hide points
        ax.legend(
            title=correctness_legend_title(levels),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.07),
            ncol=min(len(levels), 6),
            fancybox=True,
            markerscale=1.5,
        )
    ax.set_xlabel(axis_title(axis), fontsize=13)
    ax.set_ylabel("confidence", fontsize=13)
    ax.set_ylim(*CONFIDENCE_RANGE)
    ax.set_xlim(*x_range)
    sampled = (
        f" ({len(shown):,} of {len(metrics):,} points drawn, shading = all)"
        if len(shown) < len(metrics)
        else ""
    )
    ax.set_title(f"{title} Data Map{sampled}".strip(), fontsize=17)

    hist_specs = (("confidence", "#622a87"), (axis, "teal"))
    for row, (column, color) in enumerate(hist_specs):
        hax = fig.add_subplot(grid[row, 1])
        hax.hist(metrics[column].to_numpy(dtype=np.float64), bins=30, color=color, edgecolor="white")
        name = "confidence" if column == "confidence" else axis_title(column)
        hax.set_xlabel(name)
        hax.set_ylabel("count")
        hax.set_title(name)
    cax = fig.add_subplot(grid[2, 1])
    all_buckets = _buckets(metrics)
    counts = [int(np.sum(all_buckets == lvl)) for lvl in levels]
    cax.bar(levels, counts, color=[colors[lvl] for lvl in levels], edgecolor="white")
    cax.set_xlabel(correctness_legend_title(levels))
    cax.set_ylabel("count")
    cax.set_title("correctness")
    cax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


def _density(ax, metrics: pd.DataFrame, axis: str, x_range: tuple[float, float]) -> None:
    """Grey shading of every point's place under a sampled scatter: log10(count + 1) in the bins of
    :data:`cartomap.analysis.figures.DENSITY_BINS` (fewer for fewer points), empty bins left white."""
    x = metrics[axis].to_numpy(dtype=np.float64)
    y = metrics["confidence"].to_numpy(dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    bins = int(np.clip(np.sqrt(ok.sum()) / 4, 20, DENSITY_BINS))
    z, xe, ye = np.histogram2d(x[ok], y[ok], bins=bins, range=[x_range, CONFIDENCE_RANGE])
    shade = np.ma.masked_equal(np.log10(z + 1).T, 0.0)
    ax.pcolormesh(xe, ye, shade, cmap="Greys", alpha=0.55, shading="flat", zorder=0)


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


def map_html_bytes(fig) -> bytes:
    """A standalone HTML file of the figure with plotly.js embedded (works offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def map_png_bytes(frame: pd.DataFrame, title: str = "") -> bytes:
    """The static reference-style data map (matplotlib) of ``frame`` as PNG bytes."""
    fig = data_map_matplotlib(frame, title=title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()
