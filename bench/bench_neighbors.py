"""Benchmark: same-label k-nearest neighbours, cartomap's blocked matrix products vs scikit-learn.

Data: N random unit vectors of dimension D (default 20,000 x 384, the size of all-MiniLM-L6-v2's
[CLS] vectors) with 3 labels drawn uniformly. Task: for every example, its k = 4 nearest
examples by cosine similarity among those with the same label, itself excluded (WaNLI Stage 1).

* cartomap: ``cartomap.analysis.neighbours.same_label_neighbors`` (torch; GPU when present).
* scikit-learn, as a user would write it: per label ``NearestNeighbors(n_neighbors=k + 1,
  metric="cosine").fit(X_label).kneighbors(X_label)`` and drop the query itself
  (``algorithm="auto"``, which is brute force for the cosine metric; also timed with
  ``algorithm="brute", n_jobs=-1``).

Repeats are interleaved (every method once per round) so that all see the same machine load;
reports the best and median wall-clock times, the speedups and the fraction of examples whose
neighbour sets are identical to cartomap's.

    python bench/bench_neighbors.py [--n 20000] [--dim 384] [--k 4] [--repeats 3] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def make_data(n: int, dim: int, n_labels: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return emb, rng.integers(0, n_labels, size=n)


def sklearn_neighbors(emb: np.ndarray, labels: np.ndarray, k: int, **kwargs) -> np.ndarray:
    from sklearn.neighbors import NearestNeighbors

    out = np.full((len(labels), k), -1, dtype=np.int64)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine", **kwargs).fit(emb[members])
        _, pos = nn.kneighbors(emb[members])
        found = members[pos]
        for row, q in enumerate(members):
            out[q] = [i for i in found[row] if i != q][:k]
    return out


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--labels", type=int, default=3)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table row block")
    a = parser.parse_args()

    import sklearn
    import torch

    from cartomap.analysis.neighbours import same_label_neighbors

    if a.threads:
        torch.set_num_threads(a.threads)
    emb, labels = make_data(a.n, a.dim, a.labels)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    same_label_neighbors(emb[:256], labels[:256], k=a.k, device=device)  # warm-up (CUDA context, kernels)

    def ours():
        idx, _ = same_label_neighbors(emb, labels, k=a.k, device=device)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return idx

    methods = {
        "ours": ours,
        'NearestNeighbors(metric="cosine") default': lambda: sklearn_neighbors(emb, labels, a.k),
        'NearestNeighbors(metric="cosine", algorithm="brute", n_jobs=-1)': lambda: sklearn_neighbors(
            emb, labels, a.k, algorithm="brute", n_jobs=-1
        ),
    }
    # repeats interleaved, so that every method sees the same machine load
    times: dict[str, list[float]] = {name: [] for name in methods}
    results = {}
    for _ in range(a.repeats):
        for name, fn in methods.items():
            seconds, results[name] = timed(fn)
            times[name].append(seconds)
    idx = results["ours"]
    t_ours = min(times["ours"])
    rows = [(f"cartomap same_label_neighbors (torch, {device})", times["ours"], 1.0)]
    for name in list(methods)[1:]:
        same = np.mean([set(x) == set(y) for x, y in zip(idx.tolist(), results[name].tolist(), strict=True)])
        rows.append((f"scikit-learn {name}", times[name], same))
    # where the sets differ: how far apart the two sets' similarities are (float64), i.e. near-ties
    ref = results[list(methods)[1]]
    gaps = [
        float(
            np.abs(
                np.sort(emb[i].astype(np.float64) @ emb[x].astype(np.float64).T)
                - np.sort(emb[i].astype(np.float64) @ emb[y].astype(np.float64).T)
            ).max()
        )
        for i, (x, y) in enumerate(zip(idx.tolist(), ref.tolist(), strict=True))
        if set(x) != set(y)
    ]

    cpu = platform.processor() or platform.machine()
    threads = torch.get_num_threads()
    print(
        f"{a.n} x {a.dim} unit vectors, {a.labels} labels, k={a.k}, {a.repeats} rounds; "
        f"torch {torch.__version__} ({threads} threads), scikit-learn {sklearn.__version__}, "
        f"{os.cpu_count()} CPUs ({cpu})"
        + (f", GPU {torch.cuda.get_device_name()}" if device.startswith("cuda") else "")
    )
    if gaps:
        print(
            f"{len(gaps)} example(s) with a different neighbour set; largest float64 cosine gap between "
            f"the two sets: {max(gaps):.2e} (ties at float32 precision)"
        )
    if a.markdown:
        print(
            "\n| method | best s | median s | speedup (best) | speedup (median) | neighbour sets as cartomap's |"
        )
        print("|---|---:|---:|---:|---:|---:|")
    med_ours = float(np.median(times["ours"]))
    for name, ts, same in rows:
        best, med = min(ts), float(np.median(ts))
        if a.markdown:
            print(
                f"| {name} | {best:.3f} | {med:.3f} | {best / t_ours:.1f}x | {med / med_ours:.1f}x | {same:.4%} |"
            )
        else:
            print(
                f"{name:72s} best {best:7.3f}s median {med:7.3f}s  speedup {best / t_ours:5.1f}x "
                f"(median {med / med_ours:5.1f}x)  identical {same:.4%}"
            )


if __name__ == "__main__":
    main()
