"""The Neighbours page's 2-D view linked with the Data map: colourings, selection events to ids, and
the shared selection both ways (streamlit.testing, through app.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from test_app_neighbours import make_run

from cartomap.analysis import colourings, projection
from cartomap.analysis.datamap import AXIS_COLUMNS, GOLD_IS_MAJORITY, GOLD_NOT_MAJORITY, NO_MAJORITY
from cartomap.analysis.selection import points_in_box
from cartomap.scores import ambiguity
from cartomap.scores.metrics import RegionRule

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------- pure helpers

COORDS = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.5], [3.0, 3.0]])
IDS = ["a", "b", "c", "d"]


def _event(points=(), box=(), lasso=()):
    return {"selection": {"points": list(points), "box": list(box), "lasso": list(lasso)}}


def test_a_box_or_lasso_selects_every_row_inside_it_in_row_order():
    box = {"xref": "x", "yref": "y", "x": [2.5, 0.5], "y": [0.2, 1.5]}  # corners in any order
    assert projection.selection_ids(COORDS, IDS, _event(box=[box]), sampled=False) == ["b", "c"]
    lasso = {"x": [-1, 1.5, 1.5, -1], "y": [-1, -1, 1.5, 1.5]}  # round a and b, not c
    assert projection.selection_ids(COORDS, IDS, _event(lasso=[lasso]), sampled=True) == ["a", "b"]
    # two shapes: their union
    both = _event(box=[box], lasso=[lasso])
    assert projection.selection_ids(COORDS, IDS, both, sampled=True) == ["a", "b", "c"]


def test_clicked_points_are_taken_by_their_ids_unless_the_figure_is_sampled():
    clicked = [{"customdata": "d", "x": 3, "y": 3}, {"customdata": ["a"]}, {"customdata": "zz"}]
    assert projection.selection_ids(COORDS, IDS, _event(points=clicked), sampled=False) == ["a", "d"]
    # a sampled figure with a box: the geometry decides (the box's points not drawn are selected too)
    box = {"x": [1.5, 3.5], "y": [0, 4]}
    got = projection.selection_ids(COORDS, IDS, _event(points=clicked[:1], box=[box]), sampled=True)
    assert got == ["c", "d"]
    assert projection.selection_ids(COORDS, IDS, _event(), sampled=True) == []
    assert projection.selection_ids(COORDS, IDS, None, sampled=False) == []
    with pytest.raises(ValueError, match="4 coordinates for 3"):
        projection.selection_ids(COORDS, IDS[:3], _event(), sampled=False)


def _points(**extra) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": IDS, "label": ["x", "y", "x", "y"], "premise": ["<b>p</b>", "q", "r", "s"], **extra}
    )


def test_projection_colourings_follow_the_columns_present():
    assert list(colourings.for_projection(_points())) == ["label"]
    full = _points(
        region=["easy-to-learn"] * 4,
        confidence=[0.1, 0.2, 0.3, 0.4],
        variability=[0.0, 0.1, 0.2, 0.3],
        human_entropy=[0.0, 1.0, np.nan, 0.5],
        agreement=[GOLD_IS_MAJORITY] * 4,
    )
    assert list(colourings.for_projection(full)) == [
        "label",
        "region",
        "confidence",
        "variability",
        "human entropy",
        "gold vs majority",
    ]
    fig = projection.projection_figure(COORDS, full, color_by="confidence", highlight_ids=["b", "d", "nope"])
    scored, rings = fig.data
    assert list(scored.marker.color) == [0.1, 0.2, 0.3, 0.4] and scored.marker.showscale
    assert rings.name == f"{projection.SELECTED_TRACE} (2)" and list(rings.customdata) == ["b", "d"]
    assert all("<b>p" not in h for h in scored.hovertext)  # the data's text escaped
    fig = projection.projection_figure(COORDS, full, color_by="human entropy")
    assert [t.name for t in fig.data] == ["human entropy", "no value (1)"]
    assert fig.layout.dragmode == "lasso"
    # a colouring the frame cannot give falls back to label
    fig = projection.projection_figure(COORDS, _points(), color_by="confidence")
    assert [t.name for t in fig.data] == ["x (2)", "y (2)"]


def test_points_frame_carries_the_map_and_the_votes(tmp_path):
    from cartomap.io import atomic_write_parquet

    run = make_run(tmp_path / "cache", embeddings=False)
    frame = projection.points_frame(run)
    metrics = run.metrics().set_index("id")
    assert np.allclose(frame["confidence"], metrics.loc[frame["id"], "confidence"])
    for axis in AXIS_COLUMNS:  # every ambiguity axis of the map, the default rule's among them
        assert np.allclose(frame[axis], metrics.loc[frame["id"], axis])
    # regions by the default rule (by rank on the default axis), whatever rule the run saved
    assert frame["region"].tolist() == RegionRule().regions(metrics.loc[frame["id"]]).tolist()
    assert "agreement" not in frame.columns
    examples = run.examples()
    n = len(examples)
    examples["human_entropy"] = np.linspace(0, 1, n)
    examples["human_majority"] = np.where(np.arange(n) % 3 == 0, -1, examples["label"])
    examples["gold_disagrees"] = np.arange(n) % 3 == 1
    atomic_write_parquet(run.examples_path, examples)
    frame = projection.points_frame(run)
    assert frame["agreement"].astype(str).tolist()[:3] == [NO_MAJORITY, GOLD_NOT_MAJORITY, GOLD_IS_MAJORITY]
    assert "gold vs majority" in colourings.for_projection(frame)


# ----------------------------------------------------------------------------- the pages, both ways


@pytest.fixture()
def run(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    return make_run(cache)


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=patience.WAIT_S).run()


def _values(v) -> list:
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def _view(at) -> dict:
    """The 2-D view's figure (the last chart of the Neighbours page)."""
    return json.loads(at.get("plotly_chart")[-1].proto.spec)


