"""What the Data map page draws over its single map, and the map over epochs.

A run with two or more recordings gets a slider "Map after recording" (``dm_burn_out_<run>``, the reference's
burn-out): the map from the first k recordings, computed from the dynamics read once per run and recording
(``pages.components.maps.dynamics``) and sliced. Over the single map the selected examples' paths are drawn
(``dm_paths``; :func:`cartomap.analysis.epochs.trajectories`, the first
:data:`~cartomap.analysis.epochs.DEFAULT_TRAJECTORIES` by default, up to ``MAX_TRAJECTORIES`` with "Paths
drawn", ``dm_paths_drawn``): their point on the map of the first 2, 3, ..., E recordings, the point of the map
shown ringed. A token run's sentence-level map and every
view of a multi-label run have both too: a sentence after k recordings is its words' metrics over those
recordings aggregated as its map does (``cartomap.analysis.tokens``), an example of the combined view its
labels' (``cartomap.analysis.multilabel``).

Over the single map (``cartomap.analysis.overlays``, drawn by ``overlay_figures.add_*_overlay``): the focused example
(★) and its 4 nearest neighbours of any label and of its own (◆ same label, ◇ another; ``dm_show_neighbours``)
when the run has embeddings, and, when the run has filtered WaNLI batches, "Generated pairs: <batch>"
(``dm_generated_<run>``): every pair the filter scored at its estimated max variability, kept or removed, on a
strip above the map (the filter estimates no confidence; the caption says how x differs from the map's).
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import datamap, epochs, overlay_figures, overlays, tokens
from cartomap.analysis import multilabel as label_views
from cartomap.errors import CartomapError
from cartomap.runs import layout
from cartomap.scores import ambiguity
from cartomap.wanli.batches import list_batches
from pages.common import count, escape_markdown, kept, show_error
from pages.components import cached, maps

PATHS = "dm_paths"
PATHS_DRAWN = "dm_paths_drawn"
SHOW_NEIGHBOURS = "dm_show_neighbours"


def burn_out_key(run) -> str:
    """The session key of the run's "Map after recording" slider."""
    return f"dm_burn_out_{run.id}"


def generated_key(run) -> str:
    """The session key of the run's "Generated pairs" picker."""
    return f"dm_generated_{run.id}"


def view_keys(run) -> dict[str, str]:
    """The settings of what is drawn over the map that a saved view keeps ({name: session key})."""
    return {
        "paths": PATHS,
        "paths_drawn": PATHS_DRAWN,
        "show_neighbours": SHOW_NEIGHBOURS,
        "burn_out": burn_out_key(run),
        "generated": generated_key(run),
    }


def epoch_slider(run) -> tuple[int | None, int]:
    """The map over epochs: a slider "Map after recording k of E" (a run with 2 or more recordings) that
    redraws the map from the first k recordings only (the reference's ``--burn_out k``; the dynamics are
    read once per run and sliced, ``pages.components.maps.dynamics``). Returns (burn_out, E): burn_out
    None when the map uses every recording."""
    recorded = len(run.dynamics_epochs(run.recorded_source()))
    if recorded < 2:
        return None, recorded
    key = burn_out_key(run)
    if not isinstance(st.session_state.get(key), int) or not 1 <= st.session_state[key] <= recorded:
        st.session_state.pop(key, None)  # recordings lost since (a repaired run): every one again
    used = st.slider(
        "Map after recording",
        1,
        recorded,
        step=1,
        help="Metrics from the first k recordings (epochs) only: watch the map form as training goes on "
        "(the reference's --burn_out). The paths of the selection end at the last recording.",
        **kept(key, recorded),
    )
    return (int(used) if int(used) < recorded else None), recorded


def selection_paths(
    run,
    table,
    current_k: int,
    *,
    view: str | None = None,
    method: str | None = None,
    axis: str,
):
    """The paths through the map of the selected examples shown (the first "Paths drawn" of them,
    :data:`cartomap.analysis.epochs.DEFAULT_TRAJECTORIES` by default, at most ``MAX_TRAJECTORIES``): their
    point on the map of the first 2, 3, ..., E
    recordings (:func:`cartomap.analysis.epochs.trajectories`), when "Paths of the selection" is on;
    None otherwise. ``view``: a multi-label run's view (its points' paths,
    :func:`cartomap.analysis.multilabel.view_trajectories`); ``method``: the table lists a token run's
    sentences, scored by that method (:func:`cartomap.analysis.tokens.sentence_trajectories`). ``axis``: the
    map's x axis (the paths' x)."""
    if table.empty:
        return None
    n = len(table)
    kept_drawn = st.session_state.get(PATHS_DRAWN, epochs.DEFAULT_TRAJECTORIES)
    most = min(max(1, int(kept_drawn)), epochs.MAX_TRAJECTORIES) if isinstance(kept_drawn, int) else None
    st.session_state[PATHS_DRAWN] = most or epochs.DEFAULT_TRAJECTORIES
    shown = min(n, st.session_state[PATHS_DRAWN])
    noun = "sentence" if method else "example"
    label = (
        f"Paths of the selection over the recordings ({shown:,} of {n:,} drawn)"
        if n > shown
        else (f"Paths of the selection over the recordings ({count(n, noun)})")
    )
    left, right = st.columns([3, 1], vertical_alignment="center")
    on = left.checkbox(
        label,
        help=f"Each selected {noun}'s point on the map of the first 2, 3, ... "
        "recordings, joined by a line; small marker first, the red ring = the map shown.",
        **kept(PATHS, True),
    )
    if n > epochs.DEFAULT_TRAJECTORIES:
        right.number_input(
            "Paths drawn",
            1,
            epochs.MAX_TRAJECTORIES,
            step=5,
            help=f"The first this many of the selection (at most {epochs.MAX_TRAJECTORIES}: more is a tangle).",
            disabled=not on,
            **kept(PATHS_DRAWN, epochs.DEFAULT_TRAJECTORIES),
        )
    if not on:
        return None
    source = run.recorded_source()
    try:
        ids, logits, labels = maps.dynamics(run, source)
        burn_in = epochs.burn_ins(run.config.train, source, run.dynamics_epochs(source))
        picked = table["id"].astype(str).tolist()[:shown]
        if method:
            return tokens.sentence_trajectories(
                logits, labels, ids, picked, method=method, burn_in=burn_in, axis=axis
            )
        if view is not None:
            return label_views.view_trajectories(
                logits, labels, ids, view, picked, run.label_names, burn_in=burn_in, axis=axis
            )
        return epochs.trajectories(logits, labels, ids, picked, burn_in=burn_in, axis=axis)
    except CartomapError as err:
        show_error(err)
        return None


