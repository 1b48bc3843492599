"""Data map page: the interactive map of the picked run, filters, selection table, groups, downloads.

Layout only: every computation is a function of ``cartomap.analysis.datamap`` / ``cartomap.runs.groups``.
Session state: ``selected_ids`` (the current selection, a list of example ids; other pages may set
it, e.g. "find this example on the map"), ``dm_*`` filter values kept with ``pages.common.kept`` (so
they survive page switches), ``dm_focus`` (the example whose trajectory is shown) and
``_dm_event_sig`` (the last map selection event taken, so a stale event is not taken twice).
The filters that pick examples (labels, regions, ranges, ...) belong to one run (``_dm_filters_run``):
picking another run resets them; the display settings (colour, points drawn, region rule) stay.
A selection replaces ``selected_ids`` only when the map reports a new one; "Clear selection" empties it.
Wherever it was made (lasso, box, a table row, a group, the Neighbours page's 2-D view) the selection is
ringed on the map, drawn over the whole distribution in the map's marginal histograms (each as a share of
its own examples, ``figures.marginal_traces``) and listed in the selection table.

When the run has a finished seeds experiment (``cartomap seeds`` or *Add seeds* here) the page draws
the map of the seeds' means (``dm_seeds_mean_<run>`` toggles it), with "region agreement" as a colour,
"Stable only" as a filter and one trajectory per seed; without one it says how stable such maps were
measured to be (``cartomap.analysis.stability_reference``) and offers *Add seeds* (a background job).

A run with two or more recordings gets a slider "Map after recording" (``dm_burn_out_<run>``, the reference's
burn-out): the map from the first k recordings, computed from the dynamics read once per run and recording
(``pages.components.maps.dynamics``) and sliced. Over the single map the selected examples' paths are drawn
(``dm_paths``; :func:`cartomap.analysis.epochs.trajectories`, the first 50): their point on the map of the
first 2, 3, ..., E recordings, the point of the map shown ringed. A token run's sentence-level map and every
view of a multi-label run have both too: a sentence after k recordings is its words' metrics over those
recordings aggregated as its map does (``cartomap.analysis.tokens``), an example of the combined view its
labels' (``cartomap.analysis.multilabel``).

A session's first single map comes as a picture first (``cartomap.analysis.preview``, drawn on the server
from the same figure; the plain map's picture is kept with the frame and drawn by the launcher's warm-up):
the browser shows it at once while it fetches and compiles plotly.js, and a page style hides it when
plotly has drawn the chart in the same slot (``MAP_SLOT``; ``_dm_painted`` marks the session as served).

The map can be coloured by anything the run's frame holds (``cartomap.analysis.colourings``: categories with
a palette, scores such as AUM, EL2N or a label-error detector with a colour scale; ``dm_color``) and split
into one map per gold label (``dm_facet``; its selection events are ``datamap_facets``). "Run summary" shows
accuracy, recording settings and the dev confusion matrix (``cartomap.analysis.summary``). A click on a
row of the selection table focuses that example: its texts, probability by epoch, votes and, when the run
has embeddings, its nearest same-label neighbours.

Over the single map (``cartomap.analysis.overlays``, drawn by ``figures.add_*_overlay``): the focused example
(★) and its 4 nearest neighbours of any label and of its own (◆ same label, ◇ another; ``dm_show_neighbours``)
when the run has embeddings, and, when the run has filtered WaNLI batches, "Generated pairs: <batch>"
(``dm_generated_<run>``): every pair the filter scored at its estimated max variability, kept or removed, on a
strip above the map (the filter estimates no confidence; the caption says how x differs from the map's).

A token run (``pages.components.token_map``) maps words or sentences ("Map of"): at word level the focused
word's sentence is shown word by word with its gold and predicted tags; at sentence level each sentence
sits where a score of its words' confidences puts it (min, mean, softmin) and a picked sentence opens the same way.

When the run's data has votes, the map can be coloured by human entropy or gold vs majority, filtered by
entropy and "gold ≠ human majority", the focused example shows its votes (a table: data is never
rendered as markdown) and "Human judgement" shows the truth report (``cartomap truth``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.analysis import (
    colourings,
    curves,
    datamap,
    epochs,
    figures,
    overlays,
    preview,
    summary,
    tokens,
    truth,
)
from cartomap.analysis import multilabel as label_views
from cartomap.analysis.evaluation import run_chance_warning
from cartomap.analysis.stability_reference import measured_caption, measured_stability
from cartomap.analysis.truth import has_human_judgement
from cartomap.errors import CartomapError
from cartomap.experiments import launch, registry
from cartomap.experiments.seeds import (
    SUMMARY,
    create_seeds,
    create_seeds_from_runs,
    done_seeds_of,
    seed_runs,
    seed_siblings,
    seeds_of,
)
from cartomap.experiments.store import ExperimentStore
from cartomap.experiments.truth import truth_of
from cartomap.runs import layout
from cartomap.runs.groups import count_table_groups, list_groups, save_group
from cartomap.runs.progress import state_text
from cartomap.runs.store import Run
from cartomap.scores.metrics import RegionRule
from cartomap.wanli.batches import filtered_path, list_batches, load_filtered
from pages.common import (
    count,
    current_run,
    escape_markdown,
    flash,
    get_store,
    kept,
    new_chart_event,
    show_error,
    show_flashes,
    through_app,
)
from pages.components import maps, token_map
from pages.components.jobs import demo_or_prompt, experiment_panel

through_app()  # a first visit straight to this page's address: run it through app.py

SELECTED = "selected_ids"
TABLE_HEIGHT = 360
TABLE_MAX_ROWS = 5_000  # rows sent to the browser; groups and downloads hold the whole selection


REGION_LABELS = {
    "rank": "by rank: the most variable share",
    "threshold": "by a variability threshold",
}


def map_settings(run) -> RegionRule:
    """Sidebar: how regions are drawn."""
    sb = st.sidebar
    sb.subheader("Regions")
    default = RegionRule()
    methods = list(REGION_LABELS)
    method = sb.radio(
        "Regions",
        methods,
        format_func=REGION_LABELS.get,
        **kept("dm_region_rule", default.method, options=methods),
    )
    if method == "rank":
        share = sb.slider(
            "Ambiguous share",
            0.05,
            0.75,
            step=0.01,
            **kept("dm_ambiguous_fraction", round(default.fraction, 2)),
        )
        rule = RegionRule(method="rank", fraction=float(share))
    else:
        cut = sb.number_input(
            "Ambiguous from variability",
            0.0,
            0.5,
            step=0.01,
            format="%.3f",
            **kept("dm_ambiguous_var", default.ambiguous_var),
        )
        rule = RegionRule(method="threshold", ambiguous_var=float(cut))
    return rule


def epoch_slider(run) -> tuple[int | None, int]:
    """The map over epochs: a slider "Map after recording k of E" (a run with 2 or more recordings) that
    redraws the map from the first k recordings only (the reference's ``--burn_out k``; the dynamics are
    read once per run and sliced, ``pages.components.maps.dynamics``). Returns (burn_out, E): burn_out
    None when the map uses every recording."""
    recorded = len(run.dynamics_epochs(run.recorded_source()))
    if recorded < 2:
        return None, recorded
    key = f"dm_burn_out_{run.id}"
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


def selection_paths(run, table, current_k: int, *, view: str | None = None, method: str | None = None):
    """The paths through the map of the selected examples shown (the first
    :data:`cartomap.analysis.epochs.MAX_TRAJECTORIES`): their point on the map of the first 2, 3, ..., E
    recordings (:func:`cartomap.analysis.epochs.trajectories`), when "Paths of the selection" is on;
    None otherwise. ``view``: a multi-label run's view (its points' paths,
    :func:`cartomap.analysis.multilabel.view_trajectories`); ``method``: the table lists a token run's
    sentences, scored by that method (:func:`cartomap.analysis.tokens.sentence_trajectories`)."""
    if table.empty:
        return None
    n = len(table)
    shown = min(n, epochs.MAX_TRAJECTORIES)
    noun = "sentence" if method else "example"
    label = (
        f"Paths of the selection over the recordings ({shown:,} of {n:,} drawn)"
        if n > shown
        else (f"Paths of the selection over the recordings ({count(n, noun)})")
    )
    if not st.checkbox(
        label,
        help=f"Each selected {noun}'s point on the map of the first 2, 3, ... "
        "recordings, joined by a line; small marker first, the red ring = the map shown.",
        **kept("dm_paths", True),
    ):
        return None
    source = run.recorded_source()
    try:
        ids, logits, labels = maps.dynamics(run, source)
        burn_in = epochs.burn_ins(run.config.train, source, run.dynamics_epochs(source))
        picked = table["id"].astype(str).tolist()
        if method:
            return tokens.sentence_trajectories(logits, labels, ids, picked, method=method, burn_in=burn_in)
        if view is not None:
            return label_views.view_trajectories(
                logits, labels, ids, view, picked, run.label_names, burn_in=burn_in
            )
        return epochs.trajectories(logits, labels, ids, picked, burn_in=burn_in)
    except CartomapError as err:
        show_error(err)
        return None


def _valid_range(key: str, lo_bound, hi_bound, options=None) -> None:
    """Reset a stored (lo, hi) value that does not fit this run (another run was picked)."""
    value = st.session_state.get(key)
    try:
        lo, hi = value
    except (TypeError, ValueError):
        st.session_state.pop(key, None)
        return
    ok = (lo in options and hi in options) if options is not None else (lo_bound <= lo <= hi <= hi_bound)
    if not ok:
        st.session_state.pop(key, None)


#: The filters that pick examples of one run: another run starts without them.
RUN_FILTER_KEYS = (
    "dm_labels",
    "dm_regions",
    "dm_genres",
    "dm_conf",
    "dm_var",
    "dm_corr",
    "dm_stable_only",
    "dm_entropy",
    "dm_disagree",
)
#: Every filter and display setting the "Reset" clears: the run's filters and how the map is drawn.
FILTER_KEYS = RUN_FILTER_KEYS + (
    "dm_color",
    "dm_facet",
    "dm_max_points",
    "dm_region_rule",
    "dm_ambiguous_fraction",
    "dm_ambiguous_var",
)
_FILTERS_RUN = "_dm_filters_run"  # the run the filter values in session state were set on


def _reset_filters(keys=FILTER_KEYS) -> None:
    for key in keys:
        st.session_state.pop(key, None)
        st.session_state.pop(f"_kept_{key}", None)


def _filters_follow_run(run_id: str) -> None:
    """Drop the example filters of another run (a region or label filter of run A would hide
    examples of run B without saying so); the display settings stay."""
    if st.session_state.get(_FILTERS_RUN) not in (None, run_id):
        _reset_filters(RUN_FILTER_KEYS)
    st.session_state[_FILTERS_RUN] = run_id


def _clear_selection() -> None:
    st.session_state[SELECTED] = []
    st.session_state.pop("dm_focus", None)


# --------------------------------------------------------------------------- colour and facets


def colour_picker(frame) -> str:
    """Sidebar: what the map is coloured by, among every colouring this map offers
    (:func:`cartomap.analysis.colourings.available`: scores with a colour bar, categories with a palette)."""
    offered = colourings.available(frame)
    options = list(offered)
    return st.sidebar.selectbox(
        "Colour by",
        options,
        help="Categories (label, region, correctness in k of E epochs, ...) get a palette; scores (AUM, EL2N, "
        "forgetting, seeds, annotators, label-error detectors: higher = more suspect) a colour scale.",
        **kept("dm_color", "correctness", options=options),
    )


def split_by_label() -> bool:
    """Sidebar: whether the map is drawn as small multiples, one panel per gold label."""
    return st.sidebar.checkbox(
        "Split by gold label",
        help="One map per class on the same axes and colour scale (a lasso selects in its own panel).",
        **kept("dm_facet", False),
    )


FACET_CHART = "datamap_facets"


def take_facet_event(filtered, max_points: int) -> None:
    """:func:`take_event` for the map split by gold label: a box or lasso selects in its own panel."""
    event = new_chart_event(FACET_CHART, "_dm_facet_sig")
    if event is None:
        return
    facets = st.session_state.get("_dm_facets") or figures.facet_levels(filtered)
    st.session_state[SELECTED] = datamap.resolve_facet_selection(
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
    (:func:`selection_paths`, the map after ``current_k`` recordings ringed), the focused example's
    ``neighbours`` (:func:`neighbour_layer`) and a batch's ``generated`` pairs (:func:`generated_layer`)."""
    if split:
        fig = figures.facet_map_figure(
            filtered, color_by=color_by, max_points=max_points, highlight_ids=selected or None
        )
        st.session_state["_dm_facets"] = list(fig.layout.meta["facets"])
        return fig
    fig = figures.data_map_figure(
        filtered, color_by=color_by, max_points=max_points, highlight_ids=selected or None
    )
    if paths is not None:
        figures.add_trajectories(fig, paths, current_k)
    if generated is not None:
        figures.add_generated_overlay(fig, generated)
    if neighbours is not None:
        figures.add_neighbour_overlay(fig, neighbours)
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


