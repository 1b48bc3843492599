"""Benchmark: multi-label training dynamics (cartomap.scores.multilabel) at data-set sizes.

Data: synthetic sigmoid logits [E, N, L] (a label's logit drifts towards its gold state over the
epochs, with noise) and a gold matrix with about 10% of labels present (GoEmotions: 28 labels, 58k
examples; a topic set: 20 labels, 100k+ examples).

Measured (median of ``--repeats`` wall-clock and process CPU times, one thread):

* pairs: ``label_metrics_from_logits`` (sigmoid, p(gold), correctness, the long table of N x L rows,
  regions ranked per label);
* example (min) / example (present_only): ``example_metrics`` on that table;
* store epoch: ``dynamics_long`` of one epoch and ``to_parquet`` of it (what a run would write per
  epoch), and the Parquet file's size;
* read back: ``read_parquet`` of every epoch and ``dynamics_array`` (rows shuffled, keys checked).

    OMP_NUM_THREADS=1 python bench/bench_multilabel.py [--sizes 10000x20,100000x20] [--epochs 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.scores import label_examples
from cartomap.scores import multilabel as ml


def make_dynamics(n: int, n_labels: int, epochs: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    gold = rng.uniform(size=(n, n_labels)) < 0.1
    sign = np.where(gold, 1.0, -1.0)
    drift = (
        np.linspace(0.2, 3.0, epochs)[:, None, None] * sign[None] * rng.uniform(0.0, 1.5, size=(n, n_labels))
    )
    logits = (drift + rng.normal(0.0, 1.0, size=(epochs, n, n_labels))).astype(np.float32)
    ids = [f"ex-{i:07d}" for i in range(n)]
    return logits, gold, ids


def timed(call, repeats: int) -> tuple[float, float, object]:
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        result = call()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), result


def run(n: int, n_labels: int, epochs: int, repeats: int, folder: Path) -> list[dict]:
    logits, gold, ids = make_dynamics(n, n_labels, epochs)
    rows = []

    def add(stage: str, wall: float, cpu: float, note: str = "") -> None:
        rows.append({"size": f"{n:,} x {n_labels}", "pairs": n * n_labels, "stage": stage,
                     "wall_s": wall, "cpu_s": cpu, "note": note})  # fmt: skip

    wall, cpu, pairs = timed(lambda: ml.label_metrics_from_logits(logits, gold, ids=ids), repeats)
    add("pairs (label_metrics_from_logits)", wall, cpu, f"{len(pairs):,} rows")
    for method in ("min", "present_only"):
        wall, cpu, _ = timed(lambda m=method: label_examples.example_metrics(pairs, method=m), repeats)
        add(f"example ({method})", wall, cpu)
    paths = [folder / f"epoch_{e}.parquet" for e in range(epochs)]

    def store() -> None:
        ml.dynamics_long(logits[0], ids).to_parquet(paths[0], index=False)

    wall, cpu, _ = timed(store, repeats)
    for e in range(1, epochs):
        ml.dynamics_long(logits[e], ids).sample(frac=1.0, random_state=e).to_parquet(paths[e], index=False)
    add(
        "store epoch (dynamics_long + to_parquet)",
        wall,
        cpu,
        f"{paths[0].stat().st_size / 2**20:.1f} MiB/epoch",
    )

    def read_back() -> np.ndarray:
        return ml.dynamics_array([pd.read_parquet(p) for p in paths], ids, n_labels)

    wall, cpu, back = timed(read_back, repeats)
    assert np.allclose(back, logits)
    add(f"read back {epochs} epochs (read_parquet + dynamics_array)", wall, cpu)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000x20,100000x20", help="NxL, comma-separated")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, pandas {pd.__version__}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            n, n_labels = (int(x) for x in size.lower().split("x"))
            rows += run(n, n_labels, args.epochs, args.repeats, Path(tmp))
    print(f"\n{args.epochs} epochs, median of {args.repeats}:\n")
    print("| size (N x L) | stage | wall s | CPU s | note |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        print(f"| {r['size']} | {r['stage']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['note']} |")


if __name__ == "__main__":
    main()
