"""Token runs at cleanlab's level: entity noise, k folds by sentence, cleanlab's token classification as
detectors, the table of recurring tag swaps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from token_fixture import CONLL, make_token_run

from cartomap.errors import DataError
from cartomap.experiments.token_folds import sentence_folds
from cartomap.scores import detectors, swaps, tag_noise, token_quality

NAMES = ("B-LOC", "B-PER", "I-LOC", "I-PER", "O")
B_LOC, B_PER, I_LOC, I_PER, OUT = range(5)


# --------------------------------------------------------------------------- entity noise
def plant(tags, kind, words=None, rate=1.0, seed=0):
    return tag_noise.plant_entity_noise(tags, NAMES, rate=rate, kinds=(kind,), seed=seed, words=words)


def test_a_type_swap_retypes_the_whole_entity():
    out = plant([[B_PER, I_PER, OUT]], tag_noise.TYPE_SWAP)
    assert out.tags[0].tolist() == [B_LOC, I_LOC, OUT]  # the only other type
    assert out.word_changed.tolist() == [True, True, False] and out.kind == ["type"]


def test_a_dropped_entity_becomes_outside():
    out = plant([[OUT, B_LOC, I_LOC]], tag_noise.DROP)
    assert out.tags[0].tolist() == [OUT, OUT, OUT] and out.word_changed.tolist() == [False, True, True]


def test_a_boundary_shift_grows_into_an_outside_neighbour_or_shrinks():
    grown = plant([[OUT, B_PER, I_PER]], tag_noise.BOUNDARY)  # no right neighbour: grows left
    assert grown.tags[0].tolist() == [B_PER, I_PER, I_PER]
    assert grown.word_changed.tolist() == [True, True, False]
    shrunk = plant([[B_PER, I_PER]], tag_noise.BOUNDARY)  # no OUT neighbour: loses its last word
    assert shrunk.tags[0].tolist() == [B_PER, OUT]
    assert plant([[B_PER]], tag_noise.BOUNDARY).sentence_changed.tolist() == [False]  # cannot shift


def test_a_spurious_entity_goes_on_a_capitalised_outside_word_away_from_entities():
    tags = [[B_PER, OUT], [OUT, OUT, OUT]]
    out = plant(tags, tag_noise.SPURIOUS, words=[["Ann", "sings"], ["the", "Big", "cat"]])
    assert out.tags[0].tolist() == [B_PER, OUT]  # "sings" touches an entity
    assert out.tags[1][[0, 2]].tolist() == [OUT, OUT] and out.tags[1][1] in (B_LOC, B_PER)
    assert out.kind == ["", "spurious"]


def test_entity_noise_keeps_iob2_valid_and_corrupts_the_share_of_entities_asked_for():
    rng = np.random.default_rng(0)
    sentences = []
    for _ in range(200):  # random valid IOB2 sentences
        tags, k = [], 0
        while k < 8:
            if rng.random() < 0.3:
                etype = int(rng.integers(2))
                length = int(rng.integers(1, 4))
                tags += [(B_LOC, B_PER)[etype]] + [(I_LOC, I_PER)[etype]] * (length - 1)
                k += length
            else:
                tags.append(OUT)
                k += 1
        sentences.append(tags)
    n_entities = sum(len(tag_noise.entities(t, NAMES)) for t in sentences)
    for seed in range(5):
        out = tag_noise.plant_entity_noise(sentences, NAMES, rate=0.05, seed=seed)
        assert all(tag_noise.is_valid_iob2(t, NAMES) for t in out.tags)
        assert int(out.sentence_changed.sum()) == round(0.05 * n_entities)
        assert sum(out.counts().values()) == int(out.sentence_changed.sum())
        flat_clean = np.concatenate([np.asarray(t) for t in sentences])
        assert (out.word_changed == (np.concatenate(out.tags) != flat_clean)).all()
    assert not tag_noise.is_valid_iob2([OUT, I_PER], NAMES)
    with pytest.raises(DataError, match="unknown noise kind"):
        tag_noise.plant_entity_noise(sentences, NAMES, kinds=("typo",))


# --------------------------------------------------------------------------- cleanlab's token detectors
# Two sentences (3 + 2 words), 3 tags. Word 1 of sentence "a" (gold 0) is predicted as tag 2 with 0.9.
GOLD = np.array([0, 0, 1, 2, 2])
PROBS = np.array(
    [
        [0.8, 0.1, 0.1],
        [0.05, 0.05, 0.9],
        [0.1, 0.8, 0.1],
        [0.1, 0.1, 0.8],
        [0.2, 0.1, 0.7],
    ]
)
SENTENCES = np.array(["a", "a", "a", "b", "b"], dtype=object)


def token_inputs(**changes):
    values = dict(labels=GOLD, oof_logits=np.log(PROBS), sentences=SENTENCES)
    values.update(changes)
    return detectors.DetectorInputs(**values)


def test_cleanlab_token_detectors_give_cleanlabs_scores_flat():
    from cleanlab.token_classification.rank import get_label_quality_scores

    inputs = token_inputs()
    # hand-checked: word quality = p(gold); sentence quality = the min of its words' (cleanlab's default)
    word, sentence = token_quality.quality_scores(GOLD, PROBS, SENTENCES)
    assert np.allclose(word, [0.8, 0.05, 0.8, 0.8, 0.7])
    assert np.allclose(sentence, [0.05, 0.05, 0.05, 0.7, 0.7])
    assert np.allclose(detectors.score("cleanlab_sentence_quality", inputs), 1 - sentence)
    ref, _ = get_label_quality_scores(
        [[0, 0, 1], [2, 2]], [PROBS[:3], PROBS[3:]], sentence_score_method="softmin"
    )
    softmin = detectors.score("cleanlab_sentence_softmin", inputs)
    assert np.allclose(softmin, 1 - np.repeat(ref, [3, 2]))
    issue = detectors.score("cleanlab_token_issue", inputs)
    assert np.argmax(issue) == 1 and issue[1] == pytest.approx(1 + 0.95)  # flagged, then 1 - quality
    assert token_quality.issue_mask(GOLD, PROBS, SENTENCES).tolist() == [False, True, False, False, False]


def test_cleanlab_token_detectors_need_out_of_fold_inputs_and_sentences():
    for name in ("cleanlab_token_issue", "cleanlab_sentence_quality", "cleanlab_sentence_softmin"):
        d = detectors.get(name)
        assert d.missing(token_inputs(sentences=None)) == [detectors.SENTENCES]
        assert d.missing(token_inputs(oof_logits=None)) == [detectors.OOF]
    # they serve words: for data of examples they are not "unavailable for want of an experiment", they do
    # not apply (the inputs' unit says which detectors are asked)
    from cartomap.tasks.units import Unit

    assert "cleanlab_token_issue" in detectors.unavailable(
        replace(token_inputs(oof_logits=None), unit=Unit.WORD)
    )
    examples = replace(token_inputs(sentences=None), unit=Unit.EXAMPLE)
    assert not {"cleanlab_token_issue", "cleanlab_sentence_quality"} & set(detectors.unavailable(examples))
    with pytest.raises(DataError, match="next to each other"):
        token_quality.split_by_sentence(np.array(["a", "b", "a"], dtype=object))
    assert token_quality.sentence_keys(["s#1#0", "s#1#1", "t#0"]).tolist() == ["s#1", "s#1", "t"]


# --------------------------------------------------------------------------- swaps and folds
def test_the_swap_table_counts_recurring_gold_to_predicted_swaps():
    words = ["RT", "@x", "RT", "http://a", "RT", "http://b", "Paris"]
    gold = [OUT, OUT, OUT, OUT, OUT, OUT, B_LOC]
    pred = [B_PER, OUT, B_PER, B_PER, B_PER, B_PER, B_LOC]
    sents = ["t1", "t1", "t2", "t2", "t3", "t3", "t3"]
    table = swaps.swap_table(words, gold, pred, sents, NAMES)
    assert list(table.columns) == list(swaps.COLUMNS)
    first = table.iloc[0]
    assert (first["word"], first["gold"], first["predicted"], first["count"]) == ("RT", "O", "B-PER", 3)
    assert first["sentences"] == 3 and first["example_ids"] == "t1, t2, t3"
    assert table["count"].sum() == 5  # every wrong word once; right words not at all
    assert swaps.swap_table(words, gold, pred, sents, NAMES, min_count=2)["word"].tolist() == ["RT"]
    assert "\\|" in swaps.to_markdown(pd.DataFrame([{**first.to_dict(), "word": "a|b"}]))


def test_folds_split_whole_sentences_evenly():
    folds = sentence_folds(10, 3, seed=1)
    assert sorted(np.bincount(folds).tolist()) == [3, 3, 4]
    assert not np.array_equal(folds, sentence_folds(10, 3, seed=2))
    with pytest.raises(DataError, match="at least 3 sentences"):
        sentence_folds(2, 3)


# --------------------------------------------------------------------------- end to end
ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--epochs", "1", "--batch-size", "2", "--max-length", "32"]


def test_experiments_of_run_finds_a_runs_k_folds_by_its_data_or_fingerprint(tmp_path):
    """Unfinished experiments by the path of the run's own data, finished ones by the training set's
    fingerprint; another run's, another kind's and parameters naming no data are left out."""
    from cartomap.config import DataConfig, RunConfig
    from cartomap.experiments.store import ExperimentStore
    from cartomap.experiments.token_folds import KIND, TokenFoldsParams, experiments_of_run
    from cartomap.runs.state import State

    run = make_token_run(tmp_path / "cache", tmp_path)
    store = ExperimentStore(tmp_path / "cache")

    def params(path, folds=2) -> dict:
        return TokenFoldsParams(base=RunConfig(data=DataConfig(path=str(path))), folds=folds).to_dict()

    mine = store.create(KIND, params(run.data_config().path))  # queued, on the run's own copy
    other = store.create(KIND, params(tmp_path / "other.conll"))
    moved = store.create(KIND, params(tmp_path / "moved.conll", folds=3))  # finished, same training set
    moved.set_status(state=State.DONE)
    moved.write_result("summary", {"train_fingerprint": run.info["train_fingerprint"]})
    stale = store.create(KIND, params(tmp_path / "stale.conll", folds=4))  # finished, another set
    stale.set_status(state=State.DONE)
    stale.write_result("summary", {"train_fingerprint": "not this one"})
    store.create(KIND, {"folds": 2})  # names no data
    store.create("pruning", params(run.data_config().path))  # another kind on the same data
    found = experiments_of_run(run, store)
    assert {e.id for e in found} == {mine.id, moved.id}
    assert [e.id for e in found] == [e.id for e in store.list(KIND) if e.id in {mine.id, moved.id}]
    assert other.id not in {e.id for e in found}


@pytest.fixture(scope="module")
def token_store(tiny_model, tmp_path_factory):
    """A token run of the fixture's 3 sentences (tiny model, 1 epoch) in a store of its own, no folds yet."""
    from cartomap.cli import main
    from cartomap.runs.store import RunStore

    tmp = tmp_path_factory.mktemp("token-oof")
    data = tmp / "train.conll"
    data.write_text(CONLL, encoding="utf-8")
    cache = ["--cache", str(tmp / "c")]
    assert main([*cache, "train", "--data", str(data), "--dev", "none", "--model", tiny_model, *SMALL]) == 0
    return {"root": tmp / "c", "cache": cache, "run": RunStore(tmp / "c").list()[0], "model": tiny_model}


