"""Suspects of mislabelled tags on a token run: the detectors score its words, a review queue holds words
(each card the word marked in its sentence, its gold and predicted tag, p(gold) by recording), decisions
relabel a word's tag, and the corrected set is the run's sentences with those tags changed.

The run is tests/token_fixture.py's (3 CoNLL sentences, 11 words, hand-set logits over 3 recordings):
"Berlin" (sent-1#2) has p(gold) 0.1, 0.2, 0.9, the lowest mean of all words (0.4), then "Paris" (sent-0#4)
and "cat" (sent-2#1) at 0.5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from streamlit.testing.v1 import AppTest
from token_fixture import OVER_EPOCHS, make_token_run

from cartomap.curation import corrected, queue, sources
from cartomap.data.loading import load_dataset
from cartomap.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "review_suspects.py"
TAGS = ("B-LOC", "B-PER", "I-PER", "O")
#: the words by mean p(gold) over the 3 recordings, lowest first (OVER_EPOCHS' columns)
ORDER = np.argsort(OVER_EPOCHS.mean(axis=0), kind="stable")
UNITS = (
    [f"sent-0#{k}" for k in range(5)] + [f"sent-1#{k}" for k in range(3)] + [f"sent-2#{k}" for k in range(3)]
)


@pytest.fixture()
def run(tmp_path):
    return make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)


def test_detectors_score_the_words_and_a_queue_holds_tags_to_review(run):
    names = sources.available_detectors(run)
    assert "datamap_confidence" in names
    found = sources.from_detector(run, "datamap_confidence", top=3)
    assert list(found.ids) == [UNITS[k] for k in ORDER[:3]]  # the least confident words first
    assert found.ids[0] == "sent-1#2"  # Berlin
    items = queue.create_queue(run, "tags", found, per_item=1)
    berlin = items.iloc[0]
    assert berlin["tokens"] == "Mary visited ⟦Berlin⟧"
    assert (berlin["word"], berlin["sentence_id"], berlin["word_index"]) == ("Berlin", "sent-1", 2)
    assert berlin["gold"] == "B-LOC" and berlin["predicted"] == "B-LOC"  # learned at the last recording
    assert berlin["p_gold_epochs"] == pytest.approx([0.1, 0.2, 0.9])
    assert berlin["p_gold"] == pytest.approx(0.9)
    assert list(berlin["neighbour_ids"]) == [] and berlin["votes"] is None
    with pytest.raises(Exception, match=r"are not words \(<sentence id>#<k>\) of run"):
        sources.from_selection(run, ["sent-1"])  # a sentence id is not a word of the queue


def test_decisions_correct_the_tags_of_their_sentences(run):
    found = sources.from_selection(run, ["sent-1#2", "sent-0#4", "sent-2#0"])
    queue.create_queue(run, "picked", found, per_item=1)
    db = queue.open_queue(run, "picked")
    db.record("ann", "sent-1#2", "relabel", "B-PER")  # Berlin as a person
    db.record("ann", "sent-0#4", "keep", None)
    db.record("ann", "sent-2#0", "remove", None)  # drops its sentence
    result = corrected.write_corrected(run, "picked")
    assert (result["relabelled"], result["removed"]) == (1, 1)
    fixed = pd.read_parquet(run.corrected_path("picked"))
    assert fixed["id"].tolist() == ["sent-0", "sent-1"]
    assert [TAGS[t] for t in fixed["tags"].iloc[1]] == ["B-PER", "O", "B-PER"]
    assert [TAGS[t] for t in fixed["tags"].iloc[0]] == ["B-PER", "I-PER", "O", "O", "B-LOC"]  # kept
    # the corrected set trains as token data: run:RUN:corrected/<queue>
    data = load_dataset(RunStore(run.path.parents[1]).data_ref(result["ref"]))
    assert data.task_kind.name == "token" and len(data) == 2
    named = corrected.named(run, fixed, result["decisions"])
    assert named["tags"].iloc[1] == ["B-PER", "O", "B-PER"] and named["reviewed_words"].tolist() == [1, 1]
    table = result["decisions"].set_index("id")
    assert table.loc["sent-1#2", "label"] == "B-PER" and table.loc["sent-1#2", "original_label"] == "B-LOC"


def test_the_review_page_reviews_a_token_runs_tags(run, tmp_path, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(run.path.parents[1]))
    monkeypatch.syspath_prepend(str(ROOT))
    at = AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception, at.exception
    assert not any("does not apply" in i.value for i in at.info)
    at.selectbox(key="_kept_rs_detector").set_value("datamap_confidence").run()
    at.number_input(key="_kept_rs_top").set_value(2).run()
    at.button(key="rs_create").click().run()
    assert not at.exception, at.exception
    assert any("2 examples to review" in s.value for s in at.success)
    at.text_input(key="_kept_rs_annotator").set_value("ann").run()
    assert "Mary visited ⟦Berlin⟧" in [t.value for t in at.text]
    assert any(m.label == "Gold tag" and m.value == "B-LOC" for m in at.metric)
    relabels = {b.key: b.label for b in at.button if b.key and b.key.startswith("rs_relabel_")}
    assert set(relabels.values()) == {"Relabel: B-PER", "Relabel: I-PER", "Relabel: O"}  # the other tags
    at.button(key="rs_relabel_1").click().run()  # Berlin -> B-PER
    assert not at.exception, at.exception
    db = queue.open_queue(run, queue.list_queues(run)[0])
    assert db.decision_of("ann", "sent-1#2")["label"] == "B-PER"
    assert [t.value for t in at.text][0] != "Mary visited ⟦Berlin⟧"  # the next word's card
    at.button(key="rs_write").click().run()
    assert not at.exception, at.exception
    assert any("corrected/" in c.value for c in at.caption)