def sidebar_filters(frame):
    """Filter widgets in the sidebar; returns (filtered frame, colour-by, max points drawn)."""
    sb = st.sidebar
    sb.subheader("Filters")
    labels = [str(g) for g in frame[["label", "gold"]].drop_duplicates().sort_values("label")["gold"]]
    present = {str(r) for r in frame["region"].unique()}
    # every region offered, present or not: the map after k recordings may lack one for a while, and a
    # filter offered without it would keep it left out when the slider moves on
    regions = ["easy-to-learn", "ambiguous", "hard-to-learn"]
    regions += sorted(present - set(regions))
    genres = sorted({str(g) for g in frame["genre"].unique()}) if "genre" in frame.columns else []
    corr_options = sorted(float(v) for v in frame["correctness"].dropna().unique()) or [0.0, 1.0]
    var_hi = max(0.5, round(datamap.metric_bounds(frame, "variability")[1] + 0.005, 3))

    _valid_range("dm_conf", 0.0, 1.0)
    _valid_range("dm_var", 0.0, var_hi)
    _valid_range("dm_corr", None, None, options=corr_options)
    over_seeds = "stable" in frame.columns
    votes = "human_entropy" in frame.columns and "agreement" in frame.columns
    if votes:
        h_hi = round(max(0.01, datamap.metric_bounds(frame, "human_entropy")[1]) + 0.005, 3)
        _valid_range("dm_entropy", 0.0, h_hi)

    chosen_labels = sb.multiselect("Gold label", labels, **kept("dm_labels", labels, options=labels))
    chosen_regions = sb.multiselect("Region", regions, **kept("dm_regions", regions, options=regions))
    chosen_genres = None
    if genres:
        chosen_genres = sb.multiselect("Genre", genres, **kept("dm_genres", genres, options=genres))
    conf = sb.slider("Confidence", 0.0, 1.0, step=0.01, **kept("dm_conf", (0.0, 1.0)))
    var = sb.slider("Variability", 0.0, var_hi, step=0.005, format="%.3f", **kept("dm_var", (0.0, var_hi)))
    corr = sb.select_slider(
        "Correctness",
        options=corr_options,
        format_func="{:.2f}".format,
        **kept("dm_corr", (corr_options[0], corr_options[-1])),
    )
    max_points = sb.number_input(
        "Points drawn (at most)",
        min_value=100,
        max_value=500_000,
        step=5_000,
        help="Above this many examples the map draws a random sample over a density shading of all of "
        "them; a lasso or box still selects every example inside it.",
        **kept("dm_max_points", datamap.DEFAULT_MAX_POINTS),
    )
    color_by = colour_picker(frame)
    entropy = disagree = None
    if votes:
        entropy = sb.slider(
            "Human entropy (bits)",
            0.0,
            h_hi,
            step=0.01,
            help="How much the annotators disagree: 0 = every vote the same class.",
            **kept("dm_entropy", (0.0, h_hi)),
        )
        disagree = sb.checkbox(
            "Only gold ≠ human majority",
            help="The examples whose gold label is not the class most annotators chose.",
            **kept("dm_disagree", False),
        )
    stable = False
    if over_seeds:
        stable = sb.checkbox(
            "Stable only",
            help="Only the examples whose region is the same in every seed.",
            **kept("dm_stable_only", False),
        )
    sb.button("Reset filters", on_click=_reset_filters, key="dm_reset")

    ranges = {"confidence": conf, "variability": var, "correctness": corr}
    # a slider at its full extent does not filter (keeps values just outside the slider's grid)
    if tuple(conf) == (0.0, 1.0):
        ranges.pop("confidence")
    if tuple(var) == (0.0, var_hi):
        ranges.pop("variability")
    filtered = datamap.filter_frame(
        frame, labels=chosen_labels, regions=chosen_regions, genres=chosen_genres, ranges=ranges
    )
    if entropy is not None and tuple(entropy) != (0.0, h_hi):
        filtered = datamap.filter_frame(filtered, ranges={"human_entropy": entropy})
    if disagree:
        filtered = filtered[filtered["gold_disagrees"].to_numpy(dtype=bool)]
    if stable:
        filtered = datamap.stable_only(filtered)
    return filtered, color_by, int(max_points)