def test_token_run_gets_out_of_fold_detectors_and_swaps_from_the_command_line(token_store, tmp_path, capsys):
    from cartomap.cli import main
    from cartomap.experiments.store import ExperimentStore
    from cartomap.experiments.token_folds import KIND, oof_of_run

    run, cache = token_store["run"], token_store["cache"]
    small = ["--model", token_store["model"], *SMALL]
    capsys.readouterr()
    # no k folds yet: a one-line refusal naming the command that makes the inputs
    assert main([*cache, "review-queue", "create", run.id, "q", "--detector", "cleanlab_token_issue"]) == 2
    err = capsys.readouterr().err
    assert (
        "no oof inputs" in err and f"cartomap prune --data run:{run.id}" in err and len(err.splitlines()) == 1
    )
    # cartomap prune on a token run: k folds by sentence, nothing pruned
    assert (
        main([*cache, "prune", "--data", f"run:{run.id}", "--folds", "3", "--categories", "P1G2", *small])
        == 2
    )
    assert "--categories and --export do not apply" in capsys.readouterr().err
    assert main([*cache, "prune", "--data", f"run:{run.id}", "--folds", "3", *small]) == 0
    assert "Out-of-fold word probabilities (3 folds by sentence)" in capsys.readouterr().out
    (exp,) = ExperimentStore(token_store["root"]).list(KIND)
    oof = exp.result("oof")
    unit_ids = run.unit_labels("train", labels=False)[0]
    assert oof["id"].tolist() == unit_ids  # every word once, in the run's order
    fold_of_sentence = oof.assign(s=token_quality.sentence_keys(oof["id"])).groupby("s")["fold"].nunique()
    assert (fold_of_sentence == 1).all() and oof["fold"].nunique() == 3
    found = oof_of_run(run, ExperimentStore(token_store["root"]))
    assert found is not None and found[1].shape == (11, 4)
    # the detectors reach it: a review queue of words by cleanlab's token issue score
    assert main([*cache, "review-queue", "create", run.id, "q", "--detector", "cleanlab_token_issue"]) == 0
    assert "detector:cleanlab_token_issue" in capsys.readouterr().out
    queue = pd.read_parquet(run.path / "review" / "q" / "queue.parquet")
    assert set(queue["id"].astype(str)) <= set(unit_ids)
    # the swaps table, out of fold by default, from the last recording when asked
    assert main([*cache, "swaps", run.id]) == 0
    assert f"predictions: out-of-fold of experiment {exp.id}" in capsys.readouterr().out
    assert main([*cache, "swaps", run.id, "--source", "last", "--csv", str(tmp_path / "s.csv")]) == 0
    assert "predictions: last recording" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "s.csv")
    assert list(table.columns) == list(swaps.COLUMNS)
    # cartomap export's detectors.parquet carries them per word
    assert main([*cache, "export", run.id, "--out", str(tmp_path / "ref")]) == 0
    exported = pd.read_parquet(tmp_path / "ref" / "detectors.parquet")
    assert exported["id"].tolist() == unit_ids and exported["cleanlab_sentence_quality"].notna().all()


