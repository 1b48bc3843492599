"""The interactive data map of the dashboard, as pure functions (no streamlit here).

* :func:`map_frame`: one row per training example, metrics joined with the example texts.
* :func:`filter_frame`: label / region / genre / metric-range filters.
* :func:`figure`: the plotly WebGL data map (x = variability, y = confidence) with marginal
  histograms; above ``max_points`` it draws a density layer of every point plus a random sample.
* :func:`resolve_selection`: ids from a Streamlit plotly selection event. A lasso or box over a
  sampled map is resolved on the server against *every* point of the filtered frame
  (:func:`points_in_polygon`, :func:`points_in_box`), so the selection is exact.
* :func:`gold_trajectory`, :func:`selection_table`, :func:`to_csv_bytes`, :func:`to_jsonl_bytes`,
  :func:`map_html_bytes`, :func:`map_png_bytes`.

Dataset text is untrusted: everything that goes into plotly hover text or trace names is
HTML-escaped (plotly renders a subset of HTML in those strings).
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import RunError
from cartomap.metrics import AMBIGUOUS, EASY, HARD, bucket_order, correctness_bucket, softmax
from cartomap.plots import _ANNOTATIONS, REGION_COLORS, _bucket_colors, data_map_matplotlib

DEFAULT_MAX_POINTS = 20_000
COLOR_BY = ("correctness", "label", "region", "genre")
#: Axes of the main scatter in :func:`figure`; selection geometry on other axes (histograms) is ignored.
MAIN_XREF, MAIN_YREF = "x", "y"
#: Metric columns of :func:`map_frame`, in display order.
METRIC_COLUMNS = ("confidence", "variability", "correctness", "forgetfulness", "aum", "region")
RANGE_COLUMNS = ("confidence", "variability", "correctness", "forgetfulness", "aum")
DENSITY_BINS = 80
#: At most this many selected points get a ring (a larger selection is sampled for drawing only).
HIGHLIGHT_MAX_POINTS = 5_000
HOVER_TEXT_CHARS = 70
_QUALITATIVE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880")


# --------------------------------------------------------------------------- the frame


def _n_epochs(metrics: pd.DataFrame, run=None) -> int | None:
    n = metrics.attrs.get("n_epochs")
    if n:
        return int(n)
    if run is not None:
        epochs = run.dynamics_epochs()
        if epochs:
            return len(epochs)
    if "correct_count" in metrics.columns and "correctness" in metrics.columns:
        frac = metrics["correctness"].to_numpy(dtype=np.float64)
        count = metrics["correct_count"].to_numpy(dtype=np.float64)
        ok = frac > 0
        if ok.any():
            return int(np.round(np.median(count[ok] / frac[ok])))
    return None


def _id_array(values) -> np.ndarray:
    """Ids as a numpy object array of Python str. Hash lookups on it are fast; pandas 3's default
    Arrow-backed str dtype iterates in Python for ``isin`` against a long list."""
    if isinstance(values, pd.Series | pd.Index):
        if values.dtype == object and (
            not len(values) or isinstance(values.iloc[0] if isinstance(values, pd.Series) else values[0], str)
        ):
            return values.to_numpy()
        return values.astype(str).astype(object).to_numpy()
    return np.asarray([str(v) for v in values], dtype=object)


def _str_array(series: pd.Series) -> np.ndarray:
    """A column as an object array of str (cheap for categoricals: one str per category)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = np.asarray([str(c) for c in series.cat.categories] + [""], dtype=object)
        return cats[series.cat.codes.to_numpy()]  # code -1 (missing) -> ""
    return np.asarray([str(v) for v in series.astype(object)], dtype=object)


def _positions(frame: pd.DataFrame, ids) -> np.ndarray:
    """Row positions in ``frame`` of ``ids`` (in the order given; ids not in the frame skipped)."""
    ids = np.asarray(ids, dtype=object)
    if not len(ids) or frame.empty:
        return np.zeros(0, dtype=np.int64)
    index = pd.Index(_id_array(frame["id"]), dtype=object)
    pos = index.get_indexer_for(ids) if not index.is_unique else index.get_indexer(ids)
    return pos[pos >= 0].astype(np.int64)


def _names(codes: pd.Series, label_names: Sequence[str]) -> pd.Series:
    mapping = dict(enumerate(label_names))
    return codes.map(mapping).fillna(codes.astype(str)).astype(str)


