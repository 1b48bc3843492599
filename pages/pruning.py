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

import streamlit as st

from cartomap.config import (
    DEMO_DESCRIPTION,
    DEMO_DEV,
    DEMO_TRAIN,
    DataConfig,
)
from cartomap.data.forms import parse_names
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.experiments import forms, pruning, registry
from cartomap.experiments.store import Experiment, ExperimentStore
from cartomap.runs.progress import state_text
from cartomap.runs.state import State
from cartomap.runs.store import RUN_REF, Run
from cartomap.scores import consensus
from cartomap.tasks import support
from cartomap.team.roles import Action
from pages.common import (
    acting_as,
    applies,
    current_run,
    escape_markdown,
    flash,
    get_experiments,
    get_store,
    kept,
    show_error,
    show_flashes,
    through_app,
    write_button,
)
from pages.components import token_folds
from pages.components.forms import executor_form, model_form, source_form
from pages.components.jobs import experiment_panel
from pages.components.pruning_results import EXP_KEY, show_results

through_app()  # a first visit straight to this page's address: run it through app.py

SOURCES = {
    "run": "The selected run's training data",
    "demo": DEMO_DESCRIPTION,
    "path": "A file on this machine",
}
ss = st.session_state


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
    if run is not None and not applies(run, support.PRUNING):
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


def _evaluation_sets(suffix: str, test_default: str, dev_default: str) -> tuple[str, str]:
    """(test set, dev set) paths of the form: the test set Model 0 and Model 1 are compared on (required),
    the dev set that picks their epoch (optional); ``suffix`` keys them to the selected run."""
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
    return test_path, dev_path


def _pruning_choices(label_names: list[str]) -> tuple[int, int, list[str], float]:
    """(folds, fold seed, categories to prune, threshold) of the form; the categories by label, the
    paper's (predicted neutral, gold entailment) the default."""
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
    return folds, fold_seed, categories, threshold


def new_experiment(estore: ExperimentStore) -> None:
    data, source = training_data()
    label_names: list[str] = []
    if data is not None:
        try:
            label_names = _label_names(_config_json(data))
        except CartomapError as err:
            show_error(err)
    suffix, test_default, dev_default = run_defaults(current_run(), source)
    test_path, dev_path = _evaluation_sets(suffix, test_default, dev_default)

    folds, fold_seed, categories, threshold = _pruning_choices(label_names)
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
            base = forms.model_form_config(
                values,
                train=data,
                dev=data_set(dev_path, data) if dev_path else None,
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
    estore = get_experiments()
    run = current_run()
    if run is not None and run.task_kind.unit.sentences:  # a token run: its k folds of sentences
        token_folds.token_section(run, estore)
        st.divider()
    applies(run, support.OUT_OF_FOLD)  # says so for a kind with neither (a multi-label run)
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
