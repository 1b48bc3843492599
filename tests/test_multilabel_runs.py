"""Multi-label classification end to end: a JSONL file of texts and label lists trains a sigmoid classifier
whose dynamics are per (example, label), keyed by (example id, label index), on a tiny random BERT."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import patience
import pytest

from cartomap.config import DataConfig, ModelConfig, OrderConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.runs.store import RunStore
from cartomap.scores import label_examples
from cartomap.scores import multilabel as ml
from cartomap.tasks.multilabel import MULTILABEL
from cartomap.training.loop import train_or_load

TRAIN = [
    {"text": "the match ended in a draw", "labels": ["sports"]},
    {"text": "parliament votes on the new football stadium", "labels": ["politics", "sports"]},
    {"text": "a quiet day with nothing in the news", "labels": []},
    {"text": "the minister resigned after the vote", "labels": ["politics"]},
]
DEV = [
    {"text": "the striker scored twice", "labels": ["sports"]},
    {"text": "the senate passed the budget", "labels": ["politics"]},
]
NAMES = ("politics", "sports")  # sorted: the label space found in the training set


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture()
def ml_files(tmp_path):
    return write_jsonl(tmp_path / "train.jsonl", TRAIN), write_jsonl(tmp_path / "dev.jsonl", DEV)


def ml_data(path: str, **changes) -> DataConfig:
    return DataConfig(path=path, task="multilabel", text_columns=("text",), label_column="labels", **changes)


def ml_config(tiny_model, train, dev, **changes) -> RunConfig:
    settings = dict(epochs=2, batch_size=2, learning_rate=0.0, warmup_ratio=0.0, record="eval")
    settings.update(changes)
    return RunConfig(
        data=ml_data(train),
        dev=ml_data(dev),
        model=ModelConfig(tiny_model, max_length=32),
        train=TrainConfig(**settings),
    )


# --------------------------------------------------------------------------- loading


def test_a_jsonl_of_label_lists_is_multilabel_data_when_the_task_says_so(ml_files):
    train, _ = ml_files
    data = load_dataset(ml_data(train))
    assert data.task_kind is MULTILABEL and len(data) == 4
    assert data.label_names == NAMES
    assert [list(x) for x in data.frame["labels"]] == [["sports"], ["politics", "sports"], [], ["politics"]]
    ids, labels, counts = MULTILABEL.units(data.frame, data.label_names)
    assert ids[:3] == ["ex-0#0", "ex-0#1", "ex-1#0"] and counts.tolist() == [2, 2, 2, 2]
    # (politics, sports) of each example in turn: 1 = present
    assert labels.tolist() == [0, 1, 1, 1, 0, 0, 1, 0]
    assert data.labels.tolist() == labels.tolist()


def test_a_csv_with_delimited_labels_or_0_1_columns_reads_the_same_label_sets(tmp_path, ml_files):
    train, _ = ml_files
    expected = load_dataset(ml_data(train))
    csv = tmp_path / "train.csv"
    pd.DataFrame(
        {"text": [r["text"] for r in TRAIN], "labels": ["|".join(r["labels"]) for r in TRAIN]}
    ).to_csv(csv, index=False)
    delimited = load_dataset(ml_data(str(csv), label_separator="|"))
    assert delimited.fingerprint() == expected.fingerprint()  # same ids, texts and label sets
    flags = tmp_path / "flags.csv"
    pd.DataFrame(
        {
            "text": [r["text"] for r in TRAIN],
            "sports": [int("sports" in r["labels"]) for r in TRAIN],
            "politics": [int("politics" in r["labels"]) for r in TRAIN],
        }
    ).to_csv(flags, index=False)
    columns = load_dataset(ml_data(str(flags), label_columns=("politics", "sports")))
    assert columns.fingerprint() == expected.fingerprint()


@pytest.mark.parametrize(
    "rows,changes,message",
    [
        ([{"text": "x", "labels": None}], {}, r"line 1.*labels.*missing labels \(null\)"),
        ([{"text": "x", "labels": "sports|politics"}], {}, "give the separator"),
        ([{"text": "", "labels": ["a"]}], {}, "line 1.*text.*empty text"),
        ([{"text": "x", "labels": ["a", "a"]}], {}, "appears twice"),
        ([{"text": "x", "labels": []}], {}, "no example has a label"),
    ],
)
def test_bad_multilabel_rows_are_refused_naming_the_line_and_field(tmp_path, rows, changes, message):
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError, match=message):
        load_dataset(ml_data(path, **changes))


def test_a_dev_label_outside_the_training_labels_is_refused(tmp_path, ml_files):
    train, _ = ml_files
    dev = write_jsonl(tmp_path / "odd.jsonl", [{"text": "a tennis final", "labels": ["tennis"]}])
    names = load_dataset(ml_data(train)).label_names
    with pytest.raises(DataError, match="'tennis' is not one of the label names"):
        load_dataset(ml_data(dev), label_names=names)


def test_multilabel_options_on_other_data_are_refused():
    with pytest.raises(DataError, match="label_separator is for multi-label data"):
        DataConfig(path="x.jsonl", label_separator="|")


# --------------------------------------------------------------------------- a run


def test_a_multilabel_run_records_each_labels_logit(tiny_model, ml_files, cache):
    """With learning rate 0 the model never changes: each unit's recorded row is (0, z) with z the saved
    model's logit of that label for that example; dev accuracy is per label, exact match per example."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    train, dev = ml_files
    run = train_or_load(ml_config(tiny_model, train, dev), RunStore(cache))
    assert run.state == "done" and run.task_kind is MULTILABEL and run.label_names == NAMES
    examples = run.examples()
    assert [list(x) for x in examples["labels"]] == [["sports"], ["politics", "sports"], [], ["politics"]]

    tokenizer = AutoTokenizer.from_pretrained(run.model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(run.model_dir).eval()
    assert model.config.problem_type == "multi_label_classification" and model.config.num_labels == 2

    def logits_of(texts):
        with torch.no_grad():
            return np.concatenate([model(**tokenizer(t, return_tensors="pt")).logits.numpy() for t in texts])

    z = logits_of(examples["text"])  # [4, 2]
    unit_ids = MULTILABEL.unit_ids(examples, NAMES)[0]
    recorded = run.read_epoch("eval", 1, unit_ids)
    np.testing.assert_allclose(recorded[:, 0], 0.0)
    np.testing.assert_allclose(recorded[:, 1], z.reshape(-1), atol=1e-5)

    metrics = run.metrics()
    assert len(metrics) == 8 and metrics["id"].iloc[3] == "ex-1#1"
    assert metrics[["example_id", "label_index", "label_name"]].iloc[3].tolist() == ["ex-1", 1, "sports"]
    assert metrics["label"].tolist() == [0, 1, 1, 1, 0, 0, 1, 0]
    p = 1 / (1 + np.exp(-z.reshape(-1)))
    gold = metrics["label"].to_numpy() == 1
    np.testing.assert_allclose(metrics["confidence"], np.where(gold, p, 1 - p), atol=1e-5)  # 2 equal epochs

    # The combined map: each example at its worst label, as scores.multilabel computes it from z.
    combined = run.example_metrics()
    indicator = np.array([[0, 1], [1, 1], [0, 0], [1, 0]], dtype=bool)
    expected = label_examples.example_metrics(
        ml.label_metrics_from_logits(np.stack([z, z]), indicator, ids=examples["id"])
    )
    assert combined["id"].tolist() == ["ex-0", "ex-1", "ex-2", "ex-3"]
    np.testing.assert_allclose(combined["confidence"], expected["confidence"], atol=1e-5)
    np.testing.assert_allclose(
        combined["confidence"], np.where(indicator, p.reshape(4, 2), 1 - p.reshape(4, 2)).min(1), atol=1e-5
    )
    assert combined["worst_label"].tolist() == expected["worst_label"].tolist()
    assert set(combined["worst_label_name"]) <= set(NAMES)

    dev_frame = run.dev_examples()
    dev_z = logits_of(dev_frame["text"])
    dev_gold = np.array([[0, 1], [1, 0]])
    right = (dev_z > 0) == dev_gold
    record = run.history()[-1]
    assert record["dev_accuracy"] == pytest.approx(right.mean())
    assert record["dev_exact_match"] == pytest.approx(right.all(axis=1).mean())
    from cartomap.analysis import summary

    rows = dict(summary.summary_rows(summary.run_summary(run)).to_numpy().tolist())
    assert rows["dev exact match, last epoch"] == f"{right.all(axis=1).mean():.1%}"
    # The loss is the binary cross-entropy of every label (transformers' multi-label loss).
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(dev_z), torch.tensor(dev_gold * 1.0)
    )
    assert record["dev_loss"] == pytest.approx(float(bce), abs=1e-5)


