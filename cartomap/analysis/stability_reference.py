"""How stable data maps were measured to be: a plain table of measured figures, keyed by how the
dynamics were recorded, so a map drawn from one run can say how far to trust it.

Each row: the recording setting (record mode, record_points, skip_epochs) and what two runs that
differ only in their seed gave: mean Spearman of per-example variability and confidence between the
seeds, and the share of examples keeping their region; ``measured_on`` says where. Add a row per new
measurement (same keys); :func:`measured_stability` returns the row of a training config's setting.
"""

from __future__ import annotations

from typing import Any

#: One row per measured recording setting (record, record_points, skip_epochs).
MEASURED: tuple[dict[str, Any], ...] = (
    {
        "record": "train",
        "record_points": 1,
        "skip_epochs": 0,
        "variability_spearman": 0.23,
        "confidence_spearman": 0.79,
        "region_agreement": 0.58,
        "measured_on": "5,000 SNLI dev pairs, default encoder, 4 epochs, lr 5e-5; training-pass recording",
    },
    {
        "record": "eval",
        "record_points": 1,
        "skip_epochs": 0,
        "variability_spearman": 0.58,
        "confidence_spearman": 0.87,
        "region_agreement": 0.69,
        "measured_on": "5,000 SNLI dev pairs, default encoder, 4 epochs, lr 5e-5; eval-mode pass at the end "
        "of each epoch",
    },
)


def measured_stability(train_config) -> dict[str, Any] | None:
    """The measured row (a copy) of ``train_config``'s recording setting: its ``record`` mode ("both"
    draws the map from the training pass, as its metrics file does), ``record_points`` and
    ``skip_epochs``; None when that setting was never measured (or nothing is recorded)."""
    record = getattr(train_config, "record", "train")
    record = "train" if record == "both" else record
    key = (
        record,
        int(getattr(train_config, "record_points", 1)),
        int(getattr(train_config, "skip_epochs", 0)),
    )
    for row in MEASURED:
        if (row["record"], row["record_points"], row["skip_epochs"]) == key:
            return dict(row)
    return None


def measured_caption(row: dict[str, Any]) -> str:
    """One sentence on a measured row: how much two seeds agreed on such a map."""
    return (
        f"How stable are maps recorded like this one? Two seeds measured on {row['measured_on']}: "
        f"variability Spearman {row['variability_spearman']:.2f}, confidence Spearman "
        f"{row['confidence_spearman']:.2f}, {row['region_agreement']:.0%} of the examples kept their region. "
        "A single run's regions are a rough guide; add seeds to see how sure this map is."
    )
