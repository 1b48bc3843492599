"""Train page: choose data, map its columns, set the training options and start a run as a
background job, or map an existing model's checkpoints on that data; follow, cancel, resume and
delete runs.

Layout only: reading, validating and training are the library's (cartomap.training.forms,
cartomap.data.uploads, cartomap.runs.jobs). Every form value lives in st.session_state (see
pages.common.kept), so nothing typed is lost on a rerun or a page switch.
"""

from __future__ import annotations

import time

import streamlit as st

from cartomap.config import (
    DEMO_DESCRIPTION,
    DEMO_DEV,
    DEMO_TRAIN,
    RECORD_LABELS,
    RECORDING_MODES,
    TrainConfig,
)
from cartomap.data.forms import guess_columns, preview_table
from cartomap.errors import CartomapError
from cartomap.integrations.checkpoints import DEFAULT_BATCH_SIZE, start_scoring
from cartomap.io import file_stamp
from cartomap.runs.state import State
from cartomap.team.roles import Action
from cartomap.training.forms import build_run_config
from cartomap.training.launch import start_training
from pages.common import (
    acting_as,
    current_run,
    escape_markdown,
    flash,
    for_display,
    get_store,
    kept,
    select_run,
    show_error,
    show_flashes,
    through_app,
    write_button,
)
from pages.components.forms import model_form, source_form
from pages.components.jobs import run_panel

through_app()  # a first visit straight to this page's address: run it through app.py

SOURCES = {
    "demo": DEMO_DESCRIPTION,
    "path": "A file or folder on this machine",
    "upload": "Upload a file",
}
DEV_CHOICES = {
    "none": "No dev set",
    "demo": "Bundled demo dev set (400 NLI pairs)",
    "path": "A file on this machine",
}
DEFAULT_TRAIN = TrainConfig()
ss = st.session_state
store = get_store()


# --------------------------------------------------------------------------- callbacks
def _source_changed() -> None:
    """The demo goes with its dev set; other data starts without one."""
    if ss["train_source"] == "demo":
        ss["train_dev"] = "demo"
    elif ss.get("train_dev") == "demo":
        ss["train_dev"] = "none"


@st.cache_data(max_entries=16, show_spinner="Reading the data…")
def _preview(path: str, fmt: str, split: str, stamp: tuple):
    return preview_table(path, fmt, split or None)


# --------------------------------------------------------------------------- page
st.title("Train")
show_flashes()

# ----- the selected run
run = current_run()
with st.container(border=True):
    if run is None:
        st.caption("No runs yet. Set up a run below and press Start.")
    else:
        st.markdown(f"**Selected run** `{run.id}`")
        run_panel(run)
        try:
            warnings, config = run.warnings, run.info.get("config", {})
        except CartomapError as err:  # a damaged run
            show_error(err)
            warnings, config = [], {}
        for warning in warnings:
            st.warning(escape_markdown(f"Data warning: {warning}"))
        with st.expander("Configuration"):
            st.json(config, expanded=2)

# ----- 1. data
st.header("New run")
st.subheader("1 · Training data")
picked = source_form(
    "train",
    "Data",
    SOURCES,
    "demo",
    DEMO_TRAIN,
    upload=True,
    formats=True,
    split=True,
    horizontal=True,
    on_change=_source_changed,
    upload_label="Data file",
    placeholder="/data/train.jsonl, a folder saved with datasets' save_to_disk, or demo:dev",
)
source, data_path, fmt, split = picked.kind, picked.path, picked.format, picked.split
if source == "upload" and data_path:
    st.text(f"Using {ss.get('train_upload_name', '')} (saved as {data_path})")

columns: list[str] | None = None
if data_path:
    try:
        head, n_rows = _preview(data_path, fmt, split, file_stamp(data_path))
    except CartomapError as err:
        show_error(err)
    else:
        columns = [str(c) for c in head.columns]
        st.caption(f"First rows of {n_rows:,} (as read, before the column mapping):")
        st.dataframe(head, hide_index=True)

# ----- 2. columns
st.subheader("2 · Columns")
if columns:
    guess = guess_columns(columns, head)
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    text_columns = c1.multiselect(
        "Text columns",
        columns,
        max_selections=2,
        help="Two for a pair (premise, hypothesis), one for single texts.",
        **kept("train_text_columns", guess["text_columns"], options=columns, max_selections=2),
    )
    label_column = c2.selectbox(
        "Label", columns, **kept("train_label_column", guess["label_column"], options=columns)
    )
    id_options = ["", *columns]
    id_column = c3.selectbox(
        "Id",
        id_options,
        format_func=lambda c: c or "(generate from content)",
        **kept("train_id_column", guess["id_column"], options=id_options),
    )
    genre_column = c4.selectbox(
        "Genre (optional)",
        id_options,
        format_func=lambda c: c or "(none)",
        **kept("train_genre_column", guess["genre_column"] or "", options=id_options),
    )
