"""Token classification end to end: a CoNLL file trains a token run whose dynamics are per word (the
word's first sub-word), keyed by (sentence id, word index), on a tiny random BERT."""

from __future__ import annotations

import json
import re

import numpy as np
import patience
import pytest
from token_fixture import CONLL

from cartomap.config import DataConfig, ModelConfig, OrderConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.runs.store import RunStore
from cartomap.tasks.token import TOKEN
from cartomap.training.loop import train_or_load

# "Schwarzenegger" is several sub-words in the default encoder's vocabulary: its first one is recorded.
TRAIN = CONLL

DEV = """\
Paris B-LOC
is O
big O
"""


@pytest.fixture()
def ner_files(tmp_path):
    train, dev = tmp_path / "train.conll", tmp_path / "dev.conll"
    train.write_text(TRAIN, encoding="utf-8")
    dev.write_text(DEV, encoding="utf-8")
    return train, dev


def token_config(tiny_model, train, dev, **changes) -> RunConfig:
    settings = dict(epochs=2, batch_size=2, learning_rate=0.0, warmup_ratio=0.0, record="eval")
    settings.update(changes)
    return RunConfig(
        data=DataConfig(path=str(train)),
        dev=DataConfig(path=str(dev)),
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(**settings),
    )


def test_a_conll_file_is_token_data_by_its_suffix(ner_files):
    train, _ = ner_files
    data = load_dataset(DataConfig(path=str(train)))
    assert data.task_kind is TOKEN and len(data) == 3
    assert data.label_names == ("B-LOC", "B-PER", "I-PER", "O")
    # Units: every word of every sentence in order, "<id>#<k>", and its tag.
    ids, labels, counts = TOKEN.units(data.frame)
    assert counts.tolist() == [5, 3, 3] and ids[:2] == ["sent-0#0", "sent-0#1"] and ids[-1] == "sent-2#2"
    assert labels.tolist() == [1, 2, 3, 3, 0, 1, 3, 0, 3, 3, 3]
    assert data.labels.tolist() == labels.tolist()


