"""The Data map page's chart: the map (or one map per gold label) with what is drawn over it, its
selection events, and the picture of a session's first map.

A session's first single map comes as a picture first (``cartomap.analysis.preview``, drawn on the server
from the same figure; the plain map's picture is kept with the frame and drawn by the launcher's warm-up):
the browser shows it at once while it fetches and compiles plotly.js, and a page style hides it when
plotly has drawn the chart in the same slot (:data:`MAP_SLOT`; ``_dm_painted`` marks the session as served).

A selection replaces ``selected_ids`` only when the map reports a new one (``_dm_event_sig``: the last
event taken, so a stale event is not taken twice; ``_dm_facet_sig`` for the map split by gold label,
whose selection events are ``datamap_facets``).
"""

from __future__ import annotations

import base64
import logging

import streamlit as st

from cartomap.analysis import datamap, figures, overlay_figures, preview, selection
from pages.common import SELECTED, new_chart_event

FACET_CHART = "datamap_facets"
#: The single map's height in pixels: with Streamlit's header and the page's title it is whole on a laptop's
#: screen (a 1366 x 768 browser window shows about 625 px of the page; tests/test_browser_map_first.py).
MAP_HEIGHT = 470


def take_facet_event(filtered, max_points: int) -> None:
    """:func:`take_event` for the map split by gold label: a box or lasso selects in its own panel."""
    event = new_chart_event(FACET_CHART, "_dm_facet_sig")
    if event is None:
        return
    facets = st.session_state.get("_dm_facets") or figures.facet_levels(filtered)
    st.session_state[SELECTED] = selection.resolve_facet_selection(
        filtered, event, facets, max_points=max_points
    )
    st.session_state.pop("dm_focus", None)


#: The container of the map (``st-key-<MAP_SLOT>`` in the page): a picture of the map, then the chart.
MAP_SLOT = "dm_map_slot"
#: Set once a session has been sent the picture of its first map (:func:`draw_map`).
PAINTED = "_dm_painted"
#: The picture's alt text (the style below finds it by it).
PICTURE_ALT = "picture of the data map"
#: The picture is hidden once plotly has drawn the chart beside it; plotly draws the SVG layers and the
#: WebGL points in one task, so the picture stays until the points are on screen.
SLOT_CSS = (
    f"<style>.st-key-{MAP_SLOT}:has(.js-plotly-plot .main-svg) "
    f"[data-testid='stElementContainer']:has(img[alt='{PICTURE_ALT}']) {{display: none;}}</style>"
)


def picture_markdown(png: bytes) -> str:
    """The map's picture as a Markdown image with the PNG inline (base64: nothing of the dataset's text).
    Markdown, not ``st.image`` or HTML: Streamlit fetches the code of those elements only when the first
    one arrives, while a first visit's browser is busy fetching the page's other elements' code, and the
    picture then showed no sooner than the chart; Markdown's code is loaded with the page."""
    return f"![{PICTURE_ALT}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def map_figure(
    filtered,
    color_by: str,
    max_points: int,
    selected,
    split: bool,
    paths=None,
    current_k=None,
    neighbours=None,
    generated=None,
):
    """The map (or one map per gold label) and, on the single map, the selection's ``paths``
    (``map_layers.selection_paths``, the map after ``current_k`` recordings ringed), the focused example's
    ``neighbours`` (``map_layers.neighbour_layer``) and a batch's ``generated`` pairs
    (``map_layers.generated_layer``)."""
    if split:
        fig = figures.facet_map_figure(
            filtered, color_by=color_by, max_points=max_points, highlight_ids=selected or None
        )
        st.session_state["_dm_facets"] = list(fig.layout.meta["facets"])
        return fig
    fig = figures.data_map_figure(
        filtered, color_by=color_by, max_points=max_points, highlight_ids=selected or None, height=MAP_HEIGHT
    )
    axis = datamap.axis_of(filtered)
    if paths is not None:
        overlay_figures.add_trajectories(fig, paths, current_k, axis=axis)
    if generated is not None:
        overlay_figures.add_generated_overlay(fig, generated)
    if neighbours is not None:
        overlay_figures.add_neighbour_overlay(fig, neighbours, axis=axis)
    return fig


def draw_map(filtered, color_by: str, max_points: int, selected, split: bool, after_picture=None, **layers):
    """:func:`map_figure` (``layers``: its paths, current_k, neighbours, generated) drawn with its selection
    events in the page's map slot (:data:`MAP_SLOT`); returns the figure.

    A session's first single map is preceded by a picture of it (:mod:`cartomap.analysis.preview`): the
    browser shows it at once, while it loads plotly.js, and the chart replaces it once plotly has drawn
    it (:data:`SLOT_CSS`). The plain map's picture (no selection, paths or overlays) is kept with the
    frame (the launcher draws the default run's while the server starts) and sent before the figure is
    built."""
    built = []

    def figure():
        if not built:
            built.append(map_figure(filtered, color_by, max_points, selected, split, **layers))
        return built[0]

    st.html(SLOT_CSS)
    with st.container(key=MAP_SLOT):
        picture = st.empty()  # in every run, so the chart keeps its place in the slot
        first = not split and not st.session_state.get(PAINTED)
        if first:
            plain = not selected and not any(v is not None for k, v in layers.items() if k != "current_k")
            try:
                png = (
                    preview.data_map_png(filtered, color_by, max_points, figure=figure)
                    if plain
                    else preview.figure_png(figure(), palette=True)
                )
            except Exception:  # noqa: BLE001 - the picture only comes before the chart: the chart still follows
                # (and a figure that cannot be built raises again there, as the page's error)
                logging.getLogger(__name__).warning("no picture of the map", exc_info=True)
            else:
                picture.markdown(picture_markdown(png))
            st.session_state[PAINTED] = True
            if after_picture is not None:
                after_picture()
        st.plotly_chart(
            figure(),
            key=FACET_CHART if split else "datamap",
            on_select="rerun",
            selection_mode=("points", "box", "lasso"),
            width="stretch",
            config={"displaylogo": False},
            theme=None,  # the figure's own plotly_white: 0.1-0.3 s less in the browser than Streamlit's theme
        )
    return figure()


def take_event(filtered, max_points: int) -> None:
    """Turn a new selection event of the map (from the previous interaction) into ``selected_ids``.

    An empty event is not a deselection: the chart is replaced whenever the highlighted selection
    changes, which resets its event; use "Clear selection" instead.
    """
    event = new_chart_event("datamap", "_dm_event_sig")
    if event is None:
        return
    st.session_state[SELECTED] = selection.resolve_selection(filtered, event, max_points=max_points)
    st.session_state.pop("dm_focus", None)