def take_event(filtered, max_points: int) -> None:
    """Turn a new selection event of the map (from the previous interaction) into ``selected_ids``.

    An empty event is not a deselection: the chart is replaced whenever the highlighted selection
    changes, which resets its event; use "Clear selection" instead.
    """
    event = new_chart_event("datamap", "_dm_event_sig")
    if event is None:
        return
    st.session_state[SELECTED] = datamap.resolve_selection(filtered, event, max_points=max_points)
    st.session_state.pop("dm_focus", None)


def _digest(ids) -> str:
    return hashlib.sha1("\n".join(ids).encode("utf-8")).hexdigest()[:10]


def show_trajectory(run, table, table_event, seeds=None, per_label: bool = False) -> None:
    """The focused example's texts and metrics, and its probability by epoch (one line per seed of
    ``seeds``, {seed: run}, when the map is the mean over seeds; with ``per_label``, a multi-label run's
    point, the probability of its label: a combined point's worst label)."""
    rows = list(table_event.selection.rows) if table_event is not None else []
    if rows and rows[0] < len(table):
        st.session_state["dm_focus"] = str(table["id"].iloc[rows[0]])
    focus = st.session_state.get("dm_focus")
    if len(table) == 1:
        focus = str(table["id"].iloc[0])
    if not focus or focus not in set(table["id"]):
        st.caption("Click a row to see how the model's belief in that example moved over the epochs.")
        return
    row = table.loc[table["id"] == focus].iloc[0]
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**The focused example**")
        st.text(f"id: {focus}\ngold: {row['gold']} · predicted: {row['predicted']}")
        for col in datamap.TEXT_COLUMNS:
            if col in table.columns:
                st.text(f"{col}: {row[col]}")
        st.text(
            f"confidence {row['confidence']:.3f} · variability {row['variability']:.3f} · "
            f"correctness {row['correctness']:.2f} · region {row['region']}"
        )
    votes = [c for c in table.columns if str(c).startswith("votes_")]
    if votes:
        with left:
            st.markdown("**Annotators' votes**")
            st.caption(
                f"{int(row['human_n'])} votes · majority share {row['human_majority_share']:.2f} · "
                f"entropy {row['human_entropy']:.3f} bits · {row['agreement']}"
                if "agreement" in table.columns
                else ""
            )
            st.dataframe(
                {"label": [c.removeprefix("votes_") for c in votes], "votes": [int(row[c]) for c in votes]},
                hide_index=True,
                key="dm_votes",
            )
    if seeds:
        left.text(
            f"region in each seed: {row.get('region_votes', '')} agree on {row.get('region_majority', '')}"
        )
    with right:
        source = run.status().get("metrics_source") or "train"
        try:
            if seeds:
                st.markdown(f"**Probability of the gold label by epoch, in each of {len(seeds)} seeds**")
                fig = figures.seed_trajectory_figure(
                    datamap.seed_trajectories(seeds, focus, source), gold=str(row["gold"])
                )
            elif per_label:
                # a combined point: its worst label where the map shown has it (after k recordings, maybe another)
                worst = row["worst_label"] if "worst_label" in table.columns else None
                frame = label_views.unit_trajectory(run, focus, source, worst_label=worst)
                state = "present" if frame.attrs["present"] else "absent"
                st.markdown(f"**Probability of label {escape_markdown(frame.attrs['label'])} by epoch**")
                fig = figures.trajectory_figure(frame, gold=state)
            else:
                st.markdown("**Probability by epoch**")
                fig = figures.trajectory_figure(
                    datamap.gold_trajectory(run, focus, source), gold=str(row["gold"])
                )
        except CartomapError as err:
            st.warning(escape_markdown(str(err)))
            return
        st.plotly_chart(fig, key="dm_trajectory", config={"displaylogo": False})


