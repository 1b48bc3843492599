"""A run's map frame (a multi-label run's: one per view), loaded once per dashboard server and shared by every
page that draws a data map.

``st.cache_resource`` hands every session and page the same frame (treat it as read-only): on a
550k-example run it is a few hundred MB, which ``st.cache_data`` would pickle and copy on every read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from cartomap.analysis import datamap, seed_maps
from cartomap.runs.store import Run
from cartomap.scores.metrics import RegionRule


@st.cache_resource(max_entries=2, show_spinner="Reading the recorded dynamics…")
def _dynamics(run_path: str, source: str, stamp: tuple) -> tuple[pd.Index, np.ndarray, np.ndarray]:
    # stamp: mtimes of every epoch file and the examples, so a new recording is read again
    run = Run(Path(run_path))
    ids, logits = run.dynamics(source)
    ids = pd.Index(np.asarray(ids, dtype=object))  # looked up by the selection's paths
    labels = run.unit_labels(source)[1]  # a token run's: one per word
    logits.setflags(write=False)  # shared by every session: read-only
    labels.setflags(write=False)
    return ids, logits, labels


def dynamics_stamp(run: Run, source: str) -> tuple:
    """The cache key of ``source``'s dynamics: the mtimes of its epoch files and of the examples."""
    epochs = run.dynamics_epochs(source)
    return (len(epochs), *run.stamp(*(run.epoch_path(source, e) for e in epochs), run.examples_path))


def dynamics(run: Run, source: str) -> tuple[pd.Index, np.ndarray, np.ndarray]:
    """(ids as an index, logits [E, N, C], labels) of the recorded ``source`` of ``run``, read once per server and
    recording (every epoch file at 550k examples takes seconds): a page slices them for the map after
    k recordings and the selection's paths instead of reading again. Treat the arrays as read-only."""
    return _dynamics(str(run.path), source, dynamics_stamp(run, source))


@st.cache_resource(max_entries=6, show_spinner="Loading the data map…")
def _frame(run_path: str, stamp: tuple, rule_json: str, burn_out: int | None) -> pd.DataFrame:
    # stamp: mtimes, so a rewritten run is reloaded; one frame per (run, rule, k): moving the epoch
    # slider back and forth draws from here
    rule = RegionRule.from_dict(json.loads(rule_json))
    run = Run(Path(run_path))
    if burn_out is None:
        return datamap.map_frame(run, regions=rule)
    source = run.recorded_source()
    whole = map_frame(run, rule)  # cached: its texts serve every k (not read again for each)
    shared = units_at(run, burn_out, rule) if run.task_kind.unit.sentences else None
    return datamap.map_frame(
        run,
        regions=rule,
        burn_out=burn_out,
        dynamics=dynamics(run, source),
        examples=whole,
        metrics_at=shared,
    )


@st.cache_resource(max_entries=2, show_spinner="Computing the map after k recordings…")
def _units_at(run_path: str, stamp: tuple, k: int, rule_json: str) -> pd.DataFrame:
    from cartomap.analysis import epochs

    run = Run(Path(run_path))
    rule = RegionRule.from_dict(json.loads(rule_json))
    return epochs.run_map_at(run, k, dynamics=dynamics(run, run.recorded_source()), regions=rule)


def units_at(run: Run, k: int, rule: RegionRule | None = None) -> pd.DataFrame:
    """The metrics of ``run``'s recorded units (a token run's words) over its first ``k`` recordings
    (:func:`cartomap.analysis.epochs.run_map_at`, regions by ``rule``), computed once per run, k and rule:
    the word-level map after k recordings and the sentence-level one are both made from them."""
    rule_json = json.dumps((rule or run.region_rule()).to_dict(), sort_keys=True)
    stamp = dynamics_stamp(run, run.recorded_source())
    return _units_at(str(run.path), stamp, int(k), rule_json)


def map_frame(run: Run, rule: RegionRule | None = None, burn_out: int | None = None) -> pd.DataFrame:
    """:func:`cartomap.analysis.datamap.map_frame` of ``run`` (regions by ``rule``, default the run's kind's,
    :meth:`Run.region_rule`;
    metrics over the first ``burn_out`` epochs, from the dynamics :func:`dynamics` read once), cached
    until its metrics, examples or dynamics change."""
    rule_json = json.dumps((rule or run.region_rule()).to_dict(), sort_keys=True)
    stamp = run.stamp(run.metrics_path(), run.examples_path)
    if burn_out is not None:
        stamp += dynamics_stamp(run, run.recorded_source())
    return _frame(str(run.path), stamp, rule_json, burn_out)


@st.cache_resource(max_entries=4, show_spinner="Loading the map over seeds…")
def _seed_frame(exp_path: str, stamp: tuple, run_path: str, rule_json: str) -> pd.DataFrame:
    from cartomap.experiments.seeds import PER_EXAMPLE
    from cartomap.experiments.store import Experiment

    run = Run(Path(run_path))
    table = Experiment(Path(exp_path)).result(PER_EXAMPLE)
    table = datamap.with_regions(table, RegionRule.from_dict(json.loads(rule_json)))
    return seed_maps.seed_map_frame(
        table, run.examples(columns=datamap.map_example_columns()), run.label_names
    )


def seed_map_frame(exp, run: Run, rule: RegionRule | None = None) -> pd.DataFrame:
    """The mean map of a finished seeds experiment ``exp`` of ``run`` (the mean map's regions drawn by
    ``rule``), cached until its results are written again."""
    from cartomap.experiments.seeds import PER_EXAMPLE

    rule_json = json.dumps((rule or run.region_rule()).to_dict(), sort_keys=True)
    return _seed_frame(str(exp.path), exp.result_stamp(PER_EXAMPLE), str(run.path), rule_json)


@st.cache_resource(max_entries=6, show_spinner="Loading the data map…")
def _label_view(run_path: str, stamp: tuple, view: str, rule_json: str, burn_out: int | None):
    from cartomap.analysis import multilabel as label_views

    run = Run(Path(run_path))
    dynamics_read = None if burn_out is None else dynamics(run, run.recorded_source())
    rule = RegionRule.from_dict(json.loads(rule_json))
    return label_views.view_frame(run, view, rule, burn_out, dynamics=dynamics_read)


def label_view(run: Run, view: str, rule: RegionRule, burn_out: int | None = None) -> pd.DataFrame:
    """The map frame of a multi-label run's ``view`` (after ``burn_out`` recordings: None = all), cached
    until its metrics, examples or (for a map after k recordings) dynamics change."""
    stamp = run.stamp(run.metrics_path(), run.example_metrics_path(), run.examples_path)
    if burn_out is not None:
        stamp += dynamics_stamp(run, run.recorded_source())
    rule_json = json.dumps(rule.to_dict(), sort_keys=True)
    return _label_view(str(run.path), stamp, view, rule_json, burn_out)
