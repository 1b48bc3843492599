"""Review queues of a token run by sentence and by entity span: the tags of a sentence fixed on one card,
kept valid in the file's BIO scheme (repaired or refused), the corrected set in CoNLL columns.

The run is tests/token_fixture.py's (3 CoNLL sentences, IOB2, tags B-LOC B-PER I-PER O) with OVER_EPOCHS:
by mean p(gold) over 3 recordings the words rank Berlin (sent-1#2, 0.4), Paris (sent-0#4) and cat
(sent-2#1) at 0.5, Mary (sent-1#0) 0.7, Arnold (sent-0#0) 0.8, the rest 0.9 or more; every word is
predicted right at the last recording, so the predicted spans are the gold ones: sent-0 words 0-1 (PER)
and 4 (LOC), sent-1 words 0 (PER) and 2 (LOC); sent-2 has none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import patience
import pytest
from streamlit.testing.v1 import AppTest
from token_fixture import OVER_EPOCHS, make_token_run

from cartomap.config import DataConfig
from cartomap.curation import corrected, exchange, levels, queue, sources, tags
from cartomap.curation.aggregate import agreement
from cartomap.data.conll import read_tagged
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "review_suspects.py"
DETECTOR = "datamap_confidence"  # 1 - mean p(gold): higher = more suspect


@pytest.fixture()
def run(tmp_path):
    return make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)


# --------------------------------------------------------------------------- the tag editor
@pytest.mark.parametrize(
    ("before", "changes", "after"),
    [
        # IOB2: a retyped first word takes its entity along
        (["B-PER", "I-PER", "O", "B-LOC"], {0: "B-LOC"}, ["B-LOC", "I-LOC", "O", "B-LOC"]),
        # ... and so does a retyped inner word
        (["B-PER", "I-PER", "I-PER"], {2: "I-LOC"}, ["B-LOC", "I-LOC", "I-LOC"]),
        # a word set to O: the next I- opens the rest of the entity
        (["B-PER", "I-PER", "I-PER"], {0: "O"}, ["O", "B-PER", "I-PER"]),
        (["B-PER", "I-PER", "I-PER"], {1: "O"}, ["B-PER", "O", "B-PER"]),
        # a changed prefix splits the entity instead of retyping it
        (["B-PER", "I-PER"], {1: "B-LOC"}, ["B-PER", "B-LOC"]),
        # a new entity's I- after O opens it
        (["O", "O", "O"], {1: "I-PER", 2: "I-PER"}, ["O", "B-PER", "I-PER"]),
        # two words edited in one decision, the explicit one wins over the entity's retype
        (["B-PER", "I-PER", "O"], {0: "B-LOC", 1: "O"}, ["B-LOC", "O", "O"]),
    ],
)
def test_iob2_edits_are_repaired(before, changes, after):
    assert tags.edit_tags(before, changes, "IOB2") == after
    assert tags.problems(after, "IOB2") == []


@pytest.mark.parametrize(
    ("before", "changes", "after"),
    [
        # IOB1: I- opens an entity, B- only separates two adjacent entities of one type
        (["I-PER", "I-PER", "O", "I-LOC"], {1: "O"}, ["I-PER", "O", "O", "I-LOC"]),
        (["I-PER", "B-PER"], {0: "O"}, ["O", "I-PER"]),  # B-PER would follow O: it opens, as I-PER
        (["I-PER", "I-PER", "B-PER"], {0: "I-LOC"}, ["I-LOC", "I-LOC", "I-PER"]),
        (["O", "O"], {1: "B-PER"}, ["O", "I-PER"]),
    ],
)
def test_iob1_edits_are_repaired_in_iob1(before, changes, after):
    assert tags.edit_tags(before, changes, "IOB1") == after
    assert tags.problems(after, "IOB1") == []


def test_an_edit_that_breaks_the_scheme_is_refused_naming_the_word_without_repair():
    with pytest.raises(
        CartomapError, match=r"^word 1 `I-PER` would follow `O`: an entity must start with B-"
    ):
        tags.edit_tags(["B-PER", "I-PER", "O"], {0: "O"}, "IOB2", repair=False)
    with pytest.raises(CartomapError, match=r"^word 0 `I-PER` would start the sentence"):
        tags.check_tags(["I-PER", "O"], "IOB2")
    with pytest.raises(
        CartomapError, match=r"^word 1 `B-PER` would follow `O`: in IOB1 an entity starts with I-"
    ):
        tags.edit_tags(["I-PER", "B-PER"], {0: "O"}, "IOB1", repair=False)
    # valid edits pass unrepaired; tags outside the run's and words outside the sentence are refused
    assert tags.edit_tags(["B-PER", "I-PER"], {1: "O"}, "IOB2", repair=False) == ["B-PER", "O"]
    with pytest.raises(CartomapError, match="word 0 `B-XYZ` is not a tag of this run"):
        tags.edit_tags(["O"], {0: "B-XYZ"}, "IOB2", names=["B-PER", "O"])
    with pytest.raises(CartomapError, match="word 3 is outside the sentence's 2 words"):
        tags.edit_tags(["O", "O"], {3: "O"}, "IOB2")
    # tags without a scheme (part of speech) are kept as edited
    assert tags.edit_tags(["NN", "VB"], {0: "VB"}, None) == ["VB", "VB"]


def test_the_scheme_is_told_from_the_files_tags():
    assert tags.scheme_of([["B-PER", "I-PER", "O"], ["B-LOC"]]) == "IOB2"
    assert tags.scheme_of([["I-PER", "I-PER", "O"], ["I-LOC", "B-LOC"]]) == "IOB1"  # WikiGold's
    assert tags.scheme_of([["O", "O"]]) == "IOB2"
    assert tags.scheme_of([["NN", "VB"]]) is None and tags.scheme_of([["S-PER", "O"]]) is None
    assert tags.entity_spans(["I-PER", "I-PER", "B-PER", "O", "B-LOC"]) == [
        (0, 1, "PER"),
        (2, 2, "PER"),
        (4, 4, "LOC"),
    ]
    assert tags.decode_tags(tags.encode_tags(["B-PER", "O"])) == ["B-PER", "O"]
    with pytest.raises(CartomapError, match="holds a space"):
        tags.encode_tags(["B PER"])


# --------------------------------------------------------------------------- queues by sentence and span
def test_a_sentence_queue_takes_one_place_per_sentence_and_one_card_fixes_its_tags(run):
    found = levels.from_detector_by(run, DETECTOR, 2, "sentence")
    # min: each sentence at its worst word; sent-1 (Berlin 0.4) before sent-0 (Paris 0.5); sent-2 (cat 0.5)
    # ties with sent-0 and comes after it
    assert found.ids == ("sent-1", "sent-0") and found.level == "sentence"
    assert found.scores == pytest.approx((0.6, 0.5))
    assert levels.from_detector_by(run, DETECTOR, 3, "sentence", "mean").ids[0] == "sent-1"
    items = queue.create_queue(run, "sentences", found, per_item=2)
    card = items.iloc[0]
    assert card["tokens"] == "Mary visited Berlin" and list(card["words"]) == ["Mary", "visited", "Berlin"]
    assert list(card["gold_tags"]) == ["B-PER", "O", "B-LOC"] and card["gold"] == "B-PER O B-LOC"
    assert list(card["predicted_tags"]) == ["B-PER", "O", "B-LOC"]
    assert card["worst_word"] == 0 and list(card["p_gold_epochs"]) == pytest.approx([0.6, 0.7, 0.8])  # Mary
    db = queue.open_queue(run, "sentences")
    assert (db.level, db.scheme) == ("sentence", "IOB2")
    # two words fixed in one decision (Berlin a person, visited stays O): the whole tag list is the label
    label = queue.edited_tags(db, "sent-1", {2: "B-PER"})
    assert label == "B-PER O B-PER"
    db.record("ann", "sent-1", "relabel", label)
    db.record("bob", "sent-1", "relabel", "B-PER  O B-PER")  # spaces normalised: the same value
    db.record("ann", "sent-0", "keep")
    db.record("bob", "sent-0", "relabel", "B-PER I-PER O O B-LOC")  # its gold: recorded as keep
    with pytest.raises(CartomapError, match="word 0 `I-PER` would start the sentence"):
        db.record("ann", "sent-1", "relabel", "I-PER O B-LOC")
    with pytest.raises(CartomapError, match="2 tags for item 'sent-1', whose sentence has 3 words"):
        db.record("ann", "sent-1", "relabel", "B-PER O")
    long = db.long_table()
    assert sorted(long["value"]) == ["keep", "keep", "relabel:B-PER O B-PER", "relabel:B-PER O B-PER"]
    assert agreement(long)["summary"]["observed_agreement"] == pytest.approx(1.0)
    # undo: bob's relabel goes, the majority of one decides
    db.undo("bob", "sent-1")
    table = corrected.decisions(run, "sentences").set_index("id")
    assert table.loc["sent-1", "decision"] == "relabel" and table.loc["sent-1", "label"] == "B-PER O B-PER"
    result = corrected.write_corrected(run, "sentences")
    fixed = pd.read_parquet(run.corrected_path("sentences")).set_index("id")
    names = np.asarray(run.label_names)
    assert list(names[fixed.loc["sent-1", "tags"]]) == ["B-PER", "O", "B-PER"]
    assert list(names[fixed.loc["sent-0", "tags"]]) == ["B-PER", "I-PER", "O", "O", "B-LOC"]
    assert result["relabelled"] == 1
    named = corrected.named(run, fixed.reset_index(), result["decisions"], "sentence")
    assert named["reviewed_items"].tolist() == [1, 1, 0]
    # the tools' files carry one label per item: refused in one line
    with pytest.raises(CartomapError, match="a review queue by sentence is decided as a sentence's tag list"):
        exchange.export_queue(run, "sentences", run.path / "ls.json", "labelstudio")


def test_a_span_queue_holds_gold_and_predicted_spans_scored_by_their_worst_word(tmp_path):
    from token_fixture import make_token_run as default_run

    run = default_run(tmp_path / "cache", tmp_path)  # Berlin predicted B-PER (the fixture's WRONG)
    names = levels.predicted_codes(run)
    assert run.label_names[names["sent-1#2"]] == "B-PER"
    found = levels.from_detector_by(run, DETECTOR, 10, "span")
    # spans of gold and prediction, the same ranges merged; Berlin's span first (its word is the worst)
    assert found.ids[0] == "sent-1#2-2"
    assert set(found.ids) == {"sent-0#0-1", "sent-0#4-4", "sent-1#0-0", "sent-1#2-2"}
    items = queue.create_queue(run, "spans", found, per_item=2).set_index("id")
    assert items.loc["sent-0#0-1", "tokens"] == "⟦Arnold Schwarzenegger⟧ lives in Paris"
    assert items.loc["sent-1#2-2", "predicted"] == "B-PER O B-PER"
    db = queue.open_queue(run, "spans")
    db.record("ann", "sent-1#2-2", "relabel", queue.edited_tags(db, "sent-1#2-2", {2: "B-PER"}))
    db.record("ann", "sent-1#0-0", "relabel", queue.edited_tags(db, "sent-1#0-0", {0: "O"}))  # another word
    db.record("ann", "sent-0#0-1", "relabel", queue.edited_tags(db, "sent-0#0-1", {0: "O"}))  # repaired
    assert db.decision_of("ann", "sent-0#0-1")["label"] == "O B-PER O O B-LOC"
    with pytest.raises(CartomapError, match="word 1 `I-PER` would follow `O`"):
        queue.edited_tags(db, "sent-0#0-1", {0: "O"}, repair=False)
    fixed = corrected.write_corrected(run, "spans")["frame"].set_index("id")
    label_names = np.asarray(run.label_names)
    assert list(label_names[fixed.loc["sent-1", "tags"]]) == ["O", "O", "B-PER"]  # both spans' changes
    assert list(label_names[fixed.loc["sent-0", "tags"]]) == ["O", "B-PER", "O", "O", "B-LOC"]
    # two items of one sentence that set one word to different tags are refused, naming both
    db.record("ann", "sent-1#2-2", "relabel", "B-PER O B-LOC")  # back to gold: a keep
    db.record("ann", "sent-1#0-0", "relabel", "B-LOC O B-LOC")
    db.record("bob", "sent-1#2-2", "relabel", "B-PER O B-PER")
    db.record("bob", "sent-1#0-0", "relabel", "O O B-LOC")
    # ann and bob disagree on each: unsure, nothing applied
    assert set(
        corrected.decisions(run, "spans").set_index("id").loc[["sent-1#0-0", "sent-1#2-2"], "decision"]
    ) == {"unsure"}


def test_span_items_of_one_sentence_that_disagree_on_a_word_are_refused(run):
    found = sources.from_selection(run, ["sent-0#0", "sent-0#4"])
    spans = levels.regroup(run, found, "span")
    assert spans.ids == ("sent-0#0-1", "sent-0#4-4")
    queue.create_queue(run, "two", spans, per_item=1)
    db = queue.open_queue(run, "two")
    db.record("ann", "sent-0#0-1", "relabel", "O O O O B-LOC")
    db.record("ann", "sent-0#4-4", "relabel", "B-LOC O O O B-LOC")  # word 0 B-LOC here, O there
    with pytest.raises(
        CartomapError, match=r"items 'sent-0#0-1' and 'sent-0#4-4' set word 0 of sentence 'sent-0'"
    ):
        corrected.write_corrected(run, "two")


def test_the_levels_need_a_run_of_tagged_sentences(tmp_path):
    from curation_fixture import make_run

    other = make_run(tmp_path / "cache")
    with pytest.raises(CartomapError, match="a review by sentence needs a run of tagged sentences"):
        levels.check_level(other, "sentence")


# --------------------------------------------------------------------------- the corrected set as a file
def test_the_corrected_set_round_trips_through_conll_and_trains(run, tmp_path):
    found = levels.regroup(run, sources.from_selection(run, ["sent-1#2", "sent-2#0"]), "sentence")
    queue.create_queue(run, "fix", found, per_item=1)
    db = queue.open_queue(run, "fix")
    db.record("ann", "sent-1", "relabel", "B-PER O B-PER")
    db.record("ann", "sent-2", "remove")
    out = tmp_path / "fixed.conll"
    result = corrected.export_corrected(run, "fix", out)
    assert (result["relabelled"], result["removed"], result["corrected"]) == (1, 1, 2)
    back = read_tagged(out, id_field="sent_id")
    assert back.frame["id"].tolist() == ["sent-0", "sent-1"]
    assert back.frame["tokens"].tolist() == [
        ["Arnold", "Schwarzenegger", "lives", "in", "Paris"],
        ["Mary", "visited", "Berlin"],
    ]
    assert back.frame["tags"].tolist() == [["B-PER", "I-PER", "O", "O", "B-LOC"], ["B-PER", "O", "B-PER"]]
    assert not back.warnings
    data = load_dataset(DataConfig(path=str(out)))  # trains as token data, read as any CoNLL file
    assert data.task_kind.name == "token" and len(data) == 2
    with pytest.raises(CartomapError, match="exists already|--force|overwrite"):
        corrected.export_corrected(run, "fix", out)
    named = corrected.written_named(run, "fix", result["decisions"])
    assert corrected.file_shape(run) == "conll"
    assert corrected.corrected_bytes(run, named).decode() == out.read_text(encoding="utf-8")
    jsonl = tmp_path / "fixed.jsonl"
    corrected.export_corrected(run, "fix", jsonl)
    assert read_tagged(jsonl).frame["tags"].tolist() == back.frame["tags"].tolist()


def test_cli_makes_a_sentence_queue_decides_a_sentence_with_set_and_writes_conll(run, tmp_path):
    cache = run.path.parents[1]

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "cartomap.cli", "--cache", str(cache), "review-queue", *args],
            capture_output=True,
            text=True,
        )

    made = cli(
        "create", run.id, "s", "--detector", DETECTOR, "--top", "5", "--by", "sentence", "--per-item", "1"
    )
    assert made.returncode == 0, made.stderr
    assert "3 sentences" in made.stdout
    refused = cli(
        "decide",
        run.id,
        "s",
        "--annotator",
        "ann",
        "--item",
        "sent-0",
        "--decision",
        "relabel",
        "--set",
        "0=O",
        "--no-repair",
    )
    assert (
        refused.returncode == 2
        and "word 1 `I-PER` would follow `O`: an entity must start with B-" in refused.stderr
    )
    assert "Traceback" not in refused.stderr
    done = cli(
        "decide",
        run.id,
        "s",
        "--annotator",
        "ann",
        "--item",
        "sent-0",
        "--decision",
        "relabel",
        "--set",
        "0=O",
    )
    assert done.returncode == 0, done.stderr
    assert "O B-PER O O B-LOC" in done.stdout
    shown = cli("show", run.id, "s", "--item", "sent-0")
    assert "Schwarzenegger  gold I-PER  predicted I-PER" in shown.stdout
    out = tmp_path / "s.conll"
    written = cli("export", run.id, "s", "--out", str(out))
    assert written.returncode == 0, written.stderr
    assert read_tagged(out).frame["tags"].iloc[0] == ["O", "B-PER", "O", "O", "B-LOC"]
    tools = cli("export", run.id, "s", "--to", "argilla", "--out", str(tmp_path / "a.json"))
    assert tools.returncode == 2 and "Traceback" not in tools.stderr


# --------------------------------------------------------------------------- the page
def words_of(at: AppTest) -> pd.DataFrame:
    """The card's word table (the one with a "new" tag column)."""
    return next(d.value for d in at.dataframe if "new" in d.value.columns)


