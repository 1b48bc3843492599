"""The results of a finished pruning experiment on the Prune labels page (``pages/pruning.py``).

Layout only: the headline figures, the mismatches by category, the what-if threshold tools, the
Model 0 / Model 1 comparison, the ranked suspects (with "find on the data map") and the downloads; the
numbers and figures are ``cartomap.experiments.pruning_analysis`` and ``cartomap.analysis.pruning_figures``'.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.analysis import pruning_figures
from cartomap.analysis.evaluation import run_chance_warning
from cartomap.errors import CartomapError
from cartomap.experiments import pruning, pruning_analysis
from cartomap.experiments.store import Experiment, ExperimentStore
from cartomap.runs.store import Run
from cartomap.scores import consensus, detectors
from cartomap.team.roles import Action
from pages.common import (
    acting_as,
    escape_markdown,
    flash,
    get_store,
    kept,
    show_error,
    show_on_map,
    write_button,
)

#: The session key of the experiment the page shows.
EXP_KEY = "prune_exp_id"
#: The most suspects the table lists (the download has them all).
SUSPECTS_MAX_ROWS = 5_000
ss = st.session_state


def _stamp(exp: Experiment) -> tuple:
    return exp.result_stamp("summary")


@st.cache_data(max_entries=8, show_spinner="Loading the results…")
def _results(path: str, stamp: tuple):
    return pruning.load_results(Experiment(Path(path)))


@st.cache_data(max_entries=4, show_spinner=False)
def _examples(run_path: str) -> pd.DataFrame:
    return Run(Path(run_path)).examples()


@st.cache_data(max_entries=8, show_spinner=False)
def _chance(run_path: str, accuracy: float | None) -> str | None:
    """Near chance? Model 0's test accuracy (its first test set), else its own dev / train-pass accuracy."""
    run = Run(Path(run_path))
    if accuracy is None:
        return run_chance_warning(run)
    return run_chance_warning(run, accuracy, "test_0")


def _pct(value) -> str:
    return f"{value:.2%}" if isinstance(value, (int, float)) else "–"


def headline(s: dict) -> None:
    cols = st.columns(4)
    cols[0].metric("Training examples", f"{s['n_train']:,}")
    share = s["n_pruned"] / s["n_train"] if s["n_train"] else 0
    cols[1].metric(
        "Pruned", f"{s['n_pruned']:,}", help=f"{share:.1%} of the training set"
    )  # no delta: not a change
    cols[2].metric("Model 0 test accuracy", _pct(s.get("model0_test_accuracy")))
    acc1 = s.get("model1_test_accuracy")
    delta = None if acc1 is None else f"{acc1 - s['model0_test_accuracy']:+.2%}"
    cols[3].metric("Model 1 test accuracy", _pct(acc1), delta)
    st.caption(
        f"{s['folds']} folds · pruned: {escape_markdown(', '.join(s['categories']))} with model confidence > {s['threshold']:g}"
        + (f" · test set {escape_markdown(s['test_name'])}" if s.get("test_name") else "")
    )


def mismatches(results: dict, names: list[str], threshold: float) -> None:
    st.subheader("Out-of-fold mismatches")
    st.caption(
        "Every training example scored by the fold model that did not train on it. Rows: predicted "
        "label (P), columns: gold label (G); off the diagonal, cell PXGY counts that mismatch category. "
        "Model confidence = |logit(predicted) − logit(gold)|: higher = more likely a label error."
    )
    left, right = st.columns([2, 3])
    left.dataframe(pruning_analysis.named_matrix(results["matrix"], names), key="prune_matrix")
    fold_acc = results["summary"].get("fold_accuracy") or []
    if fold_acc:
        left.dataframe(
            pd.DataFrame(
                {"model": [f"Model F{i}" for i in range(len(fold_acc))], "held-out accuracy": fold_acc}
            ),
            hide_index=True,
            key="prune_fold_accuracy",
        )
    with right:
        options = consensus.all_categories(len(names))
        shown = st.multiselect(
            "Categories in the histogram",
            options,
            format_func=lambda c: consensus.category_label(c, names),
            **kept("prune_hist_categories", list(results["summary"]["categories"]), options=options),
        )
        fig = pruning_figures.confidence_histogram(results["oof"], names, threshold, categories=shown or None)
        st.plotly_chart(fig, key="prune_histogram", config={"displaylogo": False})


