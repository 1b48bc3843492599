"""One list of score columns per unit: a toy ambiguity statistic and toy detectors, registered at test time
with their inputs and units and nothing else, reach every map of the units they serve (a pair run's, a token
run's word and sentence maps, a multi-label run's label and combined maps), the colour menu, the truth report
and ``cartomap export``; and are absent, with no error, where their inputs are missing or their unit is not
served. Runs are the hand-set fixtures (no training)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis import colourings, datamap, multilabel, tokens, truth
from cartomap.cli import main
from cartomap.errors import DataError
from cartomap.scores import ambiguity, detectors
from cartomap.scores.columns import score_columns
from cartomap.scores.metrics import gold_probabilities, softmax
from cartomap.tasks.units import Unit

sys.path.insert(0, str(Path(__file__).parent))
from multilabel_fixture import make_multilabel_run  # noqa: E402
from test_truth import synthetic_run, votes_rows, write_votes  # noqa: E402
from token_fixture import OVER_EPOCHS, make_token_run  # noqa: E402

STAT = "toy_range"  # an ambiguity statistic of examples and (example, label) units, not of words
READS = "threshold_closeness"  # a metric column no map carried before a detector read it
CLOSE = "toy_closeness"  # a detector of examples and words reading it, not of (example, label) units
OOF_ANY = "toy_oof"  # a detector of every unit that needs out-of-fold logits
OOF_WORDS = "toy_word_oof"  # one that serves words only


def toy_range(probs, labels, logits=None):
    """max_e p_e(y*) - min_e p_e(y*): the range of p(gold) over the recordings, in [0, 1]; higher = more
    ambiguous."""
    gold = np.take_along_axis(probs, labels[None, :, None], axis=-1)[..., 0]
    return gold.max(axis=0) - gold.min(axis=0)


def toy_closeness(inputs):
    """s_i = c_i (1 - c_i), c_i the confidence: highest at c = 1/2; higher = nearer the decision."""
    values = inputs.metric(READS)
    if values is None:
        conf = gold_probabilities(softmax(inputs.logits()), inputs.y()).mean(axis=0)
        values = conf * (1 - conf)
    return values


def toy_oof(inputs):
    """s_i = 1 - p_i(y_i) on out-of-fold logits."""
    p = softmax(inputs.oof(), axis=1)
    return 1 - p[np.arange(len(p)), inputs.y()]


@pytest.fixture()
def plugins(monkeypatch):
    """The toys registered for one test (the registries as they were afterwards)."""
    monkeypatch.setattr(ambiguity, "SCORES", dict(ambiguity.SCORES))
    monkeypatch.setattr(detectors, "REGISTRY", dict(detectors.REGISTRY))
    ambiguity.register(
        ambiguity.AmbiguityScore(STAT, "toy range", toy_range, units=(Unit.EXAMPLE, Unit.LABEL), on_map=True)
    )
    detectors.register(
        detectors.Detector(
            CLOSE,
            toy_closeness,
            detectors.DYNAMICS,
            (READS,),
            title="toy closeness",
            units=("example", "word"),
        )
    )
    detectors.register(detectors.Detector(OOF_ANY, toy_oof, detectors.OOF, title="toy oof"))
    detectors.register(detectors.Detector(OOF_WORDS, toy_oof, detectors.OOF, units=(Unit.WORD,)))


def _menu(frame: pd.DataFrame) -> dict:
    return colourings.available(frame)


def _gold_probs(run) -> np.ndarray:
    """p(gold) [E, units] of ``run``'s recorded dynamics, in its metrics' order."""
    ids, logits = run.dynamics("train")
    labels = run.unit_labels("train")[1]
    return gold_probabilities(softmax(logits), labels), list(ids)


def test_the_registries_declare_units_and_inputs(plugins):
    example = score_columns(Unit.EXAMPLE)
    assert example[: len(ambiguity.MAP_SCORES) + 1] == (*ambiguity.MAP_SCORES, STAT) and example[-1] == READS
    assert STAT in score_columns(Unit.LABEL) and READS not in score_columns(Unit.LABEL)
    assert READS in score_columns(Unit.WORD) and STAT not in score_columns(Unit.WORD)
    assert ambiguity.get(STAT).needs == (ambiguity.RECORDINGS,)
    word_only = {
        n for n in detectors.names() if detectors.get(n).units == (Unit.WORD,)
    }  # cleanlab's token ones
    assert set(detectors.names()) - set(detectors.names(Unit.LABEL)) == {
        CLOSE,
        OOF_WORDS,
        "consensus_p1g0",
        *word_only,
    }
    assert {"cleanlab_token_issue", "cleanlab_sentence_quality", "cleanlab_sentence_softmin"} <= word_only
    assert detectors.metric_columns(Unit.LABEL) == detectors.metric_columns(None)[:-1]  # READS is the last
    with pytest.raises(DataError, match="already registered"):
        detectors.register(detectors.Detector(CLOSE, toy_closeness, detectors.DYNAMICS))
    with pytest.raises(DataError, match="already registered"):
        ambiguity.register(ambiguity.AmbiguityScore(STAT, "again", toy_range))
    with pytest.raises(ValueError, match="unknown unit"):
        detectors.Detector("bad", toy_closeness, detectors.DYNAMICS, units=("sentence",))
    inputs = detectors.DetectorInputs(
        labels=np.zeros(3, dtype=int), metrics={READS: np.ones(3)}, unit="label"
    )
    with pytest.raises(DataError, match="scores examples, words, not"):
        detectors.score(CLOSE, inputs)


def test_a_pair_run_carries_them_on_its_map_menu_report_and_export(plugins, tmp_path, capsys):
    run = synthetic_run(tmp_path / "cache", write_votes(tmp_path / "v.jsonl", votes_rows()))
    frame = datamap.map_frame(run)
    gold, ids = _gold_probs(run)
    by_id = pd.Series(gold.max(axis=0) - gold.min(axis=0), index=ids)
    assert frame[STAT].to_numpy() == pytest.approx(by_id.loc[frame["id"]].to_numpy())
    conf = frame["confidence"].to_numpy()
    assert frame[READS].to_numpy() == pytest.approx(conf * (1 - conf))
    menu = _menu(frame)
    stat = menu[colourings.AMBIGUITY_PREFIX + "toy range"]
    assert colourings.values(frame, stat) == pytest.approx(frame[STAT].to_numpy())
    close = menu[colourings.DETECTOR_PREFIX + "toy closeness"]
    assert colourings.values(frame, close) == pytest.approx(conf * (1 - conf))
    assert not any("toy oof" in name for name in menu)  # no out-of-fold logits: not offered, no error
    # the map after k recordings has them too
    assert STAT in datamap.map_frame(run, burn_out=2).columns

    report = truth.truth_report(run, n_boot=10)
    rows = {r["metric"]: r for r in report["spearman"]}
    assert {STAT, READS} <= set(rows)
    entropy = run.examples()["human_entropy"].to_numpy()
    metrics = run.metrics().set_index("id").loc[run.examples()["id"]]
    from scipy.stats import spearmanr

    assert rows[STAT]["spearman"] == pytest.approx(spearmanr(metrics[STAT], entropy).statistic)
    assert CLOSE in {r["detector"] for r in report["detectors"]}
    unavailable = {r["detector"]: r for r in report["unavailable"]}
    assert OOF_ANY in unavailable and "out-of-fold" in unavailable[OOF_ANY]["needs"]
    assert OOF_WORDS not in unavailable and OOF_WORDS not in {r["detector"] for r in report["detectors"]}
    assert "toy closeness" in truth.truth_markdown(report)

    out = tmp_path / "export"
    assert main(["--cache", str(tmp_path / "cache"), "export", run.id, "--out", str(out)]) == 0
    table = pd.read_parquet(out / "detectors.parquet")
    assert CLOSE in table.columns and OOF_ANY not in table.columns and OOF_WORDS not in table.columns
    exported = pd.read_csv(out / "metrics.csv").set_index("id").loc[table["id"]]
    assert table[CLOSE].to_numpy() == pytest.approx(exported[READS].to_numpy())
    assert exported[STAT].to_numpy() == pytest.approx(by_id.loc[table["id"]].to_numpy())


def test_a_token_run_carries_the_word_ones_on_its_word_and_sentence_maps(plugins, tmp_path):
    run = make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)
    words = datamap.map_frame(run)
    assert words.attrs["unit"] == "word"
    assert READS in words.columns and STAT not in words.columns  # words are not the statistic's unit
    menu = _menu(words)
    assert colourings.DETECTOR_PREFIX + "toy closeness" in menu
    assert not any("toy range" in name or "toy oof" in name for name in menu)
    for method in ("min", "mean"):
        sentences = tokens.sentence_map_frame(run, method)
        assert sentences.attrs["unit"] == "word" and STAT not in sentences.columns
        # each sentence carries its worst word's value
        by_word = words.set_index("id")[READS]
        worst = [f"{s}#{k}" for s, k in zip(sentences["id"], sentences["worst_word"], strict=True)]
        assert sentences[READS].to_numpy() == pytest.approx(by_word.loc[worst].to_numpy())
        offered = _menu(sentences)
        close = offered[colourings.DETECTOR_PREFIX + "toy closeness"]
        assert colourings.values(sentences, close) == pytest.approx(by_word.loc[worst].to_numpy())
        # the detectors of the dynamics every word map offers, the sentence map offers too
        assert {c.detector for c in offered.values()} == {c.detector for c in menu.values()}
    after = tokens.sentence_map_frame(run, "min", burn_out=2)
    assert READS in after.columns and colourings.DETECTOR_PREFIX + "toy closeness" in _menu(after)


def test_a_multilabel_run_carries_the_label_ones_on_its_label_and_combined_maps(plugins, tmp_path):
    run = make_multilabel_run(tmp_path / "cache", tmp_path)
    gold, ids = _gold_probs(run)
    by_unit = pd.Series(gold.max(axis=0) - gold.min(axis=0), index=ids)
    one = multilabel.view_frame(run, "label:1")
    assert one.attrs["unit"] == "label" and READS not in one.columns  # not the detector's unit
    assert one[STAT].to_numpy() == pytest.approx(by_unit.loc[one["id"]].to_numpy())
    menu = _menu(one)
    assert colourings.AMBIGUITY_PREFIX + "toy range" in menu
    assert not any("toy closeness" in name or "toy oof" in name for name in menu)
    combined = multilabel.view_frame(run, multilabel.COMBINED)
    worst = [
        f"{i}#{run.label_names.index(w)}"
        for i, w in zip(combined["id"], combined["worst_label"], strict=True)
    ]
    assert combined[STAT].to_numpy() == pytest.approx(by_unit.loc[worst].to_numpy())  # its worst label's
    assert colourings.AMBIGUITY_PREFIX + "toy range" in _menu(combined)
    # every detector a label's map offers, the combined map offers too (its worst label's columns)
    assert {c.detector for c in _menu(combined).values()} == {c.detector for c in menu.values()}
    assert STAT in multilabel.view_frame(run, multilabel.COMBINED, burn_out=2).columns
    out = tmp_path / "export"
    assert main(["--cache", str(tmp_path / "cache"), "export", run.id, "--out", str(out)]) == 0
    table = pd.read_parquet(out / "detectors.parquet")
    assert "aum" in table.columns and CLOSE not in table.columns and "consensus_p1g0" not in table.columns


def test_a_run_written_before_a_statistic_was_registered_has_no_column_and_no_error(tmp_path, monkeypatch):
    run = synthetic_run(tmp_path / "cache", write_votes(tmp_path / "v.jsonl", votes_rows()))
    monkeypatch.setattr(ambiguity, "SCORES", dict(ambiguity.SCORES))
    ambiguity.register(ambiguity.AmbiguityScore(STAT, "toy range", toy_range, on_map=True))
    frame = datamap.map_frame(run)  # its metrics file predates the statistic
    assert STAT not in frame.columns and not any("toy range" in name for name in _menu(frame))
    report = truth.truth_report(run, n_boot=0)
    assert STAT not in {r["metric"] for r in report["spearman"]}
