"""The Data map page over epochs for a token run (words and sentences) and a multi-label run (each view)
under streamlit.testing: the slider "Map after recording" redraws the map from the first k recordings and
the selection's paths are drawn over it. Tiny runs of hand-set probabilities (tests/token_fixture.py,
tests/multilabel_fixture.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from multilabel_fixture import make_multilabel_run
from test_app_epochs import _app, _map, _paths, _points, _values
from token_fixture import OVER_EPOCHS, make_token_run

from cartomap.scores.ambiguity import VARIABILITY

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    return cache


def _std(*values) -> float:
    return float(np.std(values))


def _path_points(spec) -> np.ndarray:
    """(variability, confidence) of the drawn paths' points, in order (the gaps between paths left out)."""
    (paths,) = _paths(spec)
    xs, ys = _values(paths["x"]), _values(paths["y"])
    return np.array([(x, y) for x, y in zip(xs, ys, strict=True) if x is not None])


def _same(got, expected, atol: float = 1e-6) -> None:
    """Points (or {id: point}) equal to ``expected`` within ``atol`` (the chart's numbers are float32)."""
    if isinstance(expected, dict):
        assert set(got) == set(expected), sorted(got)
        got, expected = [got[i] for i in expected], list(expected.values())
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(expected, dtype=float), atol=atol)


def _words(at):
    """The table of the opened sentence's words (a Styler's data)."""
    frames = [getattr(d.value, "data", d.value) for d in at.dataframe]
    return next(f for f in frames if "p_predicted" in f.columns)


def _ok(at) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def test_a_token_runs_word_map_after_k_recordings_and_a_words_path(cache, tmp_path):
    run = make_token_run(cache, tmp_path, OVER_EPOCHS)
    at = _app()
    at.session_state["dm_axis"] = VARIABILITY  # the points below are worked out on Cartography's axis
    at.session_state["selected_ids"] = ["sent-1#2"]  # "Berlin": p(gold) 0.1, 0.2, 0.9
    at.run()
    _ok(at)
    slider = at.slider(key=f"_kept_dm_burn_out_{run.id}")
    assert (slider.label, slider.min, slider.max, slider.value) == ("Map after recording", 1, 3, 3)
    _same(_points(_map(at))["sent-1#2"], (_std(0.1, 0.2, 0.9), 0.4))
    _same(_path_points(_map(at)), [(0.05, 0.15), (_std(0.1, 0.2, 0.9), 0.4)])

    slider.set_value(2).run()
    _ok(at)
    points = _points(_map(at))
    assert len(points) == 11  # a point per word
    _same(points["sent-1#2"], (0.05, 0.15))
    _same(points["sent-2#0"], (0.3, 0.6))  # "The": 0.3, 0.9
    assert "Metrics over the first 2 of 3 epochs" in " ".join(c.value for c in at.caption)
    _same(_path_points(_map(at)), [(0.05, 0.15), (_std(0.1, 0.2, 0.9), 0.4)])
    # the picked word's sentence, its words with their metrics on this map
    words = _words(at)
    assert words["token"].tolist() == ["Mary", "visited", "Berlin"]
    np.testing.assert_allclose(words["confidence"], [0.65, 0.9, 0.15])
    # p(predicted) at recording 2, whose argmax the map's "predicted" is (Berlin: 0.2 gold, 0.8 / 3 each other)
    np.testing.assert_allclose(words["p_predicted"], [0.7, 0.9, 0.8 / 3], atol=1e-6)
    assert any(
        "p(predicted): the model's probability of its tag at recording 2" in c.value for c in at.caption
    )


