"""Benchmark: what one detector's row of a truth report costs (AP, AUROC, P@50 and P@100, each with
1,000 bootstrap resamples: :func:`cartomap.scores.truth.ranking_row`), and one AP + AUROC call.

A truth report computes one such row per detector and target, so this is where AP and AUROC are called
most (a thousand times per row). Random scores, 15 % errors, seed 0; the best of ``--repeats``.

    python bench/bench_truth_stats.py [--n 1599 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cartomap.scores import truth as stats


def best_of(fn, repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def measure(n: int, repeats: int) -> str:
    """One line: the row's seconds (best, then every run) and one AP + AUROC call's milliseconds."""
    rng = np.random.default_rng(0)
    t = rng.random(n) < 0.15
    s = rng.normal(size=n) + t
    stats.ranking_row(t[:50], s[:50], [10], n_boot=10)  # the lazy imports, outside the timing
    rows = best_of(lambda: stats.ranking_row(t, s, [50, 100], n_boot=1000, seed=0), repeats)
    calls = best_of(
        lambda: [(stats.average_precision(t, s), stats.auroc(t, s)) for _ in range(1000)], repeats
    )
    runs = ", ".join(f"{r:.2f}" for r in rows)
    return f"n={n}: ranking_row(n_boot=1000) {min(rows):.2f} s ({runs}); AP + AUROC once {min(calls):.3f} ms"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[1599, 20000])
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    for n in a.n:
        print(measure(n, a.repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
