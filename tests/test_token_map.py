"""A token run's map at sentence level, one sentence word by word, tag colours (no page)."""

from __future__ import annotations

import numpy as np
import pytest
from token_fixture import OVER_EPOCHS, STRENGTH, make_token_run, p_gold

from cartomap.analysis import datamap, tokens
from cartomap.errors import RunError


@pytest.fixture()
def run(tmp_path):
    return make_token_run(tmp_path / "cache", tmp_path)


def test_sentence_map_frame_scores_each_sentence_over_its_words(run):
    p, wrong = p_gold(), (1 - p_gold()) / 3  # "Berlin" puts p on B-PER, its gold B-LOC gets (1 - p) / 3
    frame = tokens.sentence_map_frame(run, "min")
    assert frame["id"].tolist() == ["sent-0", "sent-1", "sent-2"]
    assert frame["tokens"].tolist()[1] == "Mary visited Berlin"
    np.testing.assert_allclose(frame["confidence"], [p, wrong, p])
    assert frame["worst_token"].tolist() == ["Arnold", "Berlin", "The"]  # ties: the first word
    assert frame["n_words"].tolist() == [5, 3, 3]
    assert frame.loc[1, ["gold", "predicted"]].tolist() == ["B-LOC", "B-PER"]
    assert frame["correctness"].tolist() == [1.0, 0.0, 1.0]
    mean = tokens.sentence_map_frame(run, "mean")
    np.testing.assert_allclose(mean["confidence"], [p, (2 * p + wrong) / 3, p])
    softmin = tokens.sentence_map_frame(run, "softmin")
    assert wrong < softmin["confidence"][1] < mean["confidence"][1]


def test_one_sentence_word_by_word(run):
    words_frame = datamap.map_frame(run)
    unit_ids = ["sent-1#0", "sent-1#1", "sent-1#2"]
    probs = tokens.predicted_probabilities(run, unit_ids)
    np.testing.assert_allclose(probs, p_gold(STRENGTH))
    table = tokens.sentence_words(words_frame, "sent-1", probs)
    assert list(table.columns) == list(tokens.WORD_TABLE_COLUMNS)
    assert table["token"].tolist() == ["Mary", "visited", "Berlin"]
    assert table["predicted"].tolist() == ["B-PER", "O", "B-PER"]
    assert tokens.sentence_words(words_frame, "sent-9").empty
    # the words of "sent-1" only, not of a sentence whose id starts the same way
    assert tokens.sentence_rows(
        words_frame.assign(id=words_frame["id"].str.replace("sent-2", "sent-1#5")), "sent-1"
    ).tolist() == [5, 6, 7]
    styled = tokens.styled_words(table).to_html()
    assert tokens.tag_colour("B-PER") in styled and tokens.tag_colour("B-LOC") in styled


def test_tag_colours_follow_the_entity_type_and_leave_outside_blank():
    assert tokens.tag_colour("B-PER") == tokens.tag_colour("I-PER") != ""
    assert tokens.tag_colour("O") == "" and tokens.tag_style("O") == ""
    assert tokens.entity_type("S-LOC") == "LOC" and tokens.entity_type("NOUN") == "NOUN"
    assert tokens.split_unit_id("a#b#3") == ("a#b", 3)
    with pytest.raises(RunError, match="not a word id"):
        tokens.split_unit_id("sent-1")
    assert tokens.sentence_of("sent-1#2", "word") == "sent-1" and tokens.sentence_of("s", "sentence") == "s"


def test_a_words_trajectory_on_a_token_run(run):
    traj = datamap.gold_trajectory(run, "sent-1#2")
    np.testing.assert_allclose(traj["gold_prob"], (1 - p_gold()) / 3)
    np.testing.assert_allclose(traj["prob_B-PER"], p_gold())


