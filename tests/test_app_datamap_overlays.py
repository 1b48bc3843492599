"""The Data map page's layers under streamlit.testing: a focused example's neighbours, a batch's pairs."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from test_app_datamap import make_run

from cartomap.analysis import datamap as dm
from cartomap.analysis import overlay_figures
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import Run
from cartomap.scores import ambiguity
from cartomap.wanli.batches import filtered_path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "data_map.py"


@pytest.fixture()
def run(tmp_path, monkeypatch) -> Run:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    return make_run(cache)


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _traces(at, prefix: str) -> list[dict]:
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    return [t for t in spec["data"] if str(t.get("name", "")).startswith(prefix)]


def _values(array) -> list:
    """A plotly array of the figure's JSON (numbers come as base64 ``bdata``)."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def _checkbox(at, starts: str):
    return next(c for c in at.checkbox if c.label.startswith(starts))


def _embed(run) -> list[str]:
    from cartomap.training.embeddings import save_embeddings

    ids = run.examples(columns=["id"])["id"].astype(str).tolist()
    vectors = np.random.default_rng(0).normal(size=(len(ids), 8))
    save_embeddings(run, ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return ids


def test_the_focused_example_and_its_neighbours_are_drawn_and_hidden(run):
    frame = dm.map_frame(run)
    focus = str(frame["id"].iloc[0])
    at = _app()
    at.session_state["selected_ids"] = [focus]  # a one-row table: that example is focused
    at.run()
    assert not at.exception, at.exception
    assert not [c for c in at.checkbox if c.label.startswith("Show the focused example")]  # no embeddings
    assert not _traces(at, overlay_figures.NEIGHBOUR_TRACE)
    _embed(run)
    at.run()
    assert not at.exception, at.exception
    (trace,) = _traces(at, overlay_figures.NEIGHBOUR_TRACE)
    assert trace["customdata"][0] == focus and trace["marker"]["symbol"][0] == "star"
    assert 5 <= len(trace["customdata"]) <= 9  # the focus, 4 of any label, 4 of its label (some shared)
    group = next(d.value for d in at.dataframe if "similarity" in d.value.columns)  # the panel's table
    assert set(group["id"]) - {focus} <= set(trace["customdata"])  # its same-label neighbours are drawn
    gold = frame.set_index("id")["gold"]
    symbols = dict(zip(trace["customdata"], trace["marker"]["symbol"], strict=True))
    for i in trace["customdata"][1:]:  # filled = the focus's label, open = another
        assert symbols[i] == ("diamond" if gold[i] == gold[focus] else "diamond-open")
    assert all(h.startswith("id: ") and "premise" not in h for h in trace["hovertext"])
    _checkbox(at, "Show the focused example").uncheck().run()
    assert not at.exception, at.exception
    assert not _traces(at, overlay_figures.NEIGHBOUR_TRACE)


def test_a_row_clicked_in_the_table_is_drawn_on_the_same_rerun(run):
    _embed(run)
    frame = dm.map_frame(run)
    at = _app()
    at.session_state["selected_ids"] = frame["id"].iloc[:6].tolist()
    at.run()
    assert not _traces(at, overlay_figures.NEIGHBOUR_TRACE)  # nothing focused yet
    table = next(d.value for d in at.dataframe if "premise" in d.value.columns)
    key = "dm_table_" + hashlib.sha1("\n".join(table["id"]).encode("utf-8")).hexdigest()[:10]
    at.session_state[key] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    (trace,) = _traces(at, overlay_figures.NEIGHBOUR_TRACE)
    assert trace["customdata"][0] == table["id"].iloc[2]


def write_filtered(run, batch: str = "b1") -> pd.DataFrame:
    """A filtered batch as Stage 3 writes it (by hand: no model): 2 removed by a heuristic (no score),
    2 removed for low max variability, 3 kept; one id that would be a tag if rendered."""
    frame = pd.DataFrame(
        {
            "gen_id": ["g0", "g1", "g2", "g3", "g4", "g5", "<b>g6</b>"],
            "intended_label": [
                "entailment",
                "neutral",
                "neutral",
                "entailment",
                "neutral",
                "entailment",
                "neutral",
            ],
            "premise": ["<i>p</i>"] * 7,
            "hypothesis": ["h"] * 7,
            "removed_by": [
                "too_short",
                "same_text",
                "low_max_variability",
                "low_max_variability",
                None,
                None,
                None,
            ],
            "max_variability": [np.nan, np.nan, 0.01, 0.02, 0.2, 0.3, 0.25],
            "kept": [False, False, False, False, True, True, True],
        }
    )
    atomic_write_parquet(filtered_path(run, batch), frame)
    return frame


def _not_drawn_notes(at) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("Generated pairs of this run's WaNLI batches")]


