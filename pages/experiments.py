"""Experiments page: training-order curricula (RoNLI, METHODS.md section 4), dataset combinations
(WaNLI Table 3) and the retrain after a review of suspected label errors, each a grid of runs trained by
one background job.

Layout only: parameters are built and checked by ``cartomap.experiments.forms``, experiments are
``cartomap.experiments.curriculum`` kinds started with ``cartomap.experiments.launch.start_experiment``
(one job process that trains the runs, one after another or through Ray or SLURM), and their results are read from the experiment
folder. A running experiment is polled with ``st.fragment(run_every=...)``.
Session state: ``xp_*`` (curricula), ``xc_*`` (combinations) and ``xr_*`` (retrain after review) widget
values, kept with ``pages.common.kept``; ``xp_selected`` / ``xc_selected`` / ``xr_selected`` hold the
experiment shown.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import streamlit as st

from cartomap.config import DEMO_DESCRIPTION, DEMO_DEV, DEMO_TRAIN, OrderConfig, RunConfig, TrainConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.forms import parse_names
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.experiments import forms, registry
from cartomap.experiments.combination import create_combination
from cartomap.experiments.correction import KIND as CORRECTION
from cartomap.experiments.correction import create_correction
from cartomap.experiments.curriculum import create_curriculum
from cartomap.experiments.store import Experiment
from cartomap.io import file_stamp
from cartomap.runs.store import RUN_REF
from cartomap.scores import ambiguity
from cartomap.tasks import support
from cartomap.team.roles import Action
from cartomap.training.curricula import CURRICULA, DIFFICULTIES
from cartomap.training.similarity import load_similarity
from pages.common import (
    applies,
    current_run,
    escape_markdown,
    for_display,
    get_store,
    kept,
    show_error,
    show_flashes,
    through_app,
    write_button,
)
from pages.components.experiment_grid import (
    combination_results,
    curriculum_results,
    experiment_table,
    report_download,
    show_experiment,
    start,
)
from pages.components.forms import columns_form, executor_form, model_form, source_form

through_app()  # a first visit straight to this page's address: run it through app.py

TRAIN_SOURCES = {
    "demo": DEMO_DESCRIPTION,
    "path": "A file on this machine",
    "upload": "Upload",
}
DEV_SOURCES = {"demo": "Bundled demo dev set (400 NLI pairs)", "path": "A file on this machine"}
COMBO_DEV_SOURCES = {"none": "None (last epoch)", **DEV_SOURCES}
DIFFICULTY_LABELS = {
    "paper": "paper: 1 - c + v if c > 0.5 else 3 - c - v",
    "code": "public code: (1 - correct epochs) + (1 - v if v < 0.5 else v)",
}
DEFAULT_TRAIN = TrainConfig()
ss = st.session_state
store = get_store()


# --------------------------------------------------------------------------- cached loading


@st.cache_resource(max_entries=4, show_spinner="Reading the training set…")
def _training_set(config_json: str, stamp: tuple) -> TextDataset:
    return load_dataset(RunConfig.from_dict({"data": json.loads(config_json)}).data)


@st.cache_data(max_entries=4, show_spinner="Counting tokens…")
def _lengths(key: str, model: str, max_length: int, _examples: pd.DataFrame):
    return forms.token_lengths(_examples, model, max_length)


# --------------------------------------------------------------------------- shared form parts


def _run_sources(choices: dict, run, what: str) -> dict:
    """``choices`` with "the selected run's ..." first, when a run is selected and holds that set."""
    return {"run": f"The selected run's {what}", **choices} if run is not None else choices


def _test_sets_form(prefix: str, run=None) -> str:
    """The test sets; with the selected run's data its own test sets are proposed (NAME = run:ID:test_k)."""
    key, default = f"{prefix}_tests", ""
    if run is not None:
        names = run.test_names
        key = f"{prefix}_tests_{run.id}"
        default = "\n".join(f"{name} = {RUN_REF}{run.id}:test_{k}" for k, name in enumerate(names))
    return st.text_area(
        "Test sets (one per line: PATH or NAME = PATH)",
        placeholder="snli/test = /data/snli/test.jsonl.gz\nhans = /data/hans.jsonl\ndemo:dev",
        help="Every run is evaluated on all of them after every epoch; NAME labels the results. The "
        "bundled demo dev set is demo:dev; run:RUN:test_0 is a run's own copy of its first test set.",
        **kept(key, default),
    )


