"""How a batch of a user's outputs becomes rows of recorded units, whatever its framework: arrays as numpy,
ids as strings, a token classifier's sub-word logits as each word's row at its first sub-word (the
batch's aligned labels, -100 elsewhere), a multi-label classifier's logits as one two-class row (0, z)
per label of each example. :class:`UnitLayout` picks among them by the run's unit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cartomap.errors import DataError
from cartomap.scores.tokens import IGNORE_INDEX
from cartomap.tasks.units import Unit


def first_subwords(logits: Any, token_labels: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The logits of every word's first sub-word in a batch of a token classifier: ``logits`` [B, T, C]
    and the aligned ``token_labels`` [B, T] (a word's tag at its first sub-word, :data:`IGNORE_INDEX`
    elsewhere) -> (the batch row of each word [M], its logits [M, C] as float32, its tag [M]), words in
    order within each row. DataError for shapes that do not fit."""
    values = as_numpy(logits)
    marks = as_numpy(token_labels)
    if values.ndim != 3:
        raise DataError(
            f"logits of shape {tuple(values.shape)}; a token classifier's are [batch, sub-words, classes]",
            field="logits",
        )
    if marks.shape != values.shape[:2]:
        raise DataError(
            f"labels of shape {tuple(marks.shape)} for logits of shape {tuple(values.shape)}; expected "
            f"{tuple(values.shape[:2])} (one per sub-word, {IGNORE_INDEX} where no word starts)",
            field="labels",
        )
    batch_row, position = np.nonzero(marks != IGNORE_INDEX)  # row-major: words in order within a row
    return batch_row, values[batch_row, position].astype(np.float32, copy=False), marks[batch_row, position]


def as_numpy(values: Any) -> np.ndarray:
    """A tensor (any device, with or without grad), array or list as a numpy array."""
    if hasattr(values, "detach"):
        values = values.detach()
        if hasattr(values, "float") and values.is_floating_point():
            values = values.float()
        values = values.cpu().numpy()
    return np.asarray(values)


def id_strings(ids: Any) -> list[str]:
    """Ids as strings, the way runs key them (an integral float or tensor element as an int)."""
    values = as_numpy(ids) if hasattr(ids, "detach") or isinstance(ids, np.ndarray) else ids
    out = []
    for v in values:
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            v = int(v)
        out.append(str(v.item() if hasattr(v, "item") else v))
    return out


def preview_ids(values: Sequence[str], k: int = 5) -> str:
    shown = ", ".join(repr(v) for v in values[:k])
    return shown + (", ..." if len(values) > k else "")


def word_unit_rows(
    rows: np.ndarray,
    logits: Any,
    token_labels: Any,
    offsets: np.ndarray,
    counts: np.ndarray,
    unit_labels: np.ndarray,
    unit_ids: Sequence[str],
    sentence_ids: Sequence[str],
    epoch: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(unit rows [M], logits [M, C]) of a batch of sentences (their positions ``rows`` among every
    sentence; sentence s has ``counts[s]`` words, the units ``offsets[s]`` ...): every word at its first
    sub-word (:func:`first_subwords`). A DataError names a sentence whose labelled sub-words are not its
    words, by count or by tag (``unit_labels``: every word's tag)."""
    rows = np.asarray(rows, dtype=np.int64)
    batch_row, values, tags = first_subwords(logits, token_labels)
    found = np.bincount(batch_row, minlength=len(rows))
    counts = counts[rows]
    for b in np.flatnonzero(found != counts)[:1]:
        raise DataError(
            f"epoch {epoch}: sentence {sentence_ids[rows[b]]!r} has {counts[b]} words but {found[b]} labelled "
            f"sub-words (labels other than {IGNORE_INDEX} mark each word's first sub-word; a sentence cut by "
            "max_length cannot be recorded whole)",
            field="labels",
        )
    starts = np.repeat(offsets[rows], counts)
    unit_rows = starts + (np.arange(len(batch_row)) - np.repeat(np.cumsum(counts) - counts, counts))
    wrong = np.flatnonzero(tags != unit_labels[unit_rows])
    if len(wrong):
        k = int(wrong[0])
        raise DataError(
            f"epoch {epoch}: word {unit_ids[unit_rows[k]]!r} has label {int(tags[k])} in the batch, "
            f"{int(unit_labels[unit_rows[k]])} in the recorder: the batch's labels are not these sentences'",
            field="labels",
        )
    return unit_rows, values


def label_unit_rows(
    rows: np.ndarray, logits: Any, n_labels: int, epoch: int
) -> tuple[np.ndarray, np.ndarray]:
    """(unit rows [B * L], logits [B * L, 2]) of a batch of a multi-label model: example ``rows[b]``'s logit
    z of label j (``logits`` [B, L], one sigmoid output per label) as the two-class row (0, z) of unit
    ``rows[b] * L + j`` (:mod:`cartomap.tasks.multilabel`: softmax((0, z))[1] = sigmoid(z)). A DataError
    for logits of another shape."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    values = as_numpy(logits).astype(np.float32, copy=False)
    if values.ndim != 2 or values.shape != (len(rows), n_labels):
        raise DataError(
            f"epoch {epoch}: logits of shape {tuple(values.shape)} for {len(rows)} examples; a multi-label "
            f"model's are [{len(rows)}, {n_labels}] (one logit per label)",
            field="logits",
        )
    unit_rows = (rows[:, None] * n_labels + np.arange(n_labels)).reshape(-1)
    z = values.reshape(-1)
    return unit_rows, np.stack((np.zeros_like(z), z), axis=1)


@dataclass(frozen=True)
class UnitLayout:
    """Where each example's units sit among a run's units, to turn a batch of examples' logits into rows
    of units (:meth:`batch_rows`), whatever the unit. ``examples``: the examples' (or sentences') ids in
    row order; ``unit_ids``, ``unit_labels``: every unit's id and gold (:meth:`TaskKind.units` order);
    ``counts``: units per example; ``n_labels``: the label space's size (a label unit's example has one
    unit per label)."""

    unit: Unit
    examples: Sequence[str]
    unit_ids: Sequence[str]
    unit_labels: np.ndarray
    counts: np.ndarray
    n_labels: int
    #: The position of each example's first unit among all units (from ``counts``, once).
    offsets: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", np.cumsum(self.counts) - self.counts)

    def batch_rows(
        self, rows: Any, logits: Any, token_labels: Any, epoch: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(unit rows, their logits as numpy) of a batch of the examples at ``rows`` (positions among
        ``examples``): an example's row as it is; a sentence's words at their first sub-words, found by the
        batch's aligned ``token_labels`` (:func:`word_unit_rows`); each label of an example as its
        two-class row (0, z) (:func:`label_unit_rows`). A DataError for a token batch without its labels."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if self.unit.sentences:
            if token_labels is None:
                raise DataError(
                    "a token task's batches need their aligned labels (a word's tag at its first sub-word, -100 "
                    "elsewhere) to find the words: keep the 'labels' column",
                    field="labels",
                )
            return word_unit_rows(
                rows,
                logits,
                token_labels,
                self.offsets,
                self.counts,
                self.unit_labels,
                self.unit_ids,
                self.examples,
                epoch,
            )
        if self.unit.label_sets:
            return label_unit_rows(rows, logits, self.n_labels, epoch)
        return rows, as_numpy(logits)
