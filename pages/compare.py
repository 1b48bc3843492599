"""Compare page: several runs (picked one by one or as whole experiments) side by side.

Layout only: the numbers come from ``cartomap.analysis.compare`` (scores at the epoch best on validation,
curves, per-class F1, example diffs) and ``cartomap.analysis.datamap`` (the small data maps). Loading is
cached with ``st.cache_data`` keyed by run folder + mtime of its history.json, so a run that
finishes another epoch is reread and the others are not.

Session state (kept across page switches with ``pages.common.kept``): ``cmp_runs`` (run ids),
``cmp_exps`` (experiment ids), ``cmp_best`` (best on validation per method), ``cmp_test`` (test
set name), ``cmp_metric``, ``cmp_maps``, ``cmp_a`` / ``cmp_b`` / ``cmp_source`` / ``cmp_outcomes``
(the per-example difference).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.analysis import compare, figures
from cartomap.errors import CartomapError
from cartomap.experiments import registry
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.state import State, derive_state
from cartomap.runs.store import Run
from cartomap.scores.reports import OUTCOMES, markdown_table
from pages.common import count, escape_markdown, for_display, get_store, kept, show_error, through_app
from pages.components import maps

through_app()  # a first visit straight to this page's address: run it through app.py

MAX_MAPS = 4  # data maps drawn side by side at most
MAP_POINTS = 4_000  # points drawn per small map (above: a density shading plus a sample)
DIFF_ROWS = 5_000  # rows of the example diff sent to the browser
TABLE_COLUMNS = [
    "run",
    "order",
    "seed",
    "train_size",
    "epochs",
    "best_epoch",
    "dev_accuracy",
    "dev_entity_f1",
    "accuracy",
    "micro_f1",
    "macro_f1",
    "entity_f1",
    "entity_macro_f1",
    "id",
]


# --------------------------------------------------------------------------- cached loading


def _keys(runs: dict[str, Run]) -> tuple[tuple[str, str, int | None], ...]:
    """(label, run folder, mtime of history.json) per run: the cache key of everything read from it."""
    return tuple((label, str(run.path), run.stamp(run.history_path)[0]) for label, run in runs.items())


def _runs(keys) -> dict[str, Run]:
    return {label: Run(Path(path)) for label, path, _ in keys}


@st.cache_data(max_entries=64, show_spinner="Scoring the runs…")
def _table(keys, test):
    return compare.comparison_table(_runs(keys), test)


@st.cache_data(max_entries=64, show_spinner=False)
def _chance(keys, test):
    return compare.chance_warnings(_runs(keys), _table(keys, test))


@st.cache_data(max_entries=64, show_spinner=False)
def _class_f1(keys, test):
    return compare.class_f1_frame(_runs(keys), test)


@st.cache_data(max_entries=64, show_spinner=False)
def _curves(keys, metric, test):
    return compare.curves_frame(_runs(keys), metric, test)


@st.cache_data(max_entries=32, show_spinner="Comparing predictions…")
def _diff(key_a, key_b, test):  # test None: the shared dev set
    run_a, run_b = Run(Path(key_a[1])), Run(Path(key_b[1]))
    if test is None:
        return compare.dev_diff(run_a, run_b)
    return compare.example_diff(run_a, run_b, test)


# --------------------------------------------------------------------------- choosing runs
def _state(obj) -> str:
    try:
        return derive_state(obj.status())
    except (OSError, ValueError, KeyError):
        return State.UNKNOWN


def _run_options(store) -> dict[str, str]:
    options = {}
    try:
        runs = store.list()
    except (OSError, ValueError):
        runs = []
    for run in runs:
        try:
            options[run.id] = f"{compare.run_label(run)} · {_state(run)}"
        except (OSError, ValueError, KeyError, CartomapError):
            continue  # a run folder being written, deleted or damaged
    return options


def _experiment_options(exp_store) -> dict[str, str]:
    options = {}
    try:
        experiments = exp_store.list()
    except (OSError, ValueError):
        experiments = []
    for exp in experiments:
        try:
            options[exp.id] = f"{exp.label} · {_state(exp)}"
        except (OSError, ValueError, KeyError):
            continue
    return options


def choose_runs(store, exp_store) -> tuple[dict[str, Run], list]:
    """The multiselects of runs and experiments; returns ({label: run}, chosen experiments)."""
    run_options = _run_options(store)
    exp_options = _experiment_options(exp_store)
    left, right = st.columns(2)
    run_ids = left.multiselect(
        "Runs",
        list(run_options),
        format_func=lambda rid: run_options.get(rid, rid),
        placeholder="Pick runs (name · order · seed · id · state)",
        **kept("cmp_runs", [], options=list(run_options)),
    )
    exp_ids = right.multiselect(
        "Experiments",
        list(exp_options),
        format_func=lambda eid: exp_options.get(eid, eid),
        placeholder="Add every run of an experiment",
        **kept("cmp_exps", [], options=list(exp_options)),
    )
    best_only = right.toggle(
        "Best on validation per method",
        help="For curriculum experiments: only the seed with the highest dev accuracy of each method "
        "(the run the RoNLI paper reports), without the data-map baseline.",
        **kept("cmp_best", False),
    )
    chosen: dict[str, Run] = {}
    experiments = []
    for eid in exp_ids:
        try:
            exp = exp_store.get(eid)
            runs = registry.experiment_runs(exp, store, best_only=best_only)
        except (CartomapError, OSError, ValueError) as err:
            show_error(err)
            continue
        experiments.append(exp)
        chosen.update({label: run for label, run in runs.items() if run.id not in _ids(chosen)})
    for rid in run_ids:
        if rid not in _ids(chosen):
            run = Run(store.path_for(rid))
            chosen[compare.run_label(run)] = run
    return chosen, experiments


def _ids(runs: dict[str, Run]) -> set[str]:
    return {run.id for run in runs.values()}


# --------------------------------------------------------------------------- sections
def scores_section(keys, test) -> pd.DataFrame:
    table = _table(keys, test)
    shown = table[[c for c in TABLE_COLUMNS if c in table.columns]]
    where = f"test set **{escape_markdown(test)}**" if test is not None else "the dev set"
    st.markdown(f"Scores on {where} at each run's epoch best on validation; the best of each column in bold.")
    st.dataframe(
        compare.bold_best(shown, compare.SCORE_COLUMNS),
        hide_index=True,
        key="cmp_table",
        height=min(420, 38 + 35 * len(shown)),
    )
    for warning in _chance(keys, test):
        st.warning(escape_markdown(warning))
    missing = table["run"][table["accuracy"].isna()].tolist() if "accuracy" in table.columns else []
    if missing:
        st.caption(f"No scores on this test set for: {escape_markdown(', '.join(missing))}.")
    with st.expander("As a markdown table"):
        st.code(markdown_table(shown), language="markdown")
    return table


@st.cache_data(max_entries=64, show_spinner=False)
def _curve_names(keys, test):
    return compare.curve_names(_runs(keys), test)


def curves_section(keys, test) -> None:
    names = _curve_names(keys, test)
    metric = st.radio("Curve", names, horizontal=True, **kept("cmp_metric", names[0], options=names))
    frame = _curves(keys, compare.CURVES[metric], test)
    if frame.empty:
        st.caption(f"No run recorded {metric} per epoch.")
        return
    st.plotly_chart(
        compare.curves_figure(frame, compare.CURVES[metric]), key="cmp_curves", config={"displaylogo": False}
    )


def class_section(keys, test) -> None:
    frame = _class_f1(keys, test)
    if frame.empty:
        st.caption("No run has scores on this test set yet.")
        return
    st.plotly_chart(compare.class_f1_figure(frame), key="cmp_class_f1", config={"displaylogo": False})
    unscored = [label for label, _, _ in keys if label not in set(frame["run"])]
    if unscored:
        st.caption(escape_markdown(f"No per-class scores on this test set for: {', '.join(unscored)}."))


def maps_section(runs: dict[str, Run]) -> None:
    with_maps = [label for label, run in runs.items() if run.has_metrics()]
    if not with_maps:
        st.caption("None of these runs recorded training dynamics (data-map runs have them).")
        return
    default = with_maps[: min(3, MAX_MAPS)]
    shown = st.multiselect(
        f"Maps (at most {MAX_MAPS})",
        with_maps,
        max_selections=MAX_MAPS,
        **kept("cmp_maps", default, options=with_maps, max_selections=MAX_MAPS),
    )
    if not shown:
        return
    for column, label in zip(st.columns(len(shown)), shown, strict=True):
        run = runs[label]
        with column:
            st.caption(escape_markdown(label))
            try:
                frame = maps.map_frame(run)  # shared with the Data map page, not copied
            except CartomapError as err:
                show_error(err)
                continue
            fig = figures.data_map_figure(
                frame, max_points=MAP_POINTS, height=380, title=run.info["config"].get("name", "")
            )
            fig.update_layout(legend=dict(font=dict(size=9)), margin=dict(l=40, r=5, t=70, b=40))
            st.plotly_chart(fig, key=f"cmp_map_{run.id}", config={"displaylogo": False})


def diff_section(runs: dict[str, Run], keys, test) -> None:
    labels = list(runs)
    if len(labels) < 2:
        st.caption("Pick at least two runs to compare their predictions example by example.")
        return
    left, right, source_col = st.columns([2, 2, 1])
    a = left.selectbox("Run A", labels, **kept("cmp_a", labels[0], options=labels))
    others = [label for label in labels if label != a]
    b = right.selectbox("Run B", others, **kept("cmp_b", others[0], options=others))
    run_a, run_b = runs[a], runs[b]
    sources = []
    if test is not None and test in run_a.test_names and test in run_b.test_names:
        sources.append(f"test: {test}")
    if compare.shares_dev(run_a, run_b):
        sources.append("dev set")
    if not sources:
        st.info("These two runs share neither the chosen test set nor a dev set with recorded predictions.")
        return
    source = source_col.radio(
        "On",
        sources,
        format_func=escape_markdown,  # radio labels are markdown; a test-set name is data
        **kept("cmp_source", sources[0], options=sources),
    )
    key = dict(zip((k[0] for k in keys), keys, strict=True))
    try:
        diff = _diff(key[a], key[b], None if source == "dev set" else test)
    except CartomapError as err:
        show_error(err)
        return
    counts = compare.outcome_counts(diff)
    for column, outcome in zip(st.columns(4), OUTCOMES, strict=True):
        column.metric(outcome, f"{counts[outcome]:,}")
    outcomes = st.multiselect(
        "Show",
        list(OUTCOMES),
        **kept("cmp_outcomes", [OUTCOMES[1], OUTCOMES[2]], options=list(OUTCOMES)),
    )
    shown = diff[diff["outcome"].isin(outcomes)].astype({"outcome": str})
    st.caption(escape_markdown(f"{len(shown):,} of {count(len(diff), 'example')} · A = {a} · B = {b}"))
    st.dataframe(
        shown.head(DIFF_ROWS),
        hide_index=True,
        key="cmp_diff",
        height=min(400, 38 + 35 * min(len(shown), DIFF_ROWS)),
    )


def experiment_section(exp) -> None:
    st.subheader(escape_markdown(exp.name))
    state = _state(exp)
    if state != State.DONE:
        st.caption(f"{exp.kind} experiment · {state}: its results appear when every run is done.")
        return
    sections = registry.sections(exp)
    if not sections:
        st.caption(f"{exp.kind} experiment: its runs are compared above.")
    for section in sections:
        st.markdown(f"**{escape_markdown(section.title)}**")
        table = for_display(section.table, keep=section.best_columns or (), formats=section.formats)
        numeric = [c for c in section.formats if c in table.columns and table[c].dtype.kind in "iuf"]
        if section.best_columns:
            table = compare.bold_best(table, [c for c in section.best_columns if c in table.columns])
        config = {c: st.column_config.NumberColumn(format=section.formats[c]) for c in numeric}
        st.dataframe(table, hide_index=True, column_config=config or None)


def main() -> None:
    st.title("Compare")
    store = get_store()
    exp_store = ExperimentStore(store.root)
    runs, experiments = choose_runs(store, exp_store)
    if not runs and not experiments:
        st.info("Pick runs, or experiments to add all their runs. Scores are read from each run's test sets.")
        st.stop()
    names = compare.test_names(runs)
    test = None
    if names:
        test = st.selectbox("Test set", names, **kept("cmp_test", names[0], options=names))
    else:
        st.caption("None of these runs has a test set: only their dev accuracy is compared.")
    keys = _keys(runs)
    if runs:
        try:
            scores_section(keys, test)
            st.subheader("Learning curves")
            curves_section(keys, test)
            if test is not None:
                st.subheader("F1 per class (entity type, for named entities)")
                class_section(keys, test)
            st.subheader("Data maps")
            maps_section(runs)
            st.subheader("Example by example")
            diff_section(runs, keys, test)
        except CartomapError as err:
            show_error(err)
    for exp in experiments:
        st.divider()
        experiment_section(exp)


main()
