"""How sure a data map is: the same training run with several seeds, compared example by example.

Every function takes ``frames``: one metrics frame per seed (the columns of
:func:`cartomap.scores.metrics.compute_metrics`: id, label, confidence, variability, correctness,
aum, ..., region), as ``{seed: frame}``. Frames are aligned by ``id`` (rows may come in any order;
the first seed's order is kept), so every seed must hold the same examples with the same labels.

* :func:`seed_table`: one row per example: mean and spread over the seeds of every metric, the region
  of the mean map, the majority region and how many seeds agree with it, and each seed's values.
* :func:`pairwise_spearman`, :func:`region_agreement_pairwise`: how much two seeds agree, averaged
  over every pair of seeds.
* :func:`spearman_brown`: how reliable the mean of k seeds is, given the agreement of two.
* :func:`stability_summary`: all of them in one JSON-ready dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import ambiguity
from cartomap.scores.metrics import EASY, REGIONS, RegionRule

#: Metrics whose pairwise Spearman correlation :func:`stability_summary` reports.
SUMMARY_METRICS: tuple[str, ...] = ("confidence", *ambiguity.MAP_SCORES, "correctness", "aum")
#: Metrics whose value in every seed :func:`seed_table` keeps as ``<metric>@seed<s>``.
PER_SEED_COLUMNS: tuple[str, ...] = ("confidence", *ambiguity.MAP_SCORES, "correctness", "region")
#: Columns that are numbers but no metric to average (positions, class indices).
NOT_AVERAGED = frozenset({"index", "label", "predicted"})


def seed_column(metric: str, seed: int) -> str:
    """The per-seed column of ``metric``: "variability@seed3"."""
    return f"{metric}@seed{int(seed)}"


# --------------------------------------------------------------------------- alignment


def align_frames(frames: Mapping[int, pd.DataFrame]) -> dict[int, pd.DataFrame]:
    """Every seed's frame in the row order of the first seed's ids (index reset).

    DataError when there is no seed, a frame lacks ``id``, holds an id twice, holds other ids than the
    first seed, or gives an example another label (the message names the seed)."""
    if not frames:
        raise DataError("no seeds: give at least one metrics frame")
    seeds = list(frames)
    first = seeds[0]
    aligned: dict[int, pd.DataFrame] = {}
    order: pd.Index | None = None
    for seed in seeds:
        frame = frames[seed]
        if "id" not in frame.columns:
            raise DataError(f"seed {seed}: the metrics frame has no id column", field="id")
        ids = pd.Index(frame["id"].astype(str).to_numpy(dtype=object))
        if not ids.is_unique:
            dup = ids[ids.duplicated()][0]
            raise DataError(f"seed {seed}: example id {dup!r} appears more than once", field="id")
        if order is None:
            order = ids
            aligned[seed] = frame.reset_index(drop=True)
            continue
        if len(ids) != len(order) or not ids.isin(order).all():
            missing = order.difference(ids)
            extra = ids.difference(order)
            what = []
            if len(missing):
                what.append(f"lacks {len(missing)} (e.g. {missing[0]!r})")
            if len(extra):
                what.append(f"has {len(extra)} others (e.g. {extra[0]!r})")
            raise DataError(
                f"seed {seed}: its example ids differ from seed {first}'s: it " + " and ".join(what),
                field="id",
            )
        if ids.equals(order):
            aligned[seed] = frame.reset_index(drop=True)
        else:
            aligned[seed] = frame.iloc[ids.get_indexer(order)].reset_index(drop=True)
    base_labels = aligned[first]["label"].to_numpy() if "label" in aligned[first].columns else None
    for seed in seeds[1:]:
        frame = aligned[seed]
        if base_labels is not None and "label" in frame.columns:
            differ = np.flatnonzero(frame["label"].to_numpy() != base_labels)
            if differ.size:
                i = int(differ[0])
                raise DataError(
                    f"seed {seed}: example {frame['id'].iloc[i]!r} has label {frame['label'].iloc[i]}, "
                    f"seed {first} gives {base_labels[i]}",
                    field="label",
                )
    return aligned


def _pairs(frames: Mapping[int, pd.DataFrame], what: str) -> tuple[dict[int, pd.DataFrame], list]:
    aligned = align_frames(frames)
    if len(aligned) < 2:
        raise DataError(f"{what} compares seeds: give at least 2, got {len(aligned)}")
    return aligned, list(combinations(list(aligned), 2))


def _numeric_metrics(frame: pd.DataFrame) -> list[str]:
    return [
        c
        for c in frame.columns
        if c not in NOT_AVERAGED
        and pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
    ]


def _rule(frame: pd.DataFrame) -> RegionRule:
    return RegionRule.from_dict(frame.attrs.get("regions"))


# --------------------------------------------------------------------------- per example


def majority_region(regions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(majority, votes) of a [S, N] array of region names: the most frequent region of every
    example over the S seeds, ties broken by the order easy-to-learn, ambiguous, hard-to-learn (other
    names after those, alphabetically), and how many seeds gave it (int [N], 1 ... S)."""
    regions = np.asarray(regions, dtype=object)
    present = {str(r) for r in regions.ravel()}
    levels = [r for r in REGIONS if r in present] + sorted(present - set(REGIONS))
    if not levels:
        return np.zeros(regions.shape[1], dtype=object), np.zeros(regions.shape[1], dtype=np.int64)
    counts = np.stack([(regions == level).sum(axis=0) for level in levels])  # [L, N]
    best = np.argmax(counts, axis=0)  # first maximum: the tie-break order above
    majority = np.asarray(levels, dtype=object)[best]
    return majority, counts.max(axis=0).astype(np.int64)


