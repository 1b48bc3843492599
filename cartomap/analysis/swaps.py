"""A token run's recurring tag swaps (:mod:`cartomap.scores.swaps`) from its own predictions or out-of-fold.

The predictions are the run's last recording of its training set (in sample: one training, no folds) or,
when the caller passes them, a token k-fold experiment's out-of-fold word logits in the run's word order
(:func:`cartomap.experiments.token_folds.oof_of_run`; analysis cannot look for experiments itself).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cartomap.errors import RunError
from cartomap.scores import swaps
from cartomap.scores.token_quality import sentence_keys
from cartomap.tasks import support

LAST_RECORDING, OUT_OF_FOLD = "last recording", "out-of-fold"


def word_texts(run, unit_ids: list[str]) -> list[str]:
    """The text of every word id ``<sentence id>#<k>`` of ``run``'s training set."""
    kind = run.task_kind
    frame = run.examples(columns=("id", *kind.text_fields))
    return swaps.word_texts(frame["id"].astype(str), frame[kind.text_fields[0]], unit_ids)


def last_predictions(run, unit_ids: list[str]) -> np.ndarray:
    """argmax of each word's logits at the run's last recording of its training set, in ``unit_ids`` order."""
    source = run.recorded_source("train")
    epochs = run.dynamics_epochs(source)
    if not epochs:
        raise RunError(f"run {run.id} has no recorded dynamics of its training set")
    return np.asarray(run.read_epoch(source, epochs[-1], unit_ids)).argmax(axis=1)


def run_swaps(run, oof_logits=None, min_count: int = 1) -> tuple[pd.DataFrame, str]:
    """(the swap table of ``run``'s words, what predicted them: :data:`OUT_OF_FOLD` with ``oof_logits``
    [M, C] in the run's word order, else :data:`LAST_RECORDING`). DataError for a run that is not a token run."""
    support.SWAPS.require(run.task_kind, location=f"run {run.id}")
    unit_ids, gold = run.unit_labels("train")
    if oof_logits is not None:
        pred, what = np.asarray(oof_logits).argmax(axis=1), OUT_OF_FOLD
    else:
        pred, what = last_predictions(run, unit_ids), LAST_RECORDING
    table = swaps.swap_table(
        word_texts(run, unit_ids), gold, pred, sentence_keys(unit_ids), run.label_names, min_count=min_count
    )
    return table, what
