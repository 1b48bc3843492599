"""Recording a token classifier (AutoModelForTokenClassification) outside cartomap's loop: the
DynamicsRecorder and the Trainer callback keep each word's logits at its first sub-word, keyed by
(sentence id, word index). The oracle: a tiny random-weights model trained with learning rate 0 never
changes, so every recorded row must equal the model's own logits at that word's first sub-word."""

from __future__ import annotations

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.integrations import DynamicsRecorder

TAGS = ("B-LOC", "B-PER", "I-PER", "O")
IDS = ["s0", "s1", "s2"]
# "Schwarzenegger" is several sub-words in the default encoder's vocabulary.
WORDS = [
    ["Arnold", "Schwarzenegger", "lives", "in", "Paris"],
    ["Mary", "visited", "Berlin"],
    ["The", "cat", "sat"],
]
WORD_TAGS = [["B-PER", "I-PER", "O", "O", "B-LOC"], ["B-PER", "O", "B-LOC"], ["O", "O", "O"]]


@pytest.fixture(scope="module")
def token_model():
    import torch
    from transformers import BertConfig, BertForTokenClassification

    from cartomap.training.models import default_model_path, load_tokenizer

    tokenizer = load_tokenizer(str(default_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=len(TAGS),
    )
    torch.manual_seed(0)
    return BertForTokenClassification(config).eval(), tokenizer


def encode(tokenizer, rows, padding=True):
    """Sub-word inputs of sentences ``rows`` and their aligned labels (a word's tag id at its first
    sub-word, -100 elsewhere)."""
    import torch

    from cartomap.scores.tokens import align_labels

    enc = tokenizer([WORDS[r] for r in rows], is_split_into_words=True, padding=padding, return_tensors="pt")
    labels = []
    for b, r in enumerate(rows):
        aligned = align_labels(enc.word_ids(b), [TAGS.index(t) for t in WORD_TAGS[r]])
        labels.append(aligned)
    return enc, torch.tensor(np.stack(labels))


def expected_logits(model, tokenizer) -> np.ndarray:
    """Each word's logits at its first sub-word, one sentence at a time (no padding), words in order."""
    import torch

    out = []
    for r in range(len(WORDS)):
        enc = tokenizer(WORDS[r], is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0].numpy()
        word_ids = enc.word_ids(0)
        out.append(logits[[word_ids.index(k) for k in range(len(WORDS[r]))]])
    return np.concatenate(out)


def test_the_recorder_keeps_each_words_first_sub_word(token_model, tmp_path):
    import torch

    model, tokenizer = token_model
    recorder = DynamicsRecorder(
        IDS, WORD_TAGS, WORDS, task="token", label_names=TAGS, store=tmp_path / "c", epochs=2
    )
    for epoch, order in enumerate(([0, 1, 2], [2, 0, 1])):  # another order, other batches
        for batch in ([order[0], order[1]], [order[2]]):
            enc, labels = encode(tokenizer, batch)
            assert (labels[0] == -100).sum() > 2 or len(batch) == 1  # padding and later sub-words
            with torch.no_grad():
                logits = model(**enc).logits
            recorder(epoch, [IDS[r] for r in batch], logits, labels=labels)
    run = recorder.close()
    assert run.task_kind.name == "token"
    unit_ids = [f"{s}#{k}" for s, words in zip(IDS, WORDS, strict=True) for k in range(len(words))]
    expected = expected_logits(model, tokenizer)
    for epoch in range(2):
        np.testing.assert_allclose(run.read_epoch("train", epoch, unit_ids), expected, atol=1e-5)
    metrics = run.metrics()
    assert metrics["id"].tolist() == unit_ids
    assert metrics[["example_id", "word"]].iloc[6].tolist() == ["s1", 1]
    assert metrics["label"].tolist()[:5] == [1, 2, 3, 3, 0]
    from cartomap.analysis.datamap import map_frame, sentence_map

    assert map_frame(run)["context"].iloc[6] == "Mary visited Berlin"
    assert sentence_map(run)["id"].tolist() == IDS


def test_the_recorder_names_a_sentence_whose_words_are_not_all_labelled(token_model, tmp_path):
    import torch

    model, tokenizer = token_model
    recorder = DynamicsRecorder(IDS, WORD_TAGS, WORDS, task="token", label_names=TAGS, store=tmp_path)
    enc, labels = encode(tokenizer, [0, 1])
    with torch.no_grad():
        logits = model(**enc).logits
    cut = labels.clone()
    cut[0, (cut[0] != -100).nonzero()[-1]] = -100  # "Paris" cut off by max_length
    with pytest.raises(DataError, match="sentence 's0' has 5 words but 4 labelled sub-words"):
        recorder(0, ["s0", "s1"], logits, labels=cut)
    enc, labels_12 = encode(tokenizer, [1, 2])  # both of 3 words
    with torch.no_grad():
        logits_12 = model(**enc).logits
    with pytest.raises(DataError, match="word 's2#0' has label 1 in the batch, 3 in the recorder"):
        recorder(0, ["s2", "s1"], logits_12, labels=labels_12)  # ids in another order than the rows
    with pytest.raises(DataError, match="aligned labels"):
        recorder(0, ["s0", "s1"], logits)
    with pytest.raises(DataError, match="sub-words, classes"):
        recorder(0, ["s0"], logits[0], labels=labels[0])


def token_dataset(tokenizer):
    """The sentences as a Hugging Face NER set: words, tags (a Sequence of ClassLabel), an id column,
    and the tokenised inputs with their aligned labels."""
    import datasets

    from cartomap.scores.tokens import align_labels

    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=list(TAGS))),
        }
    )
    raw = datasets.Dataset.from_dict(
        {"id": IDS, "tokens": WORDS, "ner_tags": [[TAGS.index(t) for t in row] for row in WORD_TAGS]},
        features=features,
    )

    def tokenise(batch):
        enc = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=32)
        enc["labels"] = [
            align_labels(enc.word_ids(b), tags).tolist() for b, tags in enumerate(batch["ner_tags"])
        ]
        return enc

    return raw.map(tokenise, batched=True)


def test_the_trainer_callback_records_a_token_classifier(token_model, tmp_path):
    """Dropout off and learning rate 0: the training pass and the eval-mode pass both see the model
    that the sentences were encoded with, so both record exactly its logits at each word's first sub-word."""
    import copy

    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments

    from cartomap.integrations.trainer import DataMapCallback

    model, tokenizer = token_model
    model = copy.deepcopy(model)
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
    for module in model.modules():
        if module.__class__.__name__ == "Dropout":
            module.p = 0.0
    train = token_dataset(tokenizer)
    callback = DataMapCallback(train, mode="both", task="token", store=tmp_path / "cache", name="ner")
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        num_train_epochs=2,
        learning_rate=0.0,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        seed=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        callbacks=[callback],
    )
    trainer.train()
    run = callback.run
    assert run.state == "done" and run.task_kind.name == "token"
    assert run.label_names == TAGS
    expected = expected_logits(model.eval(), tokenizer)
    unit_ids = [f"{s}#{k}" for s, words in zip(IDS, WORDS, strict=True) for k in range(len(words))]
    for source in ("train", "eval"):
        for epoch in range(2):
            np.testing.assert_allclose(run.read_epoch(source, epoch, unit_ids), expected, atol=1e-5)
    metrics = run.metrics()
    assert metrics["id"].tolist() == unit_ids and metrics["example_id"].iloc[5] == "s1"
    assert run.examples()["tokens"].iloc[1].tolist() == WORDS[1]