def build_map_frame(
    metrics: pd.DataFrame, examples: pd.DataFrame, label_names: Sequence[str], n_epochs: int | None = None
) -> pd.DataFrame:
    """:func:`map_frame` on already loaded tables (metrics from compute_metrics, examples of the run).

    Columns: id, premise and hypothesis (or text), gold, predicted (label names), genre (when the
    examples have one), confidence, variability, correctness, forgetfulness, never_learned, aum,
    region, bucket (correctness bucket "0.0" ... "1.0"), label and predicted_label (class indices).
    """
    metrics = metrics.copy()
    metrics["id"] = metrics["id"].astype(str)
    examples = examples.copy()
    examples["id"] = examples["id"].astype(str)
    text_cols = [c for c in ("premise", "hypothesis", "text") if c in examples.columns]
    extra = [c for c in ("genre",) if c in examples.columns]
    joined = metrics.merge(
        examples[["id", *text_cols, *extra]], on="id", how="left", validate="one_to_one", sort=False
    )
    n_epochs = n_epochs or _n_epochs(metrics)
    out = pd.DataFrame({"id": pd.Series(_id_array(joined["id"]), dtype=object)})
    for col in text_cols:
        out[col] = joined[col].astype(object).where(joined[col].notna(), "").astype(str)
    out["gold"] = _names(joined["label"].astype(np.int64), label_names).astype("category")
    out["predicted"] = _names(joined["predicted"].astype(np.int64), label_names).astype("category")
    if "genre" in extra:
        genre = joined["genre"].astype(object).where(joined["genre"].notna(), "")
        out["genre"] = genre.astype(str).astype("category")
    for col in ("confidence", "variability", "correctness"):
        out[col] = joined[col].astype(np.float64)
    out["forgetfulness"] = joined["forgetfulness"].astype(np.int64)
    if "never_learned" in joined.columns:
        out["never_learned"] = joined["never_learned"].astype(bool)
    out["aum"] = joined["aum"].astype(np.float64) if "aum" in joined.columns else np.nan
    out["region"] = joined["region"].astype(str).astype("category")
    out["bucket"] = pd.Categorical(correctness_bucket(out["correctness"].to_numpy(), n_epochs))
    out["label"] = joined["label"].astype(np.int64)
    out["predicted_label"] = joined["predicted"].astype(np.int64)
    out = out.reset_index(drop=True)
    out.attrs["n_epochs"] = n_epochs
    out.attrs["label_names"] = list(label_names)
    return out


def map_frame(run, source: str = "train") -> pd.DataFrame:
    """Metrics of every training example of ``run`` joined with its texts (see :func:`build_map_frame`)."""
    metrics = run.metrics(source)
    epochs = run.dynamics_epochs(source)
    return build_map_frame(
        metrics, run.examples(), run.label_names, _n_epochs(metrics) or len(epochs) or None
    )


def metric_bounds(frame: pd.DataFrame, column: str) -> tuple[float, float]:
    """(min, max) of a metric column over finite values, (0, 1) for an empty column."""
    values = frame[column].to_numpy(dtype=np.float64)
    values = values[np.isfinite(values)]
    if not values.size:
        return 0.0, 1.0
    return float(values.min()), float(values.max())


def filter_frame(
    frame: pd.DataFrame,
    labels: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    genres: Iterable[str] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Rows whose gold label, region and genre are among the given ones and whose metrics lie in
    the closed ranges ``{column: (lo, hi)}`` (None for a bound = open). ``None`` = no filter; an
    empty list keeps nothing. The index of ``frame`` is kept."""
    mask = np.ones(len(frame), dtype=bool)
    for column, allowed in (("gold", labels), ("region", regions), ("genre", genres)):
        if allowed is None:
            continue
        if column not in frame.columns:
            if column == "genre":
                continue  # no genres in this dataset: nothing to filter on
            raise KeyError(f"frame has no column {column!r}")
        mask &= frame[column].isin([str(a) for a in allowed]).to_numpy()
    for column, bounds in (ranges or {}).items():
        if column not in frame.columns:
            raise KeyError(f"cannot filter on {column!r}: the frame has no such column")
        lo, hi = bounds
        values = frame[column].to_numpy(dtype=np.float64)
        if lo is not None:
            mask &= values >= lo
        if hi is not None:
            mask &= values <= hi
    return frame[mask]


# --------------------------------------------------------------------------- geometry


def points_in_box(x, y, x_range, y_range) -> np.ndarray:
    """Bool mask: x within x_range and y within y_range (closed; each range in either order)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x0, x1 = sorted(float(v) for v in x_range)
    y0, y1 = sorted(float(v) for v in y_range)
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)


