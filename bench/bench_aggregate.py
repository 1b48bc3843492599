"""Benchmark: unit scores aggregated to groups, every method of both kinds, at data-set sizes.

Data: synthetic confidences in [0, 1]. Token runs: ``--sentences`` sentences of 1 to 29 words (about
15 on average), rows in key order; a sentence's score from its words by ``tokens.sentence_scores``.
Multi-label runs: an ``--examples`` x ``--labels`` matrix with about 10% of labels present; an
example's score from its labels by ``label_examples.example_scores``. Only the public functions of
``cartomap.scores.tokens`` and ``cartomap.scores.label_examples`` (in ``cartomap.scores.multilabel``
before 2026-11-28) are called, so the same script times any later version of them (run it with ``PYTHONPATH`` at the checkout to time).

Measured: median wall-clock and process CPU time of ``--repeats`` calls, one thread.

    PYTHONPATH=. OMP_NUM_THREADS=1 python bench/bench_aggregate.py [--sentences 50000] [--examples 100000] [--labels 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from cartomap.scores import label_examples, tokens


def timed(call, repeats: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=50_000)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"cartomap from {os.path.dirname(os.path.dirname(tokens.__file__))}")  # fmt: skip
    rng = np.random.default_rng(0)
    sentence, word = tokens.flat_keys(rng.integers(1, 30, size=args.sentences))
    conf = rng.uniform(size=len(sentence))
    scores = rng.uniform(size=(args.examples, args.labels))
    gold = rng.uniform(size=scores.shape) < 0.1
    rows = []
    for method in tokens.SENTENCE_METHODS:
        wall, cpu = timed(
            lambda m=method: tokens.sentence_scores(conf, sentence, word, method=m), args.repeats
        )
        rows.append(
            (f"{args.sentences:,} sentences, {len(conf):,} words", f"sentence_scores ({method})", wall, cpu)
        )
    for method in label_examples.EXAMPLE_METHODS:
        wall, cpu = timed(
            lambda m=method: label_examples.example_scores(scores, gold, method=m), args.repeats
        )
        rows.append((f"{args.examples:,} x {args.labels}", f"example_scores ({method})", wall, cpu))
    print(f"\nmedian of {args.repeats}:\n")
    print("| size | stage | wall s | CPU s |")
    print("|---|---|---:|---:|")
    for size, stage, wall, cpu in rows:
        print(f"| {size} | {stage} | {wall:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()
