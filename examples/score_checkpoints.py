"""Map a fine-tuning that already happened: score its saved checkpoints, one epoch each.

Runs as written after `pip install cartomap` (see the README). Step 1 stands in for "a model
someone fine-tuned": a plain transformers Trainer (no cartomap in it) fine-tunes the default
encoder on 800 demo pairs for 4 epochs and saves a checkpoint after each. Step 2 is cartomap: the
eval-mode pass of every checkpoint over the training data, in checkpoint order, becomes a run
(about 7 minutes in all on an idle 2-core CPU). The same from the shell:

    cartomap score-checkpoints examples_output/checkpoints --data demo:train

    python examples/score_checkpoints.py
"""

import datasets
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
)

from cartomap.config import DataConfig
from cartomap.data.loading import demo_path
from cartomap.integrations import score_checkpoints
from cartomap.training.models import default_model_path

LABELS = ["entailment", "neutral", "contradiction"]
ENCODER = str(default_model_path())
OUTPUT = "examples_output/checkpoints"

# 1. a fine-tuning that saved a checkpoint after every epoch (skip it when you have one)
train = datasets.load_dataset("json", data_files=str(demo_path("train")), split="train")
train = train.shuffle(seed=0).select(range(800))
train = train.map(lambda b: {"label": [LABELS.index(x) for x in b["label"]]}, batched=True)
tokenizer = AutoTokenizer.from_pretrained(ENCODER)
train = train.map(
    lambda b: tokenizer(b["premise"], b["hypothesis"], truncation=True, max_length=128), batched=True
)
model = AutoModelForSequenceClassification.from_pretrained(
    ENCODER, num_labels=3, id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)}
)
args = TrainingArguments(
    output_dir=OUTPUT,
    num_train_epochs=4,
    per_device_train_batch_size=16,
    learning_rate=1e-4,
    warmup_steps=0.1,  # a tenth of the steps
    save_strategy="epoch",
    report_to=[],
)
Trainer(
    model=model,
    args=args,
    train_dataset=train,
    data_collator=DataCollatorWithPadding(tokenizer),
    processing_class=tokenizer,
).train()

# 2. cartomap: every checkpoint-<step> folder of the output_dir, in step order, over the training
# data (all 1,600 demo pairs: examples the model never saw are mapped too). The model's id2label
# names are matched to the data's classes.
run = score_checkpoints([OUTPUT], DataConfig(path="demo:train"), name="score checkpoints example")
print(f"run {run.id} ({run.state}): {run.path}")
for record in run.history():
    print(f"  epoch {record['epoch']}: {record['checkpoint']}  accuracy {record['train_accuracy']:.3f}")
print(run.metrics()["region"].value_counts().to_string())
print(f"next: cartomap show {run.id}   |   cartomap dashboard")
