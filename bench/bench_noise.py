"""Benchmark: how well each suspect score finds planted label flips (the label-noise benchmark).

A thin wrapper around :func:`cartomap.experiments.noise_benchmark.run_noise_benchmark` (also
``cartomap noise-benchmark``): a class-balanced sample of the ``--data`` set (the bundled demo,
``demo:train``, by default; SNLI dev in docs/benchmarks.md), an exact fraction of
labels flipped (symmetric and asymmetric neutral <-> entailment), Model 0 on the noisy set for
data-map confidence and AUM, k-fold out-of-fold logits for the margin, cleanlab and the consensus
rule. Every model goes through the run store: a rerun reloads, a killed run resumes.
Prints the wall time, the diagnostics and a markdown table for docs/benchmarks.md.

    HF_HUB_OFFLINE=1 python bench/bench_noise.py [--cache cache/bench-noise] [--n 2000] [--rates 0.1]
        [--folds 5] [--epochs 2] [--settings symmetric asymmetric] [--model default] [--seed 0] [--threads 1]
        (the options of `cartomap noise-benchmark`, plus --cache and --threads)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing
    from cartomap.cli.experiments import add_noise_arguments, noise_config
    from cartomap.experiments.noise_benchmark import run_noise_benchmark, to_markdown

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"), help="run store folder")
    add_noise_arguments(parser)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    a = parser.parse_args()

    import torch

    if a.threads:  # one thread: on a shared CPU, two threads can be much slower (see docs/benchmarks.md)
        torch.set_num_threads(a.threads)

    cfg = noise_config(a)
    t0 = time.time()
    table = run_noise_benchmark(cfg, a.cache, echo=lambda m: print(m, flush=True))
    wall = time.time() - t0
    print(
        f"\nwall time {wall / 60:.1f} min; torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; saved to {table.attrs['path']}"
    )
    print(json.dumps(table.attrs["diagnostics"]["settings"], indent=1))
    print()
    print(to_markdown(table))


if __name__ == "__main__":
    main()
