"""The Data map page on a run whose data has votes: coloured and filtered by human agreement, the focused
example's votes, and the "Human judgement" report."""

from __future__ import annotations

import json
from pathlib import Path

import patience
import pytest

from cartomap.analysis import datamap as dm
from tests.test_truth import synthetic_run, votes_rows, write_votes

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "data_map.py"


@pytest.fixture()
def run(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    rows = votes_rows()
    rows[5]["premise"] = "<b>bold</b> **not markdown** <script>x</script>"
    return synthetic_run(cache, write_votes(tmp_path / "votes.jsonl", rows))


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def test_map_frame_carries_the_human_columns(run):
    frame = dm.map_frame(run)
    assert {"human_entropy", "gold_disagrees", "agreement", "votes_neutral"} <= set(frame.columns)
    assert (frame["agreement"] == dm.GOLD_NOT_MAJORITY).sum() == 15


def test_page_colours_and_filters_by_agreement(run):
    at = _app().run()
    assert not at.exception, at.exception
    colour = at.selectbox(key="_kept_dm_color")
    assert "human entropy" in colour.options and "gold vs majority" in colour.options
    colour.set_value("gold vs majority").run()
    assert not at.exception, at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t["name"].split(" (")[0] for t in spec["data"] if t.get("type") == "scattergl"]
    assert "gold ≠ majority" in names and "gold = majority" in names
    at.selectbox(key="_kept_dm_color").set_value("human entropy").run()
    assert not at.exception, at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = [t["marker"]["colorbar"]["title"]["text"] for t in spec["data"] if t["marker"].get("showscale")]
    assert bars == ["human entropy (bits)"]  # a score: a colour scale with its bar
    at.checkbox(key="_kept_dm_disagree").check().run()
    assert not at.exception
    assert any("15 match the filters" in c.value for c in at.caption)


def test_every_colouring_of_a_run_with_votes_renders(run):
    at = _app().run()
    colour = at.selectbox(key="_kept_dm_color")
    assert {"human entropy", "human majority share", "gold vs majority", "AUM", "EL2N"} <= set(colour.options)
    assert "seed spread" not in colour.options  # no seeds experiment
    for name in colour.options:
        at.selectbox(key="_kept_dm_color").set_value(name).run()
        assert not at.exception, (name, at.exception)
        spec = json.loads(at.get("plotly_chart")[0].proto.spec)
        assert spec["layout"]["meta"]["color_by"] == name


def test_focused_example_shows_its_votes_as_data(run):
    frame = dm.map_frame(run)
    focus = frame["id"].iloc[5]
    at = _app()
    at.session_state["selected_ids"] = [focus]
    at.run()
    assert not at.exception, at.exception
    votes = [d.value for d in at.dataframe if "votes" in d.value.columns and "label" in d.value.columns]
    assert votes, "no votes table"
    assert int(votes[0]["votes"].sum()) == 5
    assert set(votes[0]["label"]) == {"entailment", "neutral", "contradiction"}
    # the untrusted text only ever goes through st.text / dataframes
    assert not any("<b>bold</b>" in m.value for m in at.markdown)
    assert any("<b>bold</b>" in t.value for t in at.text)


def test_human_judgement_report_on_the_page(run):
    at = _app().run()
    at.number_input(key="_kept_dm_truth_boot").set_value(20).run()
    at.toggle(key="dm_truth_on").set_value(True).run()
    assert not at.exception, at.exception
    tables = [d.value for d in at.dataframe]
    spearman = next(t for t in tables if "spearman with entropy" in t.columns)
    assert "confidence" in set(spearman["metric"])
    det = next(t for t in tables if "detector" in t.columns)
    assert {"1 − confidence", "−AUM"} <= set(det["detector"]) and "ap_low" in det.columns  # by title
