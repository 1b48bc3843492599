"""Data map page: the interactive map of the picked run, filters, selection table, groups, downloads.

Layout only, composed of the page's components (``pages/components/``): the sidebar's region rule and
filters (``map_filters``), the seeds block (``seeds``), the map over epochs and what is drawn over the map
(``map_layers``), the chart with its selection events and first picture (``map_chart``), the selection
table, focused example and downloads (``selection``), saved groups (``groups``), the run summary and
training curves (``run_summary``), the truth report (``human_judgement``), a token run's and a
multi-label run's parts (``token_map``, ``label_map``), the map frames (``maps``) and everything else read
through Streamlit's caches (``cached``). Every computation is a function of ``cartomap.analysis.datamap``
/ ``cartomap.runs.groups`` and the other library modules those call.

The map comes first: it is the first thing under the title (a container filled once the page has read its
controls), sized to be whole on a laptop's screen with the title (``map_chart.MAP_HEIGHT``; a 1366 x 768
window, tests/test_browser_map_first.py). Under it, in this order: the captions of what it shows (examples,
axes, regions, epochs) and its warnings (near chance, nothing matches the filters), a token or multi-label
run's "Map of", the slider over the recordings, the text search, the run summary, what is drawn over the map
(paths, neighbours, generated pairs), then the rest; the filters are in the sidebar.

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
the map of the seeds' means (``dm_seeds_mean_<run>``, a toggle in the sidebar), with "region agreement" as a
colour, "Stable only" as a filter and one trajectory per seed; without one it says how stable such maps were
measured to be (``cartomap.analysis.stability_reference``) and offers *Add seeds* (a background job), in a
block after the map, collapsed unless a seeds experiment runs: the map comes first.

Saved views (``saved_views``, the sidebar's first section): the map's settings, selection and focus under a
name, restored there or by ``?view=NAME`` in the address. Text search (``text_search``, under the map): the
examples whose texts hold a text or match a regular expression become the selection. Tags (``tags``): set on
the selection or the focused example, a sidebar filter, a column of the selection table and downloads. Where
neighbours are missing the example's panel offers "Compute embeddings" (``embeddings``).

A run with two or more recordings gets a slider "Map after recording": the map from the first k
recordings, with the selected examples' paths over it (``map_layers``). A session's first single map comes
as a picture first (``map_chart``). Over the single map: the focused example and its nearest neighbours, and
a filtered WaNLI batch's generated pairs (``map_layers``).

The map can be coloured by anything the run's frame holds (``cartomap.analysis.colourings``: categories with
a palette, scores such as AUM, EL2N or a label-error detector with a colour scale; ``dm_color``) and split
into one map per gold label (``dm_facet``; its selection events are ``datamap_facets``). "Run summary" shows
accuracy, recording settings and the dev confusion matrix (``cartomap.analysis.summary``). A click on a
row of the selection table focuses that example: its texts, probability by epoch, votes and, when the run
has embeddings, its nearest same-label neighbours.

A token run (``pages.components.token_map``) maps words or sentences ("Map of"): at word level the focused
word's sentence is shown word by word with its gold and predicted tags; at sentence level each sentence
sits where a score of its words' confidences puts it (min, mean, softmin) and a picked sentence opens the same way.

When the run's data has votes, the map can be coloured by human entropy or gold vs majority, filtered by
entropy and "gold ≠ human majority", the focused example shows its votes (a table: data is never
rendered as markdown) and "Human judgement" shows the truth report (``cartomap truth``).
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import datamap, map_points, tables, tokens
from cartomap.config import Source
from cartomap.errors import CartomapError
from cartomap.experiments.seeds import seed_runs
from pages.common import (
    SELECTED,
    current_run,
    escape_markdown,
    get_experiments,
    get_store,
    show_error,
    show_flashes,
    through_app,
)
from pages.components import (
    cached,
    groups,
    human_judgement,
    label_map,
    map_chart,
    map_filters,
    map_layers,
    maps,
    run_summary,
    saved_views,
    seeds,
    selection,
    tags,
    text_search,
    token_map,
)
from pages.components.jobs import demo_or_prompt

through_app()  # a first visit straight to this page's address: run it through app.py


#: The page's style: less room above the title (Streamlit's 6rem), so that the map under it is whole on a
#: laptop's screen (a 1366 x 768 window: about 625 px of page) with the title.
PAGE_CSS = "<style>[data-testid='stMainBlockContainer'] {padding-top: 2.5rem;}</style>"


def main() -> None:
    st.html(PAGE_CSS)
    st.title("Data map")
    show_flashes()
    run = demo_or_prompt(current_run())  # app.py draws the run picker in the sidebar
    if run is None:
        st.stop()
    if not run.has_metrics():
        st.warning(f"Run {run.id} is done but has no data-map metrics (trained with record=none?).")
        st.stop()

    chart, body, tail = st.container(), st.container(), st.container()  # the map first, then the rest
    sent = []

    def curves_now() -> None:  # once: right after the map's picture, else after the page
        if not sent:
            sent.append(True)
            with tail:
                run_summary.curves_section(run)

    with body:
        page(run, chart, curves_now)
    curves_now()


def page(run, chart, after_picture=None) -> None:
    """Everything of the page but its title and the training curves, for a run with metrics: the map in
    ``chart`` (a container right under the title: the map comes first), the rest where it is called, under it;
    ``after_picture`` is called once the map's picture is sent (:func:`pages.components.map_chart.draw_map`)."""
    per_label = run.task_kind.unit.label_sets  # multi-label: several maps, picked below
    saved_views.restore_from_address(run)  # ?view=NAME: before any widget is drawn
    notes = st.container()  # right under the map: what it shows, and its warnings
    warning = None if per_label else cached.chance_warning(run)
    if warning:
        st.warning(escape_markdown(warning))
    saved_views.views_panel(run)  # the sidebar's first section
    rule = map_filters.map_settings(run, cached.axes(run))
    if token_map.is_token_run(run):  # a point per word, or per sentence
        level, method = token_map.level_picker()
        if level == tokens.SENTENCE_LEVEL:
            _sentence_map(run, rule, method, chart)
            return
    view = label_map.view_picker(run) if per_label else None
    estore = get_experiments()
    seeds_exp, seeds_done = (None, None) if per_label else seeds.seeds_map(run, estore)
    burn_out, n_recorded = (None, 0) if seeds_exp else map_layers.epoch_slider(run)
    try:
        if per_label:
            frame = maps.label_view(run, view, rule, burn_out)
        else:
            frame = (
                maps.seed_map_frame(seeds_exp, run, rule)
                if seeds_exp
                else maps.map_frame(run, rule, burn_out)
            )
    except CartomapError as err:
        show_error(err)
        st.stop()
    seed_map_runs = seed_runs(seeds_exp, get_store()) if seeds_exp else None
    map_filters.filters_follow_run(run.id)
    filtered, color_by, max_points = map_filters.sidebar_filters(
        frame, more=lambda rows: tags.tag_filter(run, rows)
    )
    split = map_filters.split_by_label()
    text_search.search_box(frame)  # a search replaces the selection, as a lasso does
    st.session_state.setdefault(SELECTED, [])
    if split:
        map_chart.take_facet_event(filtered, max_points)
    else:
        map_chart.take_event(filtered, max_points)
    selected = [str(i) for i in st.session_state.get(SELECTED) or []]
    st.session_state[SELECTED] = selected

    with notes:
        rule_text = _captions(run, rule, frame, filtered, burn_out=burn_out, mean_of=seed_map_runs)
    run_summary.summary_section(
        run,
        rule_text,
        n_seeds=len(seeds_done.params["seeds"]) if seeds_done else 1,
    )
    table = tables.selection_table(filtered, selected, texts=False)  # texts only for the rows listed
    paths = neighbours = generated = None
    if not seeds_exp and not split and n_recorded >= 2:
        paths = map_layers.selection_paths(
            run, table, burn_out or n_recorded, view=view, axis=datamap.axis_of(frame)
        )
    if not split and not per_label:
        neighbours = map_layers.neighbour_layer(run, frame, selection.focused_id(table))
        generated = map_layers.generated_layer(run, datamap.axis_of(frame))
    with chart:
        fig = map_chart.draw_map(
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

    if not per_label:
        seeds.seeds_section(run, estore, seeds_done, axis=rule.axis)  # after the map: the map comes first
    selection.selection_section(run, frame, filtered, table, selected, seed_map_runs, per_label=per_label)
    tags.tag_tools(run, table)
    human_judgement.human_section(run)
    if token_map.is_token_run(run):
        token_map.swaps_section(run, estore)
    st.divider()
    groups.group_tools(run, table)
    st.divider()
    selection.downloads(run, filtered, selected, fig)


def _sentence_map(run, rule, method: str, chart) -> None:
    """A token run's map of sentences (``token_map.sentence_level``), drawn in ``chart``, with the map over
    the recordings and the selected sentences' paths."""
    burn_out, n_recorded = map_layers.epoch_slider(run)
    token_map.sentence_level(
        run,
        rule,
        method,
        burn_out=burn_out,
        paths=(
            lambda table: map_layers.selection_paths(
                run, table, burn_out or n_recorded, method=method, axis=rule.axis
            )
        )
        if n_recorded >= 2
        else None,
        current_k=burn_out or n_recorded,
        chart=chart,
    )
    token_map.swaps_section(run, get_experiments())


def _captions(run, rule, frame, filtered, *, burn_out, mean_of=None) -> str:
    """The captions under the map: how many examples it has and match the filters, how to select, its axes,
    its regions and the epochs its metrics are over (``mean_of``: the runs of a map of seeds' means);
    a warning when no example matches. Returns the regions' description (the run summary shows it too)."""
    st.caption(
        f"{len(frame):,} examples · {len(filtered):,} match the filters. Drag a lasso or a box over the map "
        f"(or click a point) to select examples; x = {map_points.axis_title(datamap.axis_of(frame))}, "
        "y = confidence."
    )
    epochs_used = frame.attrs.get("n_epochs")
    recorded = frame.attrs.get("epochs_recorded") or epochs_used
    over = f"over the first {epochs_used} of {recorded} epochs" if burn_out else f"over {epochs_used} epochs"
    train_config = run.config.train
    if train_config.record_points > 1 and run.recorded_source() == Source.EVAL:
        over += f" (here: recordings, {train_config.record_points} eval-mode passes an epoch)"
    if frame.attrs.get("burn_in"):
        over += f", leaving out the first {frame.attrs['burn_in']} recording(s) (skip_epochs)"
    if mean_of is not None:
        over = (
            f"over {epochs_used} epochs, the mean of {len(mean_of)} seeds (burn-out applies to one run's map)"
        )
    rule_text = rule.describe(rule.values(frame))  # ranks every example: once
    st.caption(f"Regions: {rule_text}. Metrics {over}.")
    if filtered.empty:
        st.warning("No example matches the filters.")
    return rule_text


main()
