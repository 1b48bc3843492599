"""What the Data map page reads through Streamlit's caches, besides the map frames (``maps``).

Each reader takes a run and asks the cache by the run's path and a stamp of the files it reads (their
mtimes), so a rewritten file is read again; the cached functions themselves take plain values only.
``st.cache_resource`` for what is large and read-only (the embeddings), ``st.cache_data`` for the rest.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from cartomap.analysis import datamap, overlays, summary
from cartomap.analysis.evaluation import run_chance_warning
from cartomap.errors import CartomapError
from cartomap.experiments.seeds import seed_siblings
from cartomap.experiments.truth import truth_of
from cartomap.runs import tags as run_tags
from cartomap.runs.store import Run, RunStore
from cartomap.wanli.batches import filtered_path, load_filtered
from pages.common import get_store


@st.cache_data(ttl=30, max_entries=32, show_spinner=False)
def _siblings_of(run_path: str, root: str, folders: tuple[str, ...]) -> dict[int, str]:
    return {seed: r.id for seed, r in seed_siblings(Run(Path(run_path)), RunStore(root)).items()}


def sibling_ids(run, runs) -> dict[int, str]:
    """{seed: run id} of the runs that are ``run`` but for their seed: the store's configs are read once
    per change of its run folders (30 s at most), not on every rerun of the page."""
    folders = tuple(sorted(p.name for p in runs.dir.iterdir())) if runs.dir.is_dir() else ()
    return _siblings_of(str(run.path), str(runs.root), folders)


@st.cache_resource(max_entries=2, show_spinner="Loading the embeddings…")
def _embeddings(run_path: str, stamp: tuple):
    from cartomap.training.embeddings import load_embeddings

    return load_embeddings(Run(Path(run_path)))


def embeddings(run):
    """The run's embeddings (``cartomap embed RUN`` or the Neighbours page), read once per server and
    change of the embedding files."""
    return _embeddings(str(run.path), run.stamp(run.embeddings_path, run.embedding_ids_path))


@st.cache_data(max_entries=32, show_spinner=False)
def _neighbour_ids(run_path: str, stamp: tuple, focus: str, k: int) -> dict[str, list[str]]:
    run = Run(Path(run_path))
    return overlays.focus_neighbour_ids(run, focus, k=k, embeddings=_embeddings(run_path, stamp))


def neighbour_ids(run, focus: str, k: int) -> dict[str, list[str]]:
    """:func:`cartomap.analysis.overlays.focus_neighbour_ids` of ``focus``: its ``k`` nearest of any label
    and of its own label, by the run's embeddings."""
    stamp = run.stamp(run.embeddings_path, run.embedding_ids_path)
    return _neighbour_ids(str(run.path), stamp, focus, k)


@st.cache_data(max_entries=16, show_spinner=False)
def _tags(run_path: str, stamp: tuple):
    return run_tags.tags_of(Run(Path(run_path)))


def tags(run):
    """The run's tags (:func:`cartomap.runs.tags.tags_of`: id, tag, tagged_by, tagged_at), read again
    whenever they change."""
    return _tags(str(run.path), run_tags.stamp(run))


@st.cache_data(max_entries=8, show_spinner=False)
def _generated(run_path: str, batch: str, stamp: tuple):
    frame = load_filtered(Run(Path(run_path)), batch)
    if frame is None:
        return None, {}
    overlay = overlays.generated_overlay(frame, str(filtered_path(Run(Path(run_path)), batch)))
    return overlay, dict(overlay.attrs)


def generated(run, batch: str):
    """(overlay, its attrs) of a filtered WaNLI ``batch`` of ``run``
    (:func:`cartomap.analysis.overlays.generated_overlay`), (None, {}) when the batch has no filtered
    pairs; read again when the filter writes them again."""
    return _generated(str(run.path), batch, run.stamp(filtered_path(run, batch)))


@st.cache_data(max_entries=8, show_spinner=False)
def _dev_confusion(run_path: str, stamp: tuple):
    return summary.dev_confusion(Run(Path(run_path)))


def dev_confusion(run, dev_epochs: list[int]):
    """The dev set's confusion matrix at its last recorded epoch of ``dev_epochs``
    (:func:`cartomap.analysis.summary.dev_confusion`), None without a dev recording."""
    stamp = run.stamp(*(run.epoch_path("dev", e) for e in dev_epochs[-1:]))
    return _dev_confusion(str(run.path), stamp) if dev_epochs else None


@st.cache_data(max_entries=4, show_spinner="Computing the truth report…")
def _truth(run_path: str, cache: str, stamp: tuple, n_boot: int) -> dict:
    return truth_of(Run(Path(run_path)), cache, n_boot=n_boot)


def truth_report(run, n_boot: int) -> dict:
    """The truth report of a run with votes (:func:`cartomap.experiments.truth.truth_of`, as
    ``cartomap truth RUN``), computed again when its metrics are."""
    return _truth(str(run.path), str(get_store().root), run.stamp(run.metrics_path()), int(n_boot))


@st.cache_data(max_entries=16, show_spinner=False)
def _chance(run_path: str, stamp: tuple) -> str | None:
    return run_chance_warning(Run(Path(run_path)))


def chance_warning(run) -> str | None:
    """Near chance? The run's dev accuracy, else its final train-pass accuracy
    (:func:`cartomap.analysis.evaluation.run_chance_warning`), read again when its history changes."""
    return _chance(str(run.path), run.stamp(run.history_path))


@st.cache_data(max_entries=16, show_spinner="Reading the run's ambiguity scores…")
def _axes(run_path: str, stamp: tuple) -> tuple[str, ...]:
    run = Run(Path(run_path))
    try:  # metrics written before a score existed are computed again from the dynamics here, once
        return datamap.axes_in(run.metrics(columns=("id", *datamap.AXIS_COLUMNS)))
    except CartomapError:
        return ("variability",)


def axes(run) -> tuple[str, ...]:
    """The ambiguity axes the run's metrics have (:func:`cartomap.analysis.datamap.axes_in`)."""
    return _axes(str(run.path), run.stamp(run.metrics_path()))
