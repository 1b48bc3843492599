"""The config of a run recorded outside cartomap's loop: what the run id is made of.

The identity of such a run is its data (the examples' fingerprint: ids, texts, labels), the model
it names, the TrainConfig fields that describe the training, and :class:`OriginConfig` (who recorded
it, and as canonical JSON whatever else decided the dynamics: a Trainer's arguments, a recorder's
settings and the digest of its dynamics, the file stamps of scored checkpoints).
"""

from __future__ import annotations

import json
from typing import Any

from cartomap.config import DataConfig, ModelConfig, OriginConfig, RunConfig, TrainConfig
from cartomap.data.loading import TextDataset


def canonical(settings: dict[str, Any]) -> str:
    """Settings as JSON with sorted keys (non-JSON values as their str): equal settings, equal text."""
    return json.dumps(settings, sort_keys=True, default=str, separators=(",", ":"))


def data_config(kind: str, data_name: str, examples: TextDataset) -> DataConfig:
    """A DataConfig naming in-memory examples: path ``<kind>:<data name>``, cartomap's own columns."""
    return DataConfig(
        path=f"{kind}:{data_name}",
        format=kind,
        text_columns=examples.text_columns,
        label_column="label",
        id_column="id",
        label_names=examples.label_names,
        genre_column=None,
        name=data_name,
    )


def recorded_config(
    kind: str,
    examples: TextDataset,
    *,
    data_name: str,
    model: str,
    train: TrainConfig,
    settings: dict[str, Any],
    name: str = "",
    max_length: int = ModelConfig.max_length,
    checkpoints: tuple[str, ...] = (),
    data: DataConfig | None = None,
) -> RunConfig:
    """The RunConfig of a run whose dynamics ``kind`` (trainer, recorder, checkpoints) recorded."""
    return RunConfig(
        data=data or data_config(kind, data_name, examples),
        dev=None,
        model=ModelConfig(name_or_path=model, max_length=int(max_length)),
        train=train,
        name=name,
        origin=OriginConfig(kind=kind, checkpoints=tuple(checkpoints), settings=canonical(settings)),
    )