def points_in_polygon(x, y, poly_x, poly_y) -> np.ndarray:
    """Bool mask of the points inside the polygon, by the even-odd rule (PNPOLY ray casting).

    The polygon is closed implicitly (a repeated first vertex is fine); it may be concave or
    self-intersecting. An edge from (x_i, y_i) to (x_j, y_j) is crossed by the ray from a point
    (px, py) towards +x when min(y_i, y_j) <= py < max(y_i, y_j) and px is left of the edge at py,
    the usual half-open rule, so every point of the plane is decided exactly once. Non-finite
    points are outside. Cost: O(N log N + total crossings): the points are sorted by y once and
    each edge only touches the points in its y band.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.shape[0]} != {y.shape[0]}")
    px = np.asarray(poly_x, dtype=np.float64).ravel()
    py = np.asarray(poly_y, dtype=np.float64).ravel()
    if px.shape != py.shape:
        raise ValueError("polygon x and y differ in length")
    finite = np.isfinite(px) & np.isfinite(py)
    px, py = px[finite], py[finite]
    inside = np.zeros(x.shape[0], dtype=bool)
    if px.size < 3 or x.size == 0:
        return inside
    # candidates: finite points inside the polygon's bounding box
    cand = np.flatnonzero(
        np.isfinite(x)
        & np.isfinite(y)
        & (x >= px.min())
        & (x <= px.max())
        & (y >= py.min())
        & (y <= py.max())
    )
    if cand.size == 0:
        return inside
    order = np.argsort(y[cand], kind="stable")
    cand = cand[order]
    cx, cy = x[cand], y[cand]
    parity = np.zeros(cand.size, dtype=bool)
    xj, yj = np.roll(px, 1), np.roll(py, 1)
    for x_i, y_i, x_j, y_j in zip(px.tolist(), py.tolist(), xj.tolist(), yj.tolist(), strict=True):
        if y_i == y_j:
            continue  # horizontal edge: never crossed under the half-open rule
        lo, hi = (y_i, y_j) if y_i < y_j else (y_j, y_i)
        start = np.searchsorted(cy, lo, side="left")
        stop = np.searchsorted(cy, hi, side="left")
        if start >= stop:
            continue
        band_y = cy[start:stop]
        x_cross = x_i + (band_y - y_i) * (x_j - x_i) / (y_j - y_i)
        parity[start:stop] ^= cx[start:stop] < x_cross
    inside[cand] = parity
    return inside


# --------------------------------------------------------------------------- selection


def _shapes(selection: Mapping[str, Any], kind: str) -> list[tuple[list[float], list[float]]]:
    shapes = []
    for shape in selection.get(kind) or []:
        xref = shape.get("xref") or MAIN_XREF
        yref = shape.get("yref") or MAIN_YREF
        if xref != MAIN_XREF or yref != MAIN_YREF:
            continue  # drawn on a marginal histogram
        xs, ys = list(shape.get("x") or []), list(shape.get("y") or [])
        if xs and len(xs) == len(ys):
            shapes.append((xs, ys))
    return shapes


def _point_id(point: Mapping[str, Any]) -> str | None:
    custom = point.get("customdata")
    if isinstance(custom, list | tuple):
        custom = custom[0] if custom else None
    return None if custom is None else str(custom)


def event_selection(event: Any) -> dict[str, Any]:
    """The ``selection`` dict of a Streamlit plotly event (or the dict itself); {} when absent."""
    if event is None:
        return {}
    selection = (
        event.get("selection", event) if isinstance(event, Mapping) else getattr(event, "selection", {})
    )
    return dict(selection or {})


def event_signature(event: Any) -> str:
    """A short string that changes when the user's selection changes (to tell a new event from a stale one)."""
    sel = event_selection(event)
    ids = sorted({i for i in (_point_id(p) for p in sel.get("points") or []) if i is not None})
    return json.dumps(
        {"ids": ids, "box": sel.get("box") or [], "lasso": sel.get("lasso") or []},
        sort_keys=True,
        default=str,
    )


def is_empty_event(event: Any) -> bool:
    sel = event_selection(event)
    return not (sel.get("points") or sel.get("box") or sel.get("lasso"))