def neighbour_layer(run, frame, focus: str | None):
    """The focused example and its nearest neighbours on the map (a checkbox, ``dm_show_neighbours``): the k
    nearest of any label and the k nearest of its own label, the two searches of a WaNLI exemplar group.
    Offered when an example is focused and the run has embeddings; returns the overlay frame or None."""
    if focus is None or not run.embeddings_path.exists():
        return None
    if run.task_kind.unit.sentences and datamap.SENTENCE not in frame.columns:
        return None  # a token run's sentence-level map: its words are embedded, not its sentences
    k = overlays.DEFAULT_K
    if not st.checkbox(
        f"Show the focused example and its {k} nearest neighbours on the map",
        help="Nearest by cosine similarity of the model's [CLS] vectors: the nearest of any label and the "
        "nearest with the focused example's label (a WaNLI exemplar group is the seed and the latter).",
        **kept(SHOW_NEIGHBOURS, True),
    ):
        return None
    try:
        found = cached.neighbour_ids(run, focus, k)
    except CartomapError as err:
        show_error(err)
        return None
    overlay = overlays.neighbour_overlay(frame, focus, found["any label"] + found["same label"])
    missing = overlay.attrs.get("missing", 0)
    st.caption(
        "★ the focused example · ◆ a neighbour with its label · ◇ a neighbour with another label"
        + (f" ({count(missing, 'neighbour')} not on this map)" if missing else "")
        + "."
    )
    return overlay


NO_BATCH = ""


def generated_layer(run, axis: str):
    """ "Generated pairs: <batch>" over the map (``dm_generated_<run>``), offered when the run has filtered
    WaNLI batches: each pair the filter scored at its estimated max variability, kept or removed. The
    filter estimates no confidence, so they go on a strip above the map (the caption says so). Returns the
    overlay frame or None. The filter places a pair by its estimated max variability: on a map whose x axis
    (``axis``) is another score they are not drawn, and the page says so."""
    names = list_batches(run, having=layout.FILTERED)
    if not names:
        return None
    if axis != ambiguity.VARIABILITY:
        st.caption(
            f"Generated pairs of this run's WaNLI batches are not drawn: the filter places them by their "
            f"estimated max variability, and this map's x is {ambiguity.get(axis).label}. Pick "
            f"{ambiguity.get(ambiguity.VARIABILITY).label} as the ambiguity axis (x) in the sidebar to draw them."
        )
        return None
    options = [NO_BATCH, *names]
    batch = st.selectbox(
        "Generated pairs",
        options,
        format_func=lambda n: "none drawn" if n == NO_BATCH else f"Generated pairs: {n}",
        help="Pairs generated and filtered from this run (WaNLI): where the filter placed them.",
        **kept(generated_key(run), NO_BATCH, options=options),
    )
    if batch == NO_BATCH:
        return None
    try:
        overlay, attrs = cached.generated(run, batch)
    except CartomapError as err:
        show_error(err)
        return None
    if overlay is None:
        return None
    n_kept = int((overlay["status"] == overlays.KEPT).sum())
    drawn = min(len(overlay), overlay_figures.GENERATED_MAX_POINTS)
    where = (
        "y = the confidence the filter estimated"
        if attrs.get("has_y")
        else "a generated pair has no gold label, so the filter estimates no confidence: they lie on a strip "
        "above the map, kept (▲) in its upper row, removed (▼) in its lower one, their height within the row "
        "meaning nothing"
    )
    st.caption(
        escape_markdown(
            f"Batch {batch}: {n_kept:,} kept and {len(overlay) - n_kept:,} removed for low max variability "
            f"of {attrs.get('n_total', len(overlay)):,} generated"
            + (f" ({drawn:,} drawn at random)" if drawn < len(overlay) else "")
            + f"; {attrs.get('n_unscored', 0):,} removed by a heuristic before scoring are not drawn. "
            "x = the estimated max variability: the largest, over the labels, of the std over the run's "
            "checkpoints of p(label). It is not the map's variability (the std over the recorded epochs of "
            f"p(gold)): for one pair it is never smaller than that; {where}."
        )
    )
    return overlay
