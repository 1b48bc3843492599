"""Prune labels page: find and prune suspected label errors with the k-fold consensus experiment
(the SNLI cleaning paper; METHODS.md section 3).

Layout only: the experiment, its analysis and its figures are ``cartomap.experiments.pruning``; it runs as a
background job (``cartomap.experiments.launch.start_experiment``) that this page polls. Session state:
``prune_exp_id`` (the experiment shown), ``prune_*`` form values kept with ``pages.common.kept``,
and for "find a suspect on the data map" the Data map page's own keys: ``run_id`` (via
``pages.common.show_on_map``), ``selected_ids`` and ``dm_focus``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.analysis import pruning_figures
from cartomap.analysis.evaluation import run_chance_warning
from cartomap.config import (
    DEMO_DESCRIPTION,
    DEMO_DEV,
    DEMO_TRAIN,
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainConfig,
)
from cartomap.data.forms import parse_names
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.experiments import forms, pruning, pruning_analysis, registry
from cartomap.experiments.store import Experiment, ExperimentStore
from cartomap.runs.progress import state_text
from cartomap.runs.state import State
from cartomap.runs.store import RUN_REF, Run
from cartomap.scores import consensus, detectors
from cartomap.team.roles import Action
from cartomap.training.forms import check_device, check_model
from pages.common import (
    acting_as,
    applies_per_example,
    current_run,
    escape_markdown,
    flash,
    get_store,
    kept,
    show_error,
    show_flashes,
    show_on_map,
    through_app,
    write_button,
)
from pages.components.forms import executor_form, model_form, source_form
from pages.components.jobs import experiment_panel

through_app()  # a first visit straight to this page's address: run it through app.py

EXP_KEY = "prune_exp_id"
SOURCES = {
    "run": "The selected run's training data",
    "demo": DEMO_DESCRIPTION,
    "path": "A file on this machine",
}
SUSPECTS_MAX_ROWS = 5_000
ss = st.session_state


def experiment_store() -> ExperimentStore:
    return ExperimentStore(get_store().root)


# --------------------------------------------------------------------------- picking an experiment
def _label(exp: Experiment) -> str:
    try:
        s = exp.summary()
    except (OSError, ValueError, KeyError):
        return f"{exp.id} · unreadable"
    head = f"{s['name']} ({s['id']})" if s.get("name") else s["id"]
    return f"{head} · {s['state']} · runs {s['runs']} · {s['created']}"


def pick_experiment(estore: ExperimentStore) -> Experiment | None:
    try:
        experiments = estore.list(pruning.KIND)
    except (OSError, ValueError):  # an experiment folder being written or deleted right now
        experiments = []
    if not experiments:
        st.caption("No pruning experiments yet: set one up under “New pruning experiment”.")
        return None
    ids = [e.id for e in experiments]
    labels = {e.id: _label(e) for e in experiments}
    choice = st.selectbox(
        "Experiment",
        ids,
        format_func=lambda i: labels.get(i, i),
        help="name (id) · state · runs done/planned · created",
        **kept(EXP_KEY, ids[0], options=ids),
    )
    return next(e for e in experiments if e.id == choice)


# --------------------------------------------------------------------------- progress
def _expected_runs(exp: Experiment) -> int:
    params = exp.params
    return int(params.get("folds", 0)) + 1 + int(bool(params.get("train_model1", True)))


def _progress_details(exp: Experiment, status: dict) -> None:
    runs = get_store()
    state = status["state"]
    done = int(status.get("runs_done") or 0)
    total = max(int(status.get("runs_planned") or 0), _expected_runs(exp))
    st.progress(
        min(1.0, done / total) if total else 0.0,
        text=f"{state_text(state, status.get('phase'))} · {done}/{total} runs done",
    )
    if state == State.RUNNING and status.get("role"):
        st.caption(
            escape_markdown(
                f"Training {registry.role_label(exp, status['role'])} (run {status.get('run_id')})."
            )
        )
    table = forms.runs_progress_table(exp, runs)
    if not table.empty:
        st.dataframe(table, hide_index=True, key="prune_runs_table")
    if exp.params.get("train_model1", True) and "model1" not in exp.run_ids():
        st.caption("Model 1 is planned once every fold is done: it trains on the set without the suspects.")


# --------------------------------------------------------------------------- results
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
        f"{s['folds']} folds · pruned: {', '.join(s['categories'])} with model confidence > {s['threshold']:g}"
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
    options = [RULE, *detector_options(results["oof"], model0, folds)]
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
        table = ranked_by(by, results["oof"], model0, examples, names, max(1, len(table)), folds)
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


def _inputs(oof: pd.DataFrame, model0, folds: pd.DataFrame | None = None) -> detectors.DetectorInputs:
    """Detector inputs in the OOF frame's order: its out-of-fold logits, Model 0's metrics and the fold
    models' in-sample table (``folds``, in the same order)."""
    metrics = None
    if model0 is not None and model0.has_metrics():
        m = model0.metrics().assign(id=lambda f: f["id"].astype(str)).drop_duplicates("id").set_index("id")
        ids = oof["id"].astype(str)
        if set(ids) <= set(m.index):
            metrics = m.loc[ids.tolist()].reset_index()
    return detectors.DetectorInputs(
        labels=oof["gold"].to_numpy(),
        oof_logits=pruning_analysis.logits_of(oof),
        metrics=metrics,
        folds=folds,
    )