def _configs(mapping: dict, train_path: str, dev_path: str | None, tests_text: str):
    """(training set, validation set or None, test sets) as DataConfigs; raises DataError."""
    names = parse_names(mapping["label_names"])
    common = {k: mapping[k] for k in ("text_columns", "label_column", "id_column", "format")}

    def config(path: str, name: str = ""):
        if path.startswith(RUN_REF):  # a run's own copy: its columns and classes are known
            own = store.data_ref(path)
            return dataclasses.replace(own, name=name or own.name)
        return forms.data_config(path, label_names=names, name=name, **common)

    if not train_path:
        raise CartomapError("no training set: pick the demo, enter a path or upload a file")
    train = config(train_path)
    dev = None if dev_path in (None, "none") else config(dev_path)
    tests = tuple(config(path, name) for name, path in forms.parse_test_sets(tests_text))
    return train, dev, tests


# --------------------------------------------------------------------------- tab 1: curricula
def _stage_preview(
    train, values: dict, methods: list[str], difficulty: str, seed: int, score: str = ambiguity.VARIABILITY
) -> None:
    """Plan.stage_table of a chosen order, from a finished baseline run's data map on this training set."""
    if not st.checkbox("Preview the stages of an order", **kept("xp_preview", False)):
        return
    options = list(forms.ORDER_DESCRIPTIONS)
    default = next((m for m in methods if m in CURRICULA), methods[0] if methods else "cart-stra++")
    order_name = st.selectbox("Order", options, **kept("xp_preview_order", default, options=options))
    try:
        dataset = _training_set(json.dumps(dataclasses.asdict(train)), file_stamp(train.path))
    except CartomapError as err:
        show_error(err)
        return
    baseline = forms.find_baseline(store, dataset.fingerprint())
    if baseline is None:
        st.info(
            "No finished run with a data map on this training set yet: the preview uses one. The experiment "
            "trains one first (its 'datamap' run), or train one on the Train page."
        )
        return
    order = OrderConfig(name=order_name, difficulty=difficulty, ambiguity=score)
    examples = dataset.frame[["id", "label", *dataset.text_columns]]
    lengths = similarity = None
    try:
        if order_name == "length":
            lengths = _lengths(dataset.fingerprint(), values["model"], int(values["max_length"]), examples)
        if order_name == "sts":
            similarity = load_similarity(baseline)
            if similarity is None:
                st.info(
                    f"STS-CL needs premise-hypothesis similarities: compute them for run {baseline.id} on the "
                    "Artifacts page (or `cartomap similarity RUN`)."
                )
                return
        table = forms.plan_preview(
            order,
            examples,
            batch_size=int(values["batch_size"]),
            epochs=int(values["epochs"]),
            seed=seed,
            label_names=dataset.label_names,
            metrics=baseline.metrics(),
            lengths=lengths,
            similarity=similarity,
        )
    except CartomapError as err:
        show_error(err)
        return
    st.caption(
        f"{order_name}: {forms.ORDER_DESCRIPTIONS[order_name]}. Data map of run {baseline.id}; seed {seed}. "
        "pool_size counts oversampled repeats; the class columns count the pool."
    )
    st.dataframe(table, hide_index=True, key="xp_preview_table")


def _curriculum_sources() -> tuple[str, str, str]:
    """(training set, dev set, test sets) of a curriculum experiment as the forms give them: the
    selected run's own sets when its data can be ordered, else the demo (or a file)."""
    run = current_run()
    if run is not None and not applies(run, support.CURRICULUM):
        run = None  # the selected run's data cannot be ordered: the demo or a file instead
    train_path = source_form(
        "xp_train",
        "Training set",
        _run_sources(TRAIN_SOURCES, run, "training data"),
        "run" if run is not None else "demo",
        DEMO_TRAIN,
        upload=True,
        run_ref=f"{RUN_REF}{run.id}" if run is not None else "",
    ).path
    from_run = run is not None and train_path.startswith(RUN_REF)
    with_dev = from_run and "dev" in run.data_sets()
    dev_path = source_form(
        "xp_dev",
        "Validation set",
        _run_sources(DEV_SOURCES, run if with_dev else None, "dev set"),
        "run" if with_dev else "demo",
        DEMO_DEV,
        run_ref=f"{RUN_REF}{run.id}:dev" if with_dev else "",
    ).path
    tests_text = _test_sets_form("xp", run if from_run else None)
    return train_path, dev_path, tests_text


