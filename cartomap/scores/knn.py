"""Exact cosine k-nearest neighbours on arrays, in blocks (no index, no approximation).

Used by the neighbour-label detector (:mod:`cartomap.scores.detectors`) and the review queue's cards
(:mod:`cartomap.curation.queue`). Cost: O(N x Q x H) multiply-adds for Q queries over N vectors of H
dimensions; memory: one (query block x candidate block) float32 matrix at a time.
"""

from __future__ import annotations

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def cosine_top_k(vectors, rows, k: int, block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``vectors`` [N, H] most cosine-similar to each of ``rows`` (a query is never its
    own neighbour): (indices int64 [Q, k], similarities float64 [Q, k]), most similar first, ties by the
    lower index; -1 / NaN where N - 1 < k."""
    vectors = np.asarray(vectors)
    rows = np.asarray(rows, dtype=np.int64)
    n, q = len(vectors), len(rows)
    out_idx = np.full((q, k), -1, dtype=np.int64)
    out_sim = np.full((q, k), np.nan, dtype=np.float64)
    if k < 1 or q == 0:
        return out_idx, out_sim
    for q0 in range(0, q, block):
        qrows = rows[q0 : q0 + block]
        queries = _unit(vectors[qrows])
        best_sim = np.full((len(qrows), 0), -np.inf, dtype=np.float32)
        best_idx = np.zeros((len(qrows), 0), dtype=np.int64)
        for start in range(0, n, block):
            part = _unit(vectors[start : start + block])
            sims = queries @ part.T
            idx = np.arange(start, start + len(part))
            sims[qrows[:, None] == idx[None, :]] = -np.inf  # not itself
            best_sim = np.concatenate([best_sim, sims], axis=1)
            best_idx = np.concatenate([best_idx, np.broadcast_to(idx, sims.shape)], axis=1)
            keep = np.argsort(-best_sim, axis=1, kind="stable")[:, :k]
            best_sim = np.take_along_axis(best_sim, keep, axis=1)
            best_idx = np.take_along_axis(best_idx, keep, axis=1)
        width = best_idx.shape[1]
        out_idx[q0 : q0 + len(qrows), :width] = best_idx
        out_sim[q0 : q0 + len(qrows), :width] = best_sim
    missing = ~np.isfinite(out_sim)
    out_idx[missing], out_sim[missing] = -1, np.nan
    return out_idx, out_sim