def detector_options(oof: pd.DataFrame, model0, folds: pd.DataFrame | None = None) -> list[str]:
    return detectors.available(_inputs(oof, model0, folds))


def ranked_by(
    name: str,
    oof: pd.DataFrame,
    model0,
    examples: pd.DataFrame,
    names: list[str],
    n: int,
    folds: pd.DataFrame | None = None,
):
    """The ``n`` examples detector ``name`` scores highest, as the suspects table plus a score column."""
    import numpy as np

    score = detectors.score(name, _inputs(oof, model0, folds))
    top = np.argsort(-score, kind="stable")[:n]
    mask = np.zeros(len(oof), dtype=bool)
    mask[top] = True
    table = pruning_analysis.suspects_table(oof, examples, names, mask=mask)
    by_id = dict(zip(oof["id"].astype(str), score, strict=True))
    table.insert(len(table.columns), "score", [by_id[i] for i in table["id"].astype(str)])
    return table.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)


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


# --------------------------------------------------------------------------- a new experiment
@st.cache_data(max_entries=16, show_spinner="Reading the training data…")
def _label_names(config_json: str) -> list[str]:
    return list(load_dataset(DataConfig(**json.loads(config_json))).label_names)


def _config_json(config: DataConfig) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def run_defaults(run: Run | None, source: str) -> tuple[str, str, str]:
    """(key suffix, test set, dev set) the form proposes: for the selected run's data its own test set
    (else its dev set) and, next to a test set, its own dev set; else the demo dev set as test."""
    if source != "run" or run is None:
        return "", DEMO_DEV, ""
    sets = run.data_sets()
    tests = [w for w in sets if w.startswith("test_")]
    if tests:
        return (
            f"_{run.id}",
            f"{RUN_REF}{run.id}:{tests[0]}",
            f"{RUN_REF}{run.id}:dev" if "dev" in sets else "",
        )
    if "dev" in sets:
        return f"_{run.id}", f"{RUN_REF}{run.id}:dev", ""
    return f"_{run.id}", DEMO_DEV, ""


def data_set(text: str, like: DataConfig) -> DataConfig:
    """A test or dev set typed in the form: ``run:RUN[:SET]`` is a run's own copy, anything else a path read
    with the training set's column mapping."""
    if text.startswith(RUN_REF):
        return get_store().data_ref(text)
    return dataclasses.replace(like, path=text, format="auto", split=None, name="")


def training_data() -> tuple[DataConfig | None, str]:
    """The training set chosen, and where it comes from (a key of SOURCES)."""
    run = current_run()
    if run is not None and not applies_per_example(run, "Pruning the selected run's training set"):
        run = None  # the demo or a file still can be pruned
    sources = {k: words for k, words in SOURCES.items() if k != "run" or run is not None}
    picked = source_form(
        "prune",
        "Training set",
        sources,
        next(iter(sources)),
        DEMO_TRAIN,
        formats=True,
        horizontal=True,
        placeholder="/data/train.jsonl",
    )
    source = picked.kind
    if source == "run":
        try:
            data = run.data_config()
        except CartomapError as err:
            show_error(err)
            return None, source
        st.caption(escape_markdown(f"Run {run.id}: its own copy of {run.config.data.path}"))
        return data, source
    if source == "demo":
        return DataConfig(path=picked.path), source
    names = st.text_input(
        "Label names (optional)",
        placeholder="entailment, neutral, contradiction",
        **kept("prune_label_names", ""),
    )
    if not picked.path:
        return None, source
    try:
        return DataConfig(path=picked.path, format=picked.format, label_names=parse_names(names)), source
    except CartomapError as err:
        show_error(err)
        return None, source