def test_the_command_line_writes_the_sentence_level_table(run, tmp_path, capsys):
    import pandas as pd

    from cartomap.cli import main

    cache = str(tmp_path / "cache")
    out = tmp_path / "export"
    assert main(["--cache", cache, "export", run.id, "--out", str(out)]) == 0
    sentences = pd.read_parquet(out / "sentences.parquet")
    assert sentences["id"].tolist() == ["sent-0", "sent-1", "sent-2"]
    np.testing.assert_allclose(sentences["confidence"], [p_gold(), (1 - p_gold()) / 3, p_gold()])
    detectors = pd.read_parquet(out / "detectors.parquet")
    assert len(detectors) == 11 and detectors["id"].iloc[7] == "sent-1#2"  # a row per word

    table = tmp_path / "mean.csv"
    argv = ["--cache", cache, "map", run.id, "--out", str(tmp_path / "m.html"), "--level", "sentence"]
    assert main([*argv, "--method", "mean", "--table", str(table)]) == 0
    mean = pd.read_csv(table)
    p = p_gold()
    np.testing.assert_allclose(mean["confidence"], [p, (2 * p + (1 - p) / 3) / 3, p])
    assert mean["worst_token"].tolist() == ["Arnold", "Berlin", "The"]
    assert "3 rows" in capsys.readouterr().out


def test_the_token_benchmarks_sentences_follow_a_fixed_rule():
    """bench/scale_token.py: synthetic sentences are demo texts rotated, tagged by a rule, not by people."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import scale_token

    words = ["The", "New", "York", "Times", "sold", "3", "papers", "in", "Paris"]
    assert scale_token.tag_words(words) == ["O", "B-CAP", "I-CAP", "I-CAP", "O", "B-NUM", "O", "O", "B-CAP"]
    assert scale_token.words_of("A man's dog, 2 cats.") == ["A", "man's", "dog", ",", "2", "cats", "."]
    ids, rows = scale_token.synthetic_sentences([["a", "b", "c"], ["d", "e"]], 5, "syn")
    assert ids == ["syn-0", "syn-1", "syn-2", "syn-3", "syn-4"]
    assert rows == [["a", "b", "c"], ["d", "e"], ["b", "c", "a"], ["e", "d"], ["c", "a", "b"]]


def test_p_predicted_is_of_the_recording_the_map_is_after(cache, tmp_path):
    from cartomap.analysis import epochs
    from cartomap.errors import DataError

    run = make_token_run(cache, tmp_path, OVER_EPOCHS)
    assert tokens.map_recording(datamap.map_frame(run)) is None  # every recording: its last
    at_2 = epochs.run_map_at(run, 2)
    assert tokens.map_recording(at_2) == 2
    assert tokens.map_recording(epochs.run_map_at(run, 3)) is None
    berlin = ["sent-1#2"]  # p(gold) 0.1, 0.2, 0.9; the rest spread evenly over the 3 other tags
    np.testing.assert_allclose(tokens.predicted_probabilities(run, berlin, k=1), [0.9 / 3])
    np.testing.assert_allclose(tokens.predicted_probabilities(run, berlin, k=2), [0.8 / 3])
    np.testing.assert_allclose(tokens.predicted_probabilities(run, berlin), [0.9])
    with pytest.raises(DataError, match="expected 1 to 3"):
        tokens.predicted_probabilities(run, berlin, k=4)


def test_a_token_runs_regions_are_drawn_by_threshold_unless_told(cache, tmp_path):
    """'O' holds most words of a NER corpus: a rank among all words would put the minority tags' words in
    the ambiguous share wholesale, so a token run's map judges each word by its own score (its kind's
    rule); rank stays one option away. By hand on OVER_EPOCHS, variability (population std of p(gold)):
    Berlin (0.1, 0.2, 0.9) 0.356 and The (0.3, 0.9, 0.9) 0.283 reach 0.2; Arnold, Paris and Mary 0.082,
    the rest 0."""
    from cartomap.scores.metrics import RegionRule
    from cartomap.tasks.token import TOKEN

    run = make_token_run(cache, tmp_path, gold_probs=OVER_EPOCHS)
    assert TOKEN.region_method == "threshold" and run.region_rule().method == "threshold"
    assert RegionRule.for_kind(None).method == "rank"  # a pair or a text: Cartography's rank
    frame = datamap.map_frame(run)
    rule = datamap.rule_of(frame)
    assert rule == run.region_rule()
    assert (frame["region"].to_numpy() == rule.regions(frame)).all()
    by_var = datamap.map_frame(run, regions=run.region_rule(axis="variability"))
    assert set(by_var.loc[by_var["region"] == "ambiguous", "id"]) == {"sent-1#2", "sent-2#0"}
    ranked = datamap.map_frame(run, regions=run.region_rule(axis="variability", method="rank"))
    assert (ranked["region"] == "ambiguous").sum() == 4  # a third of 11 words, ties by index
