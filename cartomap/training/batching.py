"""From an examples frame to model batches: tokenising, length-grouped epochs, dynamic padding.

Every item carries its row index, so whatever order batches come in (shuffled, length-grouped,
a curriculum's plan, split across processes) the recorder writes each row's logits to its place.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cartomap.config import RunConfig
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TEXT_JOINER, TaskKind


def text_joiner(tokenizer) -> str:
    """What joins a kind's second and later texts into the tokenizer's second segment (a kind of three or
    more texts, :meth:`TaskKind.inputs`): the tokenizer's separator token between spaces (" [SEP] " for
    BERT, " </s> " for RoBERTa), which it reads as that special token, the same boundary it puts between
    the first and second segments; :data:`TEXT_JOINER` (a newline) for a tokenizer without one."""
    sep = getattr(tokenizer, "sep_token", None) if tokenizer is not None else None
    return f" {sep} " if sep else TEXT_JOINER


def texts_of(frame, task: TaskKind | None = None, tokenizer=None) -> tuple[list[str], list[str] | None]:
    """The first and second text of every row of an examples frame (None for one text): the tokenizer
    inputs of ``task`` (by default the kind the frame's columns show: a bare frame, no run to ask); a kind's third and later texts are
    joined to its second by ``tokenizer``'s separator (:func:`text_joiner`)."""
    return (task or task_kinds.of_columns(frame.columns)).inputs(frame, text_joiner(tokenizer))


class Ragged:
    """Rows of different lengths (the token ids of every example) in one flat numpy array.

    Row ``i`` is ``values[offsets[i]:offsets[i + 1]]``. On 550k pairs this holds 21M token ids in
    ~90 MB, where Python lists of ints took ~4 GB. Indexing, ``len`` and iteration behave like the
    list of lists it replaces (rows come back as numpy arrays).
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values, self.offsets = values, offsets

    @classmethod
    def from_rows(cls, rows, dtype=np.int32) -> Ragged:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=int(offsets[-1]))
        return cls(values, offsets)

    @classmethod
    def concat(cls, parts: list[Ragged]) -> Ragged:
        if not parts:
            return cls(np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64))
        values = np.concatenate([p.values for p in parts])
        offsets = [parts[0].offsets]
        for part in parts[1:]:
            offsets.append(part.offsets[1:] + offsets[-1][-1])
        return cls(values, np.concatenate(offsets))

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self):
        return (self[i] for i in range(len(self)))


TOKENIZE_CHUNK = 8192  # rows per tokenizer call: bounds the tokenizer's own per-row objects


def tokenize(tokenizer, frame, max_length: int, task: TaskKind | None = None) -> dict[str, Ragged]:
    """Token ids of every row, unpadded (padding happens per batch): ``input_ids`` and, where the
    tokenizer makes them, ``token_type_ids``, each a :class:`Ragged` (row i = example i). The rows
    are read as ``task``'s inputs (by default the kind the frame's columns show, for a bare frame with no run to
    ask; every text of a kind of
    three or more, :func:`texts_of`). A word-unit kind
    (token classification) also gets ``word_units`` and ``word_labels`` (:func:`tokenize_words`)."""
    task = task or task_kinds.of_columns(frame.columns)
    if task.unit.sentences:
        return tokenize_words(tokenizer, frame, max_length, task)
    first, second = texts_of(frame, task, tokenizer)
    parts: dict[str, list[Ragged]] = {}
    for start in range(0, len(first), TOKENIZE_CHUNK):
        stop = start + TOKENIZE_CHUNK
        encoded = tokenizer(
            first[start:stop],
            None if second is None else second[start:stop],
            truncation=True,
            max_length=max_length,
            return_attention_mask=False,
        )
        for key, dtype in (("input_ids", np.int32), ("token_type_ids", np.int8)):
            if key in encoded:
                parts.setdefault(key, []).append(Ragged.from_rows(encoded[key], dtype))
    if not parts:
        return {"input_ids": Ragged.concat([])}
    return {key: Ragged.concat(chunks) for key, chunks in parts.items()}


def subwordless_words(tokenizer, sentences) -> list[np.ndarray]:
    """Per sentence (a list of words), the positions of the words the tokenizer turns into no sub-word
    at all (a lone U+FE0F variation selector after an emoji, a zero-width space, a combining mark a
    BERT tokenizer strips), int64 arrays: the words no sub-word belongs to when the sentence is
    encoded whole (``is_split_into_words``, no truncation)."""
    out: list[np.ndarray] = []
    for start in range(0, len(sentences), TOKENIZE_CHUNK):
        chunk = [[str(w) for w in words] for words in sentences[start : start + TOKENIZE_CHUNK]]
        encoded = tokenizer(
            chunk,
            is_split_into_words=True,
            truncation=False,
            add_special_tokens=False,
            return_attention_mask=False,
            verbose=False,  # no "longer than the model's maximum" log line: nothing is fed to a model
        )
        for j, words in enumerate(chunk):
            present = np.zeros(len(words), dtype=bool)
            present[[w for w in encoded.word_ids(j) if w is not None]] = True
            out.append(np.flatnonzero(~present).astype(np.int64))
    return out


def _visible(text: str) -> str:
    """``text`` quoted, escaped (``'\\ufe0f'``) when it holds marks, format or control characters or
    spaces, which print as nothing."""
    import unicodedata

    return ascii(text) if any(unicodedata.category(c)[0] in "MCZ" for c in text) else repr(text)


def unknown_word(tokenizer, sentence_id: str, word: int, text: str) -> str:
    """What a word without a sub-word is read as: the tokenizer's unknown token (DataError when it has
    none, naming the sentence and word)."""
    from cartomap.errors import DataError

    unk = getattr(tokenizer, "unk_token", None)
    if not unk:
        raise DataError(
            f"sentence {sentence_id!r}: word {word} {text!r} is no sub-word for this tokenizer, which has no "
            "unknown token to read it as; remove such words from the data"
        )
    return str(unk)


def subwordless_warnings(tokenizer, dataset, limit: int = 3) -> list[str]:
    """One data warning for the words of a word-unit dataset that the tokenizer turns into no sub-word
    (:func:`subwordless_words`), naming how many and the first ``limit``; none for other kinds."""
    task = dataset.task_kind
    if not task.unit.sentences or not len(dataset):
        return []
    words, _ = task.inputs(dataset.frame)
    found = subwordless_words(tokenizer, words)
    ids = dataset.frame["id"].astype(str).tolist()
    where = [(ids[i], int(k), words[i][k]) for i, ks in enumerate(found) for k in ks]
    if not where:
        return []
    unk = unknown_word(tokenizer, *where[0])
    shown = "; ".join(f"{sid} word {k} {_visible(text)}" for sid, k, text in where[:limit])
    n_sentences = sum(1 for ks in found if len(ks))
    return [
        f"{dataset.source}: {len(where)} word{'s' if len(where) != 1 else ''} in {n_sentences} "
        f"sentence{'s' if n_sentences != 1 else ''} become no sub-word for the model's tokenizer ({shown}"
        f"{'; ...' if len(where) > limit else ''}): each is read as its unknown token {unk!r}, trained and "
        "recorded like any word"
    ]


def tokenize_words(
    tokenizer, frame, max_length: int, task: TaskKind, source: str | None = None
) -> dict[str, Ragged]:
    """Token ids of sentences given as word lists (``is_split_into_words``), with per sub-token the unit
    (word) it records, ``word_units`` (the word's position among all the frame's words, in
    :meth:`TaskKind.units` order, at the word's first sub-token; -1 elsewhere), and its gold tag,
    ``word_labels`` (-100 elsewhere: the loss leaves those out). A word the tokenizer turns into no
    sub-word (:func:`subwordless_words`) is read as the tokenizer's unknown token, so every word has
    one. A sentence cut by ``max_length`` is a DataError naming it (and ``source``, the file): every
    word is recorded."""
    from cartomap.errors import DataError
    from cartomap.scores.tokens import IGNORE_INDEX, align_labels, first_subword_alignment

    words, _ = task.inputs(frame)
    _, labels, counts = task.units(frame)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts
    ids = frame["id"].astype(str).tolist()
    options = {"is_split_into_words": True, "truncation": True, "max_length": max_length}
    keys = (("input_ids", np.int32), ("token_type_ids", np.int8))
    parts: dict[str, list[Ragged]] = {}
    for start in range(0, len(words), TOKENIZE_CHUNK):
        stop = start + TOKENIZE_CHUNK
        encoded = tokenizer(words[start:stop], return_attention_mask=False, **options)
        rows = {key: list(encoded[key]) for key, _ in keys if key in encoded}
        units, tags = [], []
        for j in range(len(encoded["input_ids"])):
            row = start + j
            word_ids = encoded.word_ids(j)
            n = int(counts[row])
            first = first_subword_alignment(word_ids, n_words=n)
            if (first < 0).any():
                (empty,) = subwordless_words(tokenizer, [words[row]])
                if len(empty):  # read as the unknown token: the sentence encoded again
                    sentence = [str(w) for w in words[row]]
                    for k in empty.tolist():
                        sentence[k] = unknown_word(tokenizer, ids[row], k, sentence[k])
                    again = tokenizer([sentence], return_attention_mask=False, **options)
                    for key in rows:
                        rows[key][j] = again[key][0]
                    word_ids = again.word_ids(0)
                    first = first_subword_alignment(word_ids, n_words=n)
            if (first < 0).any():
                raise DataError(
                    f"sentence {ids[row]!r}: word {int(np.flatnonzero(first < 0)[0])} of {n} is past "
                    f"max_length {max_length} sub-words; raise --max-length (every word is recorded)",
                    location=source,
                    field="max_length",
                )
            own = np.arange(starts[row], starts[row] + n, dtype=np.int64)
            unit = align_labels(word_ids, own)
            units.append(np.where(unit == IGNORE_INDEX, -1, unit))
            tags.append(align_labels(word_ids, labels[starts[row] : starts[row] + n]))
        for key, dtype in keys:
            if key in rows:
                parts.setdefault(key, []).append(Ragged.from_rows(rows[key], dtype))
        parts.setdefault("word_units", []).append(Ragged.from_rows(units, np.int64))
        parts.setdefault("word_labels", []).append(Ragged.from_rows(tags, np.int64))
    if not parts:
        return {"input_ids": Ragged.concat([])}
    return {key: Ragged.concat(chunks) for key, chunks in parts.items()}


#: The per sub-token recording keys of a word-unit kind's items (:func:`tokenize_words`).
WORD_KEYS = ("word_units", "word_labels")


#: The key of an item whose labels are one row per example of a label-unit kind (multi-label): its
#: ``labels`` are the 0/1 of every label and its ``index`` the units ``i * L + j`` (:meth:`TaskKind.units`).
LABEL_ROW = "label_row"


class TokenizedExamples:
    """A map-style dataset of token ids; each item carries its row index for recording (``index``) and
    its label (``labels``): per example, or for a word-unit kind per sub-token (the unit index and
    tag at each word's first sub-token, -1 and -100 elsewhere), or for a label-unit kind (``labels``
    given as a matrix [N, L]) the 0/1 of every label and the units ``i * L + j`` of the row."""

    def __init__(self, encoded: dict[str, Ragged | list[list[int]]], labels: np.ndarray):
        self.encoded = encoded
        self.labels = labels
        self.per_label = np.ndim(labels) == 2
        ids = encoded["input_ids"]
        self.lengths = ids.lengths if isinstance(ids, Ragged) else np.array([len(row) for row in ids])

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> dict[str, Any]:
        item = {k: v[i] for k, v in self.encoded.items() if k not in WORD_KEYS}
        if WORD_KEYS[0] in self.encoded:
            item["labels"] = self.encoded["word_labels"][i]
            item["index"] = self.encoded["word_units"][i]
        elif self.per_label:
            n = self.labels.shape[1]
            item["labels"] = np.asarray(self.labels[i], dtype=np.int64)
            item["index"] = np.arange(i * n, (i + 1) * n, dtype=np.int64)
            item[LABEL_ROW] = True
        else:
            item["labels"] = int(self.labels[i])
            item["index"] = i
        return item


@dataclass
class DynamicPadding:
    """Collate a list of items into tensors padded to the longest item of the batch."""

    pad_id: int
    pad_to: int | None = None  # pad every batch to this length instead (for benchmarks)

    def __call__(self, items: list[dict[str, Any]]):
        import torch

        width = self.pad_to or max(len(it["input_ids"]) for it in items)
        batch = {}
        for key, fill in (("input_ids", self.pad_id), ("token_type_ids", 0)):
            if key not in items[0]:
                continue
            arr = np.full((len(items), width), fill, dtype=np.int64)
            for row, it in enumerate(items):
                arr[row, : len(it[key])] = it[key]
            batch[key] = torch.from_numpy(arr)
        mask = np.zeros((len(items), width), dtype=np.int64)
        for row, it in enumerate(items):
            mask[row, : len(it["input_ids"])] = 1
        batch["attention_mask"] = torch.from_numpy(mask)
        if items[0].get(LABEL_ROW):  # every label of each example: rows of the same length L
            for key in ("labels", "index"):
                batch[key] = torch.from_numpy(np.stack([it[key] for it in items]))
            return batch
        if np.ndim(items[0]["labels"]):  # per sub-token (a word-unit kind): padded with "record nothing"
            for key, fill in (("labels", -100), ("index", -1)):
                arr = np.full((len(items), width), fill, dtype=np.int64)
                for row, it in enumerate(items):
                    arr[row, : len(it[key])] = it[key]
                batch[key] = torch.from_numpy(arr)
            return batch
        batch["labels"] = torch.tensor([it["labels"] for it in items])
        batch["index"] = torch.tensor([it["index"] for it in items])
        return batch


class EpochBatches:
    """Batches of row indices, reshuffled each epoch from (seed, epoch).

    With ``group_by_length`` the shuffled order is cut into mega-batches of 50 batches,
    each sorted by length, and the resulting batches are shuffled: far less padding,
    still a random order of batches. Without ``shuffle`` (eval-mode passes, dev and test sets) the rows
    go longest first, so each batch pads to about its own length: on MultiNLI's varied lengths an
    eval pass in row order padded most rows to far longer neighbours and took about as long as a
    training epoch (docs/stability.md).
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, shuffle=True, group_by_length=False):
        self.lengths, self.batch_size, self.seed = lengths, batch_size, seed
        self.shuffle, self.group_by_length = shuffle, group_by_length
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self):
        n, size = len(self.lengths), self.batch_size
        if not self.shuffle:
            order = np.argsort(-np.asarray(self.lengths), kind="stable")  # longest first, ties by row
            yield from (order[i : i + size].tolist() for i in range(0, n, size))
            return
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(n)
        if self.group_by_length:
            mega = size * 50
            chunks = [order[i : i + mega] for i in range(0, n, mega)]
            order = np.concatenate([c[np.argsort(-self.lengths[c], kind="stable")] for c in chunks])
        batches = [order[i : i + size].tolist() for i in range(0, n, size)]
        if self.group_by_length:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        yield from batches


class PlannedBatches:
    """The batches of a precomputed training plan (cartomap.training.curricula), one epoch's slice at a time."""

    def __init__(self, plan):
        self.plan, self.epoch = plan, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.plan.steps_per_epoch

    def __iter__(self):
        yield from (b.tolist() for b in self.plan.epoch_batches(self.epoch))


def eval_batches_for(frame, tokenizer, cfg: RunConfig, label_names=None):
    """The tokenized rows of ``frame`` (dev or test set), their batches in order, and the labels of its
    units (:meth:`TaskKind.units`: per example, per word, or per label of ``label_names``), read as the run's
    task kind (``cfg.task_kind``: dev and test sets have the training set's)."""
    task = cfg.task_kind
    labels = task.units(frame, label_names)[1]
    encoded = tokenize(tokenizer, frame, cfg.model.max_length, task)
    dataset = TokenizedExamples(encoded, task.label_rows(labels, len(frame)))
    batches = EpochBatches(dataset.lengths, cfg.train.eval_batch_size, cfg.train.seed, shuffle=False)
    return dataset, batches, labels
