"""The Data map page's sidebar: how regions are drawn, the filters that pick examples, what the map is
coloured by and whether it is split by gold label.

The filters that pick examples (labels, regions, ranges, ...) belong to one run (``_dm_filters_run``):
picking another run resets them (:func:`filters_follow_run`); the display settings (colour, points drawn,
region rule) stay. Every value is kept with ``pages.common.kept`` (so it survives page switches) under a
``dm_*`` key.
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import colourings, datamap, seed_maps
from cartomap.scores import ambiguity
from cartomap.scores.metrics import DEFAULT_AXIS, REGIONS, RegionRule, ambiguous_shares
from cartomap.tasks import registry as task_kinds
from pages.common import kept
from pages.components.tags import TAG_FILTER

REGION_LABELS = {
    "rank": "by rank: the most ambiguous share",
    "threshold": "by a threshold on the axis",
}


def axis_label(axis: str) -> str:
    """An axis as the picker offers it: Cartography's variability named as such, the default marked."""
    label = ambiguity.get(axis).label
    if axis == ambiguity.VARIABILITY:
        label += " (Dataset Cartography's map)"
    if axis == DEFAULT_AXIS:
        label += " · default"
    return label


def region_rule_key(run) -> str:
    """The session key of the region rule picked for maps of ``run``'s task kind: each kind keeps its own,
    so a token run opens on its kind's rule (by threshold) after a pair run was ranked, and back."""
    return f"dm_region_rule_{run.task_kind.name}"


def default_rule(run, axes=datamap.AXIS_COLUMNS) -> RegionRule:
    """The rule :func:`map_settings` gives while nothing is picked: the run's own (its task kind's,
    :meth:`cartomap.runs.store.Run.region_rule`; a token run's by threshold) on its axis when the run's
    metrics have that among ``axes``, else on the first of them; the threshold, where it is one, the axis's
    own. The launcher's warm-up reads the default run's map by it: the key of the page's first map."""
    default = run.region_rule()
    axes = list(axes) or [ambiguity.VARIABILITY]
    axis = default.axis if default.axis in axes else axes[0]
    if default.method == "rank":
        return RegionRule(method="rank", fraction=float(default.fraction), axis=axis)
    return RegionRule(method="threshold", axis=axis)


def map_settings(run, axes=datamap.AXIS_COLUMNS) -> RegionRule:
    """Sidebar: the map's second axis (the ambiguity score it draws across and ranks the ambiguous region
    by, among ``axes``: those the run's metrics have) and how regions are drawn (at first by
    :func:`default_rule`)."""
    sb = st.sidebar
    sb.subheader("Regions")
    default = default_rule(run, axes)
    axes = list(axes) or [ambiguity.VARIABILITY]
    axis = sb.selectbox(
        "Ambiguity axis (x)",
        axes,
        format_func=axis_label,
        help="The score the map draws across and the ambiguous region is ranked by. Variability (the spread "
        "of p(gold) over the recordings) is Dataset Cartography's; the others are means over the same "
        "recordings, which agree across seeds more (docs/stability.md).",
        **kept("dm_axis", default.axis, options=axes),
    )
    methods = list(REGION_LABELS)
    method = sb.radio(
        "Regions",
        methods,
        format_func=REGION_LABELS.get,
        **kept(region_rule_key(run), default.method, options=methods),
    )
    if method == "rank":
        shares = ambiguous_shares()  # the rule's own default among them (a third, not 0.33)
        share = sb.select_slider(
            "Ambiguous share",
            shares,
            format_func=lambda v: f"{v:.0%}",
            **kept("dm_ambiguous_fraction", default.fraction, options=shares),
        )
        rule = RegionRule(method="rank", fraction=float(share), axis=axis)
    else:
        score = ambiguity.get(axis)
        high = score.range[1] if score.range else None
        cut = sb.number_input(
            f"Ambiguous from {score.label}",
            0.0,
            high,
            step=0.01,
            format="%.3f",
            **kept(f"dm_ambiguous_cut_{axis}", RegionRule(axis=axis).ambiguous_var),
        )
        rule = RegionRule(method="threshold", ambiguous_var=float(cut), axis=axis)
    return rule


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
    *(f"dm_range_{axis}" for axis in datamap.AXIS_COLUMNS),
    "dm_corr",
    "dm_stable_only",
    "dm_entropy",
    "dm_disagree",
    TAG_FILTER,
)
#: Every filter and display setting the "Reset" clears: the run's filters and how the map is drawn.
FILTER_KEYS = RUN_FILTER_KEYS + (
    "dm_color",
    "dm_facet",
    "dm_max_points",
    "dm_axis",
    *(f"dm_region_rule_{kind}" for kind in task_kinds.names()),  # region_rule_key
    "dm_ambiguous_fraction",
    *(f"dm_ambiguous_cut_{axis}" for axis in datamap.AXIS_COLUMNS),
)
_FILTERS_RUN = "_dm_filters_run"  # the run the filter values in session state were set on


