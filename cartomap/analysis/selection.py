"""What a person selected on a map, as pure functions: the points inside a box or lasso, and the ids a
Streamlit plotly selection event picks.

A lasso or box over a sampled map is resolved on the server against *every* point of the frame the map
was drawn from (:func:`points_in_polygon`, :func:`points_in_box`), so the selection is exact; a plain
click gives the clicked points' ids (their ``customdata``). :func:`shapes_mask` is the one place a
selection's shapes become a mask: the data map (:func:`geometry_mask`, :func:`resolve_selection`), its
panels (:func:`resolve_facet_selection`) and the 2-D view of the embeddings
(:func:`cartomap.analysis.projection.resolve_projection_selection`) all ask it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import DEFAULT_MAX_POINTS, axis_of, id_array, str_array

#: Axes of the main scatter of a map; selection geometry on other axes (histograms) is ignored.
MAIN_XREF, MAIN_YREF = "x", "y"
#: The kinds of selection geometry a plotly event holds.
SHAPES = ("box", "lasso")


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


# --------------------------------------------------------------------------- events


def point_id(point: Mapping[str, Any]) -> str | None:
    """The id of a clicked point: its ``customdata`` (the first item when a list); None without one."""
    custom = point.get("customdata")
    if isinstance(custom, list | tuple):
        custom = custom[0] if custom else None
    return None if custom is None else str(custom)


def clicked_ids(selection: Mapping[str, Any]) -> set[str]:
    """The ids of the points of a selection (:func:`event_selection`) that carry one."""
    return {i for i in (point_id(p) for p in selection.get("points") or []) if i is not None}


def on_main_axes(shape: Mapping[str, Any]) -> bool:
    """Whether a shape was drawn on a map's main scatter, not on a marginal histogram."""
    return (shape.get("xref") or MAIN_XREF) == MAIN_XREF and (shape.get("yref") or MAIN_YREF) == MAIN_YREF


def shapes_mask(
    x: np.ndarray,
    y: np.ndarray,
    selection: Mapping[str, Any],
    keep: Callable[[Mapping[str, Any]], np.ndarray | bool | None] = on_main_axes,
) -> np.ndarray | None:
    """Bool mask over the points (x, y) inside any box or lasso of ``selection`` (the union); None when it
    holds no shape that counts. ``keep(shape)``: whether a shape counts (False/None: skipped), or a bool
    mask of the points it may select (a map's panel). A shape without vertices is skipped."""
    mask = None
    for kind in SHAPES:
        for shape in selection.get(kind) or []:
            xs, ys = list(shape.get("x") or []), list(shape.get("y") or [])
            if not xs or len(xs) != len(ys):
                continue
            allowed = keep(shape)
            if allowed is None or allowed is False:
                continue
            inside = (
                points_in_box(x, y, (min(xs), max(xs)), (min(ys), max(ys)))
                if kind == "box"
                else points_in_polygon(x, y, xs, ys)
            )
            if allowed is not True:
                inside = inside & allowed
            mask = inside if mask is None else mask | inside
    return mask


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
    ids = sorted({i for i in (point_id(p) for p in sel.get("points") or []) if i is not None})
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
    None when the event holds no geometry on the main axes. The geometry is in the map's coordinates: x on
    the frame's axis (:func:`cartomap.analysis.datamap.axis_of`), y confidence."""
    sel = event_selection(event)
    if not any(on_main_axes(s) for kind in SHAPES for s in sel.get(kind) or []):
        return None
    x = frame[axis_of(frame)].to_numpy(dtype=np.float64)
    y = frame["confidence"].to_numpy(dtype=np.float64)
    return shapes_mask(x, y, sel)


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
    ids = pd.Series(id_array(frame["id"]), dtype=object)
    clicked = clicked_ids(sel)
    mask = geometry_mask(frame, sel) if (sampled or not clicked) else None
    if mask is None:
        mask = ids.isin(list(clicked)).to_numpy()
    return ids[mask].tolist()


def resolve_facet_selection(
    frame: pd.DataFrame,
    event: Any,
    facets: Sequence[str],
    column: str = "gold",
    *,
    max_points: int = DEFAULT_MAX_POINTS,
) -> list[str]:
    """Example ids selected on a map split into panels (:func:`cartomap.analysis.figures.facet_map_figure`),
    in frame order. ``facets``: the panels' values of ``column`` in subplot order (its ``layout.meta``).

    A box or lasso drawn on panel k (axes ``x{k+1}``, ``x`` for the first) selects the rows of that
    panel inside it, tested on the server against every row (exact on a sampled map too); clicked points
    (no geometry, or a map that draws every point) are taken by their ids."""
    sel = event_selection(event)
    ids = pd.Series(id_array(frame["id"]), dtype=object)
    clicked = clicked_ids(sel)
    mask = None
    if len(frame) > max_points or not clicked:
        x = frame[axis_of(frame)].to_numpy(dtype=np.float64)  # the panels' x: the map's axis
        y = frame["confidence"].to_numpy(dtype=np.float64)
        panel = str_array(frame[column]) if column in frame.columns else np.full(len(frame), "", dtype=object)

        def panel_of(shape: Mapping[str, Any]) -> np.ndarray | None:
            xref = str(shape.get("xref") or MAIN_XREF)
            k = int(xref[1:] or 1) - 1 if xref[1:].isdigit() or xref == MAIN_XREF else -1
            return panel == str(facets[k]) if 0 <= k < len(facets) else None

        mask = shapes_mask(x, y, sel, panel_of)
    if mask is None:
        mask = ids.isin(list(clicked)).to_numpy()
    return ids[mask].tolist()
