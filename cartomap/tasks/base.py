"""What a task kind is: a frozen description of a task's shape, and how its logits become probabilities.

A kind is data, not a class hierarchy: every field below is read by the library (loading maps a
file's columns onto ``text_fields``/``label_field``, batching asks :meth:`TaskKind.inputs`, models
build the ``head``, the recorder keys dynamics by ``unit_columns`` and turns logits into
probabilities with :meth:`TaskKind.probabilities`). A new kind (token classification, multi-label)
is a new :class:`TaskKind` registered in :mod:`cartomap.tasks.registry`; what it needs beyond these
fields is an extension point named below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cartomap.errors import DataError

# UNITS: the names of what one row of a run's dynamics is about (:class:`cartomap.tasks.units.Unit`):
# "example": one row of logits per example (sequence classification); "word": one per word of an
# example, keyed by (id, word) (token classification: the first sub-word of each word); "label": one per
# label of an example, keyed by (id, label) (multi-label: each label a yes/no question).
from cartomap.tasks.reserved import reserved
from cartomap.tasks.units import UNITS, Unit

#: The gold column of a kind whose unit is an example, in every table of a run (examples, metrics, queues,
#: decisions): one label code per row. A file names its own column (``DataConfig.label_column``), read
#: into this one; the list-valued gold of the other units has each kind's own name (``tags``, ``labels``).
EXAMPLE_LABEL_FIELD = "label"
#: Between an example's id and a unit's position in the unit's own id ("sent-3#0": word 0 of sent-3).
UNIT_SEPARATOR = "#"


def word_key(unit_id: Any) -> tuple[str, int]:
    """(example id, k) of a unit id ``<example id>#<k>`` (word k of a sentence, label k of an example),
    split at the last :data:`UNIT_SEPARATOR`, so an example id may hold one: ``"a#b#3"`` is ("a#b", 3).
    The inverse of :func:`unit_id_of`. DataError when the id does not end in ``#<k>``, k digits."""
    example, sep, k = str(unit_id).rpartition(UNIT_SEPARATOR)
    if not sep or not k.isdigit():
        raise DataError(f"{unit_id!r} is not a unit id (<example id>{UNIT_SEPARATOR}<k>)", field="id")
    return example, int(k)


def unit_id_of(example_id: Any, k: int) -> str:
    """The id ``<example id>#<k>`` of unit k of an example (word k of a sentence, label k of an example):
    the inverse of :func:`word_key`."""
    return f"{example_id}{UNIT_SEPARATOR}{int(k)}"


