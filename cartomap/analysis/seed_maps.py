"""The data map over several seeds, as pure functions: a seeds experiment's per-example table drawn as a
map (every metric the mean over the seeds, with how many seeds agree on each example's region), the
filter to examples stable in every seed, the caption of the seeds' agreement and an example's gold
probability per epoch in every seed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import bucket_categories, build_map_frame, gold_trajectory
from cartomap.analysis.tables import SEED_COLUMNS
from cartomap.config import Source


def seed_map_frame(
    table: pd.DataFrame,
    examples: pd.DataFrame | None,
    label_names: Sequence[str],
    n_epochs: int | None = None,
) -> pd.DataFrame:
    """The map frame (:func:`build_map_frame`) of a seeds table: every metric the mean over the seeds
    (forgetfulness too, as a float), region the mean map's, plus ``region_majority``,
    ``region_agreement`` (share of seeds giving the majority region), ``region_votes`` ("2/3") and
    ``stable`` (the same region in every seed). Correctness buckets are the mean fraction to two
    decimals (a mean over seeds is no count of epochs). ``attrs``: also ``seeds`` and ``n_seeds``."""
    out = build_map_frame(table, examples, label_names, n_epochs or table.attrs.get("n_epochs"))
    if "forgetfulness" in table.columns:
        out["forgetfulness"] = table["forgetfulness"].to_numpy(dtype=np.float64)
    out["bucket"] = bucket_categories(out["correctness"].to_numpy(), None)
    for column in SEED_COLUMNS:
        if column in table.columns:
            out[column] = table[column].to_numpy()
    for key in ("seeds", "n_seeds"):
        if key in table.attrs:
            out.attrs[key] = table.attrs[key]
    return out


def stable_only(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of a map over seeds whose region is the same in every seed (index kept)."""
    if "stable" not in frame.columns:
        raise KeyError("the frame has no 'stable' column: it is no map over seeds")
    return frame[frame["stable"].to_numpy(dtype=bool)]


def seeds_caption(summary: Mapping[str, Any]) -> str:
    """One sentence on a seeds experiment's summary (:func:`cartomap.scores.stability.stability_summary`)."""

    def num(value) -> str:
        return "–" if value is None else f"{value:.2f}"

    spearman = summary.get("spearman", {})
    brown = summary.get("spearman_brown", {})
    k = summary.get("n_seeds")
    stable = summary.get("stable_share")
    return (
        f"Over {k} seeds: variability Spearman between seeds {num(spearman.get('variability'))} "
        f"(confidence {num(spearman.get('confidence'))}); two seeds put "
        f"{num(summary.get('region_agreement'))} of the examples in the same region, "
        + ("–" if stable is None else f"{stable:.0%}")
        + f" are in the same region in all {k}. Reliability of the {k}-seed mean variability "
        f"(Spearman-Brown): {num(brown.get('variability'))}."
    )


def seed_trajectories(runs: Mapping[int, Any], example_id: str, source: str = Source.TRAIN) -> pd.DataFrame:
    """:func:`gold_trajectory` of one example in every seed's run: columns seed, epoch, gold_prob
    (long format, seeds in the order given)."""
    parts = []
    for seed, run in runs.items():
        traj = gold_trajectory(run, example_id, source)
        parts.append(traj[["epoch", "gold_prob"]].assign(seed=int(seed)))
    if not parts:
        return pd.DataFrame(columns=["seed", "epoch", "gold_prob"])
    return pd.concat(parts, ignore_index=True)[["seed", "epoch", "gold_prob"]]