def test_generated_pairs_of_a_batch_are_drawn_on_a_strip_and_hidden(run):
    at = _app()
    at.run()
    assert not at.exception, at.exception
    assert not [s for s in at.selectbox if s.label == "Generated pairs"]  # no batch: not offered
    assert not _not_drawn_notes(at)
    write_filtered(run)
    at.run()
    assert not at.exception, at.exception
    # the filter places the pairs by their estimated max variability: on a map whose x is another score
    # they are not offered, and the page says why and how to draw them
    other = next(axis for axis in dm.AXIS_COLUMNS if axis != ambiguity.VARIABILITY)
    for axis in dict.fromkeys((run.region_rule().axis, other)):  # the default axis, and another
        if axis == ambiguity.VARIABILITY:
            continue
        if at.selectbox(key="_kept_dm_axis").value != axis:  # the default axis: the page as it opens
            at.selectbox(key="_kept_dm_axis").select(axis).run()
            assert not at.exception, at.exception
        assert not [s for s in at.selectbox if s.label == "Generated pairs"]
        (note,) = _not_drawn_notes(at)
        assert f"this map's x is {ambiguity.get(axis).label}" in note
        assert "Pick variability as the ambiguity axis (x)" in note
    # on Cartography's map (x = variability) they are offered
    at.selectbox(key="_kept_dm_axis").select(ambiguity.VARIABILITY).run()
    assert not at.exception, at.exception
    assert not _not_drawn_notes(at)
    box = next(s for s in at.selectbox if s.label == "Generated pairs")
    assert box.options == ["none drawn", "Generated pairs: b1"] and not _traces(
        at, overlay_figures.GENERATED_TRACE
    )
    box.select("b1").run()
    assert not at.exception, at.exception
    traces = {t["name"]: t for t in _traces(at, overlay_figures.GENERATED_TRACE)}
    assert set(traces) == {"generated pairs: kept (3)", "generated pairs: removed (2)"}
    kept = traces["generated pairs: kept (3)"]
    assert kept["yaxis"] == "y3" and "customdata" not in kept
    assert sorted(_values(kept["x"])) == [0.2, 0.25, 0.3]
    assert any("&lt;b&gt;g6&lt;/b&gt;" in h for h in kept["hovertext"])
    assert not any("<b>" in h or "<i>" in h for t in traces.values() for h in t["hovertext"])
    caption = next(c.value for c in at.caption if "Batch b1" in c.value)
    assert "3 kept and 2 removed for low max variability of 7 generated" in caption
    assert "2 removed by a heuristic" in caption and "no confidence" in caption
    next(s for s in at.selectbox if s.label == "Generated pairs").select("").run()
    assert not at.exception, at.exception
    assert not _traces(at, overlay_figures.GENERATED_TRACE)


def test_a_filtered_table_without_its_scores_is_one_error_naming_the_file(run):
    atomic_write_parquet(filtered_path(run, "b1"), write_filtered(run).drop(columns="max_variability"))
    at = _app()
    at.session_state["dm_axis"] = ambiguity.VARIABILITY  # the pairs are drawn on Cartography's map only
    at.session_state["dm_generated_" + run.id] = "b1"
    at.run()
    assert not at.exception, at.exception
    (error,) = at.error
    assert "b1/filtered.parquet: missing column(s) max\\_variability" in error.value  # markdown-escaped
    assert not _traces(at, overlay_figures.GENERATED_TRACE) and at.get(
        "plotly_chart"
    )  # the map is still drawn