def group_tools(run, table) -> None:
    ids = table["id"].astype(str).tolist()
    left, right = st.columns(2)
    with left, st.form("dm_group_form", clear_on_submit=False):
        st.markdown("**Save the selection as a group**")
        name = st.text_input("Group name", key="dm_group_name", max_chars=80)
        replace = st.checkbox("Replace a group of that name", key="dm_group_replace")
        submitted = st.form_submit_button(f"Save {count(len(ids), 'example')}", disabled=not ids)
    if submitted:
        try:
            save_group(run, name, ids, source="data map", overwrite=replace)
        except CartomapError as err:
            left.error(escape_markdown(str(err)))
        else:
            left.success(escape_markdown(f"Saved group '{name}' ({count(len(ids), 'example')})."))
    with right:
        groups = list_groups(run, include_table=False)  # automatic ones: 100k+ on a full-size run
        st.markdown("**Saved groups**")
        n_auto = count_table_groups(run)
        if n_auto:
            st.caption(
                f"{count(n_auto, 'automatic group')} (WaNLI seeds and neighbours) {'is' if n_auto == 1 else 'are'} on the Prompts page."
            )
        if not groups:
            st.caption("No groups yet.")
            return
        st.dataframe(
            [
                {"name": g.get("name"), "examples": len(g.get("ids", [])), "source": g.get("source", "")}
                for g in groups
            ],
            hide_index=True,
            height=min(200, 38 + 35 * len(groups)),
        )
        names = [g.get("name") for g in groups]
        pick = st.selectbox("Group", names, key="dm_group_pick")
        if st.button("Show this group on the map", key="dm_group_show"):
            group = next(g for g in groups if g.get("name") == pick)
            st.session_state[SELECTED] = [str(i) for i in group.get("ids", [])]
            st.session_state.pop("dm_focus", None)
            st.rerun()