def reset_filters(keys=FILTER_KEYS) -> None:
    """Forget the kept values of ``keys`` ("Reset filters": every filter and display setting)."""
    for key in keys:
        st.session_state.pop(key, None)
        st.session_state.pop(f"_kept_{key}", None)


def filters_follow_run(run_id: str) -> None:
    """Drop the example filters of another run (a region or label filter of run A would hide
    examples of run B without saying so); the display settings stay."""
    if st.session_state.get(_FILTERS_RUN) not in (None, run_id):
        reset_filters(RUN_FILTER_KEYS)
    st.session_state[_FILTERS_RUN] = run_id


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


def _max_points_input(sb) -> int:
    """The most points the map draws (above them a sample over a density shading of all)."""
    return sb.number_input(
        "Points drawn (at most)",
        min_value=100,
        max_value=500_000,
        step=5_000,
        help="Above this many examples the map draws a random sample over a density shading of all of "
        "them; a lasso or box still selects every example inside it.",
        **kept("dm_max_points", datamap.DEFAULT_MAX_POINTS),
    )


def _vote_filters(sb, h_hi: float):
    """(human entropy range in [0, ``h_hi``] bits, only gold ≠ human majority) of a run with votes."""
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
    return entropy, disagree


def sidebar_filters(frame, more=None):
    """Filter widgets in the sidebar; returns (filtered frame, colour-by, max points drawn). ``more``: a
    filter of the run's own (the tags: ``more(filtered)`` draws its widgets and returns the rows it keeps),
    drawn with the others, before "Reset filters"."""
    sb = st.sidebar
    sb.subheader("Filters")
    labels = [str(g) for g in frame[["label", "gold"]].drop_duplicates().sort_values("label")["gold"]]
    present = {str(r) for r in frame["region"].unique()}
    # every region offered, present or not: the map after k recordings may lack one for a while, and a
    # filter offered without it would keep it left out when the slider moves on
    regions = list(REGIONS)
    regions += sorted(present - set(regions))
    genres = sorted({str(g) for g in frame["genre"].unique()}) if "genre" in frame.columns else []
    corr_options = sorted(float(v) for v in frame["correctness"].dropna().unique()) or [0.0, 1.0]
    axis = datamap.axis_of(frame)
    score = ambiguity.get(axis)
    top = score.range[1] if score.range else 0.0
    var_hi = max(top, round(datamap.metric_bounds(frame, axis)[1] + 0.005, 3))
    var_key = f"dm_range_{axis}"

    _valid_range("dm_conf", 0.0, 1.0)
    _valid_range(var_key, 0.0, var_hi)
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
    var = sb.slider(
        score.label[:1].upper() + score.label[1:],
        0.0,
        var_hi,
        step=0.005,
        format="%.3f",
        **kept(var_key, (0.0, var_hi)),
    )
    corr = sb.select_slider(
        "Correctness",
        options=corr_options,
        format_func="{:.2f}".format,
        **kept("dm_corr", (corr_options[0], corr_options[-1])),
    )
    max_points = _max_points_input(sb)
    color_by = colour_picker(frame)
    entropy, disagree = _vote_filters(sb, h_hi) if votes else (None, None)
    stable = False
    if over_seeds:
        stable = sb.checkbox(
            "Stable only",
            help="Only the examples whose region is the same in every seed.",
            **kept("dm_stable_only", False),
        )
    slot = sb.container()  # ``more``'s widgets, filled once the other filters are applied
    sb.button("Reset filters", on_click=reset_filters, key="dm_reset")

    ranges = {"confidence": conf, axis: var, "correctness": corr}
    # a slider at its full extent does not filter (keeps values just outside the slider's grid)
    if tuple(conf) == (0.0, 1.0):
        ranges.pop("confidence")
    if tuple(var) == (0.0, var_hi):
        ranges.pop(axis)
    filtered = datamap.filter_frame(
        frame, labels=chosen_labels, regions=chosen_regions, genres=chosen_genres, ranges=ranges
    )
    if entropy is not None and tuple(entropy) != (0.0, h_hi):
        filtered = datamap.filter_frame(filtered, ranges={"human_entropy": entropy})
    if disagree:
        filtered = filtered[filtered["gold_disagrees"].to_numpy(dtype=bool)]
    if stable:
        filtered = seed_maps.stable_only(filtered)
    if more is not None:
        with slot:
            filtered = more(filtered)
    return filtered, color_by, int(max_points)
