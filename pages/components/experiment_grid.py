"""An experiment grid on the Curricula & combinations page (``pages/experiments.py``): the table of
experiments of a kind with its picker, the progress of the one picked (Cancel / Resume), its results
(curricula: best run per method, mean ± std, per class, curves, significance; combinations: Table 3) and
its report, and starting one from a form's parameters.

Layout only: the experiments are ``cartomap.experiments``' (``forms`` builds the tables shown), started
with ``cartomap.experiments.launch.start_experiment``.
"""

from __future__ import annotations

import plotly.express as px
import streamlit as st

from cartomap.errors import CartomapError
from cartomap.experiments import forms, launch, registry
from cartomap.experiments.store import Experiment
from cartomap.runs.progress import state_text
from cartomap.runs.state import State
from pages.common import (
    acting_as,
    escape_markdown,
    flash,
    for_display,
    get_experiments,
    get_store,
    kept,
    show_error,
)
from pages.components.jobs import experiment_panel

ss = st.session_state


def experiment_table(kind: str, selected_key: str) -> Experiment | None:
    """The table of experiments of ``kind`` and a picker; returns the one picked (or None)."""
    try:
        xstore = get_experiments()
        table = xstore.table(kind)
    except (OSError, ValueError, KeyError):  # an experiment folder being written or deleted right now
        st.caption("The experiments cannot be read right now; reload the page.")
        return None
    if table.empty:
        st.caption(escape_markdown(f"No {kind} experiments yet in {xstore.dir}."))
        return None
    st.dataframe(for_display(table.drop(columns=["kind"])), hide_index=True, key=f"{selected_key}_table")
    ids = table["id"].tolist()
    labels = {i: f"{n} ({i})" if n else i for i, n in zip(ids, table["name"], strict=True)}
    default = ss.get(selected_key) if ss.get(selected_key) in ids else ids[0]
    chosen = st.selectbox(
        "Experiment", ids, format_func=labels.get, **kept(selected_key, default, options=ids)
    )
    return xstore.get(chosen)


def _run_status(run_id: str) -> dict | None:
    if not run_id:
        return None
    try:
        return get_store().get(run_id).status()
    except (CartomapError, OSError, ValueError):
        return None


def _progress_details(exp: Experiment, status: dict) -> None:
    view = forms.experiment_progress(status, _run_status(status.get("run_id")))
    st.progress(
        view["fraction"],
        text=f"Experiment {exp.id}: {state_text(view['state'], view['phase'])} · runs {view['runs']}",
    )
    c1, c2, c3, c4 = st.columns([3, 1, 1, 1])
    c1.metric("Training", view["role"])
    c2.metric("Epoch", view["epoch"])
    c3.metric("Step", view["step"])
    c4.metric("Loss", view["loss"])
    if view["run_id"]:
        st.caption(f"Run {view['run_id']}")


def _runs_details(exp: Experiment, status: dict) -> None:
    _progress_details(exp, status)
    parallel = status.get("state") == State.RUNNING and len(status.get("running") or []) > 1
    if parallel or status.get("state") in (State.FAILED, State.CANCELLED, State.INTERRUPTED):
        table = forms.runs_progress_table(exp, get_store())
        if not table.empty:
            st.dataframe(for_display(table), hide_index=True, key=f"xp_runs_{exp.id}")


def _progress_and_actions(exp: Experiment) -> str:
    """Progress (live while active), Cancel / Resume; returns the state."""
    return experiment_panel(exp, _runs_details)


def report_download(exp: Experiment) -> None:
    try:
        report = registry.report(exp, get_experiments().runs)
    except (CartomapError, KeyError, OSError, ValueError) as err:
        show_error(f"no report: {err}")
        return
    st.download_button(
        "Download the report (markdown)",
        report,
        file_name=f"experiment-{exp.id}.md",
        mime="text/markdown",
        key=f"report_{exp.id}",
    )


