"""The Data map page's seeds block: the map of the means over seeds, or how stable such maps are.

When the run has a finished seeds experiment (``cartomap seeds`` or *Add seeds* here) the page draws the
map of the seeds' means (``dm_seeds_mean_<run>``, a toggle in the sidebar), with "region agreement" as a colour, "Stable
only" as a filter and one trajectory per seed; without one it says how stable such maps were measured to
be (``cartomap.analysis.stability_reference``) and offers *Add seeds* (a background job, its panel
following it), or a map of the finished runs that are this run but for their seed. That block comes after
the map (collapsed unless a seeds experiment is running), so the map is the first thing the page shows.
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import seed_maps
from cartomap.analysis.stability_reference import measured_caption, measured_stability
from cartomap.errors import CartomapError
from cartomap.experiments import launch, registry
from cartomap.experiments.seeds import (
    SUMMARY,
    create_seeds,
    create_seeds_from_runs,
    done_seeds_of,
    seeds_of,
)
from cartomap.experiments.store import MAX_RUNS
from cartomap.runs.progress import state_text
from cartomap.runs.state import State
from cartomap.team.roles import Action
from pages.common import (
    acting_as,
    count,
    escape_markdown,
    flash,
    kept,
    show_error,
    write_button,
)
from pages.components import cached
from pages.components.jobs import experiment_panel


def _seeds_progress(exp, status: dict) -> None:
    done, total = int(status.get("runs_done") or 0), len(exp.params.get("seeds", []))
    st.progress(
        min(1.0, done / total) if total else 0.0,
        text=f"Seeds: {state_text(status['state'], status.get('phase'))} · {done}/{total} runs",
    )
    if status["state"] == State.RUNNING and status.get("role"):
        st.caption(
            escape_markdown(
                f"Training {registry.role_label(exp, status['role'])} (run {status.get('run_id')})."
            )
        )


def mean_key(run) -> str:
    """The session key of the toggle "Map of k seeds (means)" of ``run`` (a saved view keeps it)."""
    return f"dm_seeds_mean_{run.id}"


def seeds_map(run, estore):
    """Whether the map is the mean over a finished seeds experiment: a toggle in the sidebar when the run
    has one (``dm_seeds_mean_<run>``). Returns (the experiment whose mean map is drawn, or None; the
    finished seeds experiment, or None)."""
    done = done_seeds_of(run, estore)
    if done is None:
        return None, None
    n = len(done.params["seeds"])
    on = st.sidebar.toggle(
        f"Map of {n} seeds (means)",
        help="The map of every metric's mean over the seeds, coloured by region agreement if you like, "
        "with one probability line per seed for the focused example; off: this run's own map.",
        **kept(mean_key(run), True),
    )
    return (done if on else None), done


def seeds_section(run, estore, done=None, axis: str | None = None) -> None:
    """Drawn after the map, collapsed unless a seeds experiment is running: what the page says about the
    map's stability, the finished seeds experiment's summary (``done``), or the measured stability of such
    maps with an "Add seeds" button (a background job; its panel follows it) or a map of this run's finished
    siblings of other seeds. ``axis``: the map's ambiguity axis (the measured figures are the axis's)."""
    if done is not None:
        with st.expander(f"Seeds: the map of {len(done.params['seeds'])} seeds"):
            st.caption(seed_maps.seeds_caption(done.result(SUMMARY) or {}))
        return
    pending = seeds_of(run, estore)
    active = pending is not None and pending.state != State.DONE
    with st.expander("Seeds: how stable is this map?", expanded=active):
        _seeds_block(run, estore, pending, axis)


def _seeds_block(run, estore, pending, axis: str | None = None) -> None:
    row = measured_stability(run.config.train)
    if row is not None:
        st.caption(measured_caption(row, axis))
    if pending is not None and pending.state != State.DONE:
        experiment_panel(pending, _seeds_progress, key="dm_seeds_")
        return
    siblings = {seed: estore.runs.get(rid) for seed, rid in cached.sibling_ids(run, estore.runs).items()}
    if len(siblings) > 1:
        left, right = st.columns([1, 3])
        right.caption(
            f"{len(siblings)} finished runs are this run with another seed ({', '.join(map(str, siblings))}): "
            "their mean map needs no training."
        )
        if write_button(
            f"Map these {count(len(siblings), 'seed')}",
            Action.EXPERIMENT,
            where=left,
            key="dm_sibling_seeds",
            type="primary",
        ):
            try:
                others = [r for r in siblings.values() if r.id != run.id]
                launch.start_experiment(create_seeds_from_runs(estore, run, others), estore, by=acting_as())
            except CartomapError as err:
                show_error(err)
            else:
                st.rerun()
    if not run.config.origin.kind.trains_here:
        st.caption(
            "This run was recorded outside cartomap's loop, so cartomap cannot train it again: run your "
            "script with other seeds (same settings), then map them together here or with "
            "`cartomap seeds RUN --with`."
        )
        return
    left, right = st.columns([1, 3])
    n_seeds = left.number_input(
        "Seeds in all",
        2,
        MAX_RUNS,  # an experiment's cap: a run per seed
        step=1,
        help="The run's own seed and the next ones.",
        **kept("dm_n_seeds", 3),
    )
    right.caption(
        f"Add seeds trains this run {int(n_seeds) - 1} more times, changing only the seed, and draws the "
        "map of their means with how many seeds agree on each example's region."
    )
    if write_button("Add seeds", Action.EXPERIMENT, where=left, key="dm_add_seeds", type="primary"):
        try:
            exp = create_seeds(estore, run, n_seeds=int(n_seeds))
            launch.start_experiment(exp, estore, by=acting_as())
        except CartomapError as err:
            show_error(err)
        else:
            flash("success", f"Started the seeds experiment {exp.id} in the background.")
            st.rerun()