def downloads(run, filtered, selected, fig) -> None:
    """The selection (every row under the filters, with its texts: made when a button is clicked) and the
    map as files."""
    stem = f"cartomap-{run.id}"

    def table():
        return datamap.selection_table(filtered, selected)

    empty = not selected or filtered.empty
    cols = st.columns(4)
    cols[0].download_button(
        "Selection as CSV",
        lambda: datamap.to_csv_bytes(table()),
        f"{stem}-selection.csv",
        "text/csv",
        key="dm_dl_csv",
        disabled=empty,
        on_click="ignore",
    )
    cols[1].download_button(
        "Selection as JSONL",
        lambda: datamap.to_jsonl_bytes(table()),
        f"{stem}-selection.jsonl",
        "application/jsonl",
        key="dm_dl_jsonl",
        disabled=empty,
        on_click="ignore",
    )
    cols[2].download_button(
        "Map as HTML",
        lambda: figures.map_html_bytes(fig),
        f"{stem}-map.html",
        "text/html",
        key="dm_dl_html",
        on_click="ignore",
    )
    cols[3].download_button(
        "Map as PNG",
        lambda: figures.map_png_bytes(filtered, title=run.id),
        f"{stem}-map.png",
        "image/png",
        key="dm_dl_png",
        on_click="ignore",
        disabled=filtered.empty,
    )


def _seeds_progress(exp, status: dict) -> None:
    done, total = int(status.get("runs_done") or 0), len(exp.params.get("seeds", []))
    st.progress(
        min(1.0, done / total) if total else 0.0,
        text=f"Seeds: {state_text(status['state'], status.get('phase'))} · {done}/{total} runs",
    )
    if status["state"] == "running" and status.get("role"):
        st.caption(
            escape_markdown(
                f"Training {registry.role_label(exp, status['role'])} (run {status.get('run_id')})."
            )
        )


@st.cache_data(ttl=30, max_entries=32, show_spinner=False)
def _siblings_of(run_path: str, root: str, folders: tuple[str, ...]) -> dict[int, str]:
    from pathlib import Path

    from cartomap.runs.store import Run, RunStore

    return {seed: r.id for seed, r in seed_siblings(Run(Path(run_path)), RunStore(root)).items()}


def _sibling_ids(run, runs) -> dict[int, str]:
    """{seed: run id} of the runs that are ``run`` but for their seed: the store's configs are read once
    per change of its run folders (30 s at most), not on every rerun of the page."""
    folders = tuple(sorted(p.name for p in runs.dir.iterdir())) if runs.dir.is_dir() else ()
    return _siblings_of(str(run.path), str(runs.root), folders)


def seeds_section(run, estore):
    """Whether the map is the mean over a finished seeds experiment (the toggle), that experiment,
    and what the page says about the map's stability: the seeds' summary, or the measured stability
    of such maps with an "Add seeds" button (a background job; its panel follows it)."""
    done = done_seeds_of(run, estore)
    if done is not None:
        n = len(done.params["seeds"])
        on = st.toggle(f"Map of {n} seeds (means)", **kept(f"dm_seeds_mean_{run.id}", True))
        st.caption(datamap.seeds_caption(done.result(SUMMARY) or {}))
        return (done if on else None), done
    pending = seeds_of(run, estore)
    row = measured_stability(run.config.train)
    if row is not None:
        st.caption(measured_caption(row))
    if pending is not None and pending.state != "done":
        experiment_panel(pending, _seeds_progress, key="dm_seeds_")
        return None, None
    siblings = {seed: estore.runs.get(rid) for seed, rid in _sibling_ids(run, estore.runs).items()}
    if len(siblings) > 1:
        left, right = st.columns([1, 3])
        right.caption(
            f"{len(siblings)} finished runs are this run with another seed ({', '.join(map(str, siblings))}): "
            "their mean map needs no training."
        )
        if left.button(f"Map these {count(len(siblings), 'seed')}", key="dm_sibling_seeds", type="primary"):
            try:
                others = [r for r in siblings.values() if r.id != run.id]
                launch.start_experiment(create_seeds_from_runs(estore, run, others), estore)
            except CartomapError as err:
                show_error(err)
            else:
                st.rerun()
    if run.config.origin.kind != "cartomap":
        st.caption(
            "This run was recorded outside cartomap's loop, so cartomap cannot train it again: run your "
            "script with other seeds (same settings), then map them together here or with "
            "`cartomap seeds RUN --with`."
        )
        return None, None
    left, right = st.columns([1, 3])
    n_seeds = left.number_input(
        "Seeds in all", 2, 10, step=1, help="The run's own seed and the next ones.", **kept("dm_n_seeds", 3)
    )
    right.caption(
        f"Add seeds trains this run {int(n_seeds) - 1} more times, changing only the seed, and draws the "
        "map of their means with how many seeds agree on each example's region."
    )
    if left.button("Add seeds", key="dm_add_seeds", type="primary"):
        try:
            exp = create_seeds(estore, run, n_seeds=int(n_seeds))
            launch.start_experiment(exp, estore)
        except CartomapError as err:
            show_error(err)
        else:
            flash("success", f"Started the seeds experiment {exp.id} in the background.")
            st.rerun()
    return None, None


# --------------------------------------------------------------------------- layers over the map


def focused_id(table) -> str | None:
    """The example the panel under the table focuses (:func:`show_trajectory`), known before the map is
    drawn: the row just clicked in the selection table (its event is in session state before the table is
    drawn again), else the kept focus, or the only row of a one-row table; None when none is shown."""
    shown = table.head(TABLE_MAX_ROWS)
    if shown.empty:
        return None
    event = st.session_state.get(f"dm_table_{_digest(table['id'].tolist())}")
    selection = (event.get("selection") if hasattr(event, "get") else getattr(event, "selection", None)) or {}
    rows = list(selection.get("rows") or []) if hasattr(selection, "get") else []
    focus = (
        str(shown["id"].iloc[rows[0]]) if rows and rows[0] < len(shown) else st.session_state.get("dm_focus")
    )
    if len(shown) == 1:
        focus = str(shown["id"].iloc[0])
    return focus if focus and focus in set(shown["id"]) else None


