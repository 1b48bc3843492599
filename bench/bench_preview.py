"""The map's picture: cartomap's own drawing (numpy + Pillow) against matplotlib's Agg backend.

    python bench/bench_preview.py                      # 550,000 and 20,000 examples, 5 repeats
    python bench/bench_preview.py --examples 550000 --repeats 7 --out /tmp/pictures

A session's first data map is sent as a picture drawn on the server (``cartomap.analysis.preview``)
while the browser loads plotly.js. This draws the page's own figure
(``cartomap.analysis.figures.data_map_figure``: 20,000 sampled points over a density heatmap of every
example, marginal histograms, region labels, legend) both ways, side by side in one process, and
prints the times (the best and the median of ``--repeats``, each way alternated) and the ratio, and
the time a fresh process needs to import each way's libraries (a server's first map pays it when the
launcher's warm-up has not drawn the picture). ``--out`` keeps both pictures to compare by eye.

The matplotlib drawing is written here for the measurement only: the same traces (markers with their
colours, sizes, opacity and rings; the heatmap; bars; the annotations; the axes' ranges, ticks, grid
and titles; the title and the legend) onto ``Figure`` axes placed at the figure's subplot domains,
then the same 256-colour PNG as the page sends. No dataset is needed: the examples are synthetic
(10 recorded epochs of 3-class logits around a per-example skill).
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LABELS = ["entailment", "neutral", "contradiction"]


def synthetic_frame(n: int, seed: int = 0):
    """The map frame of ``n`` synthetic examples (metrics of 10 recorded epochs)."""
    from cartomap.analysis import datamap
    from cartomap.scores.metrics import compute_metrics

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    skill = rng.normal(size=n)
    epochs = 10
    logits = np.empty((epochs, n, 3), np.float32)
    for e in range(epochs):
        z = rng.normal(size=(n, 3)).astype(np.float32)
        z[np.arange(n), labels] += (skill * 2 * (e + 1) / epochs).astype(np.float32)
        logits[e] = z
    metrics = compute_metrics(logits, labels, ids=[f"e{i}" for i in range(n)])
    return datamap.as_map_frame(metrics, LABELS)


# --------------------------------------------------------------------------- the matplotlib drawing
def _axis_key(ref, letter):
    ref = ref or letter
    return f"{letter}axis{ref[1:]}"


def _layout_axis(layout, key):
    return layout[key] if key in layout else None  # noqa: SIM401 - a plotly Layout has no get()


def _array(values):
    return np.asarray(values if values is not None else (), dtype=np.float64)


def _range(layout_axis, traces, letter):
    if layout_axis is not None and layout_axis.range is not None:
        return tuple(float(v) for v in layout_axis.range)
    values = []
    for t in traces:
        arr = _array(getattr(t, letter, None)).ravel()
        arr = arr[np.isfinite(arr)]
        if arr.size:
            bar_length = t.type == "bar" and (t.orientation == "h") == (letter == "x")
            values += [0.0, float(arr.max())] if bar_length else [float(arr.min()), float(arr.max())]
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if all(t.type == "bar" for t in traces):
        return min(lo, 0.0), hi * 1.02 if hi > 0 else 1.0
    pad = (hi - lo) * 0.05 or 0.5
    return lo - pad, hi + pad


def _rgba(colour, opacity=1.0):
    from cartomap.analysis.preview import parse_colour

    r, g, b, a = parse_colour(colour)
    return (r / 255, g / 255, b / 255, a * opacity)


def _cmap(scale, reverse=False):
    from matplotlib.colors import LinearSegmentedColormap

    from cartomap.analysis.preview import colourscale_stops

    positions, rgb = colourscale_stops(scale)
    if reverse:
        positions, rgb = 1 - positions[::-1], rgb[::-1]
    return LinearSegmentedColormap.from_list("scale", list(zip(positions, rgb / 255.0, strict=True)))


def matplotlib_png(fig, width: int = 1100, note: str = "loading the interactive map…") -> bytes:
    """``fig`` drawn by matplotlib's Agg backend, as the same 256-colour PNG the page sends."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from PIL import Image

    from cartomap.analysis.preview import nice_ticks

    text_colour, grid = "#2a3f5f", "#ebf0f8"
    layout = fig.layout
    height = int(layout.height or 500)
    m = layout.margin
    plot_left, plot_right, plot_top, plot_bottom = m.l, width - m.r, m.t, height - m.b
    figure = Figure(figsize=(width / 100, height / 100), dpi=100)
    FigureCanvasAgg(figure)
    pairs: dict = {}
    for trace in fig.data:
        pairs.setdefault((_axis_key(trace.xaxis, "x"), _axis_key(trace.yaxis, "y")), []).append(trace)
    axes = {}
    for (xkey, ykey), traces in pairs.items():
        xa, ya = _layout_axis(layout, xkey), _layout_axis(layout, ykey)
        xd = list(xa.domain) if xa is not None and xa.domain is not None else [0.0, 1.0]
        yd = list(ya.domain) if ya is not None and ya.domain is not None else [0.0, 1.0]
        left = plot_left + xd[0] * (plot_right - plot_left)
        right = plot_left + xd[1] * (plot_right - plot_left)
        top = plot_bottom - yd[1] * (plot_bottom - plot_top)
        bottom = plot_bottom - yd[0] * (plot_bottom - plot_top)
        ax = figure.add_axes(
            (left / width, 1 - bottom / height, (right - left) / width, (bottom - top) / height)
        )
        on_x = [t for (xk, _), ts in pairs.items() if xk == xkey for t in ts]
        on_y = [t for (_, yk), ts in pairs.items() if yk == ykey for t in ts]
        ax.set_xlim(*_range(xa, on_x, "x"))
        ax.set_ylim(*_range(ya, on_y, "y"))
        ax.set_axisbelow(True)
        for spine in ax.spines.values():
            spine.set_visible(False)
        for letter, layout_axis, lim in (("x", xa, ax.get_xlim()), ("y", ya, ax.get_ylim())):
            ticks = nice_ticks(min(lim), max(lim), 7 if letter == "x" else 6)
            (ax.set_xticks if letter == "x" else ax.set_yticks)(ticks)
            other = ykey if letter == "x" else xkey
            anchor = (layout_axis.anchor if layout_axis is not None else None) or (
                "y" if letter == "x" else "x"
            )
            show = (layout_axis is None or layout_axis.showticklabels is not False) and (
                anchor == "free" or _axis_key(anchor, "y" if letter == "x" else "x") == other
            )  # an axis is labelled once, beside the axis it is anchored to
            ax.tick_params(
                axis=letter,
                colors=text_colour,
                labelsize=8,
                length=0,
                **{"labelbottom" if letter == "x" else "labelleft": show},
            )
            title = layout_axis.title.text if layout_axis is not None and layout_axis.title else None
            if title and show:
                (ax.set_xlabel if letter == "x" else ax.set_ylabel)(title, color=text_colour, fontsize=9)
        ax.grid(True, color=grid, linewidth=1)
        axes[(xkey, ykey)] = ax
        for trace in traces:
            if trace.visible is False or trace.visible == "legendonly":
                continue
            if trace.type == "heatmap":
                z = _array(trace.z)
                xs, ys = _array(trace.x), _array(trace.y)

                def edges(c):
                    mids = (c[:-1] + c[1:]) / 2
                    return np.concatenate([[2 * c[0] - mids[0]], mids, [2 * c[-1] - mids[-1]]])

                ax.pcolormesh(
                    edges(xs),
                    edges(ys),
                    np.ma.masked_invalid(z),
                    cmap=_cmap(trace.colorscale or "Viridis", bool(trace.reversescale)),
                    vmin=trace.zmin,
                    vmax=trace.zmax,
                    alpha=float(trace.opacity) if trace.opacity is not None else 1.0,
                    shading="flat",
                )
            elif trace.type == "bar":
                position = _array(trace.y if trace.orientation == "h" else trace.x)
                length = _array(trace.x if trace.orientation == "h" else trace.y)
                w = np.min(np.diff(np.sort(position))) if len(position) > 1 else 1.0
                colour = _rgba(trace.marker.color, float(trace.opacity) if trace.opacity is not None else 1.0)
                if trace.orientation == "h":
                    ax.barh(position, length, height=w, color=colour, linewidth=0)
                else:
                    ax.bar(position, length, width=w, color=colour, linewidth=0)
            elif trace.type in ("scatter", "scattergl") and "markers" in (trace.mode or "markers"):
                marker = trace.marker
                size = float(np.mean(_array(marker.size))) if marker.size is not None else 6.0
                opacity = float(marker.opacity) if marker.opacity is not None else 1.0
                colour = marker.color
                ring = marker.line
                ring_width = float(ring.width) if ring is not None and ring.width else 0.0
                kwargs = {}
                if colour is not None and np.ndim(colour) and not isinstance(colour[0], str):
                    values = _array(colour)
                    kwargs = dict(
                        c=values, cmap=_cmap(marker.colorscale or "Viridis", bool(marker.reversescale))
                    )
                    kwargs.update(vmin=marker.cmin, vmax=marker.cmax, alpha=opacity)
                else:
                    kwargs = dict(color=_rgba(colour if not np.ndim(colour) else colour[0], opacity))
                ax.scatter(
                    _array(trace.x),
                    _array(trace.y),
                    s=(size * 0.72) ** 2,
                    linewidths=ring_width * 0.72,
                    edgecolors=_rgba(ring.color) if ring_width and ring.color else "none",
                    **kwargs,
                )
    main = axes.get(("xaxis", "yaxis"))
    for annotation in layout.annotations or ():
        if main is None or annotation.x is None:
            continue
        bg = _rgba(annotation.bgcolor) if annotation.bgcolor else "none"
        main.text(
            annotation.x,
            annotation.y,
            annotation.text,
            rotation=-float(annotation.textangle or 0),
            ha="center",
            va="center",
            fontsize=(annotation.font.size or 12) * 0.72,
            color=annotation.font.color or text_colour,
            bbox=dict(
                facecolor=bg,
                edgecolor=annotation.bordercolor or "none",
                linewidth=(annotation.borderwidth or 0) * 0.72,
                boxstyle=f"square,pad={0.1 + 0.05 * (annotation.borderpad or 1)}",
            ),
        )
    title = layout.title.text if layout.title and layout.title.text else ""
    figure.text(
        10 / width, 1 - 8 / height, f"{title} · {note}" if title else note, va="top", color=text_colour
    )
    handles = [
        Line2D([], [], marker="o", linestyle="", color=_rgba(t.marker.color), label=t.name)
        for t in fig.data
        if t.type in ("scatter", "scattergl")
        and t.name
        and t.showlegend is not False
        and t.marker is not None
        and t.marker.color is not None
        and not np.ndim(t.marker.color)
    ]
    if handles:
        legend = layout.legend
        figure.legend(
            handles=handles,
            title=legend.title.text if legend is not None and legend.title else None,
            loc="lower right",
            bbox_to_anchor=(1 - 20 / width, 1 - (plot_top - 2) / height),
            ncol=len(handles),
            frameon=False,
            fontsize=8,
            title_fontsize=8,
            handletextpad=0.2,
            columnspacing=0.8,
        )
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    image = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=6)
    return out.getvalue()


