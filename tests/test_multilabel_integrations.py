"""Recording a multi-label classifier (``problem_type="multi_label_classification"``: one sigmoid output per
label) outside cartomap's loop: the DynamicsRecorder and the Trainer callback keep each label of each example
as the two-class row (0, z) of its logit z, keyed ``<id>#<label index>``, and write a run that opens like
one ``cartomap train --task multilabel`` made. The oracle: a tiny random-weights model trained with learning
rate 0 never changes, so every recorded row must be (0, the model's own logit of that label)."""

from __future__ import annotations

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.integrations import DynamicsRecorder
from cartomap.tasks.multilabel import MULTILABEL

NAMES = ("politics", "sports")
IDS = ["a", "b", "c", "d"]
TEXTS = [
    "the match ended in a draw",
    "parliament votes on the new football stadium",
    "a quiet day with nothing in the news",
    "the minister resigned after the vote",
]
LABEL_SETS = [["sports"], ["politics", "sports"], [], ["politics"]]
MULTI_HOT = [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]]  # the same sets, (politics, sports)
UNIT_IDS = [f"{i}#{j}" for i in IDS for j in range(2)]
GOLD = np.array(MULTI_HOT, dtype=np.int64).reshape(-1)  # 1 = present, unit by unit
DEV_TEXTS = ["the striker scored twice", "the senate passed the budget", "rain all day"]
DEV_HOT = [[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


# --------------------------------------------------------------------------- the recorder


def test_the_recorder_keeps_each_labels_logit_as_a_two_class_row(tmp_path):
    z = np.array([[0.5, -1.0], [2.0, 0.3], [-0.2, -3.0], [1.5, 0.25]], dtype=np.float32)
    later = z + np.array([[1.0, 1.0]], dtype=np.float32)  # epoch 1: every logit one higher
    recorder = DynamicsRecorder(
        IDS, MULTI_HOT, TEXTS, task="multilabel", label_names=NAMES, store=tmp_path / "c", epochs=2
    )
    for epoch, logits in enumerate((z, later)):
        recorder(epoch, ["d", "a"], logits[[3, 0]])  # any order, any batches
        recorder(epoch, ["b", "c"], logits[[1, 2]])
    run = recorder.close()
    assert run.task_kind is MULTILABEL and run.label_names == NAMES
    for epoch, logits in enumerate((z, later)):
        recorded = run.read_epoch("train", epoch, UNIT_IDS)
        np.testing.assert_allclose(recorded, np.stack([np.zeros(8), logits.reshape(-1)], axis=1), atol=1e-6)

    # per (example, label): p(gold) of each epoch, by hand
    p = sigmoid(np.stack([z, later]).reshape(2, -1).astype(np.float64))
    p_gold = np.where(GOLD == 1, p, 1 - p)
    metrics = run.metrics()
    assert metrics["id"].tolist() == UNIT_IDS and metrics["label"].tolist() == GOLD.tolist()
    assert metrics[["example_id", "label_index", "label_name"]].iloc[3].tolist() == ["b", 1, "sports"]
    np.testing.assert_allclose(metrics["confidence"], p_gold.mean(0), atol=1e-6)
    np.testing.assert_allclose(metrics["variability"], p_gold.std(0), atol=1e-6)
    right = (np.stack([z, later]).reshape(2, -1) > 0) == (GOLD == 1)
    np.testing.assert_allclose(metrics["correctness"], right.mean(0))
    # The combined map: each example at its worst label.
    combined = run.example_metrics()
    assert combined["id"].tolist() == IDS
    worst = p_gold.mean(0).reshape(4, 2)
    np.testing.assert_allclose(combined["confidence"], worst.min(1), atol=1e-6)
    assert combined["worst_label_name"].tolist() == [NAMES[j] for j in worst.argmin(1)]
    assert [list(x) for x in run.examples()["labels"]] == LABEL_SETS
    from cartomap.analysis import multilabel as views

    sports = views.view_frame(run, "label:1")
    assert sports["gold"].astype(str).tolist() == ["present", "present", "absent", "absent"]
    assert sports["text"].tolist() == TEXTS


def test_the_recorder_reads_label_name_lists_as_multi_hot_vectors(tmp_path):
    z = np.arange(8, dtype=np.float32).reshape(4, 2) - 4
    runs = []
    for k, labels in enumerate((MULTI_HOT, LABEL_SETS, np.array(MULTI_HOT, dtype=bool))):
        recorder = DynamicsRecorder(
            IDS, labels, task="multilabel", label_names=NAMES, store=tmp_path / f"{k}"
        )
        recorder(0, IDS, z)
        runs.append(recorder.close())
    assert all(r.metrics()["label"].tolist() == GOLD.tolist() for r in runs)
    assert runs[0].examples()["text"].tolist() == [""] * 4  # no texts given: ids and labels only


@pytest.mark.parametrize(
    "labels,names,message",
    [
        (MULTI_HOT, None, "a multi-label recorder needs the label names"),
        (
            [[0.0, 1.0, 0.0], *MULTI_HOT[1:]],
            NAMES,
            "row 0.*a vector of 3 entries; expected a multi-hot vector of 2",
        ),
        ([[0.0, 0.5], *MULTI_HOT[1:]], NAMES, r"row 0.*value 0.5; expected 0 or 1"),
        ([["tennis"], *LABEL_SETS[1:]], NAMES, "'tennis' is not one of the label names"),
        (MULTI_HOT[:3], NAMES, "3 label sets for 4 ids"),
        (
            ["sports|politics", *LABEL_SETS[1:]],
            NAMES,
            "row 0.*str 'sports|politics'; expected a multi-hot vector of 2",
        ),
    ],
)
def test_bad_multilabel_recorder_inputs_are_one_line_errors(tmp_path, labels, names, message):
    with pytest.raises(DataError, match=message) as err:
        DynamicsRecorder(IDS, labels, task="multilabel", label_names=names, store=tmp_path)
    assert "\n" not in str(err.value)


def test_the_recorder_refuses_logits_that_are_not_one_per_label(tmp_path):
    recorder = DynamicsRecorder(IDS, MULTI_HOT, task="multilabel", label_names=NAMES, store=tmp_path)
    with pytest.raises(
        DataError, match=r"logits of shape \(2, 3\) for 2 examples; a multi-label model's are \[2, 2\]"
    ):
        recorder(0, ["a", "b"], np.zeros((2, 3)))
    with pytest.raises(DataError, match="id 'x' is not one of the recorder's 4 ids"):
        recorder(0, ["x"], np.zeros((1, 2)))
    recorder(0, ["a", "b"], np.zeros((2, 2)))
    with pytest.raises(DataError, match=r"epoch 0 is missing 2 of 4 ids: 'c', 'd'"):
        recorder.close()


# --------------------------------------------------------------------------- the Trainer callback


@pytest.fixture(scope="module")
def ml_model():
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from cartomap.training.models import default_model_path, load_tokenizer

    tokenizer = load_tokenizer(str(default_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=len(NAMES),
        problem_type="multi_label_classification",
        hidden_dropout_prob=0.0,  # learning rate 0 and no dropout: the training pass is the model's logits
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval(), tokenizer


def logits_of(model, tokenizer, texts) -> np.ndarray:
    """The model's logits [N, L], one text at a time (no padding)."""
    import torch

    with torch.no_grad():
        return np.concatenate([model(**tokenizer(t, return_tensors="pt")).logits.numpy() for t in texts])


def ml_dataset(tokenizer, texts, labels, **columns):
    import datasets

    raw = datasets.Dataset.from_dict({"text": texts, "labels": labels, **columns})
    return raw.map(lambda b: tokenizer(b["text"], truncation=True, max_length=32), batched=True)


def train_with(model, tokenizer, callback, train, tmp_path, dev=None, epochs=2):
    import copy

    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from cartomap.integrations import multilabel_metrics

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        num_train_epochs=epochs,
        learning_rate=0.0,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        eval_strategy="epoch" if dev is not None else "no",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        seed=0,
    )
    trainer = Trainer(
        model=copy.deepcopy(model),
        args=args,
        train_dataset=train,
        eval_dataset=dev,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=multilabel_metrics if dev is not None else None,
        callbacks=[callback],
    )
    trainer.train()
    return callback.run


def test_the_trainer_callback_records_a_multilabel_classifier(ml_model, tmp_path):
    """Both recording modes record (0, z) of the unchanged model for every (example, label); the run's
    per-unit metrics, combined map and per-label dev accuracy are those computed by hand from z."""
    from cartomap.integrations.trainer import DataMapCallback

    model, tokenizer = ml_model
    train = ml_dataset(tokenizer, TEXTS, MULTI_HOT, id=IDS)
    dev = ml_dataset(tokenizer, DEV_TEXTS, DEV_HOT)
    callback = DataMapCallback(
        train, mode="both", task="multilabel", label_names=NAMES, store=tmp_path / "cache", name="topics"
    )
    run = train_with(model, tokenizer, callback, train, tmp_path, dev=dev)
    assert run.state == "done" and run.task_kind is MULTILABEL and run.label_names == NAMES
    z = logits_of(model, tokenizer, TEXTS)  # [4, 2]
    expected = np.stack([np.zeros(8), z.reshape(-1)], axis=1)
    for source in ("train", "eval"):
        for epoch in range(2):
            np.testing.assert_allclose(run.read_epoch(source, epoch, UNIT_IDS), expected, atol=1e-5)

    p = sigmoid(z.reshape(-1).astype(np.float64))
    p_gold = np.where(GOLD == 1, p, 1 - p)
    metrics = run.metrics()
    assert metrics["id"].tolist() == UNIT_IDS and metrics["label"].tolist() == GOLD.tolist()
    assert metrics[["example_id", "label_index", "label_name"]].iloc[2].tolist() == ["b", 0, "politics"]
    np.testing.assert_allclose(metrics["confidence"], p_gold, atol=1e-5)  # two equal epochs
    np.testing.assert_allclose(metrics["variability"], 0.0, atol=1e-5)
    np.testing.assert_allclose(metrics["correctness"], ((z.reshape(-1) > 0) == (GOLD == 1)).astype(float))
    combined = run.example_metrics()
    assert combined["id"].tolist() == IDS
    np.testing.assert_allclose(combined["confidence"], p_gold.reshape(4, 2).min(1), atol=1e-5)
    assert combined["worst_label_name"].tolist() == [NAMES[j] for j in p_gold.reshape(4, 2).argmin(1)]

    dev_z = logits_of(model, tokenizer, DEV_TEXTS)
    right = (dev_z > 0) == (np.array(DEV_HOT) == 1)
    history = run.history()
    assert len(history) == 2
    assert history[-1]["dev_accuracy"] == pytest.approx(right.mean())
    assert history[-1]["dev_exact_match"] == pytest.approx(right.all(axis=1).mean())
    train_right = (z.reshape(-1) > 0) == (GOLD == 1)
    assert history[-1]["train_accuracy"] == pytest.approx(train_right.mean())
    import torch

    bce = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(MULTI_HOT))
    assert history[-1]["train_loss"] == pytest.approx(float(bce), abs=1e-5)  # the model's own loss

    # It opens in the analyses of a multi-label run: each label's map, the combined map, the summary.
    from cartomap.analysis import multilabel as views
    from cartomap.analysis import summary

    sports = views.view_frame(run, "label:1")
    assert sports["id"].tolist() == [f"{i}#1" for i in IDS]
    assert sports["label_set"].tolist() == ["sports", "politics, sports", "(none)", "politics"]
    assert views.view_frame(run, "combined")["gold"].astype(str).tolist()[2] == "(none)"
    rows = dict(summary.summary_rows(summary.run_summary(run)).to_numpy().tolist())
    assert rows["dev exact match, last epoch"] == f"{right.all(axis=1).mean():.1%}"
    assert run.examples()["text"].tolist() == TEXTS


def test_the_callback_takes_label_names_from_the_model_and_a_column_of_name_lists(ml_model, tmp_path):
    """The model's id2label names the labels; the callback's labels may be a column of label-name lists (the
    Trainer trains on the multi-hot ``labels`` beside it), each checked against the Trainer's vectors."""
    import copy

    from cartomap.integrations.trainer import DataMapCallback

    model, tokenizer = ml_model
    model = copy.deepcopy(model)
    model.config.id2label = dict(enumerate(NAMES))
    model.config.label2id = {n: k for k, n in enumerate(NAMES)}
    train = ml_dataset(tokenizer, TEXTS, MULTI_HOT, topics=LABEL_SETS)
    callback = DataMapCallback(
        train, mode="eval", task="multilabel", label_column="topics", store=tmp_path / "cache"
    )
    run = train_with(model, tokenizer, callback, train, tmp_path, epochs=1)
    assert run.label_names == NAMES and run.examples()["id"].tolist() == ["0", "1", "2", "3"]
    assert run.metrics()["label"].tolist() == GOLD.tolist()
    z = logits_of(model, tokenizer, TEXTS)
    np.testing.assert_allclose(
        run.read_epoch("eval", 0, [f"{k}#{j}" for k in range(4) for j in range(2)])[:, 1],
        z.reshape(-1),
        atol=1e-5,
    )

    swapped = [LABEL_SETS[1], LABEL_SETS[0], *LABEL_SETS[2:]]  # rows 0 and 1 differ from the Trainer's
    other = ml_dataset(tokenizer, TEXTS, MULTI_HOT, topics=swapped)
    callback = DataMapCallback(other, task="multilabel", label_column="topics", store=tmp_path / "c2")
    with pytest.raises(DataError, match=r"label 'politics' of row 0 \(id '0'\): 0 against 1"):
        train_with(model, tokenizer, callback, other, tmp_path, epochs=1)


@pytest.mark.parametrize(
    "labels,options,message",
    [
        (MULTI_HOT, {}, "a multi-label dataset needs the label names in the model's output order"),
        (
            [[0.0, 1.0, 0.0]] * 4,
            {"label_names": NAMES},
            "row 0.*a vector of 3 entries; expected a multi-hot vector of 2",
        ),
        (
            MULTI_HOT,
            {"label_names": ("politics", "sports", "arts"), "label_column": "topics"},
            r"the model has 2 outputs \(num_labels\), the dataset 3 labels",
        ),
    ],
)
def test_bad_multilabel_callback_inputs_are_one_line_errors(ml_model, tmp_path, labels, options, message):
    """The model's id2label is transformers' made-up LABEL_0, LABEL_1: it names no label."""
    from cartomap.integrations.trainer import DataMapCallback

    model, tokenizer = ml_model
    assert model.config.id2label == {0: "LABEL_0", 1: "LABEL_1"}
    train = ml_dataset(tokenizer, TEXTS, [[0.0, 1.0]] * 4, topics=LABEL_SETS)
    train = train.remove_columns("labels").add_column("labels", labels) if labels is not MULTI_HOT else train
    callback = DataMapCallback(train, task="multilabel", store=tmp_path / "cache", **options)
    with pytest.raises(DataError, match=message) as err:
        train_with(model, tokenizer, callback, train, tmp_path, epochs=1)
    assert "\n" not in str(err.value)