def test_the_page_fixes_a_sentences_tags_on_one_card(run, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(run.path.parents[1]))
    monkeypatch.syspath_prepend(str(ROOT))
    at = AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception, at.exception
    at.selectbox(key="_kept_rs_detector").set_value(DETECTOR).run()
    at.number_input(key="_kept_rs_top").set_value(2).run()
    at.radio(key="_kept_rs_level").set_value("sentence").run()
    assert at.selectbox(key="_kept_rs_sentence_score").value == "min"
    at.button(key="rs_create").click().run()
    assert not at.exception, at.exception
    name = queue.list_queues(run)[0]
    assert name.endswith("-by-sentence") and queue.open_queue(run, name).level == "sentence"
    at.text_input(key="_kept_rs_annotator").set_value("ann").run()
    assert "Mary visited Berlin" in [t.value for t in at.text]  # the sentence as text
    words = words_of(at)
    assert words["gold"].tolist() == ["B-PER", "O", "B-LOC"] and words["predicted"].tolist() == [
        "B-PER",
        "O",
        "B-LOC",
    ]
    assert at.button(key="rs_save_tags").disabled  # nothing changed yet
    # two words in one decision: Mary out, Berlin a person; repair off first: refused, saying why
    at.checkbox(key="rs_repair").uncheck().run()
    at.selectbox(key="rs_tag_0").set_value("O").run()
    at.selectbox(key="rs_tag_2").set_value("B-PER").run()
    assert not at.exception, at.exception
    assert words_of(at)["new"].tolist() == ["O", "O", "B-PER"]
    at.selectbox(key="rs_tag_2").set_value("I-PER").run()
    said = [w.value.replace("\\", "") for w in at.warning]  # markdown-escaped text
    assert any("word 2 `I-PER` would follow `O`: an entity must start with B-" in w for w in said), said
    assert at.button(key="rs_save_tags").disabled
    at.checkbox(key="rs_repair").check().run()  # repaired: I-PER after O opens, as B-PER
    assert words_of(at)["new"].tolist() == ["O", "O", "B-PER"]
    at.button(key="rs_save_tags").click().run()
    assert not at.exception, at.exception
    db = queue.open_queue(run, name)
    assert db.decision_of("ann", "sent-1") == {"decision": "relabel", "label": "O O B-PER", "note": ""}
    # the next card is the next sentence, its pickers at its own gold tags
    assert "Arnold Schwarzenegger lives in Paris" in [t.value for t in at.text]
    assert at.selectbox(key="rs_tag_0").value == "B-PER"
    at.button(key="rs_keep").click().run()
    at.button(key="rs_write").click().run()
    assert not at.exception, at.exception
    fixed = pd.read_parquet(run.corrected_path(name)).set_index("id")
    assert list(np.asarray(run.label_names)[fixed.loc["sent-1", "tags"]]) == ["O", "O", "B-PER"]
    # its download is in the file's own shape (CoNLL columns); the tools' files say in one line why not
    assert any("(CONLL)" in str(b.proto.label) for b in at.get("download_button"))
    assert any("decided as a sentence's tag list" in c.value for c in at.caption)