#: The class names of one label unit's recorded row (multi-label): the label is absent (0) or present (1).
LABEL_UNIT_CLASSES: tuple[str, str] = ("absent", "present")
#: Which model head predicts a kind: "sequence" (AutoModelForSequenceClassification: one row of logits
#: per example) or "token" (AutoModelForTokenClassification: one row per sub-word).
HEADS = ("sequence", "token")
#: How logits become probabilities: "softmax" (one class among C per unit, rows sum to 1) or
#: "sigmoid" (each class on its own: multi-label).
OUTPUTS = ("softmax", "sigmoid")
#: What joins the second and later texts of a kind of three or more into the tokenizer's second segment
#: where no tokenizer says its own separator (:meth:`TaskKind.inputs`).
TEXT_JOINER = "\n"


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax(z)_k = exp(z_k - max z) / sum_j exp(z_j - max z); numerically stable.

    Integer input is computed in float64; float input keeps its dtype.
    """
    z = np.asarray(logits)
    if not np.issubdtype(z.dtype, np.floating):
        z = z.astype(np.float64)
    shifted = z - np.max(z, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """sigmoid(z) = 1 / (1 + exp(-z)), element-wise and numerically stable (no overflow for large |z|).

    Integer input is computed in float64; float input keeps its dtype.
    """
    z = np.asarray(logits)
    if not np.issubdtype(z.dtype, np.floating):
        z = z.astype(np.float64)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(z.dtype, copy=False)


_OUTPUT_FUNCTIONS = {"softmax": softmax, "sigmoid": sigmoid}


@dataclass(frozen=True)
class TaskKind:
    """The shape of one kind of task. Frozen; validated when made.

    ``name``: the registry key, saved in a run's config (``DataConfig.task``): "single", "pair".
    ``description``: one line for forms and ``--help``.
    ``text_fields``: the columns holding an example's inputs in a loaded dataset, a run's
    ``examples.parquet`` and every table of examples, in the order the tokenizer reads them (a pair's
    first and second text). A user's file maps its own columns onto these (``DataConfig.text_columns``).
    ``noun``: what one example is called in messages ("pair", "text"); plural by adding "s".
    ``label_field``: the column of the gold label (int codes into the label names): :data:`EXAMPLE_LABEL_FIELD`
    for a kind of one label per example; a list per row for the other units.
    ``unit``: what one row of dynamics is about, a :class:`~cartomap.tasks.units.Unit` (or its name, one
    of :data:`UNITS`): ask its traits (``kind.unit.sentences``), never compare it with a name.
    ``head``: the model head that predicts it, one of :data:`HEADS`.
    ``output``: how logits become probabilities, one of :data:`OUTPUTS`.
    ``source_columns``: other names files commonly give the text fields (("sentence1", "sentence2") for
    a pair), tried in order after the fields themselves when a form guesses a file's mapping.
    ``suffixes``: file suffixes that mean this kind whatever the config says of its columns (".conll":
    token classification), a final ".gz" looked through.
    ``reader``: how its files are read and checked, a name the data layer has code for
    (``cartomap.data.loading.READERS``, ``cartomap.data.checks.CLASS_WARNINGS``): "labels" (a table of
    one label per example; small-class warnings), "tagged" (words and a tag per word, CoNLL columns or
    JSONL lists; BIO and entity-type warnings), "label_sets" (a label set per example; warnings for labels
    no example or every example has). A new reader is an entry in both tables.
    ``region_method``: how its map draws the ambiguous region unless told otherwise, a name of
    :data:`cartomap.scores.metrics.REGION_METHODS`: "rank" (the top share on the ambiguity axis, as Dataset
    Cartography and WaNLI select) or "threshold" (each unit by its own score: where one class holds most
    units, a rank among all of them puts the minority classes' units in the ambiguous share wholesale;
    docs/stability.md measures it on WikiGold).
    """

    name: str
    description: str
    text_fields: tuple[str, ...]
    noun: str
    label_field: str = "label"
    unit: Unit = Unit.EXAMPLE
    head: str = "sequence"
    output: str = "softmax"
    source_columns: tuple[tuple[str, ...], ...] = ()
    suffixes: tuple[str, ...] = ()
    region_method: str = "rank"
    reader: str = "labels"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"task kind {self.name!r}: unit {self.unit!r} is not one of {', '.join(UNITS)}")
        object.__setattr__(self, "unit", Unit(self.unit))  # a name given reads as its unit
        if not self.name or not self.text_fields or len(set(self.text_fields)) != len(self.text_fields):
            raise ValueError(f"task kind {self.name!r}: a name and distinct text fields are required")
        if any(len(names) != len(self.text_fields) for names in self.source_columns):
            raise ValueError(f"task kind {self.name!r}: every set of source columns names each text field")
        if self.label_field in self.text_fields:
            raise ValueError(f"task kind {self.name!r}: the label field is one of the text fields")
        if problem := self.reserved_field():
            raise ValueError(problem)
        if self.unit.per_example and self.label_field != EXAMPLE_LABEL_FIELD:
            raise ValueError(
                f"task kind {self.name!r}: a kind of one label per example keeps it in the column "
                f"{EXAMPLE_LABEL_FIELD!r} (a file's own column is mapped onto it by its label_column), "
                f"not {self.label_field!r}"
            )
        for field, value, choices in (
            ("head", self.head, HEADS),
            ("output", self.output, OUTPUTS),
        ):
            if value not in choices:
                raise ValueError(
                    f"task kind {self.name!r}: {field} {value!r} is not one of {', '.join(choices)}"
                )

    # ------------------------------------------------------------------ inputs
    def reserved_field(self) -> str:
        """The refusal of a text field named like a column the data map and its tables add
        (:mod:`cartomap.tasks.reserved`, the score registries' names once they are imported), or ""."""
        for field in self.text_fields:
            what = reserved(field)
            if what is not None:
                return (
                    f"task kind {self.name!r}: text field {field!r} is a column name the data map and its "
                    f"tables reserve ({what}); name the field otherwise"
                )
        return ""

    @property
    def is_pair(self) -> bool:
        """Whether an example is exactly two texts (a first and a second: what the analyses that compare
        two texts need, premise-hypothesis similarity and hypothesis-only artifacts). The tokenizer reads
        every kind of two or more texts as a text pair (:meth:`inputs`)."""
        return len(self.text_fields) == 2

    @property
    def fields_label(self) -> str:
        """The text fields for messages: "premise/hypothesis", "text"."""
        return "/".join(self.text_fields)

    @property
    def known_columns(self) -> tuple[tuple[str, ...], ...]:
        """The column names a file may give the text fields, in the order a guess tries them."""
        return (self.text_fields, *self.source_columns)

    def plural(self, count: int | None = None) -> str:
        """The noun for ``count`` examples ("1 pair", "3 pairs"); without a count, the plural alone."""
        if count is None:
            return f"{self.noun}s"
        return f"{count:,} {self.noun}{'' if count == 1 else 's'}"

    def inputs(self, frame: Any, separator: str = TEXT_JOINER) -> tuple[list[str], list[str] | None]:
        """The tokenizer's inputs of every row of an examples frame: (first texts, second texts), the
        second None for a kind of one text. A kind of two texts gives its second text as it is; a kind of
        three or more gives every text after the first joined by ``separator`` (the tokenizer's own
        separator, :func:`cartomap.training.batching.text_joiner`), so every text reaches the model: the
        first text as the tokenizer's ``text``, the rest as its ``text_pair`` (second segment, token type 1)
        with their boundaries marked. Values are read as strings; a word-unit kind's rows are lists of
        words (the tokenizer's ``is_split_into_words``)."""
        if self.unit.sentences:
            return [[str(w) for w in row] for row in frame[self.text_fields[0]]], None
        first = frame[self.text_fields[0]].astype(str).tolist()
        if len(self.text_fields) == 1:
            return first, None
        rest = [frame[f].astype(str).tolist() for f in self.text_fields[1:]]
        if len(rest) == 1:  # a pair: the second text as it is (the run's tokenization, so its identity)
            return first, rest[0]
        return first, [separator.join(texts) for texts in zip(*rest, strict=True)]

    def texts_frame(self, texts: Sequence[Any]) -> dict[str, list[str]]:
        """Columns of an examples frame from raw inputs: a list of strings (one text) or of tuples with
        one text per field (two or more), as :meth:`inputs` reads them back."""
        if len(self.text_fields) > 1:
            return {f: [str(t[i]) for t in texts] for i, f in enumerate(self.text_fields)}
        return {self.text_fields[0]: [str(t) for t in texts]}

    # ------------------------------------------------------------------ outputs
    @property
    def unit_columns(self) -> tuple[str, ...]:
        """The key of one row of dynamics: ("id",) per example; ("id", "word") per word; ("id", "label")."""
        return ("id", *self.unit.keys)

    @property
    def gold_columns(self) -> tuple[str, ...]:
        """The columns of an examples frame that :meth:`units` reads: the id, the gold and, for word units,
        the words (how many there are in each row)."""
        return (*self.unit_id_columns, self.label_field)

    @property
    def unit_id_columns(self) -> tuple[str, ...]:
        """The columns :meth:`unit_ids` reads: the id and, for word units, the words."""
        return ("id", *(self.text_fields[:1] if self.unit.sentences else ()))

    def units(
        self, frame: Any, label_names: Sequence[str] | None = None
    ) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The units of an examples frame, in row order: (unit ids, gold label of each unit as int64,
        units per row). One unit per example: its id and label. One per word: ids ``"<id>#<k>"``
        (:data:`UNIT_SEPARATOR`; word k of example id), the labels of the words in order. One per label
        of ``label_names`` (the label space, needed for this unit): ids ``"<id>#<j>"`` (label j of example
        id), every label of every example in order, gold 1 when the label is in the row's label list, else 0."""
        unit_ids, counts = self.unit_ids(frame, label_names)
        labels = self.gold(frame, label_names)
        if len(labels) != len(unit_ids):
            raise ValueError(f"task kind {self.name!r}: {len(labels)} gold labels for {len(unit_ids)} units")
        return unit_ids, labels, counts

    def gold(self, frame: Any, label_names: Sequence[str] | None = None) -> np.ndarray:
        """int64: the gold label of every unit of an examples frame, in :meth:`units` order (a word's tag,
        a label unit's 1 present / 0 absent)."""
        values = frame[self.label_field]
        if self.unit.label_sets:
            return label_indicator(values, label_names).reshape(-1)
        if self.unit.per_example:
            return values.to_numpy(dtype=np.int64)
        rows = [np.asarray(row, dtype=np.int64).reshape(-1) for row in values]
        return np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)

    def gold_names(self, value: Any, label_names: Sequence[str]) -> Any:
        """The gold of one row of an examples frame by name: its label's name, a sentence's tag names in
        word order, or a label set's names as they are (the row's content, whatever the label space's
        order of codes)."""
        if self.unit.label_sets:
            return [str(n) for n in value]
        if self.unit.per_example:
            return label_names[int(value)]
        return [label_names[int(t)] for t in value]

    def unit_ids(self, frame: Any, label_names: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
        """(unit ids, units per row) of an examples frame: its ids and, per word, its words, per label,
        the labels of ``label_names`` (no gold labels needed), in :meth:`units` order."""
        ids = frame["id"].astype(str).tolist()
        if self.unit.per_example:
            return ids, np.ones(len(ids), dtype=np.int64)
        if self.unit.label_sets:
            if label_names is None:
                raise ValueError(f"task kind {self.name!r}: units per label need the label names")
            counts = np.full(len(ids), len(label_names), dtype=np.int64)
        else:
            counts = np.asarray([len(row) for row in frame[self.text_fields[0]]], dtype=np.int64)
        unit_ids = [unit_id_of(i, k) for i, n in zip(ids, counts.tolist(), strict=True) for k in range(n)]
        return unit_ids, counts

    def unit_classes(self, label_names: Sequence[str]) -> tuple[str, ...]:
        """The class names of one unit's recorded row: the label names (one class among them per example
        or word), or for a label unit :data:`LABEL_UNIT_CLASSES`, its label's two states."""
        return LABEL_UNIT_CLASSES if self.unit.label_sets else tuple(label_names)

    def label_rows(self, labels: np.ndarray, n_rows: int) -> np.ndarray:
        """The units' labels (:meth:`units`) as the model's targets take them: as they are, or for label
        units one row of L per example ([N, L])."""
        return labels.reshape(n_rows, -1) if self.unit.label_sets else labels

    def class_counts(self, labels: np.ndarray, n_rows: int, n_classes: int) -> np.ndarray:
        """int64 [C]: how many units hold each class, from the units' gold (:meth:`gold`): examples or
        words per class, or for label units the examples each label applies to."""
        labels = np.asarray(labels, dtype=np.int64)
        if self.unit.label_sets:
            return labels.reshape(n_rows, n_classes).sum(axis=0)
        return np.bincount(labels, minlength=n_classes)

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """Per-unit probabilities of logits ``[..., C]`` (any leading shape: [N, C], [E, N, C]), same shape."""
        return _OUTPUT_FUNCTIONS[self.output](logits)


def label_indicator(label_lists: Any, label_names: Sequence[str] | None) -> np.ndarray:
    """int64 [N, L]: entry [i, j] = 1 when ``label_names[j]`` is in row i's list of label names, else 0.
    ValueError naming the row for a name outside ``label_names``."""
    if label_names is None:
        raise ValueError("units per label need the label names")
    position = {str(name): j for j, name in enumerate(label_names)}
    rows = list(label_lists)
    out = np.zeros((len(rows), len(position)), dtype=np.int64)
    for i, names in enumerate(rows):
        for name in names:
            j = position.get(str(name))
            if j is None:
                raise ValueError(f"row {i}: label {name!r} is not one of {list(position)}")
            out[i, j] = 1
    return out


def label_unit_keys(example_ids: Sequence[str], label_names: Sequence[str]) -> dict[str, np.ndarray]:
    """The key columns of a multi-label run's units, in :meth:`TaskKind.units` order (every label of every
    example): ``example_id``, ``label_index`` (0-based) and ``label_name``."""
    ids = np.asarray([str(i) for i in example_ids], dtype=object)
    n = len(label_names)
    return {
        "example_id": np.repeat(ids, n),
        "label_index": np.tile(np.arange(n, dtype=np.int64), len(ids)),
        "label_name": np.tile(np.asarray([str(x) for x in label_names], dtype=object), len(ids)),
    }