def test_a_token_runs_sentence_map_after_k_recordings_and_a_sentences_path(cache, tmp_path):
    run = make_token_run(cache, tmp_path, OVER_EPOCHS)
    at = _app()
    at.session_state["dm_axis"] = VARIABILITY  # the points below are worked out on Cartography's axis
    at.session_state["dm_token_level"] = "sentence"
    at.run()
    _ok(at)
    slider = at.slider(key=f"_kept_dm_burn_out_{run.id}")
    assert slider.value == 3
    _same(
        _points(_map(at)),
        {"sent-0": (_std(0.5, 0.6, 0.4), 0.5), "sent-1": (_std(0.1, 0.2, 0.9), 0.4), "sent-2": (0.0, 0.5)},
    )

    slider.set_value(1).run()  # each sentence at its worst word after one recording
    _ok(at)
    _same(_points(_map(at)), {"sent-0": (0.0, 0.5), "sent-1": (0.0, 0.1), "sent-2": (0.0, 0.3)})
    assert any("first 1 of 3 recordings" in c.value for c in at.caption)
    assert not _paths(_map(at))  # nothing selected

    at.session_state["dm_sentence_ids"] = ["sent-2", "sent-1"]
    at.run()
    _ok(at)
    assert at.checkbox(key="_kept_dm_paths").label.endswith("(2 sentences)")
    # sent-2 after 2 recordings: "cat" (0.5) is its worst word, no longer "The" (mean 0.6)
    _same(_path_points(_map(at)), [(0.0, 0.5), (0.0, 0.5), (0.05, 0.15), (_std(0.1, 0.2, 0.9), 0.4)])
    assert not [
        t for t in _map(at)["data"] if str(t.get("name", "")).startswith("after ")
    ]  # paths start at 2

    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(2).run()
    _ok(at)
    _same(_points(_map(at)), {"sent-0": (0.05, 0.55), "sent-1": (0.05, 0.15), "sent-2": (0.0, 0.5)})
    ring = next(t for t in _map(at)["data"] if str(t.get("name", "")).startswith("after 2 recordings"))
    _same(sorted(_values(ring["y"])), [0.15, 0.5])  # the selection's points on the map shown

    at.session_state["dm_sentence_focus"] = "sent-1"  # its words, with their metrics after 2 recordings
    at.run()
    _ok(at)
    words = _words(at)
    assert words["token"].tolist() == ["Mary", "visited", "Berlin"]
    np.testing.assert_allclose(words["confidence"], [0.65, 0.9, 0.15])
    # p(predicted) at recording 2, whose argmax the map's "predicted" is (Berlin: 0.2 gold, 0.8 / 3 each other)
    np.testing.assert_allclose(words["p_predicted"], [0.7, 0.9, 0.8 / 3], atol=1e-6)
    assert any(
        "p(predicted): the model's probability of its tag at recording 2" in c.value for c in at.caption
    )


def test_a_multilabel_runs_views_after_k_recordings_and_their_paths(cache, tmp_path):
    run = make_multilabel_run(cache, tmp_path)
    at = _app()
    at.session_state["dm_axis"] = VARIABILITY  # the points below are worked out on Cartography's axis
    at.session_state["selected_ids"] = ["ex-2"]
    at.run()
    _ok(at)
    captions = " ".join(c.value for c in at.caption)
    assert "map after k recordings" not in captions and "paths" not in captions
    slider = at.slider(key=f"_kept_dm_burn_out_{run.id}")
    assert (slider.label, slider.max, slider.value) == ("Map after recording", 3, 3)
    # the combined view: ex-2 (no label) at politics (0.4; 0.675) then at sports (0.7)
    _same(_points(_map(at))["ex-2"], (_std(0.9, 0.6, 0.6), 0.7))
    _same(_path_points(_map(at)), [(0.275, 0.675), (_std(0.9, 0.6, 0.6), 0.7)])
    assert any("Probability of label sports by epoch" in m.value for m in at.markdown)

    slider.set_value(1).run()
    _ok(at)
    # the focused example's chart follows its worst label on the map shown
    assert any("Probability of label politics by epoch" in m.value for m in at.markdown)
    _same(_points(_map(at)), {"ex-0": (0.0, 0.3), "ex-1": (0.0, 0.2), "ex-2": (0.0, 0.4)})
    assert "Metrics over the first 1 of 3 epochs" in " ".join(c.value for c in at.caption)
    assert len(_path_points(_map(at))) == 2  # the path is the same whatever map is shown

    [s for s in at.selectbox if s.label == "Map of"][0].set_value("label:1")
    at.session_state["selected_ids"] = ["ex-0#1"]
    at.run()
    _ok(at)
    assert at.slider(key=f"_kept_dm_burn_out_{run.id}").value == 1
    _same(_points(_map(at)), {"ex-0#1": (0.0, 0.3), "ex-1#1": (0.0, 0.2), "ex-2#1": (0.0, 0.9)})
    _same(_path_points(_map(at)), [(0.15, 0.45), (_std(0.3, 0.6, 0.9), 0.6)])

    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(2).run()
    [s for s in at.selectbox if s.label == "Map of"][0].set_value("units").run()
    _ok(at)
    points = _points(_map(at))
    assert len(points) == 6
    _same(points["ex-2#0"], (0.275, 0.675))


@pytest.mark.parametrize("level", ["word", "sentence"])
def test_a_token_runs_map_comes_first_under_the_title(cache, tmp_path, level):
    """A token run's map, of words or of sentences, is the first thing under the title: its "Map of"
    picker, slider and captions are under it (tests/test_browser_map_first.py: whole on a laptop's screen)."""
    from test_app_datamap import assert_map_first, laid_out

    make_token_run(cache, tmp_path, OVER_EPOCHS)
    at = _app()
    at.session_state["dm_token_level"] = level
    at.run()
    _ok(at)
    assert_map_first(at)
    assert "radio" in laid_out(at)  # "Map of": under the map


def test_a_multilabel_runs_map_comes_first_under_the_title(cache, tmp_path):
    """A multi-label run's map is the first thing under the title, its view picker ("Map of") under it."""
    from test_app_datamap import assert_map_first, laid_out

    make_multilabel_run(cache, tmp_path)
    at = _app().run()
    _ok(at)
    assert_map_first(at)
    assert "selectbox" in laid_out(at)