def seed_table(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """One row per example, over S seeds' metrics frames (aligned by id, :func:`align_frames`).

    Columns:

    * ``id``, ``label``; ``predicted``: the class most seeds predicted (ties: the lowest index);
    * for every numeric metric m (confidence, variability, correctness, aum, ...): ``m_mean`` =
      (1/S) sum_s m_s, ``m_std`` = sqrt((1/S) sum_s (m_s - m_mean)^2) (population std over seeds;
      higher = the seeds disagree more about the example), and ``m`` = ``m_mean``, so the table
      draws as a data map of the means;
    * ``region``: the region of the mean map, :func:`region_partition` of mean confidence and the mean of
      the rule's axis (variability or another ambiguity score) by the rule in the first frame's
      ``attrs["regions"]`` (default by rank);
    * ``region_majority``: the most frequent per-seed region (ties: easy-to-learn, ambiguous,
      hard-to-learn); ``region_agreement`` = (seeds giving the majority) / S, in [1/S, 1], higher =
      more stable; ``region_votes`` = "k/S"; ``stable`` = every seed gives the same region;
    * ``<m>@seed<s>`` for m in confidence, variability, correctness, region and every seed s.

    ``attrs``: ``seeds`` (in the order given), ``n_seeds``, ``regions`` (the rule), and the first
    frame's ``n_epochs`` / ``epochs_recorded`` when it has them.
    """
    aligned = align_frames(frames)
    seeds = list(aligned)
    first = aligned[seeds[0]]
    n_seeds = len(seeds)
    out = pd.DataFrame({"id": first["id"].astype(str).to_numpy(dtype=object)})
    if "label" in first.columns:
        out["label"] = first["label"].to_numpy()
    if all("predicted" in f.columns for f in aligned.values()):
        preds = np.stack([f["predicted"].to_numpy(dtype=np.int64) for f in aligned.values()])
        n_classes = int(preds.max()) + 1 if preds.size else 0
        votes = np.stack([(preds == c).sum(axis=0) for c in range(n_classes)]) if n_classes else None
        out["predicted"] = np.argmax(votes, axis=0) if votes is not None else np.zeros(0, dtype=np.int64)
    metrics = [m for m in _numeric_metrics(first) if all(m in f.columns for f in aligned.values())]
    for m in metrics:
        values = np.stack([f[m].to_numpy(dtype=np.float64) for f in aligned.values()])  # [S, N]
        mean = values.mean(axis=0)
        out[m] = mean
        out[f"{m}_mean"] = mean
        out[f"{m}_std"] = values.std(axis=0, ddof=0)
    rule = _rule(first)
    if {"confidence", rule.axis} <= set(metrics):
        out["region"] = rule.regions(out)
    if all("region" in f.columns for f in aligned.values()):
        regions = np.stack([f["region"].astype(str).to_numpy(dtype=object) for f in aligned.values()])
        majority, votes = majority_region(regions)
        out["region_majority"] = majority
        out["region_agreement"] = votes / n_seeds
        out["region_votes"] = [f"{v}/{n_seeds}" for v in votes.tolist()]
        out["stable"] = votes == n_seeds
    for m in PER_SEED_COLUMNS:
        if not all(m in f.columns for f in aligned.values()):
            continue
        for seed in seeds:
            column = aligned[seed][m]
            out[seed_column(m, seed)] = (
                column.astype(str).to_numpy(dtype=object)
                if m == "region"
                else column.to_numpy(dtype=np.float64)
            )
    out.attrs["seeds"] = [int(s) for s in seeds]
    out.attrs["n_seeds"] = n_seeds
    out.attrs["regions"] = rule.to_dict()
    for key in ("n_epochs", "epochs_recorded"):
        if key in first.attrs:
            out.attrs[key] = first.attrs[key]
    return out


# --------------------------------------------------------------------------- between seeds


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")  # undefined for a constant column
    return float(spearmanr(a, b).statistic)


def pairwise_spearman(frames: Mapping[int, pd.DataFrame], metric: str) -> float:
    """Mean over every pair of seeds (s, t) of Spearman's rank correlation rho(m_s, m_t) of
    ``metric`` over the examples. In [-1, 1]; higher = the seeds rank the examples alike (1: the same
    order). Pairs where the metric is constant in a seed (rho undefined) are left out; NaN when every
    pair is. DataError with fewer than 2 seeds or a metric a frame lacks."""
    aligned, pairs = _pairs(frames, "pairwise Spearman")
    for seed, frame in aligned.items():
        if metric not in frame.columns:
            raise DataError(f"seed {seed}: the metrics frame has no column {metric!r}", field=metric)
    rhos = [
        _spearman(
            aligned[s][metric].to_numpy(dtype=np.float64), aligned[t][metric].to_numpy(dtype=np.float64)
        )
        for s, t in pairs
    ]
    rhos = [r for r in rhos if np.isfinite(r)]
    return float(np.mean(rhos)) if rhos else float("nan")


def region_agreement_pairwise(frames: Mapping[int, pd.DataFrame]) -> float:
    """Mean over every pair of seeds (s, t) of (1/N) #{i : region_s(i) == region_t(i)}: the share of
    examples two seeds put in the same region. In [0, 1]; higher = more stable. DataError with fewer
    than 2 seeds or a frame without a region column."""
    aligned, pairs = _pairs(frames, "region agreement")
    for seed, frame in aligned.items():
        if "region" not in frame.columns:
            raise DataError(f"seed {seed}: the metrics frame has no region column", field="region")
    regions = {s: f["region"].astype(str).to_numpy(dtype=object) for s, f in aligned.items()}
    shares = [float(np.mean(regions[s] == regions[t])) if len(regions[s]) else float("nan") for s, t in pairs]
    return float(np.mean(shares))


def region_agreement_not_easy(frames: Mapping[int, pd.DataFrame]) -> float:
    """Mean over every pair of seeds (s, t) of #{i in K : region_s(i) == region_t(i)} / #K, where K = the
    examples easy-to-learn in at most one of s and t: :func:`region_agreement_pairwise` without the examples
    both seeds call easy (a token run's easy "O" words, most of its map, make any two seeds look alike). In
    [0, 1]; higher = more stable; pairs where every example is easy in both are left out, NaN when every pair is."""
    aligned, pairs = _pairs(frames, "region agreement")
    regions = {s: f["region"].astype(str).to_numpy(dtype=object) for s, f in aligned.items()}
    shares = []
    for s, t in pairs:
        kept = ~((regions[s] == EASY) & (regions[t] == EASY))
        if kept.any():
            shares.append(float(np.mean(regions[s][kept] == regions[t][kept])))
    return float(np.mean(shares)) if shares else float("nan")


def stable_share(frames: Mapping[int, pd.DataFrame]) -> float:
    """(1/N) #{i : region_s(i) is the same for every seed s}. In [0, 1]; higher = more stable; never
    above :func:`region_agreement_pairwise`."""
    aligned = align_frames(frames)
    regions = np.stack([f["region"].astype(str).to_numpy(dtype=object) for f in aligned.values()])
    if not regions.shape[1]:
        return float("nan")
    return float(np.mean(np.all(regions == regions[0], axis=0)))


def spearman_brown(rho: float, k: int) -> float:
    """Spearman-Brown prophecy: the reliability of the mean of k seeds, given the correlation rho
    between two single seeds: rho_k = k * rho / (1 + (k - 1) * rho). Higher = the k-seed mean is more
    reproducible (k = 1 gives rho; rho = 0.23 and k = 3 give 0.47). NaN for a NaN rho or a zero
    denominator; DataError for k < 1."""
    if int(k) < 1:
        raise DataError(f"k must be at least 1, got {k}", field="k")
    rho = float(rho)
    denominator = 1.0 + (int(k) - 1) * rho
    if not np.isfinite(rho) or denominator == 0:
        return float("nan")
    return int(k) * rho / denominator


def _finite_or_none(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def stability_summary(frames: Mapping[int, pd.DataFrame]) -> dict[str, Any]:
    """The stability of a map over S >= 2 seeds, JSON-ready (NaN as None):

    ``n_seeds``, ``seeds``, ``n_examples``; ``spearman``: {metric: :func:`pairwise_spearman`} for
    confidence, every ambiguity score of :data:`cartomap.scores.ambiguity.MAP_SCORES`, correctness and aum
    (those the frames have); ``axis``: the score the regions were ranked on; ``spearman_brown``:
    {metric: :func:`spearman_brown` (rho, S)}, the expected reliability of the S-seed mean map;
    ``regions``: the rule the regions were drawn by (the first frame's ``attrs``); ``region_agreement``:
    :func:`region_agreement_pairwise`; ``region_agreement_not_easy``: :func:`region_agreement_not_easy`;
    ``stable_share``: :func:`stable_share`. Higher = more stable everywhere."""
    aligned, _ = _pairs(frames, "a stability summary")
    k = len(aligned)
    first = next(iter(aligned.values()))
    metrics = [m for m in SUMMARY_METRICS if all(m in f.columns for f in aligned.values())]
    spearman = {m: pairwise_spearman(aligned, m) for m in metrics}
    return {
        "n_seeds": k,
        "seeds": [int(s) for s in aligned],
        "n_examples": int(len(first)),
        "axis": _rule(first).axis,
        "regions": _rule(first).to_dict(),
        "spearman": {m: _finite_or_none(r) for m, r in spearman.items()},
        "spearman_brown": {m: _finite_or_none(spearman_brown(r, k)) for m, r in spearman.items()},
        "region_agreement": _finite_or_none(region_agreement_pairwise(aligned)),
        "region_agreement_not_easy": _finite_or_none(region_agreement_not_easy(aligned)),
        "stable_share": _finite_or_none(stable_share(aligned)),
    }