def _rings(spec) -> list[str]:
    traces = [t for t in spec["data"] if str(t.get("name", "")).startswith(projection.SELECTED_TRACE)]
    return [] if not traces else [str(i) for i in _values(traces[0]["customdata"])]


def test_the_data_maps_selection_is_ringed_on_the_2d_view(run):
    at = _app()
    at.switch_page("pages/data_map.py").run()
    ids = run.examples()["id"].astype(str).tolist()
    at.session_state["selected_ids"] = ids[:7]
    at.run()
    assert not at.exception, at.exception
    at.switch_page("pages/neighbours.py").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Nearest neighbours"]
    assert sorted(_rings(_view(at))) == sorted(ids[:7])
    assert any("7 examples selected" in c.value for c in at.caption)
    colours = at.radio(key="_kept_nb_color")
    # the map's confidence and every ambiguity score of its second axis (the run's metrics have them all)
    axes = [ambiguity.get(axis).label for axis in AXIS_COLUMNS]
    assert colours.options == ["label", "region", "confidence", *axes]
    colours.set_value("variability").run()
    assert not at.exception, at.exception
    spec = _view(at)
    assert spec["layout"]["meta"]["color_by"] == "variability"
    assert sorted(_rings(spec)) == sorted(ids[:7])


def test_a_box_on_the_2d_view_becomes_the_data_maps_selection(run):
    at = _app()
    at.switch_page("pages/neighbours.py").run()
    assert not at.exception, at.exception
    assert at.button(key="nb_show_on_map").disabled  # nothing selected yet
    coords = np.load(run.path / "projection_pca.npy")
    ids = run.examples()["id"].astype(str).tolist()
    box = {
        "xref": "x",
        "yref": "y",
        "x": [0.0, float(coords[:, 0].max())],
        "y": [0.0, float(coords[:, 1].max())],
    }
    inside = points_in_box(coords[:, 0], coords[:, 1], tuple(box["x"]), tuple(box["y"]))
    expected = [i for i, ok in zip(ids, inside, strict=True) if ok]
    assert 0 < len(expected) < len(ids)
    at.session_state["nb_map"] = _event(box=[box])
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["selected_ids"] == expected
    assert sorted(_rings(_view(at))) == sorted(expected)
    # the same (stale) event again does not undo a clear
    at.button(key="nb_clear").click().run()
    assert at.session_state["selected_ids"] == []
    # a new event, then to the Data map: the same examples are selected there
    small = {"x": box["x"], "y": [0.0, float(np.median(coords[inside, 1]))]}
    at.session_state["nb_map"] = _event(box=[small])
    at.run()
    chosen = list(at.session_state["selected_ids"])
    assert chosen and set(chosen) < set(expected)
    at.button(key="nb_show_on_map").click().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Data map"]
    assert at.session_state["run_id"] == run.id
    table = next(d.value for d in at.dataframe if "premise" in d.value.columns)
    assert sorted(table["id"]) == sorted(chosen)
    assert any(m.value.startswith(f"**{len(chosen)} selected**") for m in at.markdown)


def test_with_votes_the_2d_view_colours_by_human_agreement(run):
    from cartomap.io import atomic_write_parquet

    examples = run.examples()
    n = len(examples)
    examples["human_entropy"] = np.linspace(0, 1, n)
    examples["human_majority"] = examples["label"]
    examples["gold_disagrees"] = np.arange(n) < 5
    atomic_write_parquet(run.examples_path, examples)
    at = _app()
    at.switch_page("pages/neighbours.py").run()
    colours = at.radio(key="_kept_nb_color")
    assert colours.options[-2:] == ["human entropy", "gold vs majority"]
    colours.set_value("gold vs majority").run()
    assert not at.exception, at.exception
    names = [t["name"] for t in _view(at)["data"] if t.get("type") == "scattergl"]
    assert f"{GOLD_NOT_MAJORITY} (5)" in names and f"{GOLD_IS_MAJORITY} ({n - 5})" in names