def geometry_mask(frame: pd.DataFrame, event: Any) -> np.ndarray | None:
    """Bool mask over ``frame`` of the points inside any box or lasso of the event (union);
    None when the event holds no geometry on the main axes."""
    sel = event_selection(event)
    boxes, lassos = _shapes(sel, "box"), _shapes(sel, "lasso")
    if not boxes and not lassos:
        return None
    x = frame["variability"].to_numpy(dtype=np.float64)
    y = frame["confidence"].to_numpy(dtype=np.float64)
    mask = np.zeros(len(frame), dtype=bool)
    for xs, ys in boxes:
        mask |= points_in_box(x, y, (min(xs), max(xs)), (min(ys), max(ys)))
    for xs, ys in lassos:
        mask |= points_in_polygon(x, y, xs, ys)
    return mask


def resolve_selection(
    frame: pd.DataFrame, event: Any, *, max_points: int = DEFAULT_MAX_POINTS, sampled: bool | None = None
) -> list[str]:
    """Example ids selected by a Streamlit plotly selection event, in frame order.

    ``frame`` is the (filtered) frame the figure was drawn from. When the figure shows every point
    (``len(frame) <= max_points``, or ``sampled=False``) the ids are the ``customdata`` of the
    event's points, as plotly chose them. When the figure is sampled, the box / lasso geometry is
    tested on the server against every row of ``frame``, so points not drawn are selected too;
    a plain click (no geometry) still gives the clicked points. Without points the geometry is used
    in either case. Ids not in ``frame`` are dropped.
    """
    sel = event_selection(event)
    if sampled is None:
        sampled = len(frame) > max_points
    ids = pd.Series(_id_array(frame["id"]), dtype=object)
    clicked = {i for i in (_point_id(p) for p in sel.get("points") or []) if i is not None}
    mask = geometry_mask(frame, sel) if (sampled or not clicked) else None
    if mask is None:
        mask = ids.isin(list(clicked)).to_numpy()
    return ids[mask].tolist()


# --------------------------------------------------------------------------- figure


def _esc(text: str) -> str:
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
    for col, label in (("premise", "P"), ("hypothesis", "H"), ("text", "T")):
        if col in shown.columns:
            text = text + f"<br>{label}: " + escape(_shorten(shown[col])).set_axis(idx)
    return text.to_numpy(dtype=object)


#: Hover of a map point: the escaped :func:`hover_text` plus the coordinates (numbers only).
HOVER_TEMPLATE = "%{hovertext}<br>confidence %{y:.3f} · variability %{x:.3f}<extra></extra>"


def _groups(frame: pd.DataFrame, color_by: str) -> tuple[np.ndarray, list[str], dict[str, str], str]:
    """(group of every row, ordered levels, colour per level, legend title)."""
    if color_by == "correctness":
        groups = _str_array(frame["bucket"])
        levels = bucket_order(groups)
        palette = {
            k: "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(c[:3])))
            for k, c in _bucket_colors(levels).items()
        }
        return groups, levels, palette, "correctness"
    if color_by == "region":
        groups = _str_array(frame["region"])
        present = set(groups)
        levels = [r for r in (EASY, AMBIGUOUS, HARD) if r in present] + sorted(
            present - {EASY, AMBIGUOUS, HARD}
        )
        palette = dict(REGION_COLORS)
        for i, lvl in enumerate(levels):
            palette.setdefault(lvl, _QUALITATIVE[i % len(_QUALITATIVE)])
        return groups, levels, palette, "region"
    if color_by == "label":
        groups = _str_array(frame["gold"])
        order = frame[["label", "gold"]].drop_duplicates("gold").sort_values("label")
        levels = [str(v) for v in order["gold"]]
    elif color_by == "genre":
        if "genre" not in frame.columns:
            raise ValueError("this dataset has no genre column to colour by")
        groups = _str_array(frame["genre"])
        levels = sorted(set(groups))
    else:
        raise ValueError(f"color_by must be one of {COLOR_BY}, got {color_by!r}")
    palette = {lvl: _QUALITATIVE[i % len(_QUALITATIVE)] for i, lvl in enumerate(levels)}
    return groups, levels, palette, color_by


def sample_rows(frame: pd.DataFrame, max_points: int, seed: int = 0) -> pd.DataFrame:
    """At most ``max_points`` rows drawn uniformly without replacement (frame order kept)."""
    if len(frame) <= max_points:
        return frame
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(frame), size=max_points, replace=False))
    return frame.iloc[keep]