def test_the_run_copy_of_multilabel_data_reads_back_as_the_same_data(tiny_model, ml_files, cache):
    train, dev = ml_files
    run = train_or_load(ml_config(tiny_model, train, dev, epochs=1), RunStore(cache))
    again = load_dataset(run.data_config("train"))
    assert again.task_kind is MULTILABEL
    assert again.fingerprint() == load_dataset(ml_data(train)).fingerprint()


def test_what_a_multilabel_run_cannot_do_is_refused(tiny_model, ml_files, cache):
    train, dev = ml_files
    curriculum = ml_config(tiny_model, train, dev).replace(order=OrderConfig(name="length"))
    with pytest.raises(DataError, match="order 'length': a multilabel run trains in the shuffled order only"):
        train_or_load(curriculum, RunStore(cache))


def test_the_command_line_trains_a_multilabel_run(tiny_model, ml_files, tmp_path, capsys):
    from cartomap.cli import main

    train, dev = ml_files
    argv = ["--cache", str(tmp_path / "c"), "train", "--data", train, "--dev", dev, "--test", dev]
    argv += ["--task", "multilabel"]
    argv += ["--model", tiny_model, "--epochs", "1", "--batch-size", "4", "--max-length", "32"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "4 texts, 1 epochs, dev accuracy (per label)" in out and "dev exact match" in out
    (test_line,) = [line for line in out.splitlines() if line.startswith("  test ")]
    assert ": accuracy (per label) " in test_line and ", exact match " in test_line
    (run,) = RunStore(tmp_path / "c").list()
    assert run.task_kind is MULTILABEL and len(run.example_metrics()) == 4


# --------------------------------------------------------------------------- the maps


@pytest.fixture()
def ml_run(tiny_model, ml_files, cache):
    train, dev = ml_files
    return train_or_load(ml_config(tiny_model, train, dev), RunStore(cache))


def test_each_label_has_its_map_and_the_combined_map_puts_an_example_at_its_worst_label(ml_run):
    from cartomap.analysis import multilabel as views

    assert views.views(NAMES) == ["combined", "label:0", "label:1", "units"]
    assert views.view_title("label:1", NAMES) == "One label: sports"
    units = ml_run.metrics()
    sports = views.view_frame(ml_run, "label:1")
    assert sports["id"].tolist() == ["ex-0#1", "ex-1#1", "ex-2#1", "ex-3#1"]
    assert sports["gold"].astype(str).tolist() == ["present", "present", "absent", "absent"]
    assert sports["text"].iloc[1] == TRAIN[1]["text"] and set(sports["label_name"]) == {"sports"}
    assert sports["label_set"].tolist() == ["sports", "politics, sports", "(none)", "politics"]
    np.testing.assert_allclose(sports["confidence"], units["confidence"].to_numpy()[1::2])
    assert len(views.view_frame(ml_run, "units")) == 8

    combined = views.view_frame(ml_run, "combined")
    assert combined["id"].tolist() == ["ex-0", "ex-1", "ex-2", "ex-3"]
    assert combined["gold"].astype(str).tolist() == ["sports", "politics, sports", "(none)", "politics"]
    worst = units["confidence"].to_numpy().reshape(4, 2).min(axis=1)
    np.testing.assert_allclose(combined["confidence"], worst)
    at = units["confidence"].to_numpy().reshape(4, 2).argmin(axis=1)
    assert combined["worst_label"].tolist() == [NAMES[j] for j in at]
    with pytest.raises(Exception, match="unknown view 'label:7'"):
        views.view_frame(ml_run, "label:7")

    # A point's label by epoch: a label view's point is its unit, a combined point its worst label's.
    z = ml_run.read_epoch("eval", 1, ["ex-1#1"])[0, 1]
    trajectory = views.unit_trajectory(ml_run, "ex-1#1")
    assert trajectory["epoch"].tolist() == [1, 2] and trajectory.attrs["present"]
    np.testing.assert_allclose(trajectory["prob_present"], 1 / (1 + np.exp(-z)), rtol=1e-6)
    np.testing.assert_allclose(trajectory["gold_prob"], trajectory["prob_present"])
    assert views.unit_of(ml_run, "ex-2") == f"ex-2#{at[2]}"
    with pytest.raises(Exception, match="no example or"):
        views.unit_of(ml_run, "ex-9#0")


def test_the_data_map_page_offers_each_label_and_the_combined_view(ml_run, cache, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(root))
    at = AppTest.from_file(str(root / "pages" / "data_map.py"), default_timeout=patience.WAIT_S)
    at.run()
    assert not at.exception, at.exception
    (picker,) = [s for s in at.selectbox if s.label == "Map of"]
    assert picker.options == [
        "All labels: each example at its worst label",
        "One label: politics",
        "One label: sports",
        "Every (example, label): one point per label of each example",
    ]
    captions = [c.value for c in at.caption]
    assert any("not shown here yet" in c and "nearest neighbours" in c for c in captions)
    assert any(c.startswith("4 examples") for c in captions)
    picker.set_value("label:1").run()
    assert not at.exception, at.exception
    gold = [m for m in at.sidebar.multiselect if m.label == "Gold label"][0]
    assert sorted(gold.options) == ["absent", "present"]
    at.session_state["selected_ids"] = ["ex-1#1"]  # one point selected: it is focused
    at.run()
    assert not at.exception, at.exception
    assert "id: ex-1#1\ngold: present" in "\n".join(t.value for t in at.text)
    assert any("Probability of label sports by epoch" in m.value for m in at.markdown)
    # On the combined map a point is an example: its chart is its worst label's.
    [s for s in at.selectbox if s.label == "Map of"][0].set_value("combined")
    at.session_state["selected_ids"] = ["ex-1"]
    at.run()
    assert not at.exception, at.exception
    assert "id: ex-1\ngold: politics, sports" in "\n".join(t.value for t in at.text)
    worst = ml_run.example_metrics()["worst_label_name"].iloc[1]
    assert any(f"Probability of label {worst} by epoch" in m.value for m in at.markdown)


@pytest.mark.parametrize(
    "page,what",
    [
        ("pruning", "pruning suspected label errors works on examples with one label each"),
        ("artifacts", "artifact analysis (lexical correlations, partial-input baselines) works on examples"),
    ],
)
def test_pages_of_one_label_per_example_say_they_do_not_apply_to_a_multilabel_run(
    ml_run, cache, monkeypatch, page, what
):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "pages" / f"{page}.py"), default_timeout=patience.WAIT_S
    )
    at.run()
    assert not at.exception
    notes = [i.value for i in at.info]
    assert any(what in n and f"Run {ml_run.id} is a multilabel run" in n for n in notes), notes


