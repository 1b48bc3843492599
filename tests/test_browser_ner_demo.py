"""The NER demo's data in a real browser (`streamlit run app.py` + headless Debian chromium, Selenium; see
test_browser.py): a token run trained on a slice of the bundled WikiGold files (the first sentences of
demo:ner_train and demo:ner_dev, IOB2, with their own ids) by the tiny random BERT, so the test stays
short. The word map draws a point per word where the map frame puts it, a click on a word's point opens
its sentence word by word with gold and predicted tags, "Map of: Sentences" draws the sentence map, and
the run's summary reports the dev entity F1 beside the per-word accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_browser import ARTIFACTS, CHROMIUM, _page_errors, _wait, browser, serve  # noqa: F401 - the fixture
from test_browser_tokens import _GEOMETRY_JS, _TABLE_JS, _click_point, _pick_radio
from test_browser_views import _body, _points, _px

from cartomap.analysis import datamap as dm
from cartomap.analysis import tokens
from cartomap.config import DEMO_NER_DEV, DEMO_NER_TRAIN, DataConfig, ModelConfig, RunConfig, TrainConfig
from cartomap.data.conll import records
from cartomap.data.loading import load_dataset
from cartomap.runs.store import RunStore
from cartomap.scores.metrics import RegionRule
from cartomap.training.loop import train_or_load

pytestmark = [
    pytest.mark.slow,  # a Streamlit server and chromium on a token run: with -m slow (the default suite's 10 minutes)
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent: apt-get install chromium chromium-driver"
    ),
]
TRAIN_SENTENCES, DEV_SENTENCES = 30, 10


def demo_slice(tmp_path: Path) -> tuple[Path, Path]:
    """The first sentences of the bundled NER demo files, written as token JSON Lines (their ids, words and
    tag names)."""
    train = load_dataset(DataConfig(path=DEMO_NER_TRAIN))
    dev = load_dataset(DataConfig(path=DEMO_NER_DEV), label_names=train.label_names)
    paths = []
    for name, data, n in (("train", train, TRAIN_SENTENCES), ("dev", dev, DEV_SENTENCES)):
        frame = data.frame.head(n).copy()
        frame["tags"] = [[data.label_names[t] for t in tags] for tags in frame["tags"]]
        path = tmp_path / f"ner_{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records(frame)), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


# about 40-60 s on 2 shared cores (training the tiny model included): in the default suite
def test_the_ner_demos_word_map_in_the_browser(tmp_path, tiny_model, browser):  # noqa: F811 - the imported fixture
    train, dev = demo_slice(tmp_path)
    cache = tmp_path / "cache"
    token = dict(task="token", text_columns=("tokens",), label_column="tags")
    config = RunConfig(
        data=DataConfig(path=str(train), **token),
        dev=DataConfig(path=str(dev), **token),
        model=ModelConfig(tiny_model, max_length=128),
        train=TrainConfig(epochs=2, batch_size=8, learning_rate=1e-3),
        name="NER demo slice",
    )
    run = train_or_load(config, RunStore(cache))
    assert run.state == "done" and run.task_kind.name == "token"
    words = dm.map_frame(run)
    sentences = tokens.sentence_map_frame(run)
    x = dm.axis_of(words)  # the maps' x: the axis of their regions, the default one
    assert x == dm.axis_of(sentences) == RegionRule().axis
    words, sentences = words.set_index("id"), sentences.set_index("id")
    n_words = len(words)
    assert n_words > 500  # every word of the 30 sentences
    f1 = run.history()[-1]["dev_entity_f1"]
    with serve(cache, tmp_path) as url:
        browser.get(f"{url}/data_map?run={run.id}")
        drawn = _wait(
            lambda: len(p := _points(browser)) == n_words and p, what=f"the word map's {n_words} points"
        )
        for unit_id, point in drawn.items():  # a point per word, where the word map puts it
            assert np.allclose(point, words.loc[unit_id, [x, "confidence"]], atol=1e-6)
        body = _body(browser)
        assert f"{n_words:,} examples" in body
        assert f"dev entity F1 {f1:.1%} last" in body  # the run summary: the field's measure

        # click the word whose point lies farthest from the others: its sentence opens (or, where points
        # overlap within the hover radius, the sentence of one of the words under the pointer)
        geo = _wait(lambda: browser.execute_script(_GEOMETRY_JS), what="the map's axes")
        ids = list(drawn)
        px = np.array([_px(geo, *drawn[i]) for i in ids], dtype=float)
        gaps = np.sqrt(((px[:, None, :] - px[None, :, :]) ** 2).sum(-1))
        np.fill_diagonal(gaps, np.inf)
        target = ids[int(gaps.min(axis=1).argmax())]
        under = {ids[j] for j in np.flatnonzero(gaps[ids.index(target)] <= 6)} | {target}
        _click_point(browser, *drawn[target])
        _wait(lambda: "1 selected · " in _body(browser), what="the click to select a word")
        rows = _wait(lambda: browser.execute_script(_TABLE_JS, "p(predicted)"), what="the word's sentence")
        opened = {tokens.split_unit_id(u)[0] for u in under}
        shown = [r["token"] for r in rows]  # the grid's rows on screen: a long sentence's first ones
        match = [s for s in opened if shown == run_words(run, s)[: len(shown)]]
        assert shown and match, (target, shown, {s: run_words(run, s) for s in opened})
        sentence = match[0]
        expected_tags = [run.label_names[t] for t in run_tags(run, sentence)]
        assert [r["gold"] for r in rows] == expected_tags[: len(rows)]
        assert all(r["predicted"] in run.label_names for r in rows)
        assert f"sentence {sentence} (" in _body(browser)
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "browser_ner_demo_word.png"))

        _pick_radio(browser, "Map of", "Sentences")
        shown = _wait(
            lambda: (p := _points(browser)) and len(p) == len(sentences) and p,
            what="the sentence map's points",
        )
        for sid, point in shown.items():  # each sentence at its worst word
            assert np.allclose(point, sentences.loc[sid, [x, "confidence"]], atol=1e-6)
        assert all(s.startswith("wikigold-") for s in shown)  # the demo's own sentence ids
        browser.save_screenshot(str(ARTIFACTS / "browser_ner_demo_sentences.png"))
        assert not _page_errors(browser)


def run_words(run, sentence: str) -> list[str]:
    frame = run.examples()
    return [str(w) for w in frame.loc[frame["id"] == sentence, "tokens"].iloc[0]]


def run_tags(run, sentence: str) -> list[int]:
    frame = run.examples()
    return [int(t) for t in frame.loc[frame["id"] == sentence, "tags"].iloc[0]]