IOB1 = """\
Arnold I-PER
Schwarzenegger I-PER
lives O
in O
Paris I-LOC

Mary I-PER
visited O
Berlin I-LOC

The O
cat O
sat O
"""


def test_a_queue_of_an_iob1_file_keeps_its_tags_iob1(tmp_path, monkeypatch):
    import token_fixture

    monkeypatch.setattr(token_fixture, "CONLL", IOB1)  # I- opens an entity, as WikiGold's original files
    run = token_fixture.make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)
    queue.create_queue(run, "s", levels.from_detector_by(run, DETECTOR, 3, "sentence"), per_item=1)
    db = queue.open_queue(run, "s")
    assert db.scheme == "IOB1"
    # Arnold out: Schwarzenegger's I-PER opens the entity, as IOB1 has it (IOB2 would want B-PER)
    label = queue.edited_tags(db, "sent-0", {0: "O"})
    assert label == "O I-PER O O I-LOC"
    db.record("ann", "sent-0", "relabel", label)
    db.record("ann", "sent-1", "relabel", "I-LOC O I-LOC")  # Mary a place: valid IOB1
    out = tmp_path / "fixed.conll"
    corrected.export_corrected(run, "s", out)
    back = read_tagged(out)
    assert back.frame["tags"].tolist()[:2] == [["O", "I-PER", "O", "O", "I-LOC"], ["I-LOC", "O", "I-LOC"]]
    assert tags.scheme_of(back.frame["tags"].tolist()) == "IOB1"
