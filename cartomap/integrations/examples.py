"""A user's training set (a Hugging Face ``datasets.Dataset``, a DataFrame, a list of records, ...)
as the validated examples of a run: id, texts, label.

Ids come from the id column, or are the row index when there is none (the row a ``Trainer`` or a
``DataLoader`` asks for). Texts come from the text columns (found by name when not given), or are
decoded from ``input_ids`` with the tokenizer when the dataset holds tokens only (a pair cut at the
tokenizer's separator token into a pair's two texts, special tokens and padding dropped). A dataset without
labels is an error that says which column was looked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import DataConfig
from cartomap.data.dataset import TextDataset
from cartomap.data.forms import guess_columns
from cartomap.data.loading import from_frame, tagged_dataset
from cartomap.errors import DataError
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.multilabel import MULTILABEL
from cartomap.tasks.sequence import PAIR, SINGLE
from cartomap.tasks.token import TOKEN

#: Label columns looked for, in order, when none is named.
LABEL_COLUMNS = ("label", "labels", "label_ids", "gold_label")
#: The name of the texts decoded from token ids (datasets without text columns): the single text's field.
DECODED = SINGLE.text_fields[0]


def _text_columns(columns: list, text_columns, taken: tuple, where: str) -> tuple:
    """The text columns asked for (each checked to exist: DataError naming the first missing one), or the
    ones guessed from the column names (:func:`guess_columns`) that are not in ``taken`` (label, id)."""
    present = set(columns)
    if text_columns is None:
        guessed = guess_columns(columns)["text_columns"]
        return tuple(c for c in guessed if c in present and c not in taken)
    text_columns = tuple(text_columns)
    missing = [c for c in text_columns if c not in present]
    if missing:
        raise DataError(f"no text column {missing[0]!r}; the columns are {columns}", location=where)
    return text_columns


def column_names(dataset: Any) -> list[str]:
    """The columns of a datasets.Dataset, a DataFrame, a dict of columns, or a sequence of dict rows."""
    if hasattr(dataset, "column_names"):
        names = dataset.column_names
        if isinstance(names, Mapping):  # a DatasetDict
            raise DataError(
                f"expected one split of the dataset, got a DatasetDict with splits {list(names)}: pass e.g. "
                "dataset['train']"
            )
        return [str(c) for c in names]
    if isinstance(dataset, pd.DataFrame):
        return [str(c) for c in dataset.columns]
    if isinstance(dataset, Mapping):
        return [str(c) for c in dataset]
    try:
        first = dataset[0]
    except (TypeError, IndexError, KeyError) as err:
        raise DataError(
            f"cannot read rows of a {type(dataset).__name__}: expected a datasets.Dataset, a pandas "
            "DataFrame, a dict of columns or a sequence of dict rows"
        ) from err
    if not isinstance(first, Mapping):
        raise DataError(f"rows of the dataset are {type(first).__name__}, expected dicts with named columns")
    return [str(c) for c in first]


def read_columns(dataset: Any, columns: Sequence[str]) -> pd.DataFrame:
    """The named columns of ``dataset`` as a DataFrame, one row per dataset row."""
    columns = list(dict.fromkeys(columns))
    if hasattr(dataset, "select_columns") and hasattr(dataset, "to_pandas"):
        frame = dataset.select_columns(columns).to_pandas()
    elif isinstance(dataset, pd.DataFrame):
        frame = dataset[columns]
    elif isinstance(dataset, Mapping):
        frame = pd.DataFrame({c: list(dataset[c]) for c in columns})
    else:
        frame = pd.DataFrame(
            [{c: row[c] for c in columns} for row in (dataset[i] for i in range(len(dataset)))]
        )
    return frame.reset_index(drop=True)


def class_names(dataset: Any, column: str) -> tuple[str, ...] | None:
    """Class names of a ``datasets.ClassLabel`` column, else None."""
    features = getattr(dataset, "features", None)
    feature = features.get(column) if isinstance(features, Mapping) else None
    names = getattr(feature, "names", None)
    return tuple(str(n) for n in names) if names else None


def _is_text(values: pd.Series) -> bool:
    return bool(len(values)) and all(isinstance(v, str) for v in values.head(100))


def _segments(row: Sequence[int], sep: int | None, special: set[int]) -> list[list[int]]:
    """A row of token ids cut at the separator token, without special tokens and padding; empty parts
    (RoBERTa's doubled ``</s></s>``) dropped."""
    parts: list[list[int]] = [[]]
    for token in row:
        if sep is not None and token == sep:
            parts.append([])
        elif token not in special:
            parts[-1].append(token)
    return [p for p in parts if p]


def decoded_texts(rows: Sequence[Sequence[int]], tokenizer) -> pd.DataFrame:
    """Texts of tokenised rows: the pair kind's two text fields when every row is a pair (two parts
    between the tokenizer's separator tokens), else the single text (:data:`DECODED`) whose parts are
    joined by a visible `` [SEP] ``. Special tokens and padding are dropped."""
    sep = getattr(tokenizer, "sep_token_id", None)
    special = {int(t) for t in (getattr(tokenizer, "all_special_ids", None) or [])}
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is not None:
        special.add(int(pad))
    cut = [_segments([int(t) for t in row], sep, special) for row in rows]
    flat = [part for parts in cut for part in parts]
    texts = (
        iter(t.strip() for t in tokenizer.batch_decode(flat, skip_special_tokens=True)) if flat else iter(())
    )
    decoded = [[next(texts) for _ in parts] for parts in cut]
    if decoded and all(len(parts) == 2 for parts in decoded):
        return pd.DataFrame(PAIR.texts_frame([(p[0] or "(empty)", p[1] or "(empty)") for p in decoded]))
    mark = f" {getattr(tokenizer, 'sep_token', None) or '[SEP]'} "
    return pd.DataFrame({DECODED: [mark.join(t for t in parts if t) or "(empty)" for parts in decoded]})


def _decoded(dataset: Any, tokenizer, where: str) -> pd.DataFrame:
    ids = read_columns(dataset, ["input_ids"])["input_ids"]
    return decoded_texts([list(row) for row in ids], tokenizer)


def user_examples(
    dataset: Any,
    *,
    id_column: str | None = "id",
    label_column: str | None = None,
    text_columns: Sequence[str] | None = None,
    label_names: Sequence[str] | None = None,
    tokenizer=None,
    where: str = "training dataset",
) -> tuple[TextDataset, dict[str, Any]]:
    """The examples of ``dataset`` (validated: unique ids, known labels, non-empty texts) and how they
    were read: ``{"ids": "column <name>" | "row index", "texts": [...] | "decoded input_ids" | None}``.

    ``label_names`` give the class order (required for integer labels unless the column is a
    ``ClassLabel``)."""
    columns = column_names(dataset)
    present = set(columns)
    if label_column is None:
        label_column = next((c for c in LABEL_COLUMNS if c in present), None)
        if label_column is None:
            raise DataError(
                f"the {where} has no label column: looked for {', '.join(LABEL_COLUMNS)} among its columns "
                f"{columns}; name yours with label_column=... (data maps need the gold label of every example)",
                location=where,
            )
    elif label_column not in present:
        raise DataError(f"no label column {label_column!r}; the columns are {columns}", location=where)
    if id_column and id_column not in present:
        id_column = None
    text_columns = _text_columns(columns, text_columns, (label_column, id_column), where)
    wanted = [label_column, *([id_column] if id_column else []), *text_columns]
    frame = read_columns(dataset, wanted)
    texts: Any = list(text_columns)
    if not text_columns or not all(_is_text(frame[c]) for c in text_columns):
        if tokenizer is not None and "input_ids" in present:
            decoded = _decoded(dataset, tokenizer, where)
            frame = frame.drop(columns=list(text_columns)).assign(**{c: decoded[c] for c in decoded.columns})
            text_columns, texts = tuple(decoded.columns), "decoded input_ids"
        else:
            raise DataError(
                f"the {where} has no text columns (looked for {task_kinds.known_columns_label()}; "
                f"columns: {columns}): name them with text_columns=..., or give the tokenizer so "
                "cartomap decodes input_ids",
                location=where,
            )
    if id_column is None:  # the row a sampler asks for
        frame["id"] = np.arange(len(frame)).astype(str)
    names = tuple(label_names) if label_names is not None else class_names(dataset, label_column)
    config = DataConfig(
        path=where,
        text_columns=tuple(text_columns),
        label_column=label_column,
        id_column=id_column or "id",
        label_names=names,
        genre_column=None,
    )
    examples = from_frame(frame, config, source=where, label_names=names)
    how = {
        "ids": f"column {id_column}" if id_column else "row index",
        "texts": texts,
        "label_column": label_column,
    }
    return examples, how


#: Columns a token-classification dataset commonly holds its words and its word tags in, tried in order.
WORD_COLUMNS = tuple(names[0] for names in TOKEN.known_columns)
TAG_COLUMNS = ("ner_tags", "tags", "pos_tags", "chunk_tags")


def user_token_examples(
    dataset: Any,
    *,
    id_column: str | None = "id",
    label_column: str | None = None,
    text_columns: Sequence[str] | None = None,
    label_names: Sequence[str] | None = None,
    model_names: Sequence[str] | None = None,
    where: str = "training dataset",
) -> tuple[TextDataset, dict[str, Any]]:
    """The sentences of a token-classification ``dataset`` (one row per sentence: its words and one tag
    per word, as Hugging Face's NER sets have them) and how they were read. ``label_column``: the word
    tags (default the first of :data:`TAG_COLUMNS`; never the sub-word ``labels`` a tokenised set
    aligns); ``text_columns``: the one column of words (default the first of :data:`WORD_COLUMNS`);
    ``label_names``: the tag order (default the column's ``Sequence(ClassLabel)`` names, else
    ``model_names``: the model's id2label)."""
    columns = column_names(dataset)
    present = set(columns)

    def pick(given, guesses, what, option):
        found = given or next((c for c in guesses if c in present), None)
        if found is None or found not in present:
            raise DataError(
                f"the {where} has no {what} column ({found or ', '.join(guesses)} not among {columns}): "
                f"name it with {option}=...",
                location=where,
            )
        return found

    words = pick(text_columns[0] if text_columns else None, WORD_COLUMNS, "words", "text_columns")
    tags = pick(label_column, TAG_COLUMNS, "word tags", "label_column")
    if id_column and id_column not in present:
        id_column = None
    frame = read_columns(dataset, [words, tags, *([id_column] if id_column else [])])
    names = tuple(label_names) if label_names is not None else None
    if names is None:
        features = getattr(dataset, "features", None)
        feature = features.get(tags) if isinstance(features, Mapping) else None
        inner = getattr(feature, "feature", None)  # datasets.Sequence(ClassLabel)
        if inner is None and isinstance(feature, list) and feature:  # datasets.List of ClassLabel
            inner = feature[0]
        found = getattr(inner, "names", None)
        names = tuple(str(n) for n in found) if found else None
    if names is None and model_names is not None:
        names = tuple(model_names)
    ids = frame[id_column].astype(str) if id_column else pd.Series(np.arange(len(frame)).astype(str))
    table = pd.DataFrame(
        {
            "id": ids.to_numpy(),
            TOKEN.text_fields[0]: [[str(w) for w in row] for row in frame[words]],
            TOKEN.label_field: [list(np.asarray(row).reshape(-1).tolist()) for row in frame[tags]],
        }
    )
    examples = tagged_dataset(table, TOKEN, names, where)
    how = {"ids": f"column {id_column}" if id_column else "row index", "texts": [words], "label_column": tags}
    return examples, how


def label_lists(
    values: Sequence[Any],
    label_names: Sequence[str],
    *,
    where: str = "training dataset",
    field: str = "labels",
) -> list[list[str]]:
    """Each example's label names, in label-space order, from a multi-label ``labels`` column: a multi-hot
    vector per example (0/1 of float, int or bool, one entry per label of ``label_names``: the Hugging Face
    convention for ``problem_type="multi_label_classification"``), or a list of label names per example (as
    cartomap's multi-label reader takes them, :func:`cartomap.data.multilabel.parse_label_list`). Numbers in
    a row make it a vector, never label positions. DataError naming the row for a vector of another width,
    an entry other than 0/1, or a name outside ``label_names``."""
    from cartomap.data.multilabel import parse_flag, parse_label_list

    names = tuple(str(n) for n in label_names)
    rows: list[list[Any]] = []
    for i, value in enumerate(values):
        row = as_list(value)
        if row is None:  # a delimited string, a null, a number
            raise DataError(
                f"{type(value).__name__} {value!r}; expected a multi-hot vector of {len(names)} entries or a list "
                "of label names",
                location=f"{where}: row {i}",
                field=field,
            )
        rows.append(row)
    # one number anywhere: the column holds multi-hot vectors
    vectors = any(not isinstance(x, str) for row in rows for x in row)
    out: list[list[str]] = []
    for i, row in enumerate(rows):
        at = f"{where}: row {i}"
        if not vectors:
            out.append(parse_label_list(row, label_names=names, where=at, field=field))
            continue
        if len(row) != len(names):
            raise DataError(
                f"a vector of {len(row)} entries; expected a multi-hot vector of {len(names)} entries, one per label {list(names)}",
                location=at,
                field=field,
            )
        flags = [parse_flag(x, where=at, field=field) for x in row]
        out.append([name for name, on in zip(names, flags, strict=True) if on])
    return out


def as_list(value: Any) -> list[Any] | None:
    """A cell holding a list (a list, tuple, numpy array, tensor) as a flat list; None for anything else."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def user_multilabel_examples(
    dataset: Any,
    *,
    id_column: str | None = "id",
    label_column: str | None = None,
    text_columns: Sequence[str] | None = None,
    label_names: Sequence[str] | None = None,
    model_names: Sequence[str] | None = None,
    tokenizer=None,
    where: str = "training dataset",
) -> tuple[TextDataset, dict[str, Any]]:
    """The examples of a multi-label ``dataset`` (one text per row and its set of labels) and how they were
    read. ``label_column``: default the first of :data:`LABEL_COLUMNS` present (the Trainer's multi-hot
    ``labels``), read by :func:`label_lists`; ``text_columns``: the one text column (found by name when not
    given; else the texts are decoded from ``input_ids`` with ``tokenizer``); ``label_names``: the label
    space in the model's output order (default ``model_names``: the model's id2label). A DataError names
    what is missing."""
    columns = column_names(dataset)
    present = set(columns)
    names = tuple(str(n) for n in label_names) if label_names is not None else None
    if names is None and model_names:
        names = tuple(str(n) for n in model_names)
    if not names:
        raise DataError(
            "a multi-label dataset needs the label names in the model's output order: give label_names=[...] "
            "(or a model whose config.id2label names them)",
            location=where,
            field="label_names",
        )
    if len(set(names)) != len(names):
        raise DataError(f"label names repeat a name: {list(names)}", location=where, field="label_names")
    column = label_column or next((c for c in LABEL_COLUMNS if c in present), None)
    if column is None or column not in present:
        raise DataError(
            f"the {where} has no labels column ({column or ', '.join(LABEL_COLUMNS)} not among {columns}): "
            "name the column of multi-hot vectors or label-name lists with label_column=...",
            location=where,
        )
    if id_column and id_column not in present:
        id_column = None
    text_columns = _text_columns(columns, text_columns, (column, id_column), where)
    if len(text_columns) > 1:
        raise DataError(
            f"multi-label examples are one text each, got text columns {list(text_columns)}: name the one "
            "with text_columns=[...]",
            location=where,
            field="text_columns",
        )
    frame = read_columns(dataset, [column, *([id_column] if id_column else []), *text_columns])
    texts: Any = list(text_columns)
    if not text_columns or not _is_text(frame[text_columns[0]]):
        if tokenizer is None or "input_ids" not in present:
            raise DataError(
                f"the {where} has no text column (looked for {', '.join(n[0] for n in MULTILABEL.known_columns)}; "
                f"columns: {columns}): name it with "
                "text_columns=[...], or give the tokenizer so cartomap decodes input_ids",
                location=where,
            )
        decoded = _decoded(dataset, tokenizer, where)
        joined = decoded.astype(str).agg(f" {getattr(tokenizer, 'sep_token', None) or '[SEP]'} ".join, axis=1)
        text, texts = "__decoded_text__", "decoded input_ids"
        frame[text] = joined.to_numpy()
    else:
        text = text_columns[0]
    lists = label_lists(frame[column].tolist(), names, where=where, field=column)
    table = pd.DataFrame(
        {
            "id": frame[id_column].tolist() if id_column else [str(k) for k in range(len(frame))],
            MULTILABEL.text_fields[0]: frame[text].tolist(),
            MULTILABEL.label_field: lists,
        }
    )
    examples = multilabel_dataset(table, names, where)
    how = {
        "ids": f"column {id_column}" if id_column else "row index",
        "texts": texts,
        "label_column": column,
    }
    return examples, how


def multilabel_dataset(
    frame: pd.DataFrame, label_names: Sequence[str], where: str, *, check_texts: bool = True
) -> TextDataset:
    """A validated multi-label dataset (:mod:`cartomap.data.multilabel`: unique ids, non-empty texts unless
    ``check_texts`` is False, label lists inside ``label_names``) from a frame of ``id``, ``text`` and
    ``labels`` (lists of names)."""
    from cartomap.data import multilabel

    text = MULTILABEL.text_fields[0]
    data = multilabel.from_frame(
        frame,
        labels_column=MULTILABEL.label_field,
        label_names=tuple(label_names),
        id_column="id",
        text_columns=(text,) if check_texts else None,
        source=where,
    )
    out = data.frame[["id", text, multilabel.LABELS]].rename(
        columns={multilabel.LABELS: MULTILABEL.label_field}
    )
    return TextDataset(frame=out, label_names=tuple(data.label_names), source=where)