def _curriculum_choices() -> tuple[list[str], str, str, tuple[str, str] | None, str, int]:
    """(methods, seeds text, Cart-CL++ difficulty, the Mann-Whitney pair or None, ambiguity score,
    data-map baseline epochs (0: as the training)) of the curriculum form."""
    methods = st.multiselect(
        "Methods (training orders)",
        list(forms.ORDER_DESCRIPTIONS),
        format_func=lambda m: f"{m}: {forms.ORDER_DESCRIPTIONS[m]}",
        **kept("xp_methods", list(forms.DEFAULT_METHODS), options=list(forms.ORDER_DESCRIPTIONS)),
    )
    c1, c2, c3, c4 = st.columns([2, 3, 2, 2])
    seeds_text = c1.text_input("Seeds", help="e.g. 0-4 or 0, 1, 7", **kept("xp_seeds", forms.DEFAULT_SEEDS))
    difficulty = c2.selectbox(
        "Cart-CL++ difficulty",
        DIFFICULTIES,
        format_func=DIFFICULTY_LABELS.get,
        **kept("xp_difficulty", "paper", options=DIFFICULTIES),
    )
    compare = None
    if len(methods) >= 2:
        a = c3.selectbox(
            "Mann-Whitney: method A", methods, **kept("xp_compare_a", methods[0], options=methods)
        )
        b = c4.selectbox("… against B", methods, **kept("xp_compare_b", methods[-1], options=methods))
        compare = (a, b)
    scores = list(ambiguity.MAP_SCORES)
    score = st.selectbox(
        "Ambiguity score of the cartography orders",
        scores,
        format_func=lambda name: ambiguity.get(name).label,
        help="where the papers rank by variability (the A group, Cart-CL++'s v): variability, the papers' "
        "and the default, or another ambiguity score of the data map (docs/stability.md)",
        **kept("xp_ambiguity", ambiguity.VARIABILITY, options=scores),
    )
    datamap_epochs = st.number_input(
        "Data-map baseline epochs (0 = as above)",
        0,
        200,
        step=1,
        help="the cartography orders read the data map of a baseline run; a map needs at least 2 epochs",
        **kept("xp_datamap_epochs", 0),
    )
    return methods, seeds_text, difficulty, compare, score, datamap_epochs


def curricula_tab() -> None:
    st.subheader("New curriculum experiment")
    st.caption(
        "Every method trains once per seed for the same number of steps (RoNLI's fair comparison); an extra "
        "baseline run records the data map that the cartography orders sort by."
    )
    train_path, dev_path, tests_text = _curriculum_sources()
    mapping = columns_form("xp")
    values = model_form("xp")
    methods, seeds_text, difficulty, compare, score, datamap_epochs = _curriculum_choices()
    name = st.text_input("Experiment name (optional)", **kept("xp_name", ""))
    where = executor_form("xp")
    try:
        seeds = forms.parse_seeds(seeds_text)
        train, dev, tests = _configs(mapping, train_path, dev_path, tests_text)
    except CartomapError as err:
        seeds, train = (0,), None
        form_error = err
    else:
        form_error = None
    if train is not None:
        with st.expander("Stage preview", expanded=bool(ss.get("xp_preview"))):
            _stage_preview(train, values, methods, difficulty, seeds[0], score)
    if write_button("Start curriculum experiment", Action.EXPERIMENT, type="primary", key="xp_start"):
        if form_error is not None:
            show_error(form_error)
        else:
            try:
                params = forms.build_curriculum_params(
                    train=train,
                    dev=dev,
                    tests=tests,
                    methods=methods,
                    seeds=seeds,
                    difficulty=difficulty,
                    compare=compare,
                    datamap_epochs=int(datamap_epochs) or None,
                    ambiguity=score,
                    **values,
                )
                with st.spinner("Checking the data…"):
                    forms.check_data(params.base)
            except CartomapError as err:
                show_error(err)
            else:
                start(create_curriculum, params, name, "xp_selected", where)
    st.subheader("Curriculum experiments")
    exp = experiment_table("curriculum", "xp_selected")
    if exp is not None:
        show_experiment(exp, curriculum_results)