def threshold_tools(exp: Experiment, estore: ExperimentStore, results: dict, names: list[str]):
    """The sweep table and the what-if; returns the what-if's suspects (a WhatIf)."""
    s = results["summary"]
    st.subheader("Threshold")
    left, right = st.columns([3, 2])
    with left:
        st.caption("Examples above each threshold, per mismatch category; chosen = the categories pruned.")
        st.dataframe(results["sweep"], hide_index=True, key="prune_sweep")
    options = consensus.all_categories(len(names))
    top = float(max(6.0, results["oof"]["confidence"].max() if len(results["oof"]) else 0.0))
    with right:
        st.markdown("**What if?** Other settings, without retraining the folds")
        categories = st.multiselect(
            "Categories",
            options,
            format_func=lambda c: consensus.category_label(c, names),
            **kept(f"prune_whatif_categories_{exp.id}", list(s["categories"]), options=options),
        )
        threshold = st.slider(
            "Threshold",
            0.0,
            round(top + 0.5, 1),
            step=0.1,
            **kept(f"prune_whatif_threshold_{exp.id}", float(s["threshold"])),
        )
        if not categories:
            st.info("Choose at least one category.")
            return pruning_analysis.what_if(results["oof"], s["categories"], s["threshold"])
        chosen = pruning_analysis.what_if(results["oof"], categories, threshold)
        st.metric(
            "Would be pruned", f"{chosen.count:,}", f"{chosen.count - s['n_pruned']:+,} vs this experiment"
        )
        same = sorted(categories) == sorted(s["categories"]) and float(threshold) == float(s["threshold"])
        if write_button(
            "Train Model 1 with these settings",
            Action.EXPERIMENT,
            key="prune_whatif_start",
            disabled=same,
            help="A new experiment with the same folds: Model 0 and the fold models are reused, "
            "only Model 1 is trained.",
        ):
            params = pruning.params_of(exp).replace(categories=tuple(categories), threshold=float(threshold))
            try:
                started = pruning.start_pruning(params, estore, name=exp.spec.get("name", ""), by=acting_as())
            except CartomapError as err:
                show_error(err)
            else:
                ss[EXP_KEY] = started.id
                flash("success", f"Started experiment {started.id}: Model 1 with threshold {threshold:g}.")
                st.rerun()
    return chosen


def model_comparison(results: dict, names: list[str]) -> None:
    test, s = results.get("test"), results["summary"]
    if test is None:
        return
    st.subheader("Model 0 vs Model 1 on the test set")
    matrices = results["test_matrix"]
    cols = st.columns(2)
    for col, model in zip(cols, ("model0", "model1"), strict=True):
        part = matrices[matrices["model"] == model]
        if len(part):
            col.markdown(f"**{pruning.role_name(model)}** · accuracy {_pct(s.get(f'{model}_test_accuracy'))}")
            col.dataframe(pruning_analysis.named_matrix(part, names), key=f"prune_test_matrix_{model}")
    if "type" not in test.columns:
        st.caption("Model 1 was not trained in this experiment.")
        return
    scope = st.radio(
        "Mismatches",
        ["type_chosen", "type"],
        format_func={"type_chosen": "of the chosen categories (as the paper)", "type": "all"}.get,
        horizontal=True,
        **kept("prune_type_scope", "type_chosen", options=["type_chosen", "type"]),
    )
    counts = s["types_chosen" if scope == "type_chosen" else "types"]
    cols = st.columns(3)
    for col, (t, title) in zip(cols, consensus.TYPE_NAMES.items(), strict=True):
        col.metric(title, f"{counts.get(str(t), 0):,}")
    st.plotly_chart(
        pruning_figures.change_scatter(test, scope), key="prune_change", config={"displaylogo": False}
    )
    st.caption("x: Model 0's confidence in its mismatch (0 = correct); y: Model 1's minus Model 0's.")


