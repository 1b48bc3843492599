"""Artifacts page: annotation artifacts of a dataset (WaNLI §4): lexical correlations, partial-input
baselines and premise-hypothesis similarity per label.

Layout only: the statistics, baselines and figures are ``cartomap.analysis.artifacts`` and
``cartomap.training.similarity``; the transformer baseline is an ordinary training job
(``cartomap.training.launch.start_training``) and the similarity of a run's pairs a task job
(``cartomap similarity RUN``) that this page polls. Results are cached (``st.cache_data`` /
``st.cache_resource``, keyed by the data's file stamps), so reopening the page is instant.
Session state: ``af_*`` widget values (kept with ``pages.common.kept``) and ``_af_done`` (the
analyses asked for, so they are shown again without a click).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from cartomap.analysis import artifacts
from cartomap.config import DEMO_DESCRIPTION, DEMO_DEV, DEMO_TRAIN, DataConfig, RunConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.derived import balanced_sample
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.io import file_stamp
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.tasks import support
from cartomap.team.roles import Action
from cartomap.training.launch import start_training
from cartomap.training.similarity import TASK as SIMILARITY_TASK
from cartomap.training.similarity import (
    aligned_similarity,
    load_similarity,
    pair_similarity,
    similarity_by_label,
)
from pages.common import (
    acting_as,
    applies,
    current_run,
    escape_markdown,
    flash,
    get_store,
    kept,
    select_run,
    show_error,
    show_flashes,
    through_app,
    write_button,
)
from pages.components.forms import source_form
from pages.components.jobs import progress_bar, run_panel, start_task_button, task_panel

through_app()  # a first visit straight to this page's address: run it through app.py

SOURCES = {
    "run": "The selected run's training data",
    "demo": DEMO_DESCRIPTION,
    "path": "A file on this machine",
}
ALPHAS = (0.05, 0.01, 0.001)
TOP_WORDS = 50
INLINE_SIMILARITY_MAX = 5_000  # pairs encoded in the page process; a run's larger sets use a task job
DONE = "_af_done"


# --------------------------------------------------------------------------- cached loading


@st.cache_resource(max_entries=4, show_spinner="Loading the run's examples…")
def _run_data(run_path: str, stamp: tuple) -> tuple[TextDataset, TextDataset | None]:
    run = Run(Path(run_path))
    train = TextDataset(run.examples(), run.label_names, f"run {run.id}")
    dev_frame = run.dev_examples()
    dev = TextDataset(dev_frame, run.label_names, f"run {run.id} dev") if dev_frame is not None else None
    return train, dev


@st.cache_resource(max_entries=8, show_spinner="Reading the data…")
def _file_data(config_json: str, stamp: tuple, label_names: tuple | None = None) -> TextDataset:
    config = DataConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(config_json).items()}
    )
    return load_dataset(config, label_names=label_names)


@st.cache_data(max_entries=16, show_spinner="Counting words…")
def _lexical(key: str, field: str, balanced: bool, min_count: int, alpha: float, _data: TextDataset):
    data = balanced_sample(_data) if balanced else _data
    table = artifacts.lexical_correlations(
        data.frame[field].tolist(), data.labels, data.label_names, min_count=min_count, alpha=alpha
    )
    return table, len(data)


@st.cache_data(max_entries=8, show_spinner="Training the TF-IDF baselines…")
def _baselines(key: str, balanced: bool, _train: TextDataset, _test: TextDataset | None) -> pd.DataFrame:
    return artifacts.partial_input_baselines(_train, _test, seed=0, balanced=balanced)


@st.cache_resource(max_entries=8, show_spinner="Preparing the balanced sample…")
def _partial_config(key: str, which: str, base_json: str, cache_root: str, _data: TextDataset) -> RunConfig:
    return artifacts.hypothesis_only_config(
        RunConfig.from_dict(json.loads(base_json)), _data, cache_root, which
    )


@st.cache_data(max_entries=4, show_spinner="Encoding the sentences (all-MiniLM-L6-v2)…")
def _inline_similarity(key: str, _data: TextDataset) -> np.ndarray:
    first, second = _data.task_kind.inputs(_data.frame)
    return pair_similarity(first, second, device="auto")


@st.cache_resource(max_entries=4, show_spinner=False)
def _run_similarity(run_path: str, stamp: tuple) -> pd.DataFrame | None:
    return load_similarity(Run(Path(run_path)))


PLURAL = {"hypothesis": "hypotheses", "premise": "premises", "text": "texts"}


def _done(name: str) -> bool:
    return name in st.session_state.get(DONE, set())


def _mark_done(name: str) -> None:
    st.session_state.setdefault(DONE, set()).add(name)


# --------------------------------------------------------------------------- the dataset
def _config_json(config: DataConfig) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def pick_dataset():
    """The source widgets; returns (dataset, key, test set or None, base RunConfig, run or None)."""
    run = current_run()
    if run is not None and not applies(run, support.ARTIFACTS):
        run = None  # the demo or a file still can be analysed
    options = {k: words for k, words in SOURCES.items() if k != "run" or run is not None}
    picked = source_form(
        "af",
        "Data",
        options,
        next(iter(options)),
        DEMO_TRAIN,
        formats=True,
        horizontal=True,
        placeholder="/data/train.jsonl",
    )
    source = picked.kind
    if source == "run":
        stamp = run.stamp(run.examples_path, run.dev_examples_path)
        train, dev = _run_data(str(run.path), stamp)
        st.caption(f"Run {run.id}: {len(train):,} training examples" + (f", {len(dev):,} dev" if dev else ""))
        # the run's own copies of its dev and test sets: the original files may be elsewhere or gone
        return train, f"run:{run.path}:{stamp}", dev, run.own_config(), run
    if source == "demo":
        config = DataConfig(path=DEMO_TRAIN)
        train = _file_data(_config_json(config), ())
        dev = _file_data(_config_json(DataConfig(path=DEMO_DEV)), (), tuple(train.label_names))
        return train, "demo", dev, RunConfig(), None
    path, fmt = picked.path, picked.format
    c1, c2 = st.columns([3, 1])
    cols = c1.text_input(
        "Text columns", help="premise,hypothesis or one column", **kept("af_cols", "premise,hypothesis")
    )
    label = c2.text_input("Label column", **kept("af_label", "label")).strip() or "label"
    if not path:
        st.info("Enter the path of a labelled dataset.")
        st.stop()
    text_columns = tuple(c.strip() for c in cols.split(",") if c.strip())
    config = DataConfig(path=path, format=fmt, text_columns=text_columns, label_column=label)
    train = _file_data(_config_json(config), file_stamp(path))
    base = RunConfig(data=config, dev=None)
    return train, f"file:{_config_json(config)}:{file_stamp(path)}", None, base, None


# --------------------------------------------------------------------------- (a) lexical correlations
def lexical_section(data: TextDataset, key: str, balanced: bool) -> None:
    st.header("Lexical correlations")
    fields = (
        [artifacts.side_column(data.text_columns, w) for w in artifacts.WHICH]
        if data.is_pair
        else list(data.text_columns)
    )
    c1, c2, c3 = st.columns([2, 1, 1])
    field = c1.radio("Words of the", fields, horizontal=True, **kept("af_field", fields[0], options=fields))
    min_count = int(c2.number_input("Min. examples per word", 1, 100_000, **kept("af_min_count", 20)))
    alpha = c3.selectbox("α", ALPHAS, **kept("af_alpha", 0.01, options=ALPHAS))
    table, n_used = _lexical(key, field, balanced, min_count, float(alpha), data)
    if table.empty:
        st.info(f"No word occurs in {min_count} or more examples: lower the minimum.")
        return
    significant = table[table["significant"]]
    st.caption(
        f"Gardner et al. (2021): every word of the {PLURAL[field]} in at least {min_count} of the {n_used:,} examples"
        f"{' (label-balanced sample)' if balanced else ''}, against each label. Above the dashed line p(label | word) "
        f"is significantly above 1/{data.num_labels} (one-sided z-test, α = {alpha:g}, Bonferroni over "
        f"{len(table):,} tests): {len(significant):,} (word, label) pairs."
    )
    st.plotly_chart(
        artifacts.lexical_figure(table, float(alpha), label_names=data.label_names),
        key="af_lexical",
        width="stretch",
        config={"displaylogo": False},
    )
    shown = artifacts.top_words(table, TOP_WORDS, significant_only=not significant.empty)
    st.markdown(
        f"**{'Most significant' if not significant.empty else 'Highest z (none significant)'}** "
        f"· top {len(shown)}"
    )
    st.dataframe(
        shown,
        key="af_top_words",
        hide_index=True,
        height=min(420, 38 + 35 * len(shown)),
        column_config={
            "p_label": st.column_config.NumberColumn("p(label | word)", format="%.3f"),
            "z": st.column_config.NumberColumn(format="%.2f"),
            "p_value": st.column_config.NumberColumn("p value", format="%.2e"),
        },
    )


# --------------------------------------------------------------------------- (b) partial-input baselines
def baselines_section(data: TextDataset, key: str, test: TextDataset | None, balanced: bool) -> None:
    st.header("Partial-input baselines")
    held_out = f"the {test.source} set ({len(test):,})" if test is not None else "a stratified 20% held out"
    st.caption(
        "A classifier that sees only the hypothesis (or only the premise) should be at chance; accuracy above "
        "the majority baseline is label information in that part alone (Gururangan et al. 2018; WaNLI §4.1). "
        f"TF-IDF of word 1-2 grams + logistic regression, trained on a {'label-balanced sample' if balanced else 'the data'}, "
        f"tested on {escape_markdown(held_out)}."
    )
    name = f"baselines:{key}:{balanced}"
    if st.button("Compute the TF-IDF baselines", key="af_baselines", type="primary"):
        _mark_done(name)
    if _done(name):
        try:
            frame = _baselines(key, balanced, data, test)
        except CartomapError as err:
            show_error(err)
        else:
            st.dataframe(
                frame,
                key="af_baseline_table",
                hide_index=True,
                column_config={
                    c: st.column_config.NumberColumn(format="%.3f")
                    for c in ("accuracy", "macro_f1", "majority_accuracy", "chance")
                },
            )


def transformer_section(data: TextDataset, key: str, base: RunConfig) -> None:
    if not data.is_pair:
        return
    st.subheader("Transformer baseline")
    which = st.radio(
        "Input",
        artifacts.WHICH,
        horizontal=True,
        format_func=lambda w: f"{artifacts.side_column(data.text_columns, w)} only",
        **kept("af_which", artifacts.WHICH[0], options=list(artifacts.WHICH)),
    )
    store = get_store()
    try:
        config = _partial_config(
            key, which, json.dumps(base.to_dict(), sort_keys=True), str(store.root), data
        )
    except CartomapError as err:
        show_error(err)
        return
    dev = (
        "the held-out 20% of the sample"
        if base.dev is None
        else f"the dev set ({base.dev.name or base.dev.path})"
    )
    st.caption(
        f"Fine-tunes {base.model.name_or_path} on the {which} alone of a label-balanced sample "
        f"({base.train.epochs} epochs), evaluated on {escape_markdown(dev)}: an ordinary run, listed with the others."
    )
    run = artifacts.find_run(store, config)
    if run is None:
        if write_button(f"Train a {which}-only transformer", Action.TRAIN, key="af_train_partial"):
            try:
                started = start_training(config, store, by=acting_as())
            except CartomapError as err:
                show_error(err)
            else:
                flash("success", f"Started the {which}-only run {started.id}.")
                st.rerun()
        return
    run_panel(run)
    history = run.history() if run.state == State.DONE else []
    accuracy = history[-1].get("dev_accuracy") if history else None
    if accuracy is not None:
        st.metric(
            f"{which}-only dev accuracy",
            f"{accuracy:.3f}",
            delta=f"{accuracy - 1 / data.num_labels:+.3f} vs chance",
            delta_color="off",  # a difference from chance, not a change: no green/red arrow
            delta_arrow="off",
        )
    if st.button("Open this run", key="af_open_partial", help="Select it in the sidebar (Data map, ...)"):
        select_run(run.id)
        st.rerun()


# --------------------------------------------------------------------------- (c) similarity


def _similarity_task(run: Run) -> None:
    if not task_panel(run, SIMILARITY_TASK, "Similarity", progress_bar("Similarity", unit="pairs")):
        start_task_button(
            run,
            SIMILARITY_TASK,
            ["similarity", run.id, "--quiet"],
            "Compute the similarity",
            key="af_sim_start",
        )


def similarity_section(data: TextDataset, key: str, run: Run | None) -> None:
    st.header("Premise–hypothesis similarity")
    if not data.is_pair:
        st.info("Single texts: there is no premise and hypothesis to compare.")
        return
    st.caption(
        "Cosine similarity of the premise and hypothesis sentence embeddings (all-MiniLM-L6-v2, mean pooling: "
        "SBERT as in WaNLI §4.3), per gold label. Well-separated distributions = similarity alone predicts the label."
    )
    sim = None
    if run is not None:
        saved = _run_similarity(str(run.path), run.stamp(run.similarity_path))
        if saved is not None:
            sim = aligned_similarity(saved, data.frame["id"])
            if sim is None:
                st.warning("The saved similarity does not cover this run's examples: compute it again.")
        if sim is None:
            st.info(
                f"Encoding {len(data):,} pairs runs as a background job; the result is kept with the run."
            )
            _similarity_task(run)
            return
    else:
        if len(data) > INLINE_SIMILARITY_MAX:
            st.info(
                f"{len(data):,} pairs: train a run on this data and compute its similarity there (a background "
                "job), or use `cartomap artifacts` on the command line."
            )
            return
        name = f"similarity:{key}"
        if st.button(f"Compute the similarity of {len(data):,} pairs", key="af_sim_inline", type="primary"):
            _mark_done(name)
        if not _done(name):
            return
        sim = _inline_similarity(key, data)
    frame = pd.DataFrame({"label": data.labels, "similarity": sim})
    st.plotly_chart(
        artifacts.similarity_figure(frame, data.label_names),
        key="af_similarity",
        width="stretch",
        config={"displaylogo": False},
    )
    st.dataframe(
        similarity_by_label(sim, data.labels, data.label_names),
        key="af_similarity_table",
        hide_index=True,
        column_config={
            c: st.column_config.NumberColumn(format="%.3f")
            for c in ("mean", "std", "min", "q25", "median", "q75", "max")
        },
    )


# --------------------------------------------------------------------------- page
def main() -> None:
    st.title("Artifacts")
    show_flashes()
    try:
        data, key, test, base, run = pick_dataset()
    except CartomapError as err:
        show_error(err)
        st.stop()
    balanced = st.checkbox(
        "Label-balanced sample (as in WaNLI)",
        help="Lexical correlations test against 1/|labels| and the baselines train on equal classes: "
        "both assume balanced labels.",
        **kept("af_balanced", True),
    )
    lexical_section(data, key, balanced)
    st.divider()
    baselines_section(data, key, test, balanced)
    transformer_section(data, key, base)
    st.divider()
    similarity_section(data, key, run)


main()