def figure(
    frame: pd.DataFrame,
    color_by: str = "correctness",
    max_points: int = DEFAULT_MAX_POINTS,
    seed: int = 0,
    *,
    highlight_ids: Iterable[str] | None = None,
    title: str = "",
    height: int = 680,
):
    """The data map of ``frame`` (from :func:`map_frame`, possibly filtered) as a plotly figure.

    Main axes ``x``/``y`` (variability / confidence): one Scattergl trace per colour group, each
    point's ``customdata`` its example id, escaped hover text. Marginal histograms of variability
    (top, axes x/y2) and confidence (right, axes x2/y) over every row. Above ``max_points`` rows a
    heatmap of the binned counts of every row is drawn under a random sample of ``max_points``
    points, and ``layout.meta`` says so (``{"n_total", "n_shown", "sampled"}``).
    ``highlight_ids`` (the current selection) are ringed in black (at most
    :data:`HIGHLIGHT_MAX_POINTS` rings, sampled). ``dragmode`` is lasso.
    """
    import plotly.graph_objects as go

    if color_by not in COLOR_BY:
        raise ValueError(f"color_by must be one of {COLOR_BY}, got {color_by!r}")
    n_total = len(frame)
    shown = sample_rows(frame, max_points, seed)
    sampled = len(shown) < n_total
    groups, levels, palette, legend_title = _groups(shown, color_by)
    all_groups = _groups(frame, color_by)[0] if sampled else groups
    counts = pd.Series(all_groups).value_counts()
    x = shown["variability"].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    ids = _id_array(shown["id"])
    hover = hover_text(shown)

    fig = go.Figure()
    all_x = frame["variability"].to_numpy(dtype=np.float64)
    all_y = frame["confidence"].to_numpy(dtype=np.float64)
    x_hi = max(0.05, float(np.nanmax(all_x)) * 1.05) if n_total else 0.5
    if sampled:
        ok = np.isfinite(all_x) & np.isfinite(all_y)
        bins = int(np.clip(np.sqrt(ok.sum()) / 4, 20, DENSITY_BINS))
        z, xe, ye = np.histogram2d(all_x[ok], all_y[ok], bins=bins, range=[[0, x_hi], [-0.02, 1.02]])
        z = np.where(z > 0, np.log10(z + 1), np.nan).T  # rows = y
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
    for level in levels:
        sel = groups == level
        if not np.any(sel):
            continue
        fig.add_trace(
            go.Scattergl(
                x=x[sel],
                y=y[sel],
                mode="markers",
                name=_esc(f"{level} ({int(counts.get(level, 0)):,})"),
                legendgroup=_esc(str(level)),
                customdata=ids[sel],
                hovertext=hover[sel],
                hovertemplate=HOVER_TEMPLATE,
                marker=dict(size=marker_size, color=palette.get(level), opacity=0.8),
                xaxis=MAIN_XREF,
                yaxis=MAIN_YREF,
            )
        )
    if highlight_ids is not None:
        wanted = pd.unique(np.asarray([str(i) for i in highlight_ids], dtype=object))
        high = frame.iloc[_positions(frame, wanted)]
        n_high = len(high)
        high = sample_rows(high, min(max_points, HIGHLIGHT_MAX_POINTS), seed)
        if len(high):
            fig.add_trace(
                go.Scattergl(
                    x=high["variability"].to_numpy(dtype=np.float64),
                    y=high["confidence"].to_numpy(dtype=np.float64),
                    mode="markers",
                    name=f"selected ({n_high:,})",
                    customdata=_id_array(high["id"]),
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

    for column, colour in (("variability", "teal"), ("confidence", "#622a87")):
        values = frame[column].to_numpy(dtype=np.float64)
        values = values[np.isfinite(values)]
        hist, edges = np.histogram(values, bins=40) if values.size else (np.zeros(0), np.zeros(1))
        centers, width = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
        if column == "variability":
            bar = go.Bar(
                x=centers,
                y=hist,
                width=width,
                xaxis="x",
                yaxis="y2",
                hovertemplate="variability %{x:.3f}: %{y} examples<extra></extra>",
            )
        else:
            bar = go.Bar(
                y=centers,
                x=hist,
                width=width,
                orientation="h",
                xaxis="x2",
                yaxis="y",
                hovertemplate="confidence %{y:.3f}: %{x} examples<extra></extra>",
            )
        bar.update(marker_color=colour, name=column, showlegend=False)
        fig.add_trace(bar)

    for text, ax_x, ax_y, rotation, edge in _ANNOTATIONS:
        fig.add_annotation(
            text=text,
            x=ax_x,
            y=ax_y,
            xref="x domain",
            yref="y domain",
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
            text=_esc(f"{title} data map · {note}".strip(" ·")),
            font=dict(size=14),
            x=0.01,
            y=0.99,
            yanchor="top",
        ),
        template="plotly_white",
        height=height,
        margin=dict(l=60, r=20, t=70, b=50),
        dragmode="lasso",
        hovermode="closest",
        bargap=0,
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


def figure_ids(fig) -> list[str]:
    """Every id drawn as a point of the map's scatter traces (for tests and checks)."""
    return [
        str(i) for t in fig.data if t.type == "scattergl" and t.customdata is not None for i in t.customdata
    ]


# --------------------------------------------------------------------------- tables and files


def selection_table(frame: pd.DataFrame, ids: Iterable[str]) -> pd.DataFrame:
    """Rows of ``frame`` for ``ids`` (in the order given, unknown or filtered-out ids skipped),
    with the columns a person reads: id, texts, gold, predicted, genre, metrics."""
    wanted = pd.unique(np.asarray([str(i) for i in ids], dtype=object))
    cols = [
        c for c in ("id", "premise", "hypothesis", "text", "gold", "predicted", "genre") if c in frame.columns
    ]
    cols += [c for c in METRIC_COLUMNS if c in frame.columns and c not in cols]
    return frame.iloc[_positions(frame, wanted)][cols].reset_index(drop=True)


def to_csv_bytes(table: pd.DataFrame) -> bytes:
    """UTF-8 CSV with a header row, no index."""
    return table.to_csv(index=False).encode("utf-8")


def to_jsonl_bytes(table: pd.DataFrame) -> bytes:
    """One JSON object per row (UTF-8, non-ASCII kept), NaN as null."""
    if table.empty:
        return b""
    text = table.to_json(orient="records", lines=True, force_ascii=False, double_precision=15)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def map_html_bytes(fig) -> bytes:
    """A standalone HTML file of the figure with plotly.js embedded (works offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def map_png_bytes(frame: pd.DataFrame, title: str = "") -> bytes:
    """The static reference-style data map (matplotlib) of ``frame`` as PNG bytes."""
    fig = data_map_matplotlib(frame, title=title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


# --------------------------------------------------------------------------- one example


def gold_trajectory(run, example_id: str, source: str = "train") -> pd.DataFrame:
    """Per-epoch probabilities of one example: columns epoch (1-based), gold_prob and
    ``prob_<class name>`` for every class, from the run's recorded dynamics.

    Reads only that example's row of each epoch file (same values as ``run.dynamics()``)."""
    example_id = str(example_id)
    examples = run.examples() if source != "dev" else run.dev_examples()
    row = examples.loc[examples["id"].astype(str) == example_id]
    if row.empty:
        raise RunError(f"run {run.id} has no example {example_id!r}")
    gold = int(row["label"].iloc[0])
    names = list(run.label_names)
    rows = []
    for epoch in run.dynamics_epochs(source):
        path = run.path / "dynamics" / source / f"epoch_{epoch}.parquet"
        part = pd.read_parquet(path, filters=[("id", "==", example_id)])
        if part.empty:
            raise RunError(f"run {run.id}: epoch {epoch} of {source} dynamics lacks example {example_id!r}")
        logits = part[[c for c in part.columns if c.startswith("logit_")]].to_numpy(dtype=np.float64)[0]
        probs = softmax(logits)
        record = {"epoch": epoch + 1, "gold_prob": float(probs[gold])}
        for c, p in enumerate(probs):
            name = names[c] if c < len(names) else str(c)
            record[f"prob_{name}"] = float(p)
        rows.append(record)
    if not rows:
        raise RunError(f"run {run.id} has no recorded {source} dynamics")
    return pd.DataFrame(rows)


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
                name=_esc(f"p({col[5:]})"),
                line=dict(width=1, dash="dot"),
                marker=dict(size=4),
            )
        )
    name = f"gold ({gold})" if gold else "gold label"
    fig.add_trace(
        go.Scatter(
            x=traj["epoch"],
            y=traj["gold_prob"],
            mode="lines+markers",
            name=_esc(name),
            line=dict(width=3, color="black"),
            marker=dict(size=7),
        )
    )
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin=dict(l=50, r=10, t=10, b=40),
        xaxis=dict(title=dict(text="epoch"), dtick=1),
        yaxis=dict(title=dict(text="probability"), range=[-0.02, 1.02]),
        legend=dict(orientation="h", y=-0.3),
        hovermode="x unified",
    )
    return fig