@st.cache_data(max_entries=32, show_spinner=False)
def _neighbour_ids(run_path: str, stamp: tuple, focus: str, k: int) -> dict[str, list[str]]:
    run = Run(Path(run_path))
    return overlays.focus_neighbour_ids(run, focus, k=k, embeddings=_embeddings(run_path, stamp))


def neighbour_layer(run, frame, focus: str | None):
    """The focused example and its nearest neighbours on the map (a checkbox, ``dm_show_neighbours``): the k
    nearest of any label and the k nearest of its own label, the two searches of a WaNLI exemplar group.
    Offered when an example is focused and the run has embeddings; returns the overlay frame or None."""
    if focus is None or not run.embeddings_path.exists():
        return None
    k = overlays.DEFAULT_K
    if not st.checkbox(
        f"Show the focused example and its {k} nearest neighbours on the map",
        help="Nearest by cosine similarity of the model's [CLS] vectors: the nearest of any label and the "
        "nearest with the focused example's label (a WaNLI exemplar group is the seed and the latter).",
        **kept("dm_show_neighbours", True),
    ):
        return None
    try:
        stamp = run.stamp(run.embeddings_path, run.embedding_ids_path)
        found = _neighbour_ids(str(run.path), stamp, focus, k)
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


@st.cache_data(max_entries=8, show_spinner=False)
def _generated(run_path: str, batch: str, stamp: tuple):
    frame = load_filtered(Run(Path(run_path)), batch)
    if frame is None:
        return None, {}
    overlay = overlays.generated_overlay(frame, str(filtered_path(Run(Path(run_path)), batch)))
    return overlay, dict(overlay.attrs)


NO_BATCH = ""


def generated_layer(run):
    """ "Generated pairs: <batch>" over the map (``dm_generated_<run>``), offered when the run has filtered
    WaNLI batches: each pair the filter scored at its estimated max variability, kept or removed. The
    filter estimates no confidence, so they go on a strip above the map (the caption says so). Returns the
    overlay frame or None."""
    names = list_batches(run, having=layout.FILTERED)
    if not names:
        return None
    options = [NO_BATCH, *names]
    batch = st.selectbox(
        "Generated pairs",
        options,
        format_func=lambda n: "none drawn" if n == NO_BATCH else f"Generated pairs: {n}",
        help="Pairs generated and filtered from this run (WaNLI): where the filter placed them.",
        **kept(f"dm_generated_{run.id}", NO_BATCH, options=options),
    )
    if batch == NO_BATCH:
        return None
    try:
        overlay, attrs = _generated(str(run.path), batch, run.stamp(filtered_path(run, batch)))
    except CartomapError as err:
        show_error(err)
        return None
    if overlay is None:
        return None
    n_kept = int((overlay["status"] == overlays.KEPT).sum())
    drawn = min(len(overlay), figures.GENERATED_MAX_POINTS)
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


# --------------------------------------------------------------------------- the selection table


def selection_dataframe(shown, key: str):
    """The selection as a table, one row clickable (it focuses that example below): label, prediction,
    confidence, variability and region first, then the texts (shown in full in the example's panel)."""
    return st.dataframe(
        shown[datamap.display_columns(shown)],
        key=key,
        on_select="rerun",
        selection_mode="single-row",
        hide_index=True,
        height=min(TABLE_HEIGHT, 38 + 35 * len(shown)),
        column_config={
            "id": st.column_config.TextColumn("id", pinned=True),  # stays in sight beside long texts
            "gold": st.column_config.TextColumn("label"),
            "predicted": st.column_config.TextColumn("prediction"),
            "confidence": st.column_config.NumberColumn(format="%.3f"),
            "variability": st.column_config.NumberColumn(format="%.3f"),
            "correctness": st.column_config.NumberColumn(format="%.2f"),
            "aum": st.column_config.NumberColumn(format="%.3f"),
            "el2n": st.column_config.NumberColumn(format="%.3f"),
        },
    )


@st.cache_resource(max_entries=2, show_spinner="Loading the embeddings…")
def _embeddings(run_path: str, stamp: tuple):
    from pathlib import Path

    from cartomap.runs.store import Run
    from cartomap.training.embeddings import load_embeddings

    return load_embeddings(Run(Path(run_path)))


def focus_neighbours(run, table) -> None:
    """The focused example's nearest same-label neighbours, when the run's embeddings are computed
    (``cartomap embed RUN`` or the Neighbours page); a table (the texts are data)."""
    focus = st.session_state.get("dm_focus")
    if len(table) == 1:
        focus = str(table["id"].iloc[0])
    if not focus or focus not in set(table["id"]) or not run.embeddings_path.exists():
        return
    from cartomap.analysis.neighbours import neighbour_group

    try:
        embeddings = _embeddings(str(run.path), run.stamp(run.embeddings_path, run.embedding_ids_path))
        group = neighbour_group(run, focus, embeddings=embeddings)
    except CartomapError as err:
        show_error(err)
        return
    st.markdown("**Nearest neighbours with the same label**")
    st.dataframe(group, hide_index=True, key="dm_neighbours")


# --------------------------------------------------------------------------- run summary


@st.cache_data(max_entries=8, show_spinner=False)
def _dev_confusion(run_path: str, stamp: tuple):
    from pathlib import Path

    from cartomap.runs.store import Run

    return summary.dev_confusion(Run(Path(run_path)))


