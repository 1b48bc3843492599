"""A real transformers Trainer with DataMapCallback, for tests: imported, run alone, or under torchrun.

    python tests/scripts/trainer_run.py MODEL CACHE OUT MODE [--rows N] [--epochs E] [--lr LR]
        [--batch B] [--accumulation K] [--group-by-length] [--no-ids]

Trains MODEL on the first N pairs of the bundled demo dev set (a datasets.Dataset with id,
premise, hypothesis and label columns, tokenised to at most 64 tokens) with dropout off, saves a
checkpoint after every epoch into OUT and prints ``RUN <id>`` (rank 0).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def dataset(tokenizer, rows: int, ids: bool = True):
    """The first ``rows`` demo dev pairs as a tokenised datasets.Dataset."""
    import datasets

    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    frame = load_dataset(DataConfig(path="demo:dev")).frame.head(rows)
    columns = ["premise", "hypothesis", "label"] + (["id"] if ids else [])
    train = datasets.Dataset.from_pandas(frame[columns], preserve_index=False)
    return train.map(
        lambda b: tokenizer(b["premise"], b["hypothesis"], truncation=True, max_length=64), batched=True
    )


def trainer(
    model_path: str,
    out: str,
    train,
    callbacks=(),
    *,
    epochs: int = 2,
    lr: float = 5e-4,
    batch: int = 4,
    accumulation: int = 1,
    group_by_length: bool = False,
    trainer_class=None,
    **extra,
):
    """A Trainer of the model at ``model_path`` (dropout off) on ``train``, one checkpoint per epoch."""
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    args = TrainingArguments(
        output_dir=out,
        num_train_epochs=epochs,
        per_device_train_batch_size=batch,
        per_device_eval_batch_size=8,
        gradient_accumulation_steps=accumulation,
        learning_rate=lr,
        train_sampling_strategy="group_by_length" if group_by_length else "random",
        save_strategy="epoch",
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        disable_tqdm=True,
        seed=0,
        **extra,
    )
    return (trainer_class or Trainer)(
        model=model,
        args=args,
        train_dataset=train,
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("cache")
    p.add_argument("out")
    p.add_argument("mode")
    p.add_argument("--rows", type=int, default=40)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--accumulation", type=int, default=1)
    p.add_argument("--group-by-length", action="store_true")
    p.add_argument("--no-ids", action="store_true")
    a = p.parse_args()

    from transformers import AutoTokenizer

    from cartomap.integrations import DataMapCallback

    train = dataset(AutoTokenizer.from_pretrained(a.model), a.rows, ids=not a.no_ids)
    callback = DataMapCallback(train, mode=a.mode, store=a.cache, name=f"trainer {a.mode}")
    t = trainer(
        a.model,
        a.out,
        train,
        [callback],
        epochs=a.epochs,
        lr=a.lr,
        batch=a.batch,
        accumulation=a.accumulation,
        group_by_length=a.group_by_length,
    )
    t.train()
    if t.args.process_index == 0:
        print(f"RUN {callback.run.id}", flush=True)


if __name__ == "__main__":
    main()
