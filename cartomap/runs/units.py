"""A run's tables keyed as its task kind's units are: a word's sentence id and word index, an (example,
label) unit's example id, label index and name beside the unit id; the per-example map of label units;
the copy of the data a run keeps (with its human columns)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.tasks.base import TaskKind, label_unit_keys, word_key


def with_word_keys(frame: pd.DataFrame, unit_ids: Sequence[str]) -> pd.DataFrame:
    """A token run's metrics frame with each word's key beside its unit id, as training writes it: the
    sentence id (``example_id``) and word index (``word``) of every ``<id>#<k>`` (columns 1 and 2)."""
    keys = [word_key(i) for i in unit_ids]
    frame = frame.copy()
    frame.insert(1, "example_id", [k[0] for k in keys])
    frame.insert(2, "word", np.asarray([k[1] for k in keys], dtype=np.int64))
    return frame


def with_label_keys(
    frame: pd.DataFrame, example_ids: Sequence[str], label_names: Sequence[str]
) -> pd.DataFrame:
    """A multi-label run's metrics frame with each unit's key beside its unit id, as training writes it: the
    example id, label index and label name (:func:`cartomap.tasks.base.label_unit_keys`, columns 1 to 3)."""
    frame = frame.copy()
    for k, (name, values) in enumerate(label_unit_keys(example_ids, label_names).items()):
        frame.insert(1 + k, name, values)
    return frame


def keyed_metrics(
    kind: TaskKind,
    frame: pd.DataFrame,
    unit_ids: Sequence[str],
    example_ids: Sequence[str],
    label_names: Sequence[str],
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(metrics frame keyed as ``kind``'s units are, the per-example map or None), as every writer of a
    run's metrics keeps them (training, the importer, a recomputation): an example's metrics as they are;
    a word's with its sentence id and word index (:func:`with_word_keys`); an (example, label) unit's with
    the example id, label index and name (:func:`with_label_keys`), and then the example-level map of
    those units (:func:`cartomap.scores.label_examples.combined_map`) as the second item."""
    if kind.unit.sentences:
        return with_word_keys(frame, unit_ids), None
    if kind.unit.label_sets:
        from cartomap.scores.label_examples import combined_map

        frame = with_label_keys(frame, example_ids, label_names)
        return frame, combined_map(frame, example_ids, label_names)
    return frame, None


def own_copy(dataset) -> pd.DataFrame:
    """The frame a run keeps of a loaded dataset: its rows as loaded, plus the human columns
    (:func:`cartomap.scores.human.human_columns`: human_n, human_majority, human_majority_share,
    human_entropy in bits, gold_disagrees) after its ``votes_<label>`` columns when it has votes."""
    from cartomap.data.annotations import votes_matrix
    from cartomap.scores.human import human_columns

    frame = dataset.frame
    votes = votes_matrix(frame, dataset.label_names)
    if votes is None:
        return frame
    derived = human_columns(votes, frame["label"].to_numpy(dtype=np.int64))
    out = frame.drop(columns=[c for c in derived if c in frame.columns])
    at = max(out.columns.get_loc(c) for c in out.columns if str(c).startswith("votes_")) + 1
    for offset, (name, values) in enumerate(derived.items()):
        out.insert(at + offset, name, values)
    return out