else:
    st.caption("No preview: type the column names.")
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    typed = c1.text_input(
        "Text columns (comma-separated)", **kept("train_text_columns_typed", "premise, hypothesis")
    )
    text_columns = [c.strip() for c in typed.split(",") if c.strip()]
    label_column = c2.text_input("Label", **kept("train_label_typed", "label")).strip()
    id_column = c3.text_input("Id (blank: generate)", **kept("train_id_typed", "id")).strip()
    genre_column = c4.text_input("Genre (optional)", **kept("train_genre_typed", "genre")).strip()
label_names = st.text_input(
    "Label names (optional)",
    placeholder="entailment, neutral, contradiction",
    help="Class order, comma-separated. Needed for integer labels; string labels are found by themselves.",
    **kept("train_label_names", ""),
)

# ----- 3. dev set
st.subheader("3 · Dev set")
picked_dev = source_form(
    "train_dev",
    "Evaluated after every epoch",
    DEV_CHOICES,
    "demo" if source == "demo" else "none",
    DEMO_DEV,
    split=True,
    key="train_dev",
    path_label="Dev set path",
    split_label="Dev split",
    placeholder="/data/dev.jsonl",
    path_help="Read with the training data's format and columns.",
)
dev = picked_dev.kind
dev_path, dev_split = (picked_dev.path, picked_dev.split) if dev == "path" else ("", "")

# ----- 4. model and training
st.subheader("4 · Model and training")
values = model_form("train", seed=True)
name = st.text_input(
    "Run name (optional)", help="A label, not part of the run's identity", **kept("train_name", "")
)
c1, c2 = st.columns(2)
c1, c2, c3 = st.columns(3)
record = c1.selectbox(
    "Record dynamics from",
    RECORDING_MODES,
    format_func=RECORD_LABELS.get,
    help="The logits of the training forward pass (as Cartography), of an eval-mode pass "
    "after each epoch (as WaNLI), or both",
    **kept("train_record", DEFAULT_TRAIN.record, options=RECORDING_MODES),
)
with c2:
    st.write("")
    save_checkpoints = st.checkbox(
        "Save end-of-epoch checkpoints", **kept("train_checkpoints", DEFAULT_TRAIN.save_checkpoints)
    )
with st.expander("Advanced"):
    c2, c3, c4, c5 = st.columns(4)
    warmup = c2.number_input(
        "Warmup ratio", 0.0, 1.0, step=0.05, **kept("train_warmup", DEFAULT_TRAIN.warmup_ratio)
    )
    decay = c3.number_input(
        "Weight decay", 0.0, 1.0, step=0.01, **kept("train_decay", DEFAULT_TRAIN.weight_decay)
    )
    patience = c4.number_input(
        "Early-stopping patience",
        0,
        100,
        step=1,
        help="Epochs without a better dev accuracy before stopping; 0 = off",
        **kept("train_patience", DEFAULT_TRAIN.early_stopping_patience),
    )
    precision = c5.selectbox(
        "Precision",
        ("auto", "fp32", "bf16", "fp16"),
        **kept("train_precision", DEFAULT_TRAIN.precision, options=("auto", "fp32", "bf16", "fp16")),
    )
    group_by_length = st.checkbox(
        "Batch examples of similar length (less padding)",
        **kept("train_group_by_length", DEFAULT_TRAIN.group_by_length),
    )

if write_button("Start training", Action.TRAIN, type="primary", key="train_start"):
    if not (name or "").strip() and source == "upload":
        name = ss.get("train_upload_name", "")
    try:
        config = build_run_config(
            data_path=data_path,
            format=fmt,
            split=split,
            text_columns=text_columns,
            label_column=label_column,
            id_column=id_column,
            genre_column=genre_column,
            label_names=label_names,
            dev=dev,
            dev_path=dev_path,
            dev_split=dev_split,
            **values,
            record=record,
            save_checkpoints=save_checkpoints,
            name=name,
            warmup_ratio=warmup,
            weight_decay=decay,
            early_stopping_patience=patience,
            precision=precision,
            group_by_length=group_by_length,
        )
        clicked = time.time()
        with st.spinner("Checking the data…"):
            started = start_training(config, store, by=acting_as())
    except CartomapError as err:
        show_error(err)
    else:
        state = started.state
        done = len(started.history()) if started.created_at() < clicked else 0
        if started.created_at() < clicked and state == State.QUEUED:  # train or load: the earlier run resumes
            flash(
                "info",
                f"This configuration was started before (a run's name and device are not part of it): it is "
                f"run {started.id}, which continues"
                + (f" after its epoch {done}" if done else " from the beginning")
                + " in the background, not a new run.",
            )
        elif state == State.DONE:
            flash(
                "info",
                f"This configuration was trained on this data before: selected run {started.id} (done).",
            )
        elif state == State.RUNNING:
            flash("info", f"Run {started.id} is already training: following it.")
        else:
            flash(
                "success",
                f"Started run {started.id}: training runs in the background; leaving this page does not stop it.",
            )
        select_run(started.id)  # its data warnings, if any, show above while it is selected
        st.rerun()