def new_experiment(estore: ExperimentStore) -> None:
    data, source = training_data()
    label_names: list[str] = []
    if data is not None:
        try:
            label_names = _label_names(_config_json(data))
        except CartomapError as err:
            show_error(err)
    suffix, test_default, dev_default = run_defaults(current_run(), source)
    c1, c2 = st.columns(2)
    test_path = c1.text_input(
        "Test set (required)",
        help="A path, read with the training set's column mapping, or run:RUN:test_0 / run:RUN:dev for a "
        "run's own copy of its test or dev set. Model 0 and Model 1 are compared on it.",
        **kept(f"prune_test{suffix}", test_default),
    ).strip()
    dev_path = c2.text_input(
        "Dev set (optional)",
        help="Model 0 and Model 1 are evaluated at their best dev epoch; without one, at the last epoch. "
        "A path or run:RUN:dev.",
        **kept(f"prune_dev{suffix}", dev_default),
    ).strip()
    if suffix:
        st.caption("run:RUN:SET is the selected run's own copy of that set (test_0, dev), as it was trained.")

    # the NLI shorthand P1G0 where the classes are in the NLI order; else the categories by name
    options = consensus.all_categories(len(label_names)) if label_names else ["P1G0"]
    default = [
        c for c in options if consensus.category_label(c, label_names).startswith("P:neutral G:entailment")
    ]
    c1, c2, c3, c4 = st.columns([1, 1, 4, 2])
    folds = c1.number_input("Folds", 2, 50, step=1, **kept("prune_folds", 10))
    fold_seed = c2.number_input("Fold seed", 0, 2**31 - 1, step=1, **kept("prune_fold_seed", 0))
    categories = c3.multiselect(
        "Categories to prune",
        options,
        format_func=lambda c: consensus.category_label(c, label_names),
        help="P:X G:Y: the model predicts class X, the gold label is Y. The paper prunes predicted neutral, "
        "gold entailment (P1G0 in the NLI class order).",
        **kept("prune_categories", default or options[:1], options=options),
    )
    threshold = c4.number_input(
        "Threshold",
        0.0,
        100.0,
        step=0.5,
        help="Prune model confidence above this (paper: 2.0; 4.0 stricter)",
        **kept("prune_threshold", 2.0),
    )
    values = model_form("prune", default_epochs=3, seed=True)  # paper: 3 epochs
    c1, c2 = st.columns([3, 2])
    name = c1.text_input("Experiment name (optional)", **kept("prune_name", ""))
    with c2:
        model1 = st.checkbox("Train Model 1 on the pruned set", **kept("prune_model1", True))
    where = executor_form("prune")
    if write_button(
        "Start the experiment", Action.EXPERIMENT, type="primary", key="prune_start", disabled=data is None
    ):
        try:
            if not test_path:
                raise CartomapError("give a test set: Model 0 and Model 1 are compared on it")
            named = [
                consensus.category_name(*consensus.parse_category(c), label_names)
                for c in categories
                if label_names
            ]
            base = RunConfig(
                data=data,
                dev=data_set(dev_path, data) if dev_path else None,
                model=ModelConfig(check_model(values["model"]), int(values["max_length"])),
                train=TrainConfig(
                    epochs=int(values["epochs"]),
                    batch_size=int(values["batch_size"]),
                    learning_rate=float(values["learning_rate"]),
                    seed=int(values["seed"]),
                    device=check_device(values["device"]),
                    save_checkpoints=False,
                ),
                tests=(data_set(test_path, data),),
            )
            params = pruning.PruningParams(
                base=base,
                folds=int(folds),
                fold_seed=int(fold_seed),
                # by label: the shorthand means what it says only in the NLI class order
                categories=tuple(categories if tuple(label_names) in ((), consensus.NLI_ORDER) else named),
                threshold=float(threshold),
                train_model1=bool(model1),
            )
            executor = forms.build_executor_config(**where)
            with st.spinner("Checking the data…"):
                exp = pruning.start_pruning(
                    params, estore, name=name.strip(), executor=executor, by=acting_as()
                )
        except CartomapError as err:
            show_error(err)
        else:
            ss[EXP_KEY] = exp.id
            state = exp.state
            if state == State.DONE:
                flash("info", f"This experiment exists (done): showing {exp.id}.")
            else:
                flash(
                    "success",
                    f"Started experiment {exp.id}: it runs in the background; leaving this page does not stop it.",
                )
            st.rerun()


# --------------------------------------------------------------------------- page
def main() -> None:
    st.title("Prune labels")
    st.caption(
        "Find suspected label errors by k-fold consensus: each training example is scored by a model "
        "that did not train on it; confident mismatches of the chosen categories are pruned and Model 1 "
        "is retrained without them (the SNLI cleaning paper)."
    )
    show_flashes()
    estore = experiment_store()
    exp = pick_experiment(estore)
    if exp is not None:
        try:
            status = exp.status()
        except (OSError, ValueError):
            status = {"state": State.UNKNOWN}
        if status["state"] == State.DONE:
            show_results(exp, estore)
        else:
            experiment_panel(exp, _progress_details, key="prune_")
    with st.expander("New pruning experiment", expanded=exp is None):
        new_experiment(estore)


main()
