"""The Data map page over epochs under streamlit.testing: the epoch slider and the selection's paths."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import patience
import pytest
from test_app_datamap import make_run

from cartomap.analysis import epochs, overlay_figures
from cartomap.scores.metrics import RegionRule

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "data_map.py"


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    return cache


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _map(at) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def _values(v) -> list:
    """A plotly JSON array: a list, or a typed array ({"dtype", "bdata"})."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def _points(spec) -> dict[str, tuple[float, float]]:
    """{id: (x, confidence)} of the map's example points (x: the map's axis)."""
    out = {}
    for t in spec["data"]:
        if t.get("type") == "scattergl" and t.get("customdata") and not t["name"].startswith("selected"):
            out.update(
                {
                    i: (x, y)
                    for i, x, y in zip(
                        _values(t["customdata"]), _values(t["x"]), _values(t["y"]), strict=True
                    )
                }
            )
    return out


def _paths(spec) -> list[dict]:
    return [t for t in spec["data"] if str(t.get("name", "")).startswith(overlay_figures.TRAJECTORY_TRACE)]


def test_the_slider_redraws_the_map_from_the_first_k_recordings(cache):
    run = make_run(cache, epochs=3)
    at = _app().run()
    assert not at.exception, at.exception
    slider = at.slider(key=f"_kept_dm_burn_out_{run.id}")
    assert slider.label == "Map after recording" and (slider.min, slider.max, slider.value) == (1, 3, 3)
    full = _points(_map(at))
    assert len(full) == 400
    ids, logits = run.dynamics()
    labels = run.examples()["label"].to_numpy()
    axis = RegionRule().axis  # the map's x: the default axis

    slider.set_value(2).run()
    assert not at.exception, at.exception
    two = _points(_map(at))
    expected = epochs.map_at(logits, labels, 2, ids).set_index("id")
    assert set(two) == set(full) and two != full
    some = ids[5]
    assert two[some][0] == pytest.approx(expected.loc[some, axis], abs=1e-6)
    assert two[some][1] == pytest.approx(expected.loc[some, "confidence"], abs=1e-6)
    assert "Metrics over the first 2 of 3 epochs" in " ".join(c.value for c in at.caption)

    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(1).run()
    one = _points(_map(at))
    expected = epochs.map_at(logits, labels, 1, ids).set_index("id")
    assert one[some][0] == pytest.approx(expected.loc[some, axis], abs=1e-6)
    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(3).run()
    assert _points(_map(at)) == full  # back to the stored metrics

    # Cartography's map (x = variability) after one recording: no variability
    at.selectbox(key="_kept_dm_axis").set_value("variability").run()
    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(1).run()
    assert not at.exception, at.exception
    assert {round(x, 9) for x, _ in _points(_map(at)).values()} == {0.0}


def test_a_run_with_one_recording_has_no_slider(cache):
    run = make_run(cache, epochs=1)
    at = _app().run()
    assert not at.exception, at.exception
    assert not [s for s in at.slider if s.key == f"_kept_dm_burn_out_{run.id}"]


def test_the_paths_of_a_selection_are_drawn_over_the_map(cache):
    run = make_run(cache, epochs=3)
    ids, logits = run.dynamics()
    labels = run.examples()["label"].to_numpy()
    picked = ids[:3]
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    assert not at.exception, at.exception
    (paths, now) = _paths(_map(at)) + [
        t for t in _map(at)["data"] if str(t.get("name", "")).startswith("after 3 recordings")
    ]
    axis = RegionRule().axis  # the paths run across the map's default axis
    expected = epochs.trajectories(logits, labels, ids, picked, axis=axis)
    xs = [x for x in _values(paths["x"]) if x is not None]
    assert len(xs) == 3 * 2  # 3 examples, k = 2 and 3
    assert np.allclose(xs, expected[axis].to_numpy())  # selection order, k ascending
    assert "customdata" not in paths
    # the ring of "after 3 recordings" sits on the examples' points of the map
    full = _points(_map(at))
    assert sorted(_values(now["x"])) == pytest.approx(sorted(full[i][0] for i in picked), abs=1e-6)

    # the map after 2 recordings rings the paths' k=2 points
    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(2).run()
    ring = next(t for t in _map(at)["data"] if str(t.get("name", "")).startswith("after 2 recordings"))
    two = _points(_map(at))
    assert sorted(_values(ring["x"])) == pytest.approx(sorted(two[i][0] for i in picked), abs=1e-6)

    # turned off, or no selection: no paths
    at.checkbox(key="_kept_dm_paths").uncheck().run()
    assert not _paths(_map(at))
    at.checkbox(key="_kept_dm_paths").check().run()
    at.session_state["selected_ids"] = []
    at.run()
    assert not at.exception and not _paths(_map(at))


def test_paths_are_capped(cache):
    run = make_run(cache, epochs=3)
    ids = run.examples()["id"].astype(str).tolist()
    at = _app()
    at.session_state["selected_ids"] = ids[:120]
    at.run()
    assert not at.exception, at.exception
    (paths,) = _paths(_map(at))
    assert paths["name"] == f"{overlay_figures.TRAJECTORY_TRACE} ({epochs.DEFAULT_TRAJECTORIES})"
    assert any(f"{epochs.DEFAULT_TRAJECTORIES} of 120 drawn" in c.label for c in at.checkbox)
    # more on request, never past the cap
    drawn = at.number_input(key="_kept_dm_paths_drawn")
    assert drawn.max == epochs.MAX_TRAJECTORIES
    drawn.set_value(epochs.MAX_TRAJECTORIES).run()
    assert not at.exception, at.exception
    (paths,) = _paths(_map(at))
    assert paths["name"] == f"{overlay_figures.TRAJECTORY_TRACE} ({epochs.MAX_TRAJECTORIES})"
    assert any(f"{epochs.MAX_TRAJECTORIES} of 120 drawn" in c.label for c in at.checkbox)
    at.session_state["dm_paths_drawn"] = 500  # kept from elsewhere: held to the cap
    at.run()
    assert not at.exception and at.number_input(key="_kept_dm_paths_drawn").value == epochs.MAX_TRAJECTORIES


def test_a_stored_k_beyond_the_recordings_falls_back_to_every_recording(cache):
    run = make_run(cache, epochs=3)
    at = _app()
    at.session_state[f"dm_burn_out_{run.id}"] = 7  # kept from before recordings were lost
    at.run()
    assert not at.exception, at.exception
    assert at.slider(key=f"_kept_dm_burn_out_{run.id}").value == 3
    assert "Metrics over 3 epochs" in " ".join(c.value for c in at.caption)
