"""The Data map page of a token run under streamlit.testing: the word-level map, the sentence-level map
(each sentence scored by its worst word, or another method), and a picked word's or sentence's view."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import patience
import pytest
from token_fixture import STRENGTH, make_token_run, p_gold

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "data_map.py"


@pytest.fixture()
def run(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    return make_token_run(cache, tmp_path)


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _click(point_id: str) -> dict:
    """The map's selection event of a click on one point (its id is the point's customdata)."""
    return {"selection": {"points": [{"customdata": [point_id]}], "box": [], "lasso": []}}


def _frame_with(at, column):
    found = [d for d in at.dataframe if column in d.value.columns]
    return found[0] if found else None


def test_word_level_map_and_the_picked_words_sentence(run):
    at = _app().run()
    assert _frame_with(at, "p_predicted") is None  # nothing picked yet
    at.session_state["datamap"] = _click("sent-1#2")  # a click on the point of "Berlin"
    at.run()
    assert at.session_state["selected_ids"] == ["sent-1#2"]
    assert not at.exception and not at.error, [e.value for e in at.error]
    level = at.radio(key="_kept_dm_token_level")
    assert level.value == "word" and list(level.options) == ["Words", "Sentences"]
    assert any("11 examples" in c.value for c in at.caption)  # a point per word
    view = _frame_with(at, "p_predicted")
    assert view is not None, "the picked word's sentence is shown"
    words = view.value
    if hasattr(words, "data"):  # a Styler
        words = words.data
    assert words["token"].tolist() == ["Mary", "visited", "Berlin"]
    assert words["gold"].tolist() == ["B-PER", "O", "B-LOC"]
    assert words["predicted"].tolist() == ["B-PER", "O", "B-PER"]
    np.testing.assert_allclose(words["p_predicted"], p_gold(STRENGTH))
    np.testing.assert_allclose(words["confidence"], [p_gold(), p_gold(), (1 - p_gold()) / 3])
    assert any("sent-1 (3 words)" in t.value and "Mary visited Berlin" in t.value for t in at.text)
    assert not any("Mary visited Berlin" in m.value for m in at.markdown)  # text, never markdown


def test_sentence_level_puts_a_sentence_at_its_worst_word_and_opens_it(run):
    at = _app()
    at.session_state["dm_token_level"] = "sentence"
    at.run()
    assert not at.exception
    assert at.selectbox(key="_kept_dm_sentence_method").value == "min"
    assert any("3 sentences" in c.value for c in at.caption)
    assert _frame_with(at, "worst_token") is None  # nothing selected yet
    at.session_state["dm_sentence_ids"] = ["sent-1", "sent-2"]
    at.run()
    table = _frame_with(at, "worst_token").value
    assert table["id"].tolist() == ["sent-1", "sent-2"]
    # sent-1's worst word is "Berlin" (read as a person): the sentence sits at its confidence.
    assert table["worst_token"].tolist() == ["Berlin", "The"]
    np.testing.assert_allclose(table["confidence"], [(1 - p_gold()) / 3, p_gold()])
    assert table["predicted"].tolist() == ["B-PER", "O"]

    at.session_state["dm_sentence_focus"] = "sent-1"  # as a click on its row
    at.run()
    words = _frame_with(at, "p_predicted").value
    words = words.data if hasattr(words, "data") else words
    assert words["token"].tolist() == ["Mary", "visited", "Berlin"]
    assert any("Word 2 is this sentence's worst word" in c.value for c in at.caption)

    # a click on a sentence's point picks it alone and opens it
    at.session_state["datamap_sentences"] = _click("sent-0")
    at.run()
    assert at.session_state["dm_sentence_ids"] == ["sent-0"]
    words = _frame_with(at, "p_predicted").value
    words = words.data if hasattr(words, "data") else words
    assert words["token"].tolist() == ["Arnold", "Schwarzenegger", "lives", "in", "Paris"]
    assert words["gold"].tolist() == words["predicted"].tolist() == ["B-PER", "I-PER", "O", "O", "B-LOC"]

    # the mean over a sentence's words: sent-1 = (2 p + (1 - p) / 3) / 3
    at.selectbox(key="_kept_dm_sentence_method").set_value("mean").run()
    at.session_state["dm_sentence_ids"] = ["sent-1", "sent-2"]
    at.run()
    table = _frame_with(at, "worst_token").value
    p = p_gold()
    np.testing.assert_allclose(table["confidence"], [(2 * p + (1 - p) / 3) / 3, p])


@pytest.mark.parametrize("page", ["prompts.py", "generate.py"])
def test_the_wanli_pages_say_plainly_they_do_not_apply_to_a_token_run(run, page):
    """The WaNLI pipeline writes premise/hypothesis pairs: a token run's Prompts and Generate pages say
    so in one line (naming the run's kind) and draw nothing else."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "premise-hypothesis pairs" in text and "token run" in text and "does not apply" in text
    assert not at.button and not at.dataframe


def test_a_picked_words_nearest_words_of_its_tag(run):
    """With word embeddings (here hand-set: "Paris" and "Berlin" alike), the picked word's nearest
    neighbours with the same label are words of its gold tag, listed under the selection."""
    from cartomap.training.embeddings import save_embeddings

    ids = run.task_kind.units(run.examples())[0]
    vectors = np.eye(len(ids), dtype=np.float32)
    vectors[ids.index("sent-0#4"), ids.index("sent-1#2")] = 1.0  # "Paris" leans towards "Berlin"
    save_embeddings(run, ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    at = _app()
    at.session_state["datamap"] = _click("sent-1#2")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Nearest neighbours with the same label" in m.value for m in at.markdown)
    group = _frame_with(at, "role").value
    assert group["id"].tolist() == ["sent-0#4", "sent-1#2"]  # the one other B-LOC word, then the seed
    assert group["label"].tolist() == ["B-LOC", "B-LOC"] and group["tokens"].tolist() == ["Paris", "Berlin"]
