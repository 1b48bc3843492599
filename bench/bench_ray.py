"""One grid of six independent runs through the local executor and through Ray (docs/benchmarks.md, "Executors").

The grid is a pruning experiment with five folds and no Model 1: Model 0 and five fold models, six
runs that do not depend on each other, on real NLI pairs of the bundled demo and a small random BERT
built from a config (no download). Each variant trains the whole grid from an empty run store in a
fresh process, so nothing is loaded instead of trained:

  local-1t   the local executor (one run after another), torch with 1 thread;
  local-2t   the local executor, torch with 2 threads (what a user of a 2-core machine gets by default);
  ray-2x1    Ray started by the executor on this machine, every run a task with 1 CPU (1 thread):
             two runs at a time on 2 cores.

Wall time of ``run_experiment`` (imports before the clock; Ray's start and its workers' imports
inside it, as a user pays them), the ratio to local-1t, and the sum over the runs of their epoch
loops (history ``train_seconds``: the training itself, without loading and saving). The variants are interleaved per repeat.
All variants must end with the same pruned ids (checked), so the work is the same.

    HF_HUB_OFFLINE=1 python bench/bench_ray.py                     # ~5 min on a busy 2-core CPU
    python bench/bench_ray.py --examples 400 --repeats 2 --json out.json
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

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {
    "local-1t": ("local", 1),
    "local-2t": ("local", 2),
    "ray-2x1": ("ray", 1),
}


def build_inputs(folder: Path, args) -> dict:
    """The small random BERT and the train / test files, written once and shared by every variant."""
    import numpy as np

    from cartomap.config import DataConfig
    from cartomap.data import derived
    from cartomap.data.loading import load_dataset
    from cartomap.training.models import save_random_classifier

    save_random_classifier(
        folder / "model",
        hidden=args.hidden,
        layers=args.layers,
        heads=max(1, args.hidden // 32),
        intermediate=4 * args.hidden,
        max_positions=512,
    )
    train = load_dataset(DataConfig(path="demo:train")).subset(np.arange(args.examples))
    test = load_dataset(DataConfig(path="demo:dev")).subset(np.arange(100))
    paths = {"model": str(folder / "model")}
    for name, data in (("train", train), ("test", test)):
        paths[name] = str(folder / f"{name}.jsonl")
        derived.to_frame(data).to_json(paths[name], orient="records", lines=True, force_ascii=False)
    return paths


def one(variant: str, inputs: dict, cache: str, args) -> dict:
    """Train the grid with ``variant`` in this process; wall seconds and the pruned ids."""
    import torch

    from cartomap.config import DataConfig, ExecutorConfig, ModelConfig, RunConfig, TrainConfig
    from cartomap.experiments.pruning import PruningParams, create_pruning, load_results
    from cartomap.experiments.runner import run_experiment
    from cartomap.experiments.store import ExperimentStore

    kind, threads = VARIANTS[variant]
    torch.set_num_threads(threads)
    data = DataConfig(path=inputs["train"])
    base = RunConfig(
        data=data,
        dev=None,
        tests=(DataConfig(path=inputs["test"]),),
        model=ModelConfig(inputs["model"], args.max_length),
        train=TrainConfig(
            epochs=args.epochs, batch_size=32, learning_rate=1e-3, device="cpu", save_checkpoints=False
        ),
    )
    params = PruningParams(base=base, folds=5, categories=("P1G0", "P2G0"), threshold=0.0, train_model1=False)
    store = ExperimentStore(cache)
    exp = create_pruning(params, store)
    executor = ExecutorConfig(kind=kind, cpus_per_run=threads)
    start = time.perf_counter()
    run_experiment(exp, store, executor=executor)
    wall = time.perf_counter() - start
    assert exp.state == "done", exp.status()
    results = load_results(exp)
    runs = [store.runs.get(run_id) for run_id in exp.run_ids().values()]
    return {
        "variant": variant,
        "wall_s": wall,
        "epochs_s": sum(h["train_seconds"] for run in runs for h in run.history()),
        "runs": len(runs),
        "pruned": sorted(results["pruned_ids"]),
    }


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--examples", type=int, default=600, help="training examples (the folds train on 4/5)"
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64, help="BERT width (random weights)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--json", default=None, help="write the measurements here")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a variant, in a child process
    parser.add_argument("--inputs", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.one:
        print(json.dumps(one(args.one, json.loads(args.inputs), args.cache, args)))
        return

    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        tmp = Path(tmp)
        inputs = build_inputs(tmp, args)
        print(f"load average before: {load()}", flush=True)
        rows = []
        for repeat in range(args.repeats):
            order = (
                args.variants[repeat % len(args.variants) :] + args.variants[: repeat % len(args.variants)]
            )
            for variant in order:
                cache = tmp / f"cache-{variant}-{repeat}"
                command = [
                    sys.executable, __file__, "--one", variant, "--inputs", json.dumps(inputs),
                    "--cache", str(cache), "--examples", str(args.examples), "--epochs", str(args.epochs),
                    "--max-length", str(args.max_length),
                ]  # fmt: skip
                env = dict(os.environ, PYTHONPATH=str(ROOT))
                done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["repeat"] = repeat
                rows.append(row)
                print(
                    f"{variant} (repeat {repeat}): {row['wall_s']:.1f} s for {row['runs']} runs", flush=True
                )
        print(f"load average after: {load()}", flush=True)
        pruned = {json.dumps(r["pruned"]) for r in rows}
        assert len(pruned) == 1, "the variants pruned different examples: not the same work"
        wall = {v: statistics.median(r["wall_s"] for r in rows if r["variant"] == v) for v in args.variants}
        work = {v: statistics.median(r["epochs_s"] for r in rows if r["variant"] == v) for v in args.variants}
        base = wall.get("local-1t")
        print(
            "\n| variant | wall (s), 6 runs | speed-up vs local-1t | epoch loops, sum over runs (s) |"
            "\n|---|---|---|---|"
        )
        for variant in args.variants:
            ratio = f"{base / wall[variant]:.2f}x" if base else "–"
            print(f"| {variant} | {wall[variant]:.1f} | {ratio} | {work[variant]:.1f} |")
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
