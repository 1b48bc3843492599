"""The map after k recordings and the paths of selected points for runs whose points are made of units:
a token run's words and sentences, a multi-label run's labels and examples. Tiny runs of hand-set
probabilities (tests/token_fixture.py, tests/multilabel_fixture.py); every expected number is worked out
by hand from those tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from multilabel_fixture import make_multilabel_run
from token_fixture import OVER_EPOCHS, make_token_run

from cartomap.analysis import epochs, tokens
from cartomap.analysis import multilabel as views
from cartomap.errors import DataError


@pytest.fixture()
def token_run(tmp_path):
    return make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)


@pytest.fixture()
def ml_run(tmp_path):
    return make_multilabel_run(tmp_path / "cache", tmp_path)


def _std(*values) -> float:
    return float(np.std(values))  # population std, as the map's variability


def _dynamics(run):
    ids, logits = run.dynamics("train")
    return pd.Index(ids), logits, run.unit_labels("train")[1]


# --------------------------------------------------------------------------- a token run


def test_a_words_point_after_k_recordings_is_over_those_recordings_only(token_run):
    """ "Berlin" (sent-1#2) has p(gold) 0.1, 0.2, 0.9: learned at the last recording."""
    for k, conf, var, right in [
        (1, 0.1, 0.0, 0.0),
        (2, 0.15, 0.05, 0.0),
        (3, 0.4, _std(0.1, 0.2, 0.9), 1 / 3),
    ]:
        words = tokens.word_metrics_at(token_run, k).set_index("id")
        assert words.loc["sent-1#2", ["example_id", "word"]].tolist() == ["sent-1", 2]
        assert words.loc["sent-1#2", "confidence"] == pytest.approx(conf)
        assert words.loc["sent-1#2", "variability"] == pytest.approx(var)
        assert words.loc["sent-1#2", "correctness"] == pytest.approx(right)  # right once p(gold) > 1/4
        assert words.attrs["n_epochs"] == k and words.attrs["epochs_recorded"] == 3


def test_a_sentence_after_k_recordings_sits_at_its_worst_word_of_those_recordings(token_run):
    expected = {  # k: [(confidence, variability, worst word)] of sent-0, sent-1, sent-2
        1: [(0.5, 0.0, "Paris"), (0.1, 0.0, "Berlin"), (0.3, 0.0, "The")],
        2: [(0.55, 0.05, "Paris"), (0.15, 0.05, "Berlin"), (0.5, 0.0, "cat")],  # The: 0.6 > cat: 0.5
        3: [(0.5, _std(0.5, 0.6, 0.4), "Paris"), (0.4, _std(0.1, 0.2, 0.9), "Berlin"), (0.5, 0.0, "cat")],
    }
    for k, rows in expected.items():
        frame = tokens.sentence_map_frame(token_run, "min", burn_out=k)
        assert frame["id"].tolist() == ["sent-0", "sent-1", "sent-2"]
        np.testing.assert_allclose(frame["confidence"], [r[0] for r in rows])
        np.testing.assert_allclose(frame["variability"], [r[1] for r in rows], atol=1e-12)
        assert frame["worst_token"].tolist() == [r[2] for r in rows]
        assert frame.attrs["n_epochs"] == k and frame.attrs["epochs_recorded"] == 3
    # "Berlin" is read as another tag until the last recording: its prediction follows the map's k
    assert tokens.sentence_map_frame(token_run, burn_out=2)["predicted"].tolist()[1] != "B-LOC"
    assert tokens.sentence_map_frame(token_run, burn_out=3)["predicted"].tolist()[1] == "B-LOC"
    # after every recording: the run's own sentence map
    whole, last = tokens.sentence_map_frame(token_run), tokens.sentence_map_frame(token_run, burn_out=3)
    np.testing.assert_allclose(last["confidence"], whole["confidence"])
    np.testing.assert_allclose(last["variability"], whole["variability"])
    # another score of the words: the mean of The 0.6, cat 0.5, sat 0.9 after 2 recordings
    mean = tokens.sentence_map_frame(token_run, "mean", burn_out=2).set_index("id")
    assert mean.loc["sent-2", "confidence"] == pytest.approx((0.6 + 0.5 + 0.9) / 3)


def test_the_paths_of_sentences_are_their_points_after_2_then_3_recordings(token_run):
    ids, logits, labels = _dynamics(token_run)
    assert tokens.words_of(ids, ["sent-2", "nope"]) == {"sent-2": ["sent-2#0", "sent-2#1", "sent-2#2"]}
    paths = tokens.sentence_trajectories(logits, labels, ids, ["sent-1", "nope", "sent-2", "sent-1"])
    assert paths["id"].tolist() == ["sent-1", "sent-1", "sent-2", "sent-2"]  # selection order, k ascending
    assert paths["k"].tolist() == [2, 3, 2, 3]
    np.testing.assert_allclose(paths["confidence"], [0.15, 0.4, 0.5, 0.5])
    np.testing.assert_allclose(paths["variability"], [0.05, _std(0.1, 0.2, 0.9), 0.0, 0.0], atol=1e-12)
    # the last point of a path is the sentence's point on the map of every recording
    whole = tokens.sentence_map_frame(token_run).set_index("id")
    assert paths["confidence"].iloc[1] == pytest.approx(whole.loc["sent-1", "confidence"])
    # leaving out the first recording of the map of 3: Berlin 0.2, 0.9; Mary 0.7, 0.8
    skipped = tokens.sentence_trajectories(logits, labels, ids, ["sent-1"], burn_in={3: 1})
    np.testing.assert_allclose(skipped["confidence"], [0.15, 0.55])
    np.testing.assert_allclose(skipped["variability"], [0.05, 0.35])
    assert tokens.sentence_trajectories(logits, labels, ids, ["sent-0", "sent-1"], limit=1)[
        "id"
    ].unique().tolist() == ["sent-0"]
    assert tokens.sentence_trajectories(logits, labels, ids, ["nope"]).empty


def test_the_word_and_sentence_maps_after_k_recordings_share_one_computation(token_run):
    from cartomap.analysis import datamap
    from cartomap.scores.metrics import RegionRule

    rule = RegionRule()
    dyn = _dynamics(token_run)
    units = epochs.run_map_at(token_run, 2, dynamics=dyn, regions=rule)
    alone = tokens.sentence_map_frame(token_run, regions=rule, burn_out=2, dynamics=dyn)
    shared = tokens.sentence_map_frame(token_run, regions=rule, burn_out=2, dynamics=dyn, word_metrics=units)
    pd.testing.assert_frame_equal(alone, shared)
    words_alone = datamap.map_frame(token_run, regions=rule, burn_out=2, dynamics=dyn)
    words_shared = datamap.map_frame(token_run, regions=rule, burn_out=2, dynamics=dyn, metrics_at=units)
    pd.testing.assert_frame_equal(words_alone, words_shared)


def test_grouped_paths_refuse_a_burn_in_the_map_cannot_leave_out(token_run):
    ids, logits, labels = _dynamics(token_run)
    with pytest.raises(DataError, match="cannot leave out 2"):
        tokens.sentence_trajectories(logits, labels, ids, ["sent-1"], burn_in={2: 2})
    with pytest.raises(DataError, match="3-d array"):
        epochs.grouped_trajectories(logits[0], labels, ids, {}, lambda u: u)


# --------------------------------------------------------------------------- a multi-label run


def test_each_label_view_after_k_recordings(ml_run):
    """p(gold) of sports for ex-0, ex-1 (present) and ex-2 (absent): 0.3/0.6/0.9, 0.2/0.4/0.4, 0.9/0.6/0.6."""
    sports = views.view_frame(ml_run, "label:1", burn_out=1)
    assert sports["id"].tolist() == ["ex-0#1", "ex-1#1", "ex-2#1"]
    np.testing.assert_allclose(sports["confidence"], [0.3, 0.2, 0.9])
    np.testing.assert_allclose(sports["variability"], 0.0, atol=1e-12)
    assert sports["predicted"].astype(str).tolist() == ["absent", "absent", "absent"]  # p 0.3, 0.2, 0.1
    two = views.view_frame(ml_run, "label:1", burn_out=2)
    np.testing.assert_allclose(two["confidence"], [0.45, 0.3, 0.75])
    np.testing.assert_allclose(two["variability"], [0.15, 0.1, 0.15])
    assert two["predicted"].astype(str).tolist() == ["present", "absent", "absent"]  # p 0.6, 0.4, 0.4
    units = views.view_frame(ml_run, "units", burn_out=1)
    np.testing.assert_allclose(units["confidence"], [0.6, 0.3, 0.7, 0.2, 0.4, 0.9])
    for view in views.views(ml_run.label_names):  # after every recording: the run's own map
        last, whole = views.view_frame(ml_run, view, burn_out=3), views.view_frame(ml_run, view)
        assert last["id"].tolist() == whole["id"].tolist()
        np.testing.assert_allclose(last["confidence"], whole["confidence"])
        np.testing.assert_allclose(last["variability"], whole["variability"])


def test_the_combined_view_after_k_recordings_puts_each_example_at_its_worst_label_then(ml_run):
    """ex-2 (no label): politics 0.4, 0.95, 0.95 and sports 0.9, 0.6, 0.6: its worst label is politics
    after 1 or 2 recordings (0.4; 0.675 < 0.75) and sports after 3 (0.7 < 0.7667)."""
    one = views.view_frame(ml_run, "combined", burn_out=1)
    assert one["id"].tolist() == ["ex-0", "ex-1", "ex-2"]
    np.testing.assert_allclose(one["confidence"], [0.3, 0.2, 0.4])
    assert one["worst_label"].tolist() == ["sports", "sports", "politics"]
    assert one["predicted"].astype(str).tolist() == ["(none)", "politics", "politics"]
    two = views.view_frame(ml_run, "combined", burn_out=2).set_index("id")
    assert two.loc["ex-2", ["confidence", "variability", "worst_label"]].tolist() == pytest.approx(
        [0.675, 0.275, "politics"]
    )
    three = views.view_frame(ml_run, "combined", burn_out=3).set_index("id")
    assert three.loc["ex-2", "worst_label"] == "sports"
    assert three.loc["ex-2", "confidence"] == pytest.approx(0.7)
    assert three.loc["ex-2", "variability"] == pytest.approx(_std(0.9, 0.6, 0.6))
    whole = views.view_frame(ml_run, "combined").set_index("id")  # the run's saved combined map
    np.testing.assert_allclose(three["confidence"], whole["confidence"])
    assert three["worst_label"].tolist() == whole["worst_label"].tolist()


def test_a_combined_map_saved_before_an_axis_existed_is_aggregated_again_from_the_units(ml_run):
    """A run's saved combined map written before an ambiguity score existed lacks its column: the combined
    view aggregates the units' metrics again (the saved map's aggregation), with every axis."""
    from cartomap.analysis.datamap import AXIS_COLUMNS
    from cartomap.io import atomic_write_parquet
    from cartomap.scores.ambiguity import VARIABILITY

    whole = views.view_frame(ml_run, "combined")
    saved = ml_run.example_metrics()
    old = saved.drop(columns=[c for c in AXIS_COLUMNS if c != VARIABILITY])
    atomic_write_parquet(ml_run.example_metrics_path(), old)
    again = views.view_frame(ml_run, "combined")
    pd.testing.assert_frame_equal(again, whole)
    for axis in AXIS_COLUMNS:
        np.testing.assert_allclose(again[axis], saved[axis])


def test_the_paths_of_a_views_points(ml_run):
    ids, logits, labels = _dynamics(ml_run)
    names = ml_run.label_names
    combined = views.view_trajectories(logits, labels, ids, "combined", ["ex-2", "ex-9", "ex-0"], names)
    assert (
        combined["id"].tolist() == ["ex-2", "ex-2", "ex-0", "ex-0"] and combined["k"].tolist() == [2, 3] * 2
    )
    np.testing.assert_allclose(combined["confidence"], [0.675, 0.7, 0.45, 0.6])
    np.testing.assert_allclose(
        combined["variability"], [0.275, _std(0.9, 0.6, 0.6), 0.15, _std(0.3, 0.6, 0.9)]
    )
    sports = views.view_trajectories(logits, labels, ids, "label:1", ["ex-2#1", "ex-2"], names)
    assert sports["id"].tolist() == ["ex-2#1", "ex-2#1"]  # an example id is no point of a label view
    np.testing.assert_allclose(sports["confidence"], [0.75, 0.7])


def test_the_command_line_draws_the_sentence_map_after_k_recordings(token_run, tmp_path, capsys):
    from cartomap.cli import main

    table = tmp_path / "sentences.csv"
    argv = ["--cache", str(tmp_path / "cache"), "map", token_run.id, "--out", str(tmp_path / "m.html")]
    assert main([*argv, "--level", "sentence", "--burn-out", "1", "--table", str(table)]) == 0
    frame = pd.read_csv(table)
    np.testing.assert_allclose(frame["confidence"], [0.5, 0.1, 0.3])  # the worst words after one recording
    assert frame["worst_token"].tolist() == ["Paris", "Berlin", "The"]
    assert "3 rows" in capsys.readouterr().out


def test_a_combined_points_chart_is_of_the_worst_label_the_map_shown_gives_it(ml_run):
    assert views.unit_of(ml_run, "ex-2") == "ex-2#1"  # the saved map (every recording): sports
    assert views.unit_of(ml_run, "ex-2", "politics") == "ex-2#0"  # after 1 or 2 recordings
    trajectory = views.unit_trajectory(ml_run, "ex-2", worst_label="politics")
    assert trajectory.attrs["label"] == "politics" and not trajectory.attrs["present"]
    np.testing.assert_allclose(trajectory["gold_prob"], [0.4, 0.95, 0.95], rtol=1e-6)
    with pytest.raises(Exception, match="no label 'weather'"):
        views.unit_of(ml_run, "ex-2", "weather")
