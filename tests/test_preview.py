"""The data map drawn as a picture (``cartomap.analysis.preview``): pixels of hand-placed traces."""

from __future__ import annotations

import io

import numpy as np
import plotly.graph_objects as go
import pytest
from PIL import Image

from cartomap.analysis import datamap as dm
from cartomap.analysis import figures, preview
from cartomap.scores.metrics import compute_metrics


def _figure(*traces, **layout) -> go.Figure:
    """A 100 x 100 px plot area from (0, 0) to (1, 1), no margins, no grid: data (x, y) is pixel
    (column 100 x, row 100 - 100 y)."""
    fig = go.Figure(list(traces))
    fig.update_layout(
        height=100,
        margin=dict(l=0, r=0, t=0, b=0),
        xaxis=dict(range=[0, 1], showgrid=False, showticklabels=False),
        yaxis=dict(range=[0, 1], showgrid=False, showticklabels=False),
        showlegend=False,
    )
    fig.update_layout(**layout)
    return fig


def _pixels(fig, width: int = 100) -> np.ndarray:
    png = preview.figure_png(fig, width=width, note="")
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def test_a_marker_is_a_disc_of_its_size_at_its_place_in_its_colour():
    img = _pixels(_figure(go.Scattergl(x=[0.5], y=[0.25], mode="markers", marker=dict(size=5, color="red"))))
    assert img.shape == (100, 100, 3)
    assert img[75, 50].tolist() == [255, 0, 0]  # y = 0.25 is row 75
    assert img[75, 52].tolist() == [255, 0, 0] and img[73, 50].tolist() == [255, 0, 0]  # radius 2.5
    assert img[75, 54].tolist() == [255, 255, 255] and img[72, 52].tolist() == [255, 255, 255]
    red = np.all(img == [255, 0, 0], axis=2)
    assert red.sum() == 21  # the pixels within 2.75 of the centre


def test_opacity_and_rgba_blend_over_white():
    img = _pixels(
        _figure(
            go.Scatter(
                x=[0.2], y=[0.5], mode="markers", marker=dict(size=1, color="rgb(0,0,255)", opacity=0.5)
            ),
            go.Scatter(x=[0.8], y=[0.5], mode="markers", marker=dict(size=1, color="rgba(0,0,255,0.25)")),
        )
    )
    assert img[50, 20].tolist() == [128, 128, 255]  # 255 * 0.5 + 0 * 0.5, rounded
    assert img[50, 80].tolist() == [191, 191, 255]  # 255 * 0.75


def test_a_colour_scale_maps_cmin_to_its_first_colour_and_cmax_to_its_last():
    scale = [[0, "rgb(0,0,255)"], [1, "rgb(255,0,0)"]]
    marker = dict(size=1, color=[0.0, 1.0, 0.5, 7.0], colorscale=scale, cmin=0.0, cmax=1.0)
    img = _pixels(_figure(go.Scattergl(x=[0.1, 0.3, 0.5, 0.7], y=[0.5] * 4, mode="markers", marker=marker)))
    assert img[50, 10].tolist() == [0, 0, 255]
    assert img[50, 30].tolist() == [255, 0, 0]
    assert img[50, 50].tolist() == [128, 0, 128]  # halfway
    assert img[50, 70].tolist() == [255, 0, 0]  # above cmax: clipped


def test_a_ringed_marker_without_fill_is_only_its_ring():
    ring = go.Scattergl(
        x=[0.5],
        y=[0.5],
        mode="markers",
        marker=dict(size=6, color="rgba(0,0,0,0)", line=dict(color="black", width=1)),
    )
    img = _pixels(_figure(ring))
    assert img[50, 50].tolist() == [255, 255, 255]  # no fill
    assert img[50, 54].tolist() == [0, 0, 0]  # radius (6 + 2) / 2 = 4
    assert img[50, 56].tolist() == [255, 255, 255]


def test_a_heatmap_fills_its_cells_and_leaves_empty_ones_blank():
    scale = [[0, "rgb(0,0,0)"], [1, "rgb(0,0,255)"]]
    z = [[1.0, np.nan], [np.nan, 3.0]]  # rows are y
    heat = go.Heatmap(x=[0.25, 0.75], y=[0.25, 0.75], z=z, colorscale=scale, showscale=False)
    img = _pixels(_figure(heat))
    assert img[75, 25].tolist() == [0, 0, 0]  # z = 1, the minimum: the first colour
    assert img[25, 75].tolist() == [0, 0, 255]  # z = 3, the maximum: the last colour
    assert img[25, 25].tolist() == [255, 255, 255] and img[75, 75].tolist() == [255, 255, 255]


def test_bars_stand_on_zero_and_an_axis_without_a_range_starts_at_zero():
    bar = go.Bar(x=[0.5], y=[2.0], width=[0.2], marker_color="green")
    fig = _figure(bar)
    fig.update_layout(yaxis=dict(range=None))  # autorange: [0, 2 * 1.02]
    img = _pixels(fig)
    green = np.all(img == [0, 128, 0], axis=2)
    rows, cols = np.nonzero(green)
    assert cols.min() == 40 and cols.max() == 59  # x 0.4 to 0.6
    assert rows.max() == 99 and rows.min() == round(100 - 100 / 1.02)  # from 0 up to 2 of 2.04


