"""How stable data maps were measured to be: a plain table of measured figures, keyed by how the
dynamics were recorded, so a map drawn from one run can say how far to trust it.

Each row: a recording setting (record mode, record_points, skip_epochs) and, per dataset, what three runs
that differ only in their seed gave: Spearman of per-example confidence between seeds and, per ambiguity
axis of the map (:data:`cartomap.scores.ambiguity.MAP_SCORES`): the axis's Spearman between seeds, the
share of examples keeping their region (ranked on that axis), of the examples one seed calls ambiguous
the share another calls ambiguous too (means over the 3 pairs), and the share in the same region in all
three seeds. Measured by ``bench/bench_stability.py --axes`` (docs/stability.md): the default encoder, 4
epochs at learning rate 5e-5, warmup 0.1, batch 16, seeds 1-3, on the bundled demo (3,198 SNLI pairs)
and on 3,000 MultiNLI dev-matched pairs. Add rows as new settings are measured (same keys);
:func:`measured_stability` returns the row of a training config.
"""

from __future__ import annotations

from typing import Any

from cartomap.config import EVAL_PASS, TRAIN_PASS, map_source, recorded_sources

#: Where the figures come from, in words (the caption says it).
MEASURED_ON = (
    "the default encoder, 4 epochs at lr 5e-5, three seeds, on 3,198 SNLI and 3,000 MultiNLI pairs "
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
                "confidence_spearman": 0.77,
                "axes": {
                    "variability": {
                        "spearman": 0.27,
                        "region_agreement": 0.59,
                        "ambiguous_kept": 0.47,
                        "same_in_all_seeds": 0.4,
                    },
                    "mean_entropy": {
                        "spearman": 0.74,
                        "region_agreement": 0.78,
                        "ambiguous_kept": 0.69,
                        "same_in_all_seeds": 0.68,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.72,
                        "region_agreement": 0.77,
                        "ambiguous_kept": 0.69,
                        "same_in_all_seeds": 0.67,
                    },
                    "margin_gap": {
                        "spearman": 0.7,
                        "region_agreement": 0.78,
                        "ambiguous_kept": 0.68,
                        "same_in_all_seeds": 0.67,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.79,
                "axes": {
                    "variability": {
                        "spearman": 0.63,
                        "region_agreement": 0.7,
                        "ambiguous_kept": 0.69,
                        "same_in_all_seeds": 0.57,
                    },
                    "mean_entropy": {
                        "spearman": 0.67,
                        "region_agreement": 0.64,
                        "ambiguous_kept": 0.62,
                        "same_in_all_seeds": 0.48,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.7,
                        "region_agreement": 0.7,
                        "ambiguous_kept": 0.65,
                        "same_in_all_seeds": 0.56,
                    },
                    "margin_gap": {
                        "spearman": 0.6,
                        "region_agreement": 0.6,
                        "ambiguous_kept": 0.56,
                        "same_in_all_seeds": 0.43,
                    },
                },
            },
        },
    },
    {
        "record": "train",
        "record_points": 1,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.79,
                "axes": {
                    "variability": {
                        "spearman": 0.38,
                        "region_agreement": 0.66,
                        "ambiguous_kept": 0.51,
                        "same_in_all_seeds": 0.5,
                    },
                    "mean_entropy": {
                        "spearman": 0.75,
                        "region_agreement": 0.8,
                        "ambiguous_kept": 0.7,
                        "same_in_all_seeds": 0.7,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.72,
                        "region_agreement": 0.78,
                        "ambiguous_kept": 0.69,
                        "same_in_all_seeds": 0.67,
                    },
                    "margin_gap": {
                        "spearman": 0.73,
                        "region_agreement": 0.78,
                        "ambiguous_kept": 0.68,
                        "same_in_all_seeds": 0.67,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.78,
                "axes": {
                    "variability": {
                        "spearman": 0.37,
                        "region_agreement": 0.58,
                        "ambiguous_kept": 0.51,
                        "same_in_all_seeds": 0.41,
                    },
                    "mean_entropy": {
                        "spearman": 0.67,
                        "region_agreement": 0.67,
                        "ambiguous_kept": 0.63,
                        "same_in_all_seeds": 0.53,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.66,
                        "region_agreement": 0.69,
                        "ambiguous_kept": 0.62,
                        "same_in_all_seeds": 0.55,
                    },
                    "margin_gap": {
                        "spearman": 0.6,
                        "region_agreement": 0.65,
                        "ambiguous_kept": 0.56,
                        "same_in_all_seeds": 0.5,
                    },
                },
            },
        },
    },
    {
        "record": "eval",
        "record_points": 1,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.89,
                "axes": {
                    "variability": {
                        "spearman": 0.59,
                        "region_agreement": 0.7,
                        "ambiguous_kept": 0.58,
                        "same_in_all_seeds": 0.56,
                    },
                    "mean_entropy": {
                        "spearman": 0.87,
                        "region_agreement": 0.86,
                        "ambiguous_kept": 0.79,
                        "same_in_all_seeds": 0.79,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.84,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.77,
                    },
                    "margin_gap": {
                        "spearman": 0.85,
                        "region_agreement": 0.84,
                        "ambiguous_kept": 0.77,
                        "same_in_all_seeds": 0.76,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.82,
                "axes": {
                    "variability": {
                        "spearman": 0.63,
                        "region_agreement": 0.68,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.53,
                    },
                    "mean_entropy": {
                        "spearman": 0.74,
                        "region_agreement": 0.73,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.62,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.75,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.69,
                        "same_in_all_seeds": 0.62,
                    },
                    "margin_gap": {
                        "spearman": 0.7,
                        "region_agreement": 0.72,
                        "ambiguous_kept": 0.63,
                        "same_in_all_seeds": 0.6,
                    },
                },
            },
        },
    },
    {
        "record": "eval",
        "record_points": 1,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.88,
                "axes": {
                    "variability": {
                        "spearman": 0.65,
                        "region_agreement": 0.75,
                        "ambiguous_kept": 0.63,
                        "same_in_all_seeds": 0.62,
                    },
                    "mean_entropy": {
                        "spearman": 0.86,
                        "region_agreement": 0.86,
                        "ambiguous_kept": 0.79,
                        "same_in_all_seeds": 0.79,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.83,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.77,
                        "same_in_all_seeds": 0.77,
                    },
                    "margin_gap": {
                        "spearman": 0.84,
                        "region_agreement": 0.83,
                        "ambiguous_kept": 0.75,
                        "same_in_all_seeds": 0.75,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.83,
                "axes": {
                    "variability": {
                        "spearman": 0.44,
                        "region_agreement": 0.61,
                        "ambiguous_kept": 0.52,
                        "same_in_all_seeds": 0.43,
                    },
                    "mean_entropy": {
                        "spearman": 0.74,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.66,
                        "same_in_all_seeds": 0.63,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.7,
                        "region_agreement": 0.73,
                        "ambiguous_kept": 0.65,
                        "same_in_all_seeds": 0.61,
                    },
                    "margin_gap": {
                        "spearman": 0.71,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.63,
                        "same_in_all_seeds": 0.62,
                    },
                },
            },
        },
    },
    {
        "record": "eval",
        "record_points": 2,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.9,
                "axes": {
                    "variability": {
                        "spearman": 0.46,
                        "region_agreement": 0.66,
                        "ambiguous_kept": 0.52,
                        "same_in_all_seeds": 0.5,
                    },
                    "mean_entropy": {
                        "spearman": 0.88,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.78,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.85,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.77,
                    },
                    "margin_gap": {
                        "spearman": 0.87,
                        "region_agreement": 0.84,
                        "ambiguous_kept": 0.77,
                        "same_in_all_seeds": 0.76,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.83,
                "axes": {
                    "variability": {
                        "spearman": 0.74,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.79,
                        "same_in_all_seeds": 0.63,
                    },
                    "mean_entropy": {
                        "spearman": 0.75,
                        "region_agreement": 0.72,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.6,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.76,
                        "region_agreement": 0.75,
                        "ambiguous_kept": 0.7,
                        "same_in_all_seeds": 0.63,
                    },
                    "margin_gap": {
                        "spearman": 0.71,
                        "region_agreement": 0.72,
                        "ambiguous_kept": 0.64,
                        "same_in_all_seeds": 0.6,
                    },
                },
            },
        },
    },
    {
        "record": "eval",
        "record_points": 2,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.89,
                "axes": {
                    "variability": {
                        "spearman": 0.73,
                        "region_agreement": 0.78,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.67,
                    },
                    "mean_entropy": {
                        "spearman": 0.87,
                        "region_agreement": 0.86,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.78,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.85,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.77,
                    },
                    "margin_gap": {
                        "spearman": 0.86,
                        "region_agreement": 0.84,
                        "ambiguous_kept": 0.77,
                        "same_in_all_seeds": 0.76,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.83,
                "axes": {
                    "variability": {
                        "spearman": 0.51,
                        "region_agreement": 0.63,
                        "ambiguous_kept": 0.56,
                        "same_in_all_seeds": 0.46,
                    },
                    "mean_entropy": {
                        "spearman": 0.75,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.62,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.72,
                        "region_agreement": 0.73,
                        "ambiguous_kept": 0.66,
                        "same_in_all_seeds": 0.61,
                    },
                    "margin_gap": {
                        "spearman": 0.72,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.64,
                        "same_in_all_seeds": 0.62,
                    },
                },
            },
        },
    },
    {
        "record": "eval",
        "record_points": 4,
        "skip_epochs": 0,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.91,
                "axes": {
                    "variability": {
                        "spearman": 0.51,
                        "region_agreement": 0.69,
                        "ambiguous_kept": 0.58,
                        "same_in_all_seeds": 0.55,
                    },
                    "mean_entropy": {
                        "spearman": 0.88,
                        "region_agreement": 0.86,
                        "ambiguous_kept": 0.79,
                        "same_in_all_seeds": 0.79,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.85,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.78,
                    },
                    "margin_gap": {
                        "spearman": 0.87,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.77,
                        "same_in_all_seeds": 0.77,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.83,
                "axes": {
                    "variability": {
                        "spearman": 0.77,
                        "region_agreement": 0.75,
                        "ambiguous_kept": 0.8,
                        "same_in_all_seeds": 0.64,
                    },
                    "mean_entropy": {
                        "spearman": 0.75,
                        "region_agreement": 0.71,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.59,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.78,
                        "region_agreement": 0.75,
                        "ambiguous_kept": 0.71,
                        "same_in_all_seeds": 0.64,
                    },
                    "margin_gap": {
                        "spearman": 0.72,
                        "region_agreement": 0.71,
                        "ambiguous_kept": 0.64,
                        "same_in_all_seeds": 0.59,
                    },
                },
            },
        },
    },
    {
        "record": "eval",
        "record_points": 4,
        "skip_epochs": 1,
        "figures": {
            "SNLI": {
                "confidence_spearman": 0.9,
                "axes": {
                    "variability": {
                        "spearman": 0.72,
                        "region_agreement": 0.77,
                        "ambiguous_kept": 0.65,
                        "same_in_all_seeds": 0.65,
                    },
                    "mean_entropy": {
                        "spearman": 0.87,
                        "region_agreement": 0.86,
                        "ambiguous_kept": 0.79,
                        "same_in_all_seeds": 0.79,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.85,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.78,
                        "same_in_all_seeds": 0.78,
                    },
                    "margin_gap": {
                        "spearman": 0.87,
                        "region_agreement": 0.85,
                        "ambiguous_kept": 0.77,
                        "same_in_all_seeds": 0.77,
                    },
                },
            },
            "MultiNLI": {
                "confidence_spearman": 0.83,
                "axes": {
                    "variability": {
                        "spearman": 0.54,
                        "region_agreement": 0.62,
                        "ambiguous_kept": 0.56,
                        "same_in_all_seeds": 0.45,
                    },
                    "mean_entropy": {
                        "spearman": 0.75,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.62,
                    },
                    "gold_bernoulli": {
                        "spearman": 0.73,
                        "region_agreement": 0.74,
                        "ambiguous_kept": 0.67,
                        "same_in_all_seeds": 0.61,
                    },
                    "margin_gap": {
                        "spearman": 0.72,
                        "region_agreement": 0.73,
                        "ambiguous_kept": 0.64,
                        "same_in_all_seeds": 0.61,
                    },
                },
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


def measured_caption(row: dict[str, Any], axis: str | None = None) -> str:
    """One sentence on a measured row: how much three seeds agreed on such a map, per dataset, on the map's
    ambiguity ``axis`` (default: the map's default, :data:`cartomap.scores.metrics.DEFAULT_AXIS`)."""
    from cartomap.scores import ambiguity
    from cartomap.scores.metrics import DEFAULT_AXIS

    axis = axis or DEFAULT_AXIS
    figures = row["figures"]

    def each(key: str, fmt: str) -> str:
        return " / ".join(format(f["axes"][axis][key], fmt) for f in figures.values())

    names = " / ".join(figures)
    confidence = " / ".join(format(f["confidence_spearman"], ".2f") for f in figures.values())
    return (
        f"How stable are maps recorded like this one? Three seeds ({names}; {row['measured_on']}) agreed on "
        f"{ambiguity.get(axis).label} with Spearman {each('spearman', '.2f')}, on confidence {confidence}, "
        f"and two seeds put {each('region_agreement', '.0%')} of the examples in the same region; "
        f"{each('same_in_all_seeds', '.0%')} were in the same region in all three. Of the examples one seed "
        f"called ambiguous, {each('ambiguous_kept', '.0%')} were ambiguous in another. A single run's regions "
        "are a rough guide: add seeds to see how sure this map is."
    )