def suspects(exp: Experiment, results: dict, names: list[str], chosen) -> None:
    st.subheader("Suspects")
    runs = get_store()
    model0 = exp.run(pruning_analysis.MODEL0, runs)
    examples = _examples(str(model0.path)) if model0 is not None else pd.DataFrame({"id": []})
    folds = pruning.fold_table_of(exp, runs, results["oof"]["id"].astype(str).tolist())
    options = [RULE, *pruning_analysis.detector_options(results["oof"], model0, folds)]
    by = st.selectbox(
        "Rank suspects by",
        options,
        format_func=lambda option: option if option == RULE else detectors.title(option),
        help="The consensus rule (the what-if settings above), or any registered detector "
        "(higher score = more likely a label error), listing as many suspects as the rule selects.",
        **kept("prune_rank_by", RULE, options=options),
    )
    table = pruning_analysis.suspects_table(results["oof"], examples, names, mask=chosen.mask)
    if by != RULE:
        table = pruning_analysis.ranked_suspects(
            by, results["oof"], model0, examples, names, max(1, len(table)), folds
        )
        st.caption(
            f"The {len(table):,} examples {detectors.title(by)} scores highest (as many as the rule selects). "
            "Select a row to find it on Model 0's data map."
        )
    else:
        st.caption(
            f"{len(table):,} suspects under the what-if settings, most confident first. "
            "Select a row to find it on Model 0's data map."
        )
    shown = table.head(SUSPECTS_MAX_ROWS)
    event = st.dataframe(
        shown,
        key="prune_suspects",
        on_select="rerun",
        selection_mode="single-row",
        hide_index=True,
        column_config={"confidence": st.column_config.NumberColumn(format="%.3f")},
    )
    rows = list(event.selection.rows) if event is not None else []
    focus = str(shown["id"].iloc[rows[0]]) if rows and rows[0] < len(shown) else None
    c1, c2 = st.columns(2)
    if model0 is None:
        return
    if c1.button("Show the selected suspect on the data map", key="prune_focus_one", disabled=focus is None):
        show_on_map(model0.id, [focus], focus)
    if c2.button(f"Show all {len(table):,} on the data map", key="prune_focus_all", disabled=table.empty):
        show_on_map(model0.id, table["id"].astype(str).tolist(), None)


RULE = "consensus rule"


def downloads(exp: Experiment) -> None:
    st.subheader("Export")
    runs = get_store()
    stem = f"cartomap-pruning-{exp.id}"
    cols = st.columns(2)
    cols[0].download_button(
        "Pruned training set (JSONL)",
        lambda: pruning.pruned_jsonl_bytes(exp, runs),
        f"{stem}-{pruning.PRUNED_FILE}",
        "application/jsonl",
        key="prune_dl_data",
        on_click="ignore",
    )
    cols[1].download_button(
        "Removed ids (text)",
        lambda: pruning.removed_ids_bytes(exp),
        f"{stem}-{pruning.REMOVED_FILE}",
        "text/plain",
        key="prune_dl_ids",
        on_click="ignore",
    )
    st.caption("With this experiment's settings (not the what-if).")


def show_results(exp: Experiment, estore: ExperimentStore) -> None:
    results = _results(str(exp.path), _stamp(exp))
    if results is None:
        st.warning("The experiment is done but its results cannot be read; run it again to rewrite them.")
        return
    s = results["summary"]
    names = list(s["label_names"])
    headline(s)
    model0 = exp.run(pruning_analysis.MODEL0, estore.runs)
    warning = _chance(str(model0.path), s.get("model0_test_accuracy")) if model0 is not None else None
    if warning:
        st.warning(f"Model 0: {escape_markdown(warning)}")
    mismatches(results, names, s["threshold"])
    chosen = threshold_tools(exp, estore, results, names)
    model_comparison(results, names)
    suspects(exp, results, names, chosen)
    downloads(exp)