def test_horizontal_bars_grow_from_the_left():
    bar = go.Bar(y=[0.5], x=[0.5], width=[0.2], orientation="h", marker_color="green")
    img = _pixels(_figure(bar))
    rows, cols = np.nonzero(np.all(img == [0, 128, 0], axis=2))
    assert cols.min() == 0 and cols.max() == 49
    assert rows.min() == 40 and rows.max() == 59


def test_the_points_of_a_hidden_trace_are_not_drawn():
    hidden = go.Scattergl(
        x=[0.5], y=[0.5], mode="markers", marker=dict(size=3, color="red"), visible="legendonly"
    )
    assert (_pixels(_figure(hidden)) == 255).all()


def test_parse_colour_reads_plotly_forms():
    assert preview.parse_colour("#ff0000") == (255, 0, 0, 1.0)
    assert preview.parse_colour("#0f0") == (0, 255, 0, 1.0)
    assert preview.parse_colour("rgb(1, 2, 3)") == (1, 2, 3, 1.0)
    assert preview.parse_colour("rgba(230,120,0,0.75)") == (230, 120, 0, 0.75)
    assert preview.parse_colour("teal") == (0, 128, 128, 1.0)
    assert preview.parse_colour(None, default=(1, 1, 1, 0.0)) == (1, 1, 1, 0.0)


@pytest.mark.parametrize(
    "lo, hi, expected",
    [
        (0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (-0.03, 1.03, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (-0.01, 0.42, [0.0, 0.1, 0.2, 0.3, 0.4]),
        (0.0, 4200.0, [0, 1000, 2000, 3000, 4000]),
    ],
)
def test_nice_ticks(lo, hi, expected):
    assert preview.nice_ticks(lo, hi, 6).tolist() == pytest.approx(expected)


def test_the_data_map_figure_drawn_has_its_points_where_the_chart_puts_them():
    """A real data map figure (marginal histograms, legend): each example's marker sits at
    its (variability, confidence) in the main axes' pixel box, in its trace's colour and opacity."""
    logits = np.array([[[4.0, 0, 0], [0, 0, 3]], [[2.0, 0, 0], [3, 0, 0]]], dtype=np.float32)  # [E, N, C]
    metrics = compute_metrics(logits, np.array([0, 2]), ids=["a", "b"])
    frame = dm.as_map_frame(metrics, ["entailment", "neutral", "contradiction"])
    fig = figures.data_map_figure(frame, color_by="label")
    assert len(fig.layout.annotations) == 2  # the regions' names, each on its lone example
    fig.layout.annotations = ()
    width = 900
    img = _pixels(fig, width=width)
    assert img.shape == (fig.layout.height, width, 3)
    m = fig.layout.margin
    left, right, top, bottom = m.l, width - m.r, m.t, fig.layout.height - m.b
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    dx, dy = fig.layout.xaxis.domain, fig.layout.yaxis.domain
    box_left, box_right = left + dx[0] * (right - left), left + dx[1] * (right - left)
    box_top, box_bottom = bottom - dy[1] * (bottom - top), bottom - dy[0] * (bottom - top)
    seen = 0
    for trace in fig.data:
        if trace.type != "scattergl" or trace.customdata is None:
            continue
        r, g, b, _ = preview.parse_colour(trace.marker.color)
        a = trace.marker.opacity
        for x, y in zip(trace.x, trace.y, strict=True):
            col = round(box_left + (x - x0) / (x1 - x0) * (box_right - box_left))
            row = round(box_bottom - (y - y0) / (y1 - y0) * (box_bottom - box_top))
            expected = [round(255 * (1 - a) + c * a) for c in (r, g, b)]
            assert np.abs(img[row, col] - expected).max() <= 1, (x, y, img[row, col], expected)
            seen += 1
    assert seen == 2


def test_a_picture_too_narrow_for_the_margins_is_refused():
    fig = _figure(go.Scatter(x=[0.5], y=[0.5]), margin=dict(l=60, r=60))
    with pytest.raises(ValueError, match="no room"):
        preview.figure_png(fig, width=100)


def test_the_256_colour_picture_keeps_a_white_background_and_the_colours_near():
    rng = np.random.default_rng(0)
    n = 3000
    marker = dict(size=3, color=rng.random(n), colorscale="Viridis", cmin=0, cmax=1)
    fig = _figure(go.Scattergl(x=rng.random(n), y=rng.random(n), mode="markers", marker=marker))
    fig.update_layout(height=300)
    full = np.asarray(Image.open(io.BytesIO(preview.figure_png(fig, width=400, note=""))).convert("RGB"))
    png = preview.figure_png(fig, width=400, note="", palette=True)
    small = Image.open(io.BytesIO(png))
    assert small.mode == "P"
    small = np.asarray(small.convert("RGB")).astype(int)
    white = (full == 255).all(axis=2)
    assert white.any() and (small[white] == 255).all()  # the background exactly white, not 254
    assert np.abs(small - full).max() <= 24 and np.abs(small - full).mean() < 2


def test_points_without_a_value_are_left_out_quietly():
    import warnings

    trace = go.Scattergl(
        x=[0.5, np.nan, 0.2], y=[0.5, 0.3, np.nan], mode="markers", marker=dict(size=1, color="red")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "invalid value encountered in cast"
        img = _pixels(_figure(trace))
    assert np.all(img == [255, 0, 0], axis=2).sum() == 1 and img[50, 50].tolist() == [255, 0, 0]
