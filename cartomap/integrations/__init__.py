"""Bring your own training: data maps of training that cartomap did not run itself.

* :class:`DataMapCallback` (:mod:`.trainer`): a ``transformers.TrainerCallback`` for your own
  ``Trainer``, recording the training-pass or eval-pass logits of every example and epoch;
* :class:`DynamicsRecorder` (:mod:`.recorder`): the same for any PyTorch loop, called with
  ``(epoch, batch_ids, logits)``;
* :func:`score_checkpoints` (:mod:`.checkpoints`): the eval-mode pass of each saved checkpoint of a
  finished fine-tuning (``cartomap score-checkpoints``).

Each writes an ordinary run into the run store (:mod:`cartomap.runs.importer` writes the files),
so the dashboard and every command open it like a run cartomap trained. Where the dynamics came
from is the run's ``config.origin`` (:class:`cartomap.config.OriginConfig`). Imports are lazy:
``transformers`` is loaded only when the callback is used.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DataMapCallback",
    "DynamicsRecorder",
    "ReusedRunWarning",
    "multilabel_metrics",
    "score_checkpoints",
]


def __getattr__(name: str) -> Any:
    if name == "DataMapCallback":
        from cartomap.integrations.trainer import DataMapCallback

        return DataMapCallback
    if name == "ReusedRunWarning":
        from cartomap.integrations.trainer_config import ReusedRunWarning

        return ReusedRunWarning
    if name == "multilabel_metrics":
        from cartomap.integrations.trainer import multilabel_metrics

        return multilabel_metrics
    if name == "DynamicsRecorder":
        from cartomap.integrations.recorder import DynamicsRecorder

        return DynamicsRecorder
    if name == "score_checkpoints":
        from cartomap.integrations.checkpoints import score_checkpoints

        return score_checkpoints
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
