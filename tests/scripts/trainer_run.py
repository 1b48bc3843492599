"""A real transformers Trainer with DataMapCallback, for tests: run alone or under torchrun.

python tests/scripts/trainer_run.py MODEL CACHE OUT MODE [--rows N] [--epochs E] [--lr LR] [--accumulation K]
    [--group-by-length] [--no-ids] [--batch B]

Trains MODEL on the first N pairs of the bundled demo dev set (tokenised with the model's
tokenizer, max 64 tokens, a datasets.Dataset with id, premise, hypothesis, label columns) with
dropout off, saving a checkpoint after every epoch, and prints the run id.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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

    import datasets
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset
    from cartomap.integrations import DataMapCallback

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForSequenceClassification.from_pretrained(
        a.model, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    frame = load_dataset(DataConfig(path="demo:dev")).frame.head(a.rows)
    columns = ["premise", "hypothesis", "label"] + ([] if a.no_ids else ["id"])
    train = datasets.Dataset.from_pandas(frame[columns], preserve_index=False)
    train = train.map(
        lambda b: tokenizer(b["premise"], b["hypothesis"], truncation=True, max_length=64), batched=True
    )
    args = TrainingArguments(
        output_dir=a.out,
        num_train_epochs=a.epochs,
        per_device_train_batch_size=a.batch,
        per_device_eval_batch_size=8,
        gradient_accumulation_steps=a.accumulation,
        learning_rate=a.lr,
        train_sampling_strategy="group_by_length" if a.group_by_length else "random",
        save_strategy="epoch",
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        disable_tqdm=True,
        seed=0,
    )
    callback = DataMapCallback(train, mode=a.mode, store=a.cache, name=f"trainer {a.mode}")
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train,
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        callbacks=[callback],
    )
    trainer.train()
    if args.process_index == 0:
        print(f"RUN {callback.run.id}", flush=True)


if __name__ == "__main__":
    main()