def summary_section(run, rule_text: str, n_seeds: int) -> None:
    """ "Run summary": dev/test accuracy (last and best epoch), epochs, seeds, recording, regions, and the
    dev set's confusion matrix at the final epoch."""
    try:
        facts = summary.run_summary(run, n_seeds=n_seeds, region_rule=rule_text)
        dev_epochs = run.dynamics_epochs("dev")
        stamp = run.stamp(*(run.epoch_path("dev", e) for e in dev_epochs[-1:]))
        confusion = _dev_confusion(str(run.path), stamp) if dev_epochs else None
    except CartomapError as err:
        show_error(err)
        return
    st.caption(escape_markdown(f"Run: {summary.summary_line(facts)}."))
    with st.expander("Run summary and dev confusion matrix", expanded=False):
        left, right = st.columns([3, 2])
        left.dataframe(summary.summary_rows(facts), hide_index=True, key="dm_summary", width="stretch")
        with right:
            if confusion is None:
                st.caption("No dev set: no confusion matrix.")
            else:
                st.caption(f"Dev set at the final epoch ({dev_epochs[-1] + 1}): gold label by prediction.")
                st.dataframe(confusion, key="dm_confusion")


def curves_section(run) -> None:
    """ "Training curves": the run's loss and dev / test accuracy by epoch (``cartomap.analysis.curves``, the
    job panel's live curves, here of the finished run) in a collapsed expander at the end of the page;
    nothing for a run without them.

    On a session's first map it is sent right after the map's picture (:func:`main`): the browser, showing
    the picture, fetches and compiles plotly.js (a few MB, loaded with the page's first chart) while the
    server builds the map's figure. Sent before the picture, plotly.js's compilation held the picture
    back; sent after the map, the chart waited for it (docs/benchmarks.md, "A picture first")."""
    try:
        frame = curves.training_curves(run.history(), run.status(), run.test_names)
    except (CartomapError, OSError, ValueError):
        return
    if frame.empty:
        return
    with st.expander("Training curves", expanded=False):
        st.plotly_chart(
            curves.training_curves_figure(frame, height=260),
            key="dm_curves",
            config={"displaylogo": False},
        )


@st.cache_data(max_entries=4, show_spinner="Computing the truth report…")
def _truth(run_path: str, cache: str, stamp: tuple, n_boot: int) -> dict:
    from pathlib import Path

    from cartomap.runs.store import Run

    return truth_of(Run(Path(run_path)), cache, n_boot=n_boot)


def human_section(run) -> None:
    """ "Human judgement": the truth report (metrics vs human entropy, detectors vs gold ≠ majority)."""
    if not has_human_judgement(run):
        return
    with st.expander("Human judgement", expanded=False):
        st.caption(
            "How the map and every label-error detector agree with the annotators: Spearman of each metric "
            "with the entropy of the votes, and how well each detector ranks the examples whose gold label "
            "is not the majority's (or the known errors) first. Same numbers as `cartomap truth RUN`."
        )
        n_boot = st.number_input("Bootstrap resamples", 0, 5000, step=100, **kept("dm_truth_boot", 200))
        if not st.toggle("Show the report", key="dm_truth_on"):
            return
        try:
            report = _truth(str(run.path), str(get_store().root), run.stamp(run.metrics_path()), int(n_boot))
        except CartomapError as err:
            show_error(err)
            return
        if report["spearman"]:
            st.markdown("**Data-map metrics vs human entropy**")
            st.dataframe(truth.spearman_frame(report), hide_index=True, key="dm_truth_spearman")
        for target, n_err in report["targets"].items():
            st.markdown(f"**Detectors for “{truth.TARGETS[target]}”** ({n_err:,} of {report['n']:,})")
            st.dataframe(truth.detector_frame(report, target), hide_index=True, key=f"dm_truth_{target}")


@st.cache_data(max_entries=16, show_spinner=False)
def _chance(run_path: str, stamp: tuple) -> str | None:
    """Near chance? The run's dev accuracy, else its final train-pass accuracy (stamp: history.json)."""
    return run_chance_warning(Run(Path(run_path)))


@st.cache_resource(max_entries=6, show_spinner="Loading the data map…")
def _label_view(run_path: str, stamp: tuple, view: str, rule_json: str, burn_out: int | None):
    import json

    run = Run(Path(run_path))
    dynamics = None if burn_out is None else maps.dynamics(run, run.recorded_source())
    rule = RegionRule(**json.loads(rule_json))
    return label_views.view_frame(run, view, rule, burn_out, dynamics=dynamics)


def label_view_picker(run) -> str:
    """A multi-label run's view picker (one label's map, every example at its worst label, every
    (example, label); ``dm_label_view_<run>``), with a caption that says what this page does not show
    for such a run."""
    names = run.label_names
    options = label_views.views(names)
    view = st.selectbox(
        "Map of",
        options,
        format_func=lambda v: label_views.view_title(v, names),
        help="A multi-label run records every label of every example: pick one label's map, or every "
        "example at its worst label (the lowest confidence over its labels).",
        **kept(f"dm_label_view_{run.id}", label_views.COMBINED, options=options),
    )
    st.caption(
        "A multi-label run: not shown here yet are seeds and nearest neighbours. A point of the combined "
        "map shows its worst label's probability by epoch."
    )
    return str(view)


def label_view(run, view: str, rule: RegionRule, burn_out: int | None = None):
    """The map frame of a multi-label run's ``view`` (after ``burn_out`` recordings: None = all), cached
    until its metrics, examples or (for a map after k recordings) dynamics change."""
    import json

    stamp = run.stamp(run.metrics_path(), run.example_metrics_path(), run.examples_path)
    if burn_out is not None:
        stamp += maps.dynamics_stamp(run, run.recorded_source())
    rule_json = json.dumps(rule.to_dict(), sort_keys=True)
    return _label_view(str(run.path), stamp, view, rule_json, burn_out)


