"""A picture of a data map figure, drawn on the server: the map a browser shows while it loads plotly.js.

A browser opening the Data map for the first time spends 1-2 s before plotly can draw anything: it fetches
and compiles plotly.js (a few MB) and sets up WebGL, which in a browser without a GPU is drawn in software
(``docs/benchmarks.md``, "The browser's side, profiled"). :func:`figure_png` draws the same figure as an
image (a few tens of ms for 20,000 points) so the page shows the map at once and swaps the picture for the
interactive chart when that is drawn (``pages/data_map.py``).

It draws what the data map figures of :mod:`cartomap.analysis.figures` hold, from the figure itself, so
the picture cannot disagree with the chart: marker traces (one colour or a colour scale; ringed markers
drawn as rings), line traces, heatmaps, bars (the marginal histograms), annotations, the axes of every
subplot (range, domain, ticks, titles), the title and the legend's entries. Not drawn: colour bars, marker
symbols (every marker is a disc), hover texts. Text comes from the figure (dataset labels in legend names)
and is only ever drawn as pixels.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

#: Width of the picture in pixels; its height is the figure's ``layout.height``.
PREVIEW_WIDTH = 1100
#: What the picture's title line ends with, so nobody tries to lasso a picture.
LOADING_NOTE = "loading the interactive map…"

# plotly_white: the template of the data map figures
_GRID = (235, 240, 248)
_TEXT = (42, 63, 95)
_TAGS = re.compile(r"<[^>]+>")


def parse_colour(colour, default=(99, 110, 250, 1.0)) -> tuple[int, int, int, float]:
    """``(r, g, b, alpha)`` of a plotly colour string: ``#rgb``, ``#rrggbb``, ``rgb(r, g, b)``,
    ``rgba(r, g, b, a)`` (alpha 0-1) or a CSS name; ``default`` for None."""
    from PIL import ImageColor

    if colour is None:
        return default
    text = str(colour).strip().lower()
    match = re.fullmatch(r"rgba?\(([^)]*)\)", text)
    if match:
        parts = [float(p) for p in match.group(1).split(",")]
        alpha = parts[3] if len(parts) > 3 else 1.0
        return int(round(parts[0])), int(round(parts[1])), int(round(parts[2])), float(alpha)
    r, g, b = ImageColor.getrgb(text)[:3]
    return r, g, b, 1.0


def colourscale_stops(scale) -> tuple[np.ndarray, np.ndarray]:
    """(positions in [0, 1], RGB rows) of a plotly colour scale: a name or ``[[position, colour], ...]``."""
    import plotly.colors

    if isinstance(scale, str):
        scale = plotly.colors.get_colorscale(scale)
    positions = np.array([float(stop[0]) for stop in scale])
    rgb = np.array([parse_colour(stop[1])[:3] for stop in scale], dtype=np.float64)
    return positions, rgb


def scale_colours(values: np.ndarray, scale, lo: float, hi: float, reverse: bool = False) -> np.ndarray:
    """RGB rows (uint8) of ``values`` on ``scale`` from ``lo`` (its first colour) to ``hi`` (its last),
    clipped; NaN gets the first colour."""
    positions, rgb = colourscale_stops(scale)
    if reverse:
        positions, rgb = 1.0 - positions[::-1], rgb[::-1]
    span = hi - lo if hi > lo else 1.0
    t = np.clip((np.asarray(values, dtype=np.float64) - lo) / span, 0.0, 1.0)
    t = np.where(np.isfinite(t), t, 0.0)
    return np.stack([np.interp(t, positions, rgb[:, c]) for c in range(3)], axis=1).round().astype(np.uint8)


def nice_ticks(lo: float, hi: float, target: int = 6) -> np.ndarray:
    """Round tick values in ``[lo, hi]``: a step of 1, 2 or 5 times a power of ten giving about ``target``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return np.array([])
    raw = (hi - lo) / max(target, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = np.arange(first, hi + step * 1e-9, step)
    return np.round(ticks, 10)


def _tick_text(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-12)) if step > 0 else 0
    return f"{value:.{decimals}f}"