def curriculum_results(exp: Experiment) -> None:
    summary = exp.result("summary") or {}
    best = exp.result("best")
    if best is None:
        st.warning("This experiment has no results folder (finished by an older version?).")
        return
    tests = summary.get("test_sets") or []
    first = tests[0] if tests else best["test_set"].iloc[0]
    st.subheader("Best run on validation, per method")
    st.caption(
        f"Per method, the seed whose best epoch (on validation) has the highest validation accuracy, scored on "
        f"the test set {escape_markdown(first)} (RoNLI's protocol)."
    )
    cols = [
        c
        for c in ("method", "seed", "epoch", "dev_accuracy", "accuracy", "micro_f1", "macro_f1", "run_id")
        if c in best
    ]
    st.dataframe(best[cols], hide_index=True, key=f"best_{exp.id}")
    st.subheader("All seeds: mean ± std")
    st.dataframe(forms.mean_std_table(exp.result("aggregate")), hide_index=True, key=f"agg_{exp.id}")
    per_class = exp.result("per_class")
    st.subheader("Per class (best run per method)")
    c1, c2 = st.columns([3, 2])
    c1.dataframe(
        per_class[["method", "class", "precision", "recall", "f1", "support"]].round(4),
        hide_index=True,
        key=f"cls_{exp.id}",
    )
    classes = per_class[~per_class["class"].isin(["micro", "macro"])]
    fig = px.bar(
        classes, x="class", y="f1", color="method", barmode="group", range_y=[0, 1], title="F1 per class"
    )
    c2.plotly_chart(fig, key=f"f1_{exp.id}", width="stretch", config={"displaylogo": False})
    curves = exp.result("curves")
    if curves is not None and not curves.empty and curves["dev_accuracy"].notna().any():
        curves = curves.assign(run=curves["method"] + " seed " + curves["seed"].astype(str))
        fig = px.line(
            curves,
            x="epoch",
            y="dev_accuracy",
            color="method",
            line_group="run",
            hover_data=["seed", "test_accuracy", "train_loss"],
            markers=True,
            range_y=[0, 1],
            title="Validation accuracy per epoch (one line per run)",
        )
        st.plotly_chart(fig, key=f"curves_{exp.id}", width="stretch", config={"displaylogo": False})
    sentences = forms.significance_sentences(exp.result("significance") or {})
    st.subheader("Significance")
    if sentences:
        for line in sentences:
            st.markdown(escape_markdown(line))
    else:
        st.caption("One method only: nothing to compare.")
    with st.expander("Every run and test set"):
        st.dataframe(for_display(exp.result("runs")), hide_index=True, key=f"runs_{exp.id}")
    report_download(exp)


def combination_results(exp: Experiment) -> None:
    table3 = exp.result("table3")
    if table3 is None:
        st.warning("This experiment has no results folder (finished by an older version?).")
        return
    st.subheader("Accuracy per training set (rows) and test set (columns)")
    st.caption(
        "Mean accuracy over the seeds, at each run's epoch best on validation; ★ = best of the column."
    )
    st.dataframe(forms.marked_matrix(table3), hide_index=True, key=f"t3_{exp.id}")
    st.subheader("Every run")
    st.dataframe(for_display(exp.result("runs")), hide_index=True, key=f"c_runs_{exp.id}")
    report_download(exp)


def show_experiment(exp: Experiment, results) -> None:
    with st.container(border=True):
        st.markdown(f"**Experiment** `{exp.id}` {escape_markdown(exp.spec.get('name') or '')}")
        state = _progress_and_actions(exp)
        with st.expander("Parameters"):
            st.json(exp.params, expanded=1)
        if state == State.DONE:
            results(exp)


def start(create, params, name: str, selected_key: str, where: dict) -> None:
    try:
        executor = forms.build_executor_config(**where)
        xstore = get_experiments()
        exp = create(params, xstore, name=name.strip())
    except CartomapError as err:
        show_error(err)
        return
    state = exp.state
    if state == State.DONE:
        flash("info", f"These settings were run before: experiment {exp.id} is done, showing its results.")
    elif exp.is_locked():
        flash("info", f"Experiment {exp.id} is already running: following it.")
    else:
        try:
            launch.start_experiment(exp, xstore, executor, by=acting_as())
        except CartomapError as err:
            show_error(err)
            return
        flash(
            "success",
            f"Started experiment {exp.id}: it trains in the background; leaving this page does not stop it.",
        )
    ss[selected_key] = exp.id
    st.rerun()