def test_jsonl_of_tokens_and_tags_is_token_data_when_the_task_says_so(tmp_path, ner_files):
    train, _ = ner_files
    path = tmp_path / "ner.jsonl"
    rows = [
        {
            "words": ["Arnold", "Schwarzenegger", "lives", "in", "Paris"],
            "ner": ["B-PER", "I-PER", "O", "O", "B-LOC"],
        },
        {"words": ["Mary", "visited", "Berlin"], "ner": ["B-PER", "O", "B-LOC"]},
        {"words": ["The", "cat", "sat"], "ner": ["O", "O", "O"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = DataConfig(path=str(path), task="token", text_columns=("words",), label_column="ner")
    data = load_dataset(config)
    conll = load_dataset(DataConfig(path=str(train)))
    assert data.task_kind is TOKEN and data.fingerprint() == conll.fingerprint()  # the same sentences and ids


def test_a_token_run_records_each_words_first_sub_word(tiny_model, ner_files, cache):
    """With learning rate 0 the model never changes: each recorded word's logits are the saved model's
    logits at that word's first sub-word, and the dev accuracy is per word."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    train, dev = ner_files
    run = train_or_load(token_config(tiny_model, train, dev), RunStore(cache))
    assert run.state == "done" and run.task_kind is TOKEN
    metrics = run.metrics()
    assert len(metrics) == 11 and metrics["id"].iloc[1] == "sent-0#1"
    assert metrics[["example_id", "word"]].iloc[1].tolist() == ["sent-0", 1]
    assert metrics["label"].tolist() == [1, 2, 3, 3, 0, 1, 3, 0, 3, 3, 3]

    examples = run.examples()
    unit_ids = TOKEN.units(examples)[0]
    recorded = run.read_epoch("eval", 1, unit_ids)
    tokenizer = AutoTokenizer.from_pretrained(run.model_dir)
    model = AutoModelForTokenClassification.from_pretrained(run.model_dir).eval()
    expected, split = [], False
    for words in examples["tokens"]:
        enc = tokenizer(list(words), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0].numpy()
        word_ids = enc.word_ids(0)
        firsts = [word_ids.index(w) for w in range(len(words))]
        split |= len([w for w in word_ids if w == 1]) > 1 and word_ids[0] is None
        expected.append(logits[firsts])
    assert split, "the fixture must hold a word of several sub-words"
    np.testing.assert_allclose(recorded, np.concatenate(expected), atol=1e-5)

    # The word-level map shows each word with its sentence; the sentence-level map puts a sentence
    # at its worst word.
    from cartomap.analysis.datamap import map_frame, sentence_map

    words = map_frame(run)
    assert words[["id", "tokens", "context"]].iloc[1].tolist() == [
        "sent-0#1",
        "Schwarzenegger",
        "Arnold Schwarzenegger lives in Paris",
    ]
    sentences = sentence_map(run)
    assert sentences["id"].tolist() == ["sent-0", "sent-1", "sent-2"]
    assert sentences["tokens"].iloc[1] == "Mary visited Berlin"
    worst = metrics.groupby("example_id")["confidence"].min()
    np.testing.assert_allclose(sentences["confidence"], worst.loc[sentences["id"]].to_numpy())

    dev_logits = run.read_epoch("dev", 1, ["sent-0#0", "sent-0#1", "sent-0#2"])
    gold = np.array([0, 3, 3])  # B-LOC O O in the training set's tag order
    assert run.history()[-1]["dev_accuracy"] == pytest.approx(float((dev_logits.argmax(1) == gold).mean()))


def test_the_command_line_trains_a_token_run_from_a_conll_file(tiny_model, ner_files, tmp_path, capsys):
    from cartomap.cli import main

    train, dev = ner_files
    argv = [
        "--cache",
        str(tmp_path / "c"),
        "train",
        "--data",
        str(train),
        "--dev",
        str(dev),
        "--model",
        tiny_model,
    ]
    assert main([*argv, "--epochs", "1", "--batch-size", "4", "--max-length", "32"]) == 0
    out = capsys.readouterr().out
    assert "3 sentences, 1 epochs, dev accuracy (per word)" in out


def test_what_a_token_run_cannot_do_is_refused_saying_what_to_change(tiny_model, ner_files, cache):
    train, dev = ner_files
    with pytest.raises(DataError, match="word 4 of 5 is past max_length 8 sub-words"):
        train_or_load(
            token_config(tiny_model, train, dev, epochs=1).replace(
                model=ModelConfig(tiny_model, max_length=8)
            ),
            RunStore(cache),
        )
    curriculum = token_config(tiny_model, train, dev).replace(order=OrderConfig(name="length"))
    with pytest.raises(DataError, match="order 'length': a token run trains in the shuffled order only"):
        train_or_load(curriculum, RunStore(cache))


def test_tags_outside_the_training_set_are_refused_in_the_dev_set(tiny_model, ner_files, tmp_path, cache):
    train, _ = ner_files
    dev = tmp_path / "odd.conll"
    dev.write_text("Paris B-MISC\n", encoding="utf-8")
    with pytest.raises(DataError, match="B-MISC"):
        train_or_load(token_config(tiny_model, train, dev), RunStore(cache))


@pytest.mark.parametrize(
    "page,what",
    [
        ("pruning", "pruning suspected label errors works on examples with one label each"),
        ("artifacts", "artifact analysis (lexical correlations, partial-input baselines) works on examples"),
    ],
)
def test_pages_of_one_label_per_example_say_they_do_not_apply_to_a_token_run(
    tiny_model, ner_files, cache, monkeypatch, page, what
):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    train, dev = ner_files
    run = train_or_load(token_config(tiny_model, train, dev, epochs=1), RunStore(cache))
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "pages" / f"{page}.py"), default_timeout=patience.WAIT_S
    )
    at.run()
    assert not at.exception
    notes = [i.value for i in at.info]
    assert any(what in n and f"Run {run.id} is a token run" in n and "does not apply" in n for n in notes), (
        notes
    )


def test_experiments_of_one_label_per_example_refuse_token_data(tiny_model, ner_files, tmp_path, capsys):
    from cartomap.cli import main

    train, dev = ner_files
    common = ["--model", tiny_model, "--epochs", "2", "--test", str(dev)]
    cache = ["--cache", str(tmp_path / "c")]
    assert main([*cache, "prune", "--data", str(train), *common]) == 2
    assert "pruning suspected label errors works on examples with one label each" in capsys.readouterr().err
    assert main([*cache, "curriculum", "--data", str(train), "--dev", str(dev), *common]) == 2
    assert "a curriculum of training orders works on examples with one label each" in capsys.readouterr().err
    assert not (tmp_path / "c" / "experiments").exists() or not any(
        (tmp_path / "c" / "experiments").iterdir()
    )


@pytest.fixture(scope="module")
def entity_runs(tiny_model, tmp_path_factory):
    """Two finished token runs of the same data with other seeds (tiny random BERT, learning rate 1e-3),
    a dev set and the training set again as test set: {seed: run}."""
    folder = tmp_path_factory.mktemp("entity-runs")
    train, dev = folder / "train.conll", folder / "dev.conll"
    train.write_text(TRAIN, encoding="utf-8")
    dev.write_text(DEV, encoding="utf-8")
    store = RunStore(folder / "cache")
    runs = {}
    for seed in (1, 2):
        config = token_config(tiny_model, train, dev, learning_rate=1e-3, seed=seed)
        runs[seed] = train_or_load(config.replace(tests=(DataConfig(path=str(train)),)), store)
    return runs


def test_a_token_run_reports_entity_scores_on_dev_and_test_each_epoch(entity_runs):
    """Entity-level precision, recall and F1 (seqeval's, per type, micro and macro) of every epoch's dev and
    test predictions, beside the per-word accuracy: the history holds what seqeval says of the recorded
    logits' argmax."""
    from seqeval.metrics import classification_report, f1_score

    from cartomap.scores.entities import tags_by_sentence

    run = entity_runs[1]
    history = run.history()
    assert len(history) == 2
    names = run.label_names
    for source, frame in (("dev", run.dev_examples()), ("test_0", run.test_examples(0))):
        ids, gold_codes, counts = TOKEN.units(frame)
        gold = tags_by_sentence(gold_codes, counts, names)
        for epoch, record in enumerate(history):
            pred = tags_by_sentence(run.read_epoch(source, epoch, ids).argmax(1), counts, names)
            report = classification_report(gold, pred, output_dict=True, zero_division=0)
            scores = record[f"{source}_entities"]
            assert record[f"{source}_entity_f1"] == pytest.approx(f1_score(gold, pred))
            assert scores["micro"]["f1"] == pytest.approx(report["micro avg"]["f1-score"])
            assert scores["macro"]["recall"] == pytest.approx(report["macro avg"]["recall"])
            assert set(scores) == {k for k in report if not k.endswith(" avg")} | {"micro", "macro"}
            assert {"LOC", "PER"} <= set(scores) or source == "dev"
            words = np.concatenate(pred) == np.concatenate(gold)
            assert record[f"{source}_accuracy"] == pytest.approx(float(words.mean()))
    assert "dev_entities" not in (run.path / "log.txt").read_text()  # the log keeps the numbers only


def test_entity_scores_in_show_the_run_summary_and_compare(entity_runs, capsys):
    """`cartomap show`, the Data map page's run summary and Compare report the entity scores beside the
    per-word accuracy; a token run's dev confusion matrix and per-example diff are per word."""
    from cartomap.analysis import compare, summary
    from cartomap.cli import main

    a, b = entity_runs[1], entity_runs[2]
    last, best = a.history()[-1], a.history()[a.best_epoch()]
    assert main(["--cache", str(a.path.parents[1]), "show", a.id]) == 0
    out = capsys.readouterr().out
    assert "dev entities (epoch 2), precision / recall / F1 of whole entities:" in out
    m = last["dev_entities"]["micro"]
    assert re.search(
        rf"micro\s+{m['precision']:.4f}\s+{m['recall']:.4f}\s+{m['f1']:.4f}\s+{m['support']}\n", out
    )
    assert re.search(r"\n\s+LOC\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+1\n", out)  # the dev set's one entity
    assert "dev_entity_f1" in out and "{" not in out  # the epochs' numbers, no raw dict
    assert re.search(r"test \S*train entities \(epoch \d\), precision / recall / F1", out)

    facts = summary.run_summary(a)
    rows = dict(summary.summary_rows(facts).itertuples(index=False))
    f1 = best["dev_entities"]["micro"]["f1"]
    assert rows[f"dev entity F1, micro / macro, best epoch ({a.best_epoch() + 1})"].startswith(f"{f1:.1%} / ")
    assert any(k.startswith("dev LOC: precision / recall / F1") for k in rows)
    assert "dev entity F1" in summary.summary_line(facts)
    confusion = summary.dev_confusion(a)  # per word: 3 dev words
    assert confusion.to_numpy().sum() == 3 and list(confusion.index)[0] == "gold B-LOC"

    table = compare.comparison_table({"a": a, "b": b}, 0).set_index("run")
    assert table.loc["a", "dev_entity_f1"] == pytest.approx(best["dev_entity_f1"])
    assert table.loc["a", "entity_f1"] == pytest.approx(best["test_0_entity_f1"])
    assert table.loc["a", "accuracy"] == pytest.approx(best["test_0_accuracy"])  # per word
    classes = compare.class_f1_frame({"a": a, "b": b}, 0)
    assert set(classes["class"]) <= {"LOC", "PER"} and len(classes) >= 2  # entity types, not tags
    names = compare.curve_names({"a": a}, 0)
    assert "dev entity F1" in names and "test entity F1" in names
    assert "dev entity F1" not in compare.curve_names({}, None)
    curve = compare.curves_frame({"a": a}, "test entity F1", 0)
    assert curve["value"].tolist() == pytest.approx([h["test_0_entity_f1"] for h in a.history()])
    diff = compare.dev_diff(a, b)  # word by word
    assert diff["id"].tolist() == ["sent-0#0", "sent-0#1", "sent-0#2"]
    assert diff["tokens"].tolist() == ["Paris", "is", "big"] and diff["gold"].tolist()[0] == "B-LOC"


def test_the_compare_page_compares_two_token_runs(entity_runs, monkeypatch):
    """Compare on two token runs: the entity columns in the score table, the entity F1 curve offered, F1
    per entity type, the word-by-word difference on the shared test set; no exception."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    a, b = entity_runs[1], entity_runs[2]
    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("CARTOMAP_CACHE", str(a.path.parents[1]))
    monkeypatch.syspath_prepend(str(root))
    at = AppTest.from_file(str(root / "pages" / "compare.py"), default_timeout=patience.WAIT_S).run()
    at.multiselect(key="_kept_cmp_runs").set_value([a.id, b.id]).run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "entity_f1" in d.value.columns)
    assert {"dev_entity_f1", "entity_f1", "entity_macro_f1", "accuracy"} <= set(table.columns)
    names = at.radio(key="_kept_cmp_metric").options
    assert "dev entity F1" in names and "test entity F1" in names
    at.radio(key="_kept_cmp_metric").set_value("dev entity F1").run()
    assert not at.exception, at.exception
    diff = next(
        d.value for d in at.dataframe if "outcome" in d.value.columns
    )  # on the test set: word by word
    assert len(diff) and all("#" in i for i in diff["id"]) and all(" " not in w for w in diff["tokens"])
