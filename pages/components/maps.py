"""A run's map frame, loaded once per dashboard server and shared by every page that draws a data map.

``st.cache_resource`` hands every session and page the same frame (treat it as read-only): on a
550k-example run it is a few hundred MB, which ``st.cache_data`` would pickle and copy on every read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.analysis import datamap
from cartomap.runs.store import Run
from cartomap.scores.metrics import RegionRule


@st.cache_resource(max_entries=4, show_spinner="Loading the data map…")
def _frame(run_path: str, stamp: tuple, rule_json: str, burn_out: int | None) -> pd.DataFrame:
    # stamp: mtimes, so a rewritten run is reloaded
    rule = RegionRule(**json.loads(rule_json))
    return datamap.map_frame(Run(Path(run_path)), regions=rule, burn_out=burn_out)


def map_frame(run: Run, rule: RegionRule | None = None, burn_out: int | None = None) -> pd.DataFrame:
    """:func:`cartomap.analysis.datamap.map_frame` of ``run`` (regions by ``rule``, default by rank;
    metrics over the first ``burn_out`` epochs), cached until its metrics or examples change."""
    rule_json = json.dumps((rule or RegionRule()).to_dict(), sort_keys=True)
    return _frame(str(run.path), run.stamp(run.metrics_path(), run.examples_path), rule_json, burn_out)


@st.cache_resource(max_entries=4, show_spinner="Loading the map over seeds…")
def _seed_frame(exp_path: str, stamp: tuple, run_path: str, rule_json: str) -> pd.DataFrame:
    from cartomap.experiments.seeds import PER_EXAMPLE
    from cartomap.experiments.store import Experiment

    run = Run(Path(run_path))
    table = Experiment(Path(exp_path)).result(PER_EXAMPLE)
    table = datamap.with_regions(table, RegionRule(**json.loads(rule_json)))
    return datamap.seed_map_frame(table, run.examples(columns=datamap.MAP_EXAMPLE_COLUMNS), run.label_names)


def seed_map_frame(exp, run: Run, rule: RegionRule | None = None) -> pd.DataFrame:
    """The mean map of a finished seeds experiment ``exp`` of ``run`` (the mean map's regions drawn by
    ``rule``), cached until its results are written again."""
    from cartomap.experiments.seeds import PER_EXAMPLE

    rule_json = json.dumps((rule or RegionRule()).to_dict(), sort_keys=True)
    return _seed_frame(str(exp.path), exp.result_stamp(PER_EXAMPLE), str(run.path), rule_json)