# --------------------------------------------------------------------------- tab 2: combinations
def combinations_tab() -> None:
    st.subheader("New dataset combination experiment")
    st.caption(
        "Training sets A, A + B (B added) and A ◇ B (as many random examples of A replaced by B), every run "
        "evaluated on all test sets: the WaNLI paper's Table 3."
    )
    c1, c2 = st.columns([3, 1])
    a_path = c1.text_input(
        "Dataset A path", placeholder="/data/mnli/train.jsonl.gz or demo:train", **kept("xc_a", "")
    ).strip()
    a_name = c2.text_input("Name of A", **kept("xc_a_name", "A"))
    c1, c2 = st.columns([3, 1])
    b_path = c1.text_input(
        "Dataset B path", placeholder="/data/wanli/train.jsonl.gz", **kept("xc_b", "")
    ).strip()
    b_name = c2.text_input("Name of B", **kept("xc_b_name", "B"))
    modes = st.multiselect(
        "Training sets",
        list(forms.MODES),
        format_func=forms.MODE_DESCRIPTIONS.get,
        **kept("xc_modes", list(forms.MODES), options=list(forms.MODES)),
    )
    dev_path = source_form("xc_dev", "Validation set", COMBO_DEV_SOURCES, "none", DEMO_DEV).path
    tests_text = _test_sets_form("xc")
    mapping = columns_form("xc")
    values = model_form("xc")
    c1, c2 = st.columns([1, 3])
    seeds_text = c1.text_input("Seeds", help="e.g. 0 or 0-2", **kept("xc_seeds", "0"))
    name = c2.text_input("Experiment name (optional)", **kept("xc_name", ""))
    where = executor_form("xc")
    if write_button("Start combination experiment", Action.EXPERIMENT, type="primary", key="xc_start"):
        try:
            if not a_path:
                raise CartomapError("no dataset A: enter its path (demo:train for the bundled demo)")
            seeds = forms.parse_seeds(seeds_text)
            a, dev, tests = _configs(mapping, a_path, dev_path, tests_text)
            names = parse_names(mapping["label_names"])
            common = {k: mapping[k] for k in ("text_columns", "label_column", "id_column", "format")}
            b = forms.data_config(b_path, label_names=names, **common) if b_path else None
            params = forms.build_combination_params(
                a=dataclasses.replace(a, name=a_name.strip()),
                b=b,
                modes=modes,
                tests=tests,
                seeds=seeds,
                cache=str(store.root),
                a_name=a_name,
                b_name=b_name,
                dev=dev,
                **values,
            )
            with st.spinner("Checking the data…"):
                forms.check_data(params.base, [b] if b is not None else [])
        except CartomapError as err:
            show_error(err)
        else:
            start(create_combination, params, name, "xc_selected", where)
    st.subheader("Combination experiments")
    exp = experiment_table("combination", "xc_selected")
    if exp is not None:
        show_experiment(exp, combination_results)


# --------------------------------------------------------------------------- tab 3: retrain after review
DECISION_SOURCES = {"upload": "Upload", "path": "A file on this machine"}


def _correction_results(exp: Experiment) -> None:
    sections = registry.sections(exp)
    if not sections:
        st.warning("This experiment has no results folder (finished by an older version?).")
        return
    for k, section in enumerate(sections):
        st.markdown(f"**{escape_markdown(section.title)}**")  # the title holds no dataset text
        st.dataframe(for_display(section.table), hide_index=True, key=f"xr_section_{k}_{exp.id}")
    report_download(exp)


def corrections_tab() -> None:
    st.subheader("Retrain after review")
    st.caption(
        "The selected run's training set trained again three ways with the same seeds: as it was, pruned "
        "of every queued example (what blind pruning would do), and corrected by the review's decisions "
        "(relabel applied, remove dropped, keep / unsure / unreviewed unchanged); all evaluated on the run's "
        "own dev and test sets. The run's own seed reuses the run itself."
    )
    run = current_run()
    if run is None:
        st.info("Select a finished run (sidebar) to retrain it after a review.")
    elif applies(run, support.CORRECTION):
        st.markdown(f"Base run: `{run.id}` {escape_markdown(run.config.name or '')}")
        path = source_form(
            "xr",
            "Decisions file (.parquet, .jsonl or .csv)",
            DECISION_SOURCES,
            "upload",
            upload=True,
            path_label="Decisions file path",
            upload_label="Decisions file",
            placeholder="/data/review/fix.decisions.parquet",
            path_help=None,
        ).path
        c1, c2, c3 = st.columns([1, 2, 2])
        n_seeds = c1.number_input(
            "Seeds in all",
            1,
            forms.MAX_SEEDS,
            step=1,
            help="the run's own, then own + 1, ...",
            **kept("xr_n", 3),
        )
        extra = c2.text_input(
            "Or these seeds besides the run's own",
            placeholder="e.g. 1, 2",
            help="when given, replaces 'Seeds in all'",
            **kept("xr_seeds", ""),
        )
        name = c3.text_input("Experiment name (optional)", **kept("xr_name", ""))
        where = executor_form("xr")
        if write_button("Start the retrain", Action.EXPERIMENT, type="primary", key="xr_start"):
            try:
                if not path:
                    raise CartomapError("no decisions file: upload one or enter its path")
                seeds = forms.parse_seeds(extra) if extra.strip() else None
            except CartomapError as err:
                show_error(err)
            else:

                def create(_params, experiments, name=""):
                    return create_correction(
                        experiments, run, path, n_seeds=int(n_seeds), seeds=seeds, name=name
                    )

                with st.spinner("Checking the decisions…"):
                    start(create, None, name, "xr_selected", where)
    st.subheader("Retrain experiments")
    exp = experiment_table(CORRECTION, "xr_selected")
    if exp is not None:
        show_experiment(exp, _correction_results)


# --------------------------------------------------------------------------- page
st.title("Curricula & combinations")
show_flashes()
tab_curricula, tab_combinations, tab_corrections = st.tabs(
    ["Curricula", "Dataset combinations (Table 3)", "Retrain after review"]
)
with tab_curricula:
    curricula_tab()
with tab_combinations:
    combinations_tab()
with tab_corrections:
    corrections_tab()