def _plain(text) -> str:
    """A figure's (escaped, possibly tagged) text as plain text: ``<br>`` a space, tags dropped."""
    if text is None:
        return ""
    text = re.sub(r"<br\s*/?>", " ", str(text), flags=re.IGNORECASE)
    return html.unescape(_TAGS.sub("", text))


@lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


@lru_cache(maxsize=16)
def _disc(diameter: float, ring_width: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Pixel offsets (dy, dx) of a marker of ``diameter`` pixels: a filled disc, or only its outer
    ``ring_width`` pixels."""
    r = max(diameter / 2.0, 0.5)
    reach = int(math.ceil(r))
    dy, dx = np.mgrid[-reach : reach + 1, -reach : reach + 1]
    d2 = dx.astype(np.float64) ** 2 + dy**2
    inside = d2 <= (r + 0.25) ** 2
    if ring_width > 0:
        inside &= d2 >= max(r - ring_width, 0.0) ** 2
    return dy[inside], dx[inside]


class _Axes:
    """Pixel geometry of one subplot axis pair: data value to pixel column / row."""

    def __init__(self, box: tuple[float, float, float, float], xrange, yrange):
        self.left, self.top, self.right, self.bottom = box
        self.x0, self.x1 = xrange
        self.y0, self.y1 = yrange

    def px(self, x: np.ndarray) -> np.ndarray:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (np.asarray(x, dtype=np.float64) - self.x0) / span * (self.right - self.left)

    def py(self, y: np.ndarray) -> np.ndarray:
        span = (self.y1 - self.y0) or 1.0
        return self.bottom - (np.asarray(y, dtype=np.float64) - self.y0) / span * (self.bottom - self.top)


def _axis_key(ref: str | None, letter: str) -> str:
    """``x`` -> ``xaxis``, ``x2`` -> ``xaxis2`` (a trace's axis reference as a layout key)."""
    ref = ref or letter
    return f"{letter}axis{ref[1:]}"


def _values(values, default=()):
    """A trace's array as numbers: a list, a numpy array, or plotly's typed-array JSON (``{"dtype",
    "bdata"[, "shape"]}``, as a figure read back from JSON holds it); ``default`` for None."""
    import base64

    if values is None:
        return np.asarray(default, dtype=np.float64)
    if isinstance(values, dict) and "bdata" in values:
        arr = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        shape = values.get("shape")
        if shape:
            arr = arr.reshape([int(n) for n in str(shape).split(",")])
        return arr.astype(np.float64)
    return np.asarray(values, dtype=np.float64)


def _is_array(value) -> bool:
    """True for a per-point array (a list, a numpy array or a typed-array dict), False for one value."""
    return isinstance(value, dict) or bool(np.ndim(value))


def _layout_axis(layout, key: str):
    """``layout[key]`` (an axis) where the layout has one, else None."""
    return layout[key] if key in layout else None  # noqa: SIM401 - a plotly Layout has no get()


def _trace_extent(trace, letter: str) -> list[float]:
    """The finite values a trace puts on its ``letter`` axis (for autoranged axes)."""
    values = getattr(trace, letter, None)
    if values is None:
        return []
    arr = _values(values).ravel()
    arr = arr[np.isfinite(arr)]
    if not arr.size:
        return []
    if trace.type == "bar" and (trace.orientation == "h") == (letter == "x"):
        return [0.0, float(arr.max())]  # a bar's length starts at 0
    return [float(arr.min()), float(arr.max())]


def _axis_range(layout_axis, traces, letter: str) -> tuple[float, float]:
    if layout_axis is not None and layout_axis.range is not None:
        lo, hi = layout_axis.range
        return float(lo), float(hi)
    values = [v for t in traces for v in _trace_extent(t, letter)]
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if all(t.type == "bar" for t in traces):
        return min(lo, 0.0), hi * 1.02 if hi > 0 else 1.0
    pad = (hi - lo) * 0.05 or 0.5
    return lo - pad, hi + pad


def figure_png(fig, width: int = PREVIEW_WIDTH, *, note: str = LOADING_NOTE, palette: bool = False) -> bytes:
    """The figure drawn as a PNG of ``width`` x ``layout.height`` pixels (see the module's docstring for
    what is drawn), its title followed by `` · note``. Axes without a range are autoranged over their
    traces as plotly does (bars from 0). ``palette``: reduced to 256 colours (a quarter of the bytes;
    the shading of a density layer gets coarser)."""
    from PIL import Image, ImageDraw

    layout = fig.layout
    height = int(layout.height or 500)
    margin = layout.margin
    ml, mr = margin.l if margin.l is not None else 80, margin.r if margin.r is not None else 80
    mt, mb = margin.t if margin.t is not None else 100, margin.b if margin.b is not None else 80
    plot_left, plot_right, plot_top, plot_bottom = ml, width - mr, mt, height - mb
    if plot_right <= plot_left or plot_bottom <= plot_top:
        raise ValueError(f"a {width} x {height} picture leaves no room inside the figure's margins")

    pairs: dict[tuple[str, str], list] = {}
    for trace in fig.data:
        pairs.setdefault((_axis_key(trace.xaxis, "x"), _axis_key(trace.yaxis, "y")), []).append(trace)
    pairs.setdefault(("xaxis", "yaxis"), [])
    axes: dict[tuple[str, str], _Axes] = {}
    for xkey, ykey in pairs:
        xa, ya = _layout_axis(layout, xkey), _layout_axis(layout, ykey)
        on_x = [t for (xk, _), ts in pairs.items() if xk == xkey for t in ts]
        on_y = [t for (_, yk), ts in pairs.items() if yk == ykey for t in ts]
        xd = list(xa.domain) if xa is not None and xa.domain is not None else [0.0, 1.0]
        yd = list(ya.domain) if ya is not None and ya.domain is not None else [0.0, 1.0]
        box = (
            plot_left + xd[0] * (plot_right - plot_left),
            plot_bottom - yd[1] * (plot_bottom - plot_top),
            plot_left + xd[1] * (plot_right - plot_left),
            plot_bottom - yd[0] * (plot_bottom - plot_top),
        )
        axes[(xkey, ykey)] = _Axes(box, _axis_range(xa, on_x, "x"), _axis_range(ya, on_y, "y"))

    canvas = np.full((height, width, 3), 255, dtype=np.float64)
    small, label_font, title_font = _font(11), _font(12), _font(14)
    for (xkey, ykey), ax in axes.items():  # grid lines under everything
        for letter, key in (("x", xkey), ("y", ykey)):
            layout_axis = _layout_axis(layout, key)
            if layout_axis is not None and layout_axis.showgrid is False:
                continue
            for value in _ticks(ax, letter)[0]:
                if letter == "x":
                    canvas[int(ax.top) : int(ax.bottom) + 1, int(round(float(ax.px(value))))] = _GRID
                else:
                    canvas[int(round(float(ax.py(value)))), int(ax.left) : int(ax.right) + 1] = _GRID

    # traces, in the figure's order (later over earlier)
    lines: list[tuple] = []
    for (xkey, ykey), traces in pairs.items():
        ax = axes[(xkey, ykey)]
        for trace in traces:
            if trace.visible is False or trace.visible == "legendonly":
                continue
            if trace.type == "heatmap":
                _heatmap(canvas, ax, trace)
            elif trace.type == "bar":
                _bars(canvas, ax, trace)
            elif trace.type in ("scatter", "scattergl"):
                mode = trace.mode or "markers"
                if "lines" in mode:
                    lines.append((ax, trace))
                if "markers" in mode:
                    _markers(canvas, ax, trace)

    image = Image.fromarray(canvas.clip(0, 255).round().astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    _axis_labels(draw, axes, layout, small, label_font, image)
    for ax, trace in lines:
        _line(draw, ax, trace)
    for annotation in layout.annotations or ():
        _annotation(image, axes, annotation, plot_left, plot_top, plot_right, plot_bottom)
    title = _plain(layout.title.text if layout.title else "")
    title = f"{title} · {note}" if title and note else (title or note)
    if title:
        draw.text((10, 8), title, fill=_TEXT, font=title_font, anchor="lt")
    _legend(draw, fig, plot_top, width, label_font)
    buffer = io.BytesIO()
    if palette:  # 256 colours: a quarter of the bytes (the page sends it inline), ~15 ms at 1100 x 680
        image = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE)
        # the octree averages white with the near-white pixels around it: keep the background white
        colours = image.getpalette() or []
        image.putpalette(
            [
                255 if min(colours[i : i + 3]) >= 250 else c
                for i in range(0, len(colours), 3)
                for c in colours[i : i + 3]
            ]
        )
    image.save(buffer, format="PNG", compress_level=6 if palette else 1)
    return buffer.getvalue()


def _ticks(ax: _Axes, letter: str) -> tuple[np.ndarray, float]:
    """(tick values, step) of one axis of a subplot."""
    lo, hi = (ax.x0, ax.x1) if letter == "x" else (ax.y0, ax.y1)
    ticks = nice_ticks(min(lo, hi), max(lo, hi), 7 if letter == "x" else 6)
    return ticks, float(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0


def _axis_labels(draw, axes, layout, small, label_font, image) -> None:
    """Tick labels and axis titles of every subplot axis that shows them."""
    for (xkey, ykey), ax in axes.items():
        xa, ya = _layout_axis(layout, xkey), _layout_axis(layout, ykey)
        for letter, layout_axis, other in (("x", xa, ykey), ("y", ya, xkey)):
            if layout_axis is not None and layout_axis.showticklabels is False:
                continue
            anchor = (layout_axis.anchor if layout_axis is not None else None) or (
                "y" if letter == "x" else "x"
            )
            if anchor != "free" and _axis_key(anchor, "y" if letter == "x" else "x") != other:
                continue  # an axis is labelled once, beside the axis it is anchored to
            ticks, step = _ticks(ax, letter)
            for value in ticks:
                text = _tick_text(float(value), step)
                if letter == "x":
                    draw.text((float(ax.px(value)), ax.bottom + 4), text, fill=_TEXT, font=small, anchor="mt")
                else:
                    draw.text((ax.left - 5, float(ax.py(value))), text, fill=_TEXT, font=small, anchor="rm")
            title = layout_axis.title.text if layout_axis is not None and layout_axis.title else None
            if not title:
                continue
            if letter == "x":
                draw.text(
                    ((ax.left + ax.right) / 2, ax.bottom + 24),
                    _plain(title),
                    fill=_TEXT,
                    font=label_font,
                    anchor="mt",
                )
            else:
                _rotated_text(image, _plain(title), (ax.left - 42, (ax.top + ax.bottom) / 2), 90, label_font)


def _blend(
    canvas: np.ndarray, rows: np.ndarray, cols: np.ndarray, rgb: np.ndarray, alpha: np.ndarray
) -> None:
    """canvas[rows, cols] = (1 - alpha) * canvas + alpha * rgb, a pixel each (``rgb`` [n, 3], ``alpha`` [n]);
    pixels outside the canvas are skipped, one hit twice in a call blends once."""
    h, w = canvas.shape[:2]
    ok = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    a = alpha[ok, None]
    canvas[rows[ok], cols[ok]] = canvas[rows[ok], cols[ok]] * (1.0 - a) + rgb[ok] * a


def _clip_to(ax: _Axes, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return (cols >= ax.left) & (cols <= ax.right) & (rows >= ax.top) & (rows <= ax.bottom)


def _markers(canvas: np.ndarray, ax: _Axes, trace) -> None:
    x, y = _values(trace.x), _values(trace.y)
    if not x.size:
        return
    marker = trace.marker
    size = marker.size if marker.size is not None else 6
    size = float(np.mean(_values(size))) if _is_array(size) else float(size)
    opacity = float(marker.opacity) if marker.opacity is not None and not _is_array(marker.opacity) else 1.0
    if trace.opacity is not None:
        opacity *= float(trace.opacity)
    ok = np.isfinite(x) & np.isfinite(y)
    cols = np.round(ax.px(np.where(ok, x, ax.x0))).astype(np.int64)  # points without a place: not drawn
    rows = np.round(ax.py(np.where(ok, y, ax.y0))).astype(np.int64)
    colour = marker.color
    numeric = (
        colour is not None
        and _is_array(colour)
        and (isinstance(colour, dict) or not isinstance(colour[0], str))
    )
    if numeric:
        values = _values(colour)
        lo = marker.cmin if marker.cmin is not None else float(np.nanmin(values))
        hi = marker.cmax if marker.cmax is not None else float(np.nanmax(values))
        rgb = scale_colours(values, marker.colorscale or "Viridis", lo, hi, bool(marker.reversescale)).astype(
            np.float64
        )
        fill_alpha = np.full(len(x), opacity)
    else:
        single = colour[0] if colour is not None and _is_array(colour) else colour
        r, g, b, a = parse_colour(single)
        rgb = np.tile(np.array([r, g, b], dtype=np.float64), (len(x), 1))
        fill_alpha = np.full(len(x), opacity * a)
    ring = marker.line
    ring_width = float(ring.width) if ring is not None and ring.width and not _is_array(ring.width) else 0.0
    layers = []
    if fill_alpha.max(initial=0.0) > 0:
        layers.append((_disc(size), rgb, fill_alpha))
    if ring_width > 0 and ring.color is not None and not _is_array(ring.color):
        r, g, b, a = parse_colour(ring.color)
        if a > 0:
            ring_rgb = np.tile(np.array([r, g, b], dtype=np.float64), (len(x), 1))
            layers.append(
                (_disc(size + 2 * ring_width, max(ring_width, 1.0)), ring_rgb, np.full(len(x), opacity * a))
            )
    cols, rows = cols[ok], rows[ok]
    for (dy, dx), layer_rgb, layer_alpha in layers:
        layer_rgb, layer_alpha = layer_rgb[ok], layer_alpha[ok]
        for oy, ox in zip(dy.tolist(), dx.tolist(), strict=True):
            rr, cc = rows + oy, cols + ox
            keep = _clip_to(ax, rr, cc)
            _blend(canvas, rr[keep], cc[keep], layer_rgb[keep], layer_alpha[keep])


def _heatmap(canvas: np.ndarray, ax: _Axes, trace) -> None:
    z = _values(trace.z)
    if z.ndim != 2 or not np.isfinite(z).any():
        return
    xs = _values(trace.x, np.arange(z.shape[1]) if z.ndim == 2 else ())
    ys = _values(trace.y, np.arange(z.shape[0]) if z.ndim == 2 else ())

    def edges(centres: np.ndarray) -> np.ndarray:
        if len(centres) == 1:
            return np.array([centres[0] - 0.5, centres[0] + 0.5])
        mids = (centres[:-1] + centres[1:]) / 2
        return np.concatenate([[2 * centres[0] - mids[0]], mids, [2 * centres[-1] - mids[-1]]])

    xe, ye = edges(xs), edges(ys)
    top, bottom = int(math.ceil(ax.top)), int(math.floor(ax.bottom))
    left, right = int(math.ceil(ax.left)), int(math.floor(ax.right))
    col_values = ax.x0 + (np.arange(left, right + 1) + 0.0 - ax.left) / ((ax.right - ax.left) or 1) * (
        ax.x1 - ax.x0
    )
    row_values = ax.y0 + (ax.bottom - np.arange(top, bottom + 1)) / ((ax.bottom - ax.top) or 1) * (
        ax.y1 - ax.y0
    )
    ci = np.searchsorted(xe, col_values, side="right") - 1
    ri = np.searchsorted(ye, row_values, side="right") - 1
    col_ok = (ci >= 0) & (ci < z.shape[1])
    row_ok = (ri >= 0) & (ri < z.shape[0])
    if not col_ok.any() or not row_ok.any():
        return
    cells = z[np.ix_(ri[row_ok], ci[col_ok])]
    finite = np.isfinite(cells)
    lo = trace.zmin if trace.zmin is not None else float(np.nanmin(z))
    hi = trace.zmax if trace.zmax is not None else float(np.nanmax(z))
    rgb = scale_colours(cells[finite], trace.colorscale or "Viridis", lo, hi, bool(trace.reversescale))
    rr, cc = np.nonzero(finite)
    rows = np.arange(top, bottom + 1)[row_ok][rr]
    cols = np.arange(left, right + 1)[col_ok][cc]
    opacity = float(trace.opacity) if trace.opacity is not None else 1.0
    _blend(canvas, rows, cols, rgb.astype(np.float64), np.full(len(rows), opacity))


def _bars(canvas: np.ndarray, ax: _Axes, trace) -> None:
    horizontal = trace.orientation == "h"
    position = _values(trace.y if horizontal else trace.x)
    length = _values(trace.x if horizontal else trace.y)
    if not position.size:
        return
    width = trace.width
    if width is None:
        width = np.full(len(position), np.min(np.diff(np.sort(position))) if len(position) > 1 else 1.0)
    width = np.broadcast_to(_values(width), position.shape)
    colour = trace.marker.color if trace.marker is not None else None
    r, g, b, a = parse_colour(colour if not _is_array(colour) else None)
    opacity = (float(trace.opacity) if trace.opacity is not None else 1.0) * a
    if trace.marker is not None and trace.marker.opacity is not None and not _is_array(trace.marker.opacity):
        opacity *= float(trace.marker.opacity)
    for centre, w, value in zip(position, width, length, strict=True):
        if not (np.isfinite(centre) and np.isfinite(value)) or value == 0:
            continue
        if horizontal:
            r0, r1 = sorted((float(ax.py(centre + w / 2)), float(ax.py(centre - w / 2))))
            c0, c1 = sorted((float(ax.px(0.0)), float(ax.px(value))))
        else:
            c0, c1 = sorted((float(ax.px(centre - w / 2)), float(ax.px(centre + w / 2))))
            r0, r1 = sorted((float(ax.py(value)), float(ax.py(0.0))))
        r0, r1 = max(int(round(r0)), int(ax.top)), min(int(round(r1)), int(ax.bottom))
        c0, c1 = max(int(round(c0)), int(ax.left)), min(int(round(c1)), int(ax.right))
        if r1 <= r0 or c1 <= c0:
            continue
        block = canvas[r0:r1, c0:c1]
        block *= 1.0 - opacity
        block += opacity * np.array([r, g, b], dtype=np.float64)


def _line(draw, ax: _Axes, trace) -> None:
    x, y = _values(trace.x), _values(trace.y)
    if not x.size:
        return
    line = trace.line
    r, g, b, a = parse_colour(line.color if line is not None and line.color is not None else "#636efa")
    if a <= 0:
        return
    width = int(round(line.width)) if line is not None and line.width else 2
    cols, rows = ax.px(x), ax.py(y)
    ok = np.isfinite(cols) & np.isfinite(rows)
    run: list[tuple[float, float]] = []
    for c, rr, good in zip(cols.tolist(), rows.tolist(), ok.tolist(), strict=True):
        if good:
            run.append((c, rr))
            continue
        if len(run) > 1:
            draw.line(run, fill=(r, g, b), width=width)
        run = []
    if len(run) > 1:
        draw.line(run, fill=(r, g, b), width=width)


def _rotated_text(image, text: str, centre: tuple[float, float], angle: float, font, fill=_TEXT) -> None:
    """``text`` drawn centred on ``centre``, turned ``angle`` degrees counter-clockwise."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text)
    label = Image.new("RGBA", (right - left + 4, bottom - top + 4), (255, 255, 255, 0))
    ImageDraw.Draw(label).text((2 - left, 2 - top), text, fill=fill, font=font)
    label = label.rotate(angle, expand=True, resample=Image.BICUBIC)
    image.paste(label, (int(centre[0] - label.width / 2), int(centre[1] - label.height / 2)), label)


def _annotation(image, axes, annotation, plot_left, plot_top, plot_right, plot_bottom) -> None:
    """A text box of ``layout.annotations`` at data or domain coordinates of the main axes."""
    from PIL import Image, ImageDraw

    ax = axes.get(("xaxis", "yaxis"))
    text = _plain(annotation.text)
    if ax is None or not text or annotation.x is None or annotation.y is None:
        return
    if (annotation.xref or "x").endswith("domain"):
        cx = ax.left + float(annotation.x) * (ax.right - ax.left)
    elif (annotation.xref or "x") == "paper":
        cx = plot_left + float(annotation.x) * (plot_right - plot_left)
    else:
        cx = float(ax.px(annotation.x))
    if (annotation.yref or "y").endswith("domain"):
        cy = ax.bottom - float(annotation.y) * (ax.bottom - ax.top)
    elif (annotation.yref or "y") == "paper":
        cy = plot_bottom - float(annotation.y) * (plot_bottom - plot_top)
    else:
        cy = float(ax.py(annotation.y))
    size = int(annotation.font.size) if annotation.font is not None and annotation.font.size else 12
    font = _font(size)
    pad = int(annotation.borderpad or 1)
    border = int(annotation.borderwidth or 0)
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 2 * (pad + border), bottom - top + 2 * (pad + border)
    box = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(box)
    bg = parse_colour(annotation.bgcolor, default=(255, 255, 255, 0.0))
    edge = parse_colour(annotation.bordercolor, default=(0, 0, 0, 0.0))
    if border:
        draw.rectangle((0, 0, w - 1, h - 1), fill=(*edge[:3], int(255 * edge[3])))
    draw.rectangle((border, border, w - 1 - border, h - 1 - border), fill=(*bg[:3], int(255 * bg[3])))
    colour = parse_colour(
        annotation.font.color if annotation.font is not None else None, default=(*_TEXT, 1.0)
    )
    draw.text((border + pad - left, border + pad - top), text, fill=colour[:3], font=font)
    angle = -float(annotation.textangle or 0)  # plotly turns clockwise, PIL counter-clockwise
    if angle:
        box = box.rotate(angle, expand=True, resample=Image.BICUBIC)
    image.paste(box, (int(cx - box.width / 2), int(cy - box.height / 2)), box)


def _legend(draw, fig, plot_top: float, width: int, font) -> None:
    """The legend's entries (a dot in the trace's colour and its name) right-aligned above the plot in
    rows (the first row lowest), as the data map figures lay their horizontal legend out; colour scales
    and entries without a single colour are left out."""
    entries: list[tuple[str, tuple[int, int, int] | None]] = []
    for trace in fig.data:
        if trace.showlegend is False or not trace.name or trace.type not in ("scatter", "scattergl"):
            continue
        colour = trace.marker.color if trace.marker is not None else None
        if colour is None or _is_array(colour):
            continue
        r, g, b, a = parse_colour(colour)
        if a <= 0 and trace.marker.line is not None and trace.marker.line.color:
            r, g, b, _ = parse_colour(trace.marker.line.color)
        entries.append((_plain(trace.name), (r, g, b)))
    if not entries:
        return
    legend = fig.layout.legend
    title = _plain(legend.title.text if legend is not None and legend.title else "")
    items = ([(title, None)] if title else []) + entries
    room = width - 30
    rows: list[list[tuple[str, tuple | None, float]]] = [[]]
    used = 0.0
    for text, colour in items:
        w = font.getlength(text) + (14 if colour else 0) + 16
        if rows[-1] and used + w > room:
            rows.append([])
            used = 0.0
        rows[-1].append((text, colour, w))
        used += w
    line = font.size + 7
    for k, row in enumerate(rows):
        y = plot_top - 10 - (len(rows) - 1 - k) * line
        x = max(10.0, width - 20 - sum(w for *_, w in row))
        for text, colour, w in row:
            if colour is not None:
                draw.ellipse((x, y - 4, x + 8, y + 4), fill=colour)
                draw.text((x + 14, y), text, fill=_TEXT, font=font, anchor="lm")
            else:
                draw.text((x, y), text, fill=_TEXT, font=font, anchor="lm")
            x += w


def data_map_png(
    frame,
    color_by: str = "correctness",
    max_points: int | None = None,
    width: int = PREVIEW_WIDTH,
    *,
    figure: Callable[[], Any] | None = None,
) -> bytes:
    """:func:`figure_png` (256 colours) of the plain data map of ``frame`` (:func:`cartomap.analysis.figures.data_map_figure`
    without a selection or overlays), kept with the frame while it lives
    (:func:`cartomap.analysis.datamap.frame_memo`): the dashboard's launcher draws the default run's while
    the server starts, and a session's first map sends it before its figure is built. ``figure``: a
    function returning that same plain figure, when the caller builds it anyway (drawn from it instead of
    building a second one)."""
    from cartomap.analysis import figures
    from cartomap.analysis.datamap import frame_memo

    points = figures.DEFAULT_MAX_POINTS if max_points is None else int(max_points)

    def draw() -> bytes:
        plain = figure() if figure is not None else None
        if plain is None:
            plain = figures.data_map_figure(frame, color_by=color_by, max_points=points)
        return figure_png(plain, width, palette=True)

    return frame_memo(frame, ("picture", color_by, points, width), draw)
