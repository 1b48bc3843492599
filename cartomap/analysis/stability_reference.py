"""How stable data maps were measured to be: a plain table of measured figures, keyed by how the
dynamics were recorded, so a map drawn from one run can say how far to trust it.

Each row: a recording setting (record mode, record_points, skip_epochs) and, per dataset, what two runs
that differ only in their seed gave: Spearman of per-example variability and confidence between the
seeds, the share of examples keeping their region (cartomap's rule by rank) and, of the examples one seed
calls ambiguous, the share the other calls ambiguous too. Measured by ``bench/bench_stability.py``
(docs/stability.md): the default encoder, 4 epochs at learning rate 5e-5, warmup 0.1, batch 16, seeds 1
and 2, on the bundled demo (3,198 SNLI pairs) and on 3,000 MultiNLI dev-matched pairs. Add rows as new
settings are measured (same keys); :func:`measured_stability` returns the row of a training config.
"""

from __future__ import annotations

from typing import Any

from cartomap.config import EVAL_PASS, TRAIN_PASS, map_source, recorded_sources

#: Where the figures come from, in words (the caption says it).
MEASURED_ON = (
    "the default encoder, 4 epochs at lr 5e-5, two seeds, on 3,198 SNLI and 3,000 MultiNLI pairs "
    "(docs/stability.md)"
)

#: One row per measured recording setting (record, record_points, skip_epochs).
MEASURED: tuple[dict[str, Any], ...] = (
    {
        "record": "train",
        "record_points": 1,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.29,
                "confidence_spearman": 0.77,
                "region_agreement": 0.6,
                "ambiguous_kept": 0.5,
            },
            "MultiNLI": {
                "variability_spearman": 0.64,
                "confidence_spearman": 0.8,
                "region_agreement": 0.69,
                "ambiguous_kept": 0.68,
            },
        },
    },
    {
        "record": "train",
        "record_points": 1,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.39,
                "confidence_spearman": 0.78,
                "region_agreement": 0.67,
                "ambiguous_kept": 0.52,
            },
            "MultiNLI": {
                "variability_spearman": 0.38,
                "confidence_spearman": 0.8,
                "region_agreement": 0.59,
                "ambiguous_kept": 0.5,
            },
        },
    },
    {
        "record": "eval",
        "record_points": 1,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.55,
                "confidence_spearman": 0.89,
                "region_agreement": 0.69,
                "ambiguous_kept": 0.56,
            },
            "MultiNLI": {
                "variability_spearman": 0.7,
                "confidence_spearman": 0.84,
                "region_agreement": 0.73,
                "ambiguous_kept": 0.73,
            },
        },
    },
    {
        "record": "eval",
        "record_points": 1,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.61,
                "confidence_spearman": 0.88,
                "region_agreement": 0.72,
                "ambiguous_kept": 0.58,
            },
            "MultiNLI": {
                "variability_spearman": 0.37,
                "confidence_spearman": 0.84,
                "region_agreement": 0.57,
                "ambiguous_kept": 0.45,
            },
        },
    },
    {
        "record": "eval",
        "record_points": 2,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.42,
                "confidence_spearman": 0.91,
                "region_agreement": 0.65,
                "ambiguous_kept": 0.51,
            },
            "MultiNLI": {
                "variability_spearman": 0.76,
                "confidence_spearman": 0.84,
                "region_agreement": 0.75,
                "ambiguous_kept": 0.8,
            },
        },
    },
    {
        "record": "eval",
        "record_points": 2,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.73,
                "confidence_spearman": 0.9,
                "region_agreement": 0.79,
                "ambiguous_kept": 0.69,
            },
            "MultiNLI": {
                "variability_spearman": 0.5,
                "confidence_spearman": 0.84,
                "region_agreement": 0.6,
                "ambiguous_kept": 0.52,
            },
        },
    },
    {
        "record": "eval",
        "record_points": 4,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.53,
                "confidence_spearman": 0.91,
                "region_agreement": 0.7,
                "ambiguous_kept": 0.59,
            },
            "MultiNLI": {
                "variability_spearman": 0.78,
                "confidence_spearman": 0.85,
                "region_agreement": 0.75,
                "ambiguous_kept": 0.79,
            },
        },
    },
    {
        "record": "eval",
        "record_points": 4,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "variability_spearman": 0.73,
                "confidence_spearman": 0.91,
                "region_agreement": 0.78,
                "ambiguous_kept": 0.67,
            },
            "MultiNLI": {
                "variability_spearman": 0.55,
                "confidence_spearman": 0.85,
                "region_agreement": 0.61,
                "ambiguous_kept": 0.52,
            },
        },
    },
)


def measured_stability(train_config) -> dict[str, Any] | None:
    """The measured row (a copy) of ``train_config``'s recording setting: its ``record`` mode ("both"
    draws the map from the training pass, as its metrics file does), ``record_points`` (eval only) and
    ``skip_epochs``; None when that setting was never measured (or nothing is recorded)."""
    mode = getattr(train_config, "record", TRAIN_PASS)
    if not recorded_sources(mode):
        return None
    record = map_source(mode)
    points = int(getattr(train_config, "record_points", 1)) if record == EVAL_PASS else 1
    key = (record, points, int(getattr(train_config, "skip_epochs", 0)))
    for row in MEASURED:
        if (row["record"], row["record_points"], row["skip_epochs"]) == key:
            return {**row, "measured_on": MEASURED_ON}
    return None


def measured_caption(row: dict[str, Any]) -> str:
    """One sentence on a measured row: how much two seeds agreed on such a map, per dataset."""
    figures = row["figures"]

    def each(key: str, fmt: str) -> str:
        return " / ".join(format(f[key], fmt) for f in figures.values())

    names = " / ".join(figures)
    return (
        f"How stable are maps recorded like this one? Two seeds ({names}; {row['measured_on']}) agreed on "
        f"variability with Spearman {each('variability_spearman', '.2f')}, on confidence "
        f"{each('confidence_spearman', '.2f')}, and put {each('region_agreement', '.0%')} of the examples in "
        f"the same region; of the examples one seed called ambiguous, {each('ambiguous_kept', '.0%')} were "
        "ambiguous in the other. A single run's regions are a rough guide: add seeds to see how sure this map is."
    )