# --------------------------------------------------------------------------- the measurement
def import_seconds(modules: str) -> float:
    """Seconds a fresh interpreter needs to import ``modules`` (the best of three)."""
    best = float("inf")
    for _ in range(3):
        code = f"import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        best = min(best, float(out.stdout.strip()))
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, nargs="+", default=[550_000, 20_000])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path, default=None, help="folder to keep both pictures in")
    a = p.parse_args(argv)
    if a.repeats < 1 or any(n < 1 for n in a.examples):
        p.error("--examples and --repeats must be at least 1")
    from cartomap.analysis import figures, preview

    print(
        "| examples | points drawn | cartomap (numpy + Pillow) | matplotlib Agg | ratio | PNG bytes (cartomap / matplotlib) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n in a.examples:
        frame = synthetic_frame(n)
        fig = figures.data_map_figure(frame, color_by="correctness")
        shown = (fig.layout.meta or {}).get("n_shown", n)
        pictures = {
            "cartomap": lambda fig=fig: preview.figure_png(fig, palette=True),
            "matplotlib": lambda fig=fig: matplotlib_png(fig),
        }
        times: dict[str, list[float]] = {name: [] for name in pictures}
        sizes = {name: len(draw()) for name, draw in pictures.items()}  # warm: fonts, colour maps
        for _ in range(a.repeats):
            for name, draw in pictures.items():
                start = time.perf_counter()
                png = draw()
                times[name].append(time.perf_counter() - start)
                if a.out is not None:
                    a.out.mkdir(parents=True, exist_ok=True)
                    (a.out / f"{name}_{n}.png").write_bytes(png)
        own, mpl = (times[k] for k in ("cartomap", "matplotlib"))
        print(
            f"| {n:,} | {shown:,} | {min(own):.3f} s (median {statistics.median(own):.3f}) | "
            f"{min(mpl):.3f} s (median {statistics.median(mpl):.3f}) | "
            f"{statistics.median(mpl) / statistics.median(own):.1f}x | {sizes['cartomap']:,} / {sizes['matplotlib']:,} |"
        )
    print()
    print(
        f"imports in a fresh process: PIL.Image + ImageDraw {import_seconds('PIL.Image, PIL.ImageDraw'):.2f} s, "
        f"matplotlib Agg (Figure, FigureCanvasAgg) "
        f"{import_seconds('matplotlib.figure, matplotlib.backends.backend_agg'):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