def main() -> None:
    st.title("Data map")
    show_flashes()
    run = demo_or_prompt(current_run())  # app.py draws the run picker in the sidebar
    if run is None:
        st.stop()
    if not run.has_metrics():
        st.warning(f"Run {run.id} is done but has no data-map metrics (trained with record=none?).")
        st.stop()

    body, tail = st.container(), st.container()
    sent = []

    def curves_now() -> None:  # once: right after the map's picture, else after the page
        if not sent:
            sent.append(True)
            with tail:
                curves_section(run)

    with body:
        page(run, curves_now)
    curves_now()


def page(run, after_picture=None) -> None:
    """Everything of the page but its title and the training curves, for a run with metrics;
    ``after_picture`` is called once the map's picture is sent (:func:`draw_map`)."""
    per_label = run.task_kind.unit == "label"  # multi-label: several maps, picked below
    warning = None if per_label else _chance(str(run.path), run.stamp(run.history_path))
    if warning:
        st.warning(escape_markdown(warning))
    rule = map_settings(run)
    if token_map.is_token_run(run):  # a point per word, or per sentence
        level, method = token_map.level_picker()
        if level == "sentence":
            burn_out, n_recorded = epoch_slider(run)
            token_map.sentence_level(
                run,
                rule,
                method,
                burn_out=burn_out,
                paths=(lambda table: selection_paths(run, table, burn_out or n_recorded, method=method))
                if n_recorded >= 2
                else None,
                current_k=burn_out or n_recorded,
            )
            return
    view = label_view_picker(run) if per_label else None
    estore = ExperimentStore(get_store().root)
    seeds_exp, seeds_done = (None, None) if per_label else seeds_section(run, estore)
    burn_out, n_recorded = (None, 0) if seeds_exp else epoch_slider(run)
    try:
        if per_label:
            frame = label_view(run, view, rule, burn_out)
        else:
            frame = (
                maps.seed_map_frame(seeds_exp, run, rule)
                if seeds_exp
                else maps.map_frame(run, rule, burn_out)
            )
    except CartomapError as err:
        show_error(err)
        st.stop()
    seeds = seed_runs(seeds_exp, get_store()) if seeds_exp else None
    _filters_follow_run(run.id)
    filtered, color_by, max_points = sidebar_filters(frame)
    split = split_by_label()
    st.session_state.setdefault(SELECTED, [])
    if split:
        take_facet_event(filtered, max_points)
    else:
        take_event(filtered, max_points)
    selected = [str(i) for i in st.session_state.get(SELECTED) or []]
    st.session_state[SELECTED] = selected

    st.caption(
        f"{len(frame):,} examples · {len(filtered):,} match the filters. Drag a lasso or a box over the map "
        "(or click a point) to select examples; x = variability, y = confidence."
    )
    epochs_used = frame.attrs.get("n_epochs")
    recorded = frame.attrs.get("epochs_recorded") or epochs_used
    over = f"over the first {epochs_used} of {recorded} epochs" if burn_out else f"over {epochs_used} epochs"
    train_config = run.config.train
    if train_config.record_points > 1 and run.recorded_source() == "eval":
        over += f" (here: recordings, {train_config.record_points} eval-mode passes an epoch)"
    if frame.attrs.get("burn_in"):
        over += f", leaving out the first {frame.attrs['burn_in']} recording(s) (skip_epochs)"
    if seeds_exp:
        over = f"over {epochs_used} epochs, the mean of {len(seeds or {})} seeds (burn-out applies to one run's map)"
    rule_text = rule.describe(frame["variability"].to_numpy())  # ranks every example: once
    st.caption(f"Regions: {rule_text}. Metrics {over}.")
    summary_section(
        run,
        rule_text,
        n_seeds=len(seeds_done.params["seeds"]) if seeds_done else 1,
    )
    if filtered.empty:
        st.warning("No example matches the filters.")
    table = datamap.selection_table(filtered, selected, texts=False)  # texts only for the rows listed
    paths = neighbours = generated = None
    if not seeds_exp and not split and n_recorded >= 2:
        paths = selection_paths(run, table, burn_out or n_recorded, view=view)
    if not split and not per_label:
        neighbours = neighbour_layer(run, frame, focused_id(table))
        generated = generated_layer(run)
    fig = draw_map(
        filtered,
        color_by,
        max_points,
        selected,
        split,
        paths=paths,
        current_k=burn_out or n_recorded,
        neighbours=neighbours,
        generated=generated,
        after_picture=after_picture,
    )

    # how many selected ids are examples of this run: the table's count when no filter is on (no second table)
    if not selected:
        known = 0
    elif len(filtered) == len(frame):
        known = len(table)
    else:
        known = len(datamap.positions_of(frame, pd.unique(pd.Series(selected, dtype=object))))
    head, clear = st.columns([4, 1])
    head.markdown(f"**{len(selected):,} selected** · {len(table):,} shown under the current filters")
    if known < len(selected):
        head.caption(f"{len(selected) - known:,} selected ids are not examples of this run.")
    clear.button("Clear selection", on_click=_clear_selection, key="dm_clear", disabled=not selected)
    if table.empty:
        st.info("Nothing selected (or nothing of the selection matches the filters).")
    table_event = None
    if not table.empty:
        shown = datamap.selection_table(filtered, table["id"].head(TABLE_MAX_ROWS).tolist())
        if len(shown) < len(table):
            st.caption(
                f"The table lists the first {len(shown):,} of {len(table):,}; "
                "saving and downloading take all of them."
            )
        table_event = selection_dataframe(shown, key=f"dm_table_{_digest(table['id'].tolist())}")
        show_trajectory(run, shown, table_event, seeds, per_label=per_label)
        if token_map.is_token_run(run):  # the focused word's sentence, tag by tag
            token_map.word_level_sentence(run, frame, shown)
        if not per_label:
            focus_neighbours(run, shown)
    human_section(run)
    st.divider()
    group_tools(run, table)
    st.divider()
    downloads(run, filtered, selected, fig)


main()