# ----- an existing model's checkpoints
st.header("Map an existing model's checkpoints")
st.caption(
    "A fine-tuning that already happened: each saved checkpoint scores every example of the training "
    "data chosen in 1 and 2 in eval mode, and its logits are one epoch of the run. Give a Trainer "
    "output_dir (its checkpoint-<step> folders are taken in step order), or one checkpoint folder or hub "
    "id per line, in epoch order."
)
checkpoint_text = st.text_area(
    "Checkpoints",
    placeholder="/path/to/output_dir\n(or one checkpoint folder or hub id per line, in epoch order)",
    **kept("score_paths", ""),
)
c1, c2, c3, c4 = st.columns([1, 1, 2, 2])
score_batch = c1.number_input("Batch size", 1, 4096, step=8, **kept("score_batch", DEFAULT_BATCH_SIZE))
score_length = c2.number_input("Max tokens", 8, 4096, step=8, **kept("score_max_length", 128))
score_tokenizer = c3.text_input(
    "Tokenizer (optional)",
    help="A folder or hub id, when the checkpoints hold no tokenizer (default: theirs, or the output_dir's)",
    **kept("score_tokenizer", ""),
)
score_name = c4.text_input("Run name (optional)", **kept("score_name", ""))
if write_button("Score checkpoints", Action.TRAIN, key="score_start"):
    try:
        data = build_run_config(
            data_path=data_path,
            format=fmt,
            split=split,
            text_columns=text_columns,
            label_column=label_column,
            id_column=id_column,
            genre_column=genre_column,
            label_names=label_names,
        ).data
        with st.spinner("Checking the checkpoints and the data…"):
            started = start_scoring(
                [line.strip() for line in checkpoint_text.splitlines() if line.strip()],
                data,
                store,
                batch_size=int(score_batch),
                max_length=int(score_length),
                tokenizer=score_tokenizer.strip(),
                device=values["device"],
                name=score_name.strip(),
                by=acting_as(),
            )
    except CartomapError as err:
        show_error(err)
    else:
        if started.state == State.DONE:
            flash(
                "info",
                f"These checkpoints were scored on this data before: selected run {started.id} (done).",
            )
        else:
            flash(
                "success",
                f"Started run {started.id}: the checkpoints are scored in the background; leaving this page "
                "does not stop it.",
            )
        select_run(started.id)
        st.rerun()

# ----- all runs
st.header("All runs")
table = store.table()
if table.empty:
    st.caption(escape_markdown(f"No runs in {store.runs_dir}."))
else:
    st.dataframe(for_display(table), hide_index=True)
    with st.expander("Delete a run"):
        ids = table["id"].tolist()
        labels = dict(
            zip(ids, (f"{n} ({i})" if n else i for i, n in zip(ids, table["name"], strict=True)), strict=True)
        )
        default = run.id if run is not None and run.id in ids else ids[0]
        victim = st.selectbox(
            "Run", ids, format_func=labels.get, **kept("train_delete_choice", default, options=ids)
        )
        if ss.get("train_confirm_delete") != victim:
            if write_button("Delete…", Action.MANAGE, key="train_delete"):
                ss["train_confirm_delete"] = victim
                st.rerun()
        else:
            st.warning(
                f"Delete run {victim} and all its files (dynamics, metrics, weights, groups)? This cannot be undone."
            )
            c1, c2, _ = st.columns([1, 1, 4])
            if write_button(
                "Yes, delete it", Action.MANAGE, where=c1, type="primary", key="train_delete_yes"
            ):
                ss.pop("train_confirm_delete", None)
                try:
                    store.delete(victim)
                except CartomapError as err:
                    show_error(err)
                else:
                    if ss.get("run_id") == victim:
                        select_run(None)
                    flash("success", f"Deleted run {victim}.")
                    st.rerun()
            if c2.button("Keep it", key="train_delete_no"):
                ss.pop("train_confirm_delete", None)
                st.rerun()