def test_experiments_of_one_label_per_example_refuse_multilabel_data(tiny_model, ml_files, tmp_path, capsys):
    from cartomap.cli import main

    train, dev = ml_files
    common = ["--task", "multilabel", "--model", tiny_model, "--epochs", "2", "--test", dev]
    cache = ["--cache", str(tmp_path / "c")]
    assert main([*cache, "prune", "--data", train, *common]) == 2
    assert "out-of-fold probabilities by k folds (pruning, or a token run's folds of sentences) works on" in (
        capsys.readouterr().err
    )
    assert main([*cache, "curriculum", "--data", train, "--dev", dev, *common]) == 2
    assert "a curriculum of training orders works on examples with one label each" in capsys.readouterr().err


def test_a_lost_metrics_file_of_a_multilabel_run_is_rebuilt_from_its_dynamics(ml_run):
    saved = ml_run.metrics()
    ml_run.metrics_path().write_bytes(b"not parquet")
    again = ml_run.metrics()
    assert again["id"].tolist() == saved["id"].tolist()
    assert again[["example_id", "label_index", "label_name"]].equals(
        saved[["example_id", "label_index", "label_name"]]
    )
    np.testing.assert_allclose(again["confidence"], saved["confidence"])
    ids, logits = ml_run.dynamics("eval")
    assert ids[:2] == ["ex-0#0", "ex-0#1"] and logits.shape == (2, 8, 2)


def test_a_multilabel_queue_is_reviewed_on_the_page(ml_run, cache, monkeypatch):
    """The Review suspects page decides a multi-label queue's (example, label) units: the card asks about one
    label of the example (its labels shown), relabel offers absent / present, a click is recorded."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from cartomap.cli import main
    from cartomap.curation.queue import open_queue

    assert (
        main(
            [
                "--cache",
                str(cache),
                "review-queue",
                "create",
                ml_run.id,
                "q",
                "--detector",
                "aum",
                "--top",
                "4",
            ]
        )
        == 0
    )
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "pages" / "review_suspects.py"),
        default_timeout=patience.WAIT_S,
    )
    at.query_params["run"] = ml_run.id
    at.session_state["rs_annotator"] = "ann"
    at.run()
    assert not at.exception
    asked = [c.value for c in at.caption if c.value.startswith("Is the label")]
    assert len(asked) == 1 and "Its labels:" in asked[0]
    labels = [b.label for b in at.button]
    assert "Relabel: absent" in labels or "Relabel: present" in labels
    next(b for b in at.button if b.label == "Keep").click().run()
    assert not at.exception
    assert open_queue(ml_run, "q").history()["decision"].tolist() == ["keep"]