def _page(name: str, run, monkeypatch, root):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CARTOMAP_CACHE", str(root))
    monkeypatch.syspath_prepend(str(ROOT))
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    return at


def test_the_data_map_of_a_token_run_shows_its_recurring_swaps(tmp_path, monkeypatch):
    run = make_token_run(tmp_path / "cache", tmp_path)  # "Berlin" (B-LOC) predicted B-PER
    at = _page("data_map.py", run, monkeypatch, tmp_path / "cache")
    at.session_state["dm_swaps_min"] = 1
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (table,) = [d.value for d in at.dataframe if "example_ids" in d.value.columns]
    assert table[["word", "gold", "predicted", "count"]].values.tolist() == [["Berlin", "B-LOC", "B-PER", 1]]
    assert any("predictions: last recording" in c.value and f"run:{run.id}" in c.value for c in at.caption)


def test_the_prune_labels_page_runs_and_shows_a_token_runs_k_folds(token_store, monkeypatch):
    from cartomap.experiments.store import ExperimentStore
    from cartomap.experiments.token_folds import KIND

    run = token_store["run"]
    at = _page("pruning.py", run, monkeypatch, token_store["root"])
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(f"Run {run.id} is a token run" in i.value and "Nothing is pruned" in i.value for i in at.info)
    if not ExperimentStore(token_store["root"]).list(KIND):  # this test alone: start it from the page
        at.text_input(key="_kept_prune_token_model").set_value(token_store["model"])
        at.number_input(key="_kept_prune_token_folds").set_value(2)
        at.button(key="prune_token_start").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        (exp,) = ExperimentStore(token_store["root"]).list(KIND)
        patience.wait_for(lambda: exp.state == "done", what="the k folds of the page")
        at.run()
    assert any("out-of-fold word accuracy" in c.value for c in at.caption)
    suspects = [d.value for d in at.dataframe if "p_gold" in d.value.columns]
    assert suspects and set(suspects[0]["id"]) <= set(run.unit_labels("train", labels=False)[0])


def test_review_suspects_says_which_command_makes_a_token_runs_out_of_fold_detectors(tmp_path, monkeypatch):
    run = make_token_run(tmp_path / "cache", tmp_path)
    at = _page("review_suspects.py", run, monkeypatch, tmp_path / "cache")
    at.session_state["_kept_rs_new"] = True
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (hint,) = [c.value for c in at.caption if "Need out-of-fold probabilities" in c.value]
    assert "cleanlab_token_issue" in hint and "cleanlab_sentence_quality" in hint
    assert f"cartomap prune --data run:{run.id} --folds 5" in hint and "never saw the sentence" in hint
