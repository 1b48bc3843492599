"""The forms every configuring page shares: a dataset's source, its columns, the model and training,
and where an experiment's runs train.

Every value is kept in ``st.session_state`` under ``<prefix>_<field>`` (see ``pages.common.kept``),
so two forms on one page differ by their prefix and nothing typed is lost on a rerun.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import streamlit as st

from cartomap.config import ExecutorConfig, ModelConfig, TrainConfig
from cartomap.data.forms import FORMAT_CHOICES
from cartomap.data.uploads import MAX_UPLOAD_MB, UPLOAD_TYPES, save_upload
from cartomap.errors import CartomapError
from cartomap.executors import registry
from cartomap.team.roles import Action
from cartomap.training.forms import DEVICES
from pages.common import (
    escape_markdown,
    get_store,
    kept,
    refused,
    show_error,
)

DEFAULT_TRAIN = TrainConfig()
ss = st.session_state


def columns_form(prefix: str) -> dict:
    """Column mapping and class order of the files (the demo sets keep their own)."""
    with st.expander("Columns and classes of the files"):
        c1, c2, c3, c4 = st.columns([3, 2, 2, 1])
        text = c1.text_input(
            "Text columns",
            help="premise,hypothesis or one column",
            **kept(f"{prefix}_text", "premise, hypothesis"),
        )
        label = c2.text_input("Label column", **kept(f"{prefix}_label", "label")).strip()
        ident = c3.text_input("Id column (blank: generate)", **kept(f"{prefix}_id", "id")).strip()
        fmt = c4.selectbox(
            "Format", FORMAT_CHOICES, **kept(f"{prefix}_format", "auto", options=FORMAT_CHOICES)
        )
    names = st.text_input(
        "Label names (optional)",
        placeholder="entailment, neutral, contradiction",
        help="Class order, comma-separated: needed for integer labels, and fixes the order of the "
        "per-class tables. String labels are found by themselves.",
        **kept(f"{prefix}_label_names", ""),
    )
    return {
        "text_columns": tuple(c.strip() for c in text.split(",") if c.strip()),
        "label_column": label,
        "id_column": ident,
        "format": fmt,
        "label_names": names,
    }


def model_form(prefix: str, default_epochs: int = DEFAULT_TRAIN.epochs, *, seed: bool = False) -> dict:
    """Model, device, epochs, batch size, learning rate and max tokens (and the seed when ``seed``),
    as keyword arguments of :func:`cartomap.training.forms.build_run_config` and the experiment forms."""
    c1, c2 = st.columns([3, 1])
    model = c1.text_input(
        "Model",
        help="'default' = the bundled all-MiniLM-L6-v2 encoder; or a local checkpoint folder, "
        "or a Hugging Face hub id (needs the network).",
        **kept(f"{prefix}_model", ModelConfig().name_or_path),
    )
    device = c2.selectbox("Device", DEVICES, **kept(f"{prefix}_device", "auto", options=DEVICES))
    columns = st.columns(5 if seed else 4)
    c1, c2, c3, c4 = columns[:4]
    values = {
        "model": model,
        "device": device,
        "epochs": c1.number_input("Epochs", 1, 200, step=1, **kept(f"{prefix}_epochs", default_epochs)),
        "batch_size": c2.number_input(
            "Batch size", 1, 4096, step=8, **kept(f"{prefix}_batch_size", DEFAULT_TRAIN.batch_size)
        ),
        "learning_rate": c3.number_input(
            "Learning rate",
            1e-7,
            1.0,
            step=1e-5,
            format="%.1e",
            **kept(f"{prefix}_lr", DEFAULT_TRAIN.learning_rate),
        ),
        "max_length": c4.number_input(
            "Max tokens", 8, 4096, step=16, **kept(f"{prefix}_max_length", ModelConfig().max_length)
        ),
    }
    if seed:
        values["seed"] = columns[4].number_input(
            "Seed", 0, 2**31 - 1, step=1, **kept(f"{prefix}_seed", DEFAULT_TRAIN.seed)
        )
    return values


def upload_field(prefix: str, label: str = "Training file") -> str:
    """An uploaded file saved under the run store (content-addressed, size-limited); its path or ''.

    The original file name is kept in ``st.session_state[f"{prefix}_upload_name"]``. In team mode only
    whoever may train uploads (the file is written into the run store)."""
    why = refused(Action.TRAIN)
    if why is not None:
        st.caption(f":material/lock: {escape_markdown(why)}")
        return ""
    size_limit = (
        {"max_upload_size": MAX_UPLOAD_MB}
        if "max_upload_size" in inspect.signature(st.file_uploader).parameters
        else {}
    )
    uploaded = st.file_uploader(
        f"{label} (up to {MAX_UPLOAD_MB} MB)",
        type=list(UPLOAD_TYPES),
        key=f"{prefix}_upload",
        **size_limit,
    )
    if uploaded is None:  # none yet, or the user removed it
        for key in (f"{prefix}_upload_path", f"{prefix}_upload_name", f"_{prefix}_upload_id"):
            ss.pop(key, None)
    elif ss.get(f"_{prefix}_upload_id") != uploaded.file_id:
        try:
            saved = save_upload(uploaded.getvalue(), uploaded.name, get_store().root)
        except CartomapError as err:
            show_error(err)
        else:
            ss[f"{prefix}_upload_path"] = str(saved.resolve())
            ss[f"{prefix}_upload_name"] = uploaded.name
            ss[f"_{prefix}_upload_id"] = uploaded.file_id
    return ss.get(f"{prefix}_upload_path", "")


@dataclass(frozen=True)
class Source:
    """What :func:`source_form` gives back: ``kind`` the choice (``demo``, ``path``, ``upload``, ``run``,
    ``none``); ``path`` the dataset's path ('' while none is given yet, ``none`` for no set, the run
    reference for ``run``); ``format`` and ``split`` as typed (``auto`` and '' where the form does not
    ask for them)."""

    kind: str
    path: str
    format: str = "auto"
    split: str = ""


#: What a dataset path field takes, in the forms' words (:func:`cartomap.data.loading.load_dataset`).
PATH_HELP = (
    "JSON Lines (plain or .gz), CSV, TSV, Parquet, a saved Hugging Face dataset folder, hf:NAME for a hub "
    "dataset, or demo:train / demo:dev."
)
PATH_PLACEHOLDER = "/data/file.jsonl (JSON Lines, CSV, TSV, Parquet, saved HF dataset), or demo:dev"


def source_form(
    prefix: str,
    label: str,
    choices: dict,
    default: str,
    demo_path: str = "",
    upload: bool = False,
    run_ref: str = "",
    *,
    formats: bool = False,
    split: bool = False,
    horizontal: bool = False,
    on_change=None,
    key: str | None = None,
    path_label: str | None = None,
    split_label: str = "Split",
    upload_label: str = "Training file",
    placeholder: str = PATH_PLACEHOLDER,
    path_help: str | None = PATH_HELP,
) -> Source:
    """The one picker of where a dataset comes from, on every page that picks one: ``choices`` (choice ->
    words, in the order shown) among the bundled demo (``demo``: ``demo_path``), a path on this machine
    (``path``, with its format when ``formats`` and its Hugging Face split when ``split``), an upload
    (``upload``, offered when ``upload``), no set (``none``) or the selected run's own copy (``run``:
    ``run_ref``, e.g. ``run:ID:dev``).

    Kept in ``st.session_state`` (:func:`pages.common.kept`): the choice under ``<prefix>_source`` (or
    ``key``), the path under ``<prefix>_path``, the format and split under ``<prefix>_format`` and
    ``<prefix>_split``, an upload under ``<prefix>_upload*`` (:func:`upload_field`). ``horizontal``: the
    choices in a row above the fields, else beside them; ``on_change`` runs when the choice changes. The
    path field is labelled ``path_label`` ("Path" in a row, else "<label> path")."""
    options = list(choices)
    radio = dict(
        format_func=choices.get,
        **kept(key or f"{prefix}_source", default, options=options, on_change=on_change),
    )
    extra = [1] * (int(formats) + int(split))
    if horizontal:
        kind = st.radio(label, options, horizontal=True, **radio)
        cells = None
    else:
        c1, *cells = st.columns([2, 3, *extra])
        kind = c1.radio(label, options, **radio)
    if kind == "demo":
        return Source(kind, demo_path)
    if kind == "none":
        return Source(kind, "none")
    if kind == "run":
        if run_ref:
            (cells[0] if cells else st).caption(f"{run_ref}: the selected run's own copy, as it was trained")
        return Source(kind, run_ref)
    if kind == "upload" and upload:
        if cells:
            with cells[0]:
                return Source(kind, upload_field(prefix, upload_label))
        return Source(kind, upload_field(prefix, upload_label))
    if cells is None:
        cells = st.columns([4, *extra])
    field, *rest = cells
    path = field.text_input(
        path_label or ("Path" if horizontal else f"{label} path"),
        placeholder=placeholder,
        help=path_help,
        **kept(f"{prefix}_path", ""),
    ).strip()
    fmt = "auto"
    if formats:
        fmt = rest.pop(0).selectbox(
            "Format", FORMAT_CHOICES, **kept(f"{prefix}_format", "auto", options=FORMAT_CHOICES)
        )
    hf_split = ""
    if split:
        hf_split = rest.pop(0).text_input(
            split_label, help="For a Hugging Face DatasetDict", **kept(f"{prefix}_split", "")
        )
    return Source(kind, path, fmt, hf_split.strip())


def _option_rows(options: tuple[registry.ExecutorOption, ...]) -> list[list[registry.ExecutorOption]]:
    """The settings laid out in rows: two to a row, a wide one alone."""
    rows: list[list[registry.ExecutorOption]] = []
    for option in options:
        if option.wide or not rows or len(rows[-1]) == 2 or rows[-1][0].wide:
            rows.append([option])
        else:
            rows[-1].append(option)
    return rows


def _option_field(place, prefix: str, option: registry.ExecutorOption):
    """One executor setting's widget in ``place`` (the page or a column), kept under ``<prefix>_<key>``."""
    value = kept(f"{prefix}_{option.key}", option.default)
    if option.type is int:
        return place.number_input(
            option.label, option.low, option.high, step=option.step, help=option.help, **value
        )
    if option.type is bool:
        return place.checkbox(option.label, help=option.help, **value)
    return place.text_input(option.label, placeholder=option.placeholder, help=option.help, **value)


def executor_form(prefix: str) -> dict:
    """Where an experiment's runs train: every registered executor (:mod:`cartomap.executors.registry`)
    by its name and description, and the settings the chosen one declares, as keyword arguments of
    :func:`cartomap.experiments.forms.build_executor_config` (checked when the experiment starts)."""
    with st.expander("Where the runs train"):
        labels = registry.descriptions()
        kind = st.radio(
            "Executor",
            list(labels),
            format_func=lambda name: f"{name}: {labels[name]}",
            **kept(f"{prefix}_executor", ExecutorConfig().kind, options=list(labels)),
        )
        entry = registry.entry(kind)
        values: dict = {"kind": kind}
        for row in _option_rows(entry.options):
            places = [st] if row[0].wide else st.columns(2)
            for place, option in zip(places, row, strict=False):
                values[option.name] = _option_field(place, prefix, option)
        if entry.note:
            st.caption(entry.note)
    return values
