"""Is a model's accuracy near chance? A model that learned little draws a data map that says little.

Chance is the better of two guesses that need no model: one of ``C`` classes at random (1/C), and
always the majority class of the set scored (its share). An accuracy within :data:`NEAR_CHANCE_MARGIN`
of that (or below it) is near chance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NEAR_CHANCE_MARGIN = 0.05  # accuracy at most this far above chance reads as near chance


def chance_accuracy(n_classes: int, labels: Sequence[int] | np.ndarray | None = None) -> float:
    """max(1/C, the majority class's share of ``labels``); ``labels`` (gold label ids) may be None."""
    if n_classes < 1:
        raise ValueError(f"n_classes must be at least 1, got {n_classes}")
    chance = 1.0 / n_classes
    if labels is not None and len(labels):
        counts = np.bincount(np.asarray(labels, dtype=np.int64).clip(min=0))
        chance = max(chance, float(counts.max()) / len(labels))
    return chance


def near_chance(
    accuracy: float | None,
    n_classes: int,
    labels: Sequence[int] | np.ndarray | None = None,
    margin: float = NEAR_CHANCE_MARGIN,
) -> bool:
    """Whether ``accuracy`` is at most ``margin`` above :func:`chance_accuracy` (None, NaN: False)."""
    if accuracy is None or not np.isfinite(accuracy):
        return False
    return float(accuracy) <= chance_accuracy(n_classes, labels) + margin


def chance_warning(
    accuracy: float | None,
    n_classes: int,
    labels: Sequence[int] | np.ndarray | None = None,
    what: str = "accuracy",
    margin: float = NEAR_CHANCE_MARGIN,
) -> str | None:
    """One line saying ``accuracy`` (named ``what``) is near chance, or None when it is not."""
    if not near_chance(accuracy, n_classes, labels, margin):
        return None
    chance = chance_accuracy(n_classes, labels)
    guess = f"1 of {n_classes} classes" if chance == 1.0 / n_classes else "always the majority class"
    return (
        f"Near chance: {what} {accuracy:.1%} is within {margin:.0%} of chance ({chance:.1%}, {guess}). "
        "The model learned little, so its data map and scores say little about the examples."
    )
