"""Load labelled text datasets (NLI pairs or single texts) into one validated shape.

Every reader (:mod:`cartomap.data.readers`: a file or saved dataset as a raw frame) ends in
:func:`from_frame`, which maps the configured columns onto cartomap's fields and validates every row. A bad row raises one :class:`DataError`
naming the file, the line (text formats, 1-based physical line; CSV/TSV count the
header as line 1) or the row (Parquet, Hugging Face, in-memory frames: 0-based),
the field, and what was expected. Loading never partially succeeds.

The result is a :class:`cartomap.data.dataset.TextDataset` whose ``frame`` has the columns

* ``id`` (str, unique): from ``DataConfig.id_column``, or generated from the content
  (``"ex-" + sha1(texts + label)[:12]``, ``-2``, ``-3`` … for repeated identical rows),
  so generated ids do not change when rows are reordered;
* the text fields of the config's task kind (:mod:`cartomap.tasks`: a pair's two texts, or one text);
* ``label`` (int64 codes into ``label_names``);
* ``genre`` / ``group`` when those columns are configured and present;
* ``votes_<label>`` (int64 per class) when the data has votes or annotator labels, ``is_error`` when
  it has a known-error column (:mod:`cartomap.data.annotations`; the run store adds the human columns
  derived from the votes to a run's copy);
* every other source column, unchanged (renamed ``orig_<name>`` if its name clashes
  with one of the columns above).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import DEMO_DEV, DEMO_NER_DEV, DEMO_NER_TRAIN, DEMO_TRAIN, DataConfig
from cartomap.data import conll, multilabel
from cartomap.data.annotations import annotation_columns
from cartomap.data.dataset import TextDataset
from cartomap.data.readers import read_hub, read_source, read_table
from cartomap.errors import DataError
from cartomap.io import MAX_DECOMPRESSED, MAX_DECOMPRESSED_ENV, gunzip, max_decompressed  # noqa: F401 (re-exported)
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TaskKind

NLI_LABEL_NAMES: tuple[str, ...] = ("entailment", "neutral", "contradiction")
DEMO_LABEL_NAMES: tuple[str, ...] = NLI_LABEL_NAMES
DEMO_DIR = Path(__file__).parent / "demo"
_DEMO_FILES = {
    "train": "nli_train.jsonl.gz",
    "dev": "nli_dev.jsonl.gz",
    "ner_train": "ner_train.conll.gz",
    "ner_dev": "ner_dev.conll.gz",
}
#: The comment naming each sentence of the bundled NER demo files (``# sent_id = wikigold-<article>-<k>``).
DEMO_NER_ID_FIELD = "sent_id"

_INT_RE = re.compile(r"^[+-]?\d+$")


# ----------------------------------------------------------------------------- public API


def demo_path(split: str) -> Path:
    """The bundled demo file for ``"train"`` (3,198 SNLI pairs), ``"dev"`` (400 SNLI pairs), ``"ner_train"``
    (1,454 WikiGold sentences, IOB2 tags) or ``"ner_dev"`` (242 sentences of other articles)."""
    if split not in _DEMO_FILES:
        raise DataError(f"unknown demo split {split!r}; expected one of {sorted(_DEMO_FILES)}")
    return DEMO_DIR / _DEMO_FILES[split]


def load_dataset(config: DataConfig, label_names: tuple[str, ...] | None = None) -> TextDataset:
    """Read, map and validate the dataset described by ``config``.

    ``label_names`` overrides ``config.label_names``: pass the training set's classes
    when loading a dev set, so that a label unknown to training is an error.
    """
    kind = config.task_kind
    read = READERS.get(kind.reader)
    if read is None:
        raise DataError(
            f"task {kind.name!r} reads its files with {kind.reader!r}; expected one of {', '.join(READERS)}",
            field="task",
        )
    return read(config, kind, label_names)


def _load_labelled(config: DataConfig, kind: TaskKind, label_names: Sequence[str] | None) -> TextDataset:
    """A table of one label per example (JSONL, CSV/TSV, Parquet, a Hugging Face dataset, the bundled NLI
    demo), its columns mapped onto ``kind``'s fields by :func:`_build`."""
    path = str(config.path)
    source = path
    fmt = config.format
    if path in (DEMO_TRAIN, DEMO_DEV):
        file = demo_path(path.split(":", 1)[1])
        if label_names is None and config.label_names is None:
            label_names = DEMO_LABEL_NAMES
        frame, lines, class_names = read_source(file, "jsonl" if fmt == "auto" else fmt, None, source)
    elif path.startswith("hf:"):
        frame, lines, class_names = read_hub(path[3:], config.split, source)
    else:
        frame, lines, class_names = read_source(Path(path), fmt, config.split, source)
    names = label_names if label_names is not None else config.label_names
    if names is None and class_names is not None:
        names = class_names.get(config.label_column)
    return _build(frame, config, source, names, lines, names_given=label_names is not None)


def _load_tagged(config: DataConfig, kind: TaskKind, label_names: Sequence[str] | None) -> TextDataset:
    """A token-classification dataset: CoNLL columns or JSONL of token and tag lists
    (:mod:`cartomap.data.conll`), or a table with the kind's columns (a run's own copy in Parquet)."""
    names = label_names if label_names is not None else config.label_names
    path, source = Path(str(config.path)).expanduser(), str(config.path)
    words, tags = config.text_columns[0], config.label_column
    warnings: tuple[str, ...] = ()
    if config.format == "parquet" or (config.format == "auto" and path.suffix.lower() in (".parquet", ".pq")):
        frame, _ = read_table(path, "parquet")
        missing = [c for c in ("id", words, tags) if c not in frame.columns]
        if missing:
            raise DataError(
                f"missing column(s) {missing}; the table has {list(frame.columns)}", location=source
            )
        frame = frame[["id", words, tags]].rename(
            columns={words: kind.text_fields[0], tags: kind.label_field}
        )
    elif source in (DEMO_NER_TRAIN, DEMO_NER_DEV):
        file = demo_path(source.split(":", 1)[1])
        read = conll.read_tagged(file, id_field=DEMO_NER_ID_FIELD, tag_names=names, source=source)
        frame, names = read.frame, read.tag_names
    elif conll.is_token_data(path):
        read = conll.read_tagged(path, tag_names=names, source=source, skip_blank=config.skip_blank_tokens)
        frame, names, warnings = read.frame, read.tag_names, read.warnings
    else:
        text = conll.read_text(path, source)
        first = next((line for line in text.splitlines() if line.strip()), "")
        try:
            has_id = bool(config.id_column) and config.id_column in json.loads(first)
        except (ValueError, TypeError):
            has_id = False
        read = conll.parse_token_jsonl(
            text,
            source,
            tokens_field=words,
            tags_field=tags,
            id_field=config.id_column if has_id else None,
            tag_names=names,
            skip_blank=config.skip_blank_tokens,
        )
        frame, names, warnings = read.frame, read.tag_names, read.warnings
        frame = frame.rename(columns={words: kind.text_fields[0], tags: kind.label_field})
    return tagged_dataset(frame, kind, names, source, warnings)


def _load_multilabel(config: DataConfig, kind: TaskKind, label_names: Sequence[str] | None) -> TextDataset:
    """A multi-label dataset (:mod:`cartomap.data.multilabel`): any table :func:`read_table` reads (JSONL,
    CSV, Parquet, a saved Hugging Face dataset), its labels in a column of name lists (split at
    ``config.label_separator`` when they are delimited strings) or in 0/1 columns (``config.label_columns``).
    ``names`` (the training set's labels, for a dev set) fixes the label space: a label outside it is an
    error. Ids come from ``config.id_column`` when the file has it, else ``ex-<row>``."""
    names = label_names if label_names is not None else config.label_names
    path, source = str(config.path), str(config.path)
    if path in (DEMO_TRAIN, DEMO_DEV) or path.startswith("hf:"):
        raise DataError("multi-label data is read from a file (JSONL, CSV, Parquet)", location=source)
    frame, lines = read_table(Path(path).expanduser(), config.format, config.split)
    given = tuple(str(n) for n in names) if names is not None else None
    columns = config.label_columns
    if columns is not None and given is not None:
        if set(columns) != set(given):
            raise DataError(
                f"the label columns {list(columns)} are not the labels {list(given)}",
                location=source,
                field="label_columns",
            )
        columns = given  # the label space's order
    text = config.text_columns[0]
    id_column = config.id_column if config.id_column and config.id_column in frame.columns else None
    data = multilabel.from_frame(
        frame,
        labels_column=None if columns is not None else config.label_column,
        label_columns=columns,
        separator=config.label_separator,
        label_names=given if columns is None else None,
        id_column=id_column,
        text_columns=(text,),
        source=source,
        lines=lines,
    )
    out = data.frame
    # Columns that name another kind's fields ("label", "premise", ...) would make the table read as
    # that kind (registry.of_columns): kept, renamed orig_<name>.
    reserved = {f for k in task_kinds.KINDS.values() for f in (*k.text_fields, k.label_field)}
    reserved -= {*kind.text_fields, kind.label_field, text}
    renames = {c: f"orig_{c}" for c in out.columns if c in reserved or (c == kind.text_fields[0] != text)}
    out = out.rename(columns=renames).rename(columns={text: kind.text_fields[0]})
    out[kind.text_fields[0]] = out[kind.text_fields[0]].astype(str)
    if kind.label_field != multilabel.LABELS:
        out = out.rename(columns={multilabel.LABELS: kind.label_field})
    own = {"id", *kind.text_fields, kind.label_field}
    out, warnings = storable_columns(out, [c for c in out.columns if c not in own], source)
    return TextDataset(
        frame=out, label_names=tuple(data.label_names), source=source, warnings=tuple(warnings)
    )


#: How each kind's files are read, by the kind's :attr:`~cartomap.tasks.base.TaskKind.reader`:
#: ``reader(config, kind, label_names)`` -> a validated dataset (``label_names``: the training set's, for a
#: dev or test set). Their class warnings: :data:`cartomap.data.checks.CLASS_WARNINGS`.
READERS = {"labels": _load_labelled, "tagged": _load_tagged, "label_sets": _load_multilabel}


def tagged_dataset(
    frame: pd.DataFrame,
    kind: TaskKind,
    names: Sequence[str] | None,
    source: str,
    warnings: Sequence[str] = (),
) -> TextDataset:
    """A validated dataset of a word-unit kind from a frame of id, word lists and tag lists (tag names,
    or codes into ``names``): tags become int codes; every sentence has a word and one tag per word.
    ``warnings``: the reader's (:attr:`TextDataset.warnings`)."""
    words_field, tags_field = kind.text_fields[0], kind.label_field
    if names is None:
        found = {t for row in frame[tags_field] for t in row}
        if any(not isinstance(t, str) for t in found):
            raise DataError(
                "integer tags but no tag names: give the tag names (--label-names)", location=source
            )
        names = tuple(sorted(found))
    names = tuple(str(n) for n in names)
    index = {n: k for k, n in enumerate(names)}
    codes = []
    for i, (sid, row_words, row_tags) in enumerate(
        zip(frame["id"], frame[words_field], frame[tags_field], strict=True)
    ):
        row_tags = list(row_tags)
        if len(row_words) == 0 or len(row_words) != len(row_tags):
            raise DataError(
                f"sentence {sid!r} has {len(row_words)} words and {len(row_tags)} tags; expected one tag per word",
                location=f"{source}: row {i}",
                field=tags_field,
            )
        row = []
        for t in row_tags:
            k = index.get(t) if isinstance(t, str) else (int(t) if 0 <= int(t) < len(names) else None)
            if k is None:
                raise DataError(
                    f"sentence {sid!r}: tag {t!r} is not one of {list(names)}",
                    location=source,
                    field=tags_field,
                )
            row.append(k)
        codes.append(np.asarray(row, dtype=np.int64))
    if len(names) < 2:
        raise DataError(
            f"fewer than two tags ({list(names)}); a classifier needs at least two", location=source
        )
    out = pd.DataFrame(
        {
            "id": pd.Series([str(i) for i in frame["id"]], dtype=str),
            words_field: [[str(w) for w in row] for row in frame[words_field]],
            tags_field: codes,
        }
    )
    if out["id"].duplicated().any():
        raise DataError(
            f"duplicate sentence id {out['id'][out['id'].duplicated()].iloc[0]!r}", location=source
        )
    return TextDataset(frame=out, label_names=names, source=source, warnings=tuple(warnings))


def from_frame(
    frame: pd.DataFrame,
    config: DataConfig,
    source: str = "<frame>",
    label_names: tuple[str, ...] | None = None,
    *,
    lines: Sequence[int] | None = None,
) -> TextDataset:
    """Map and validate an in-memory DataFrame (e.g. an upload).

    ``lines`` optionally gives each row's physical line in its file, for messages;
    otherwise rows are named by 0-based position.
    """
    names = label_names if label_names is not None else config.label_names
    return _build(frame, config, source, names, lines, names_given=label_names is not None)


def read_multilabel(
    path: str | Path,
    *,
    labels_column: str | None = None,
    label_columns: Sequence[str] | None = None,
    separator: str | None = None,
    label_names: Sequence[str] | None = None,
    id_column: str | None = None,
    text_columns: Sequence[str] | None = None,
    format: str = "auto",
    source: str | None = None,
) -> multilabel.MultiLabelData:
    """Read a multi-label file: JSON lines (``.jsonl``, ``.ndjson``, optionally ``.gz``) by
    :func:`cartomap.data.multilabel.parse_multilabel_jsonl`, anything else (CSV, TSV, Parquet, JSON, a saved Hugging Face
    dataset; ``format`` as in :func:`read_table`) read as a table and mapped by
    :func:`cartomap.data.multilabel.from_frame`. The options are :func:`cartomap.data.multilabel.from_frame`'s. In a CSV a labels column is text: give
    the ``separator``, or use one 0/1 column per label."""
    path = Path(path)
    source = str(path) if source is None else source
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    is_jsonl = format in ("jsonl", "ndjson") or (
        format == "auto" and suffixes and suffixes[-1] in multilabel.JSONL_SUFFIXES
    )
    if is_jsonl:
        return multilabel.parse_multilabel_jsonl(
            conll.read_text(path, source),
            source,
            labels_field=labels_column,
            label_fields=label_columns,
            separator=separator,
            label_names=label_names,
            id_field=id_column,
            text_fields=text_columns,
        )
    frame, lines = read_table(path, format)
    return multilabel.from_frame(
        frame,
        labels_column=labels_column,
        label_columns=label_columns,
        separator=separator,
        label_names=label_names,
        id_column=id_column,
        text_columns=text_columns,
        source=source,
        lines=lines,
    )


# ----------------------------------------------------------------------------- mapping + validation


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _as_int(value: Any) -> int | None:
    """An integer (bools and integral floats included), else None."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def _build(
    frame: pd.DataFrame,
    config: DataConfig,
    source: str,
    label_names: Sequence[str] | None,
    lines: Sequence[int] | None,
    names_given: bool,
) -> TextDataset:
    def where(i: int) -> str:
        return f"{source}: line {lines[i]}" if lines is not None else f"{source}: row {i}"

    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(frame).__name__}", location=source)
    text_cols = tuple(config.text_columns)
    try:
        task = config.task_kind
    except DataError as err:
        raise DataError(f"DataConfig: {err}", location=source) from None
    if lines is not None and len(lines) != len(frame):
        raise ValueError("lines must give one line number per row")
    present = [str(c) for c in frame.columns]
    needed = [*text_cols, config.label_column]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise DataError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"the data has columns {present}; map yours with --text-columns / --label-column (DataConfig.text_columns / label_column)",
            location=source,
            field=missing[0],
        )
    if len(frame) == 0:
        raise DataError("no rows; expected at least one example", location=source)
    frame = frame.reset_index(drop=True)
    n = len(frame)
    out_text = task.text_fields

    # texts
    texts: dict[str, list[str]] = {}
    for src_col, out_col in zip(text_cols, out_text, strict=True):
        values = frame[src_col].tolist()
        for i, v in enumerate(values):
            if isinstance(v, str):
                if not v.strip():
                    raise DataError(
                        "empty text" + (" (only whitespace)" if v else "") + "; expected a non-empty string",
                        location=where(i),
                        field=src_col,
                    )
            elif _is_missing(v):
                raise DataError(
                    "missing text (null); expected a non-empty string", location=where(i), field=src_col
                )
            else:
                raise DataError(
                    f"expected a text string, got {type(v).__name__} {v!r}", location=where(i), field=src_col
                )
        texts[out_col] = [str(v) for v in values]

    # labels
    names, codes = _encode_labels(
        frame[config.label_column].tolist(), label_names, config.label_column, where
    )
    if len(names) < 2:
        raise DataError(
            f"fewer than two classes ({list(names)}); a classifier needs at least two",
            location=source,
            field=config.label_column,
        )
    if not names_given:
        used = len(set(codes))
        if used < 2:
            raise DataError(
                f"every row has the same label {names[codes[0]]!r}; expected at least two classes",
                location=source,
                field=config.label_column,
            )
    label_list = [names[c] for c in codes]

    # ids
    id_col = config.id_column
    if id_col and id_col in frame.columns:
        ids = []
        for i, v in enumerate(frame[id_col].tolist()):
            if _is_missing(v) or (isinstance(v, str) and not v.strip()):
                raise DataError(
                    "missing id; expected a non-empty value in every row", location=where(i), field=id_col
                )
            as_int = _as_int(v) if not isinstance(v, (bool, np.bool_)) else None
            ids.append(str(as_int) if as_int is not None else str(v))
        first: dict[str, int] = {}
        for i, v in enumerate(ids):
            j = first.setdefault(v, i)
            if j != i:
                other = f"line {lines[j]}" if lines is not None else f"row {j}"
                raise DataError(
                    f"duplicate id {v!r} (also on {other}); ids must be unique",
                    location=where(i),
                    field=id_col,
                )
    else:
        ids = _generate_ids([texts[c] for c in out_text], label_list)

    # assemble
    columns: dict[str, Any] = {"id": pd.Series(ids, dtype=str)}
    for col in out_text:
        columns[col] = pd.Series(texts[col], dtype=str)
    columns[config.task_kind.label_field] = pd.Series(np.asarray(codes, dtype=np.int64))
    used_src = {*text_cols, config.label_column}
    if id_col and id_col in frame.columns:
        used_src.add(id_col)
    for out_col, src_col in (("genre", config.genre_column), ("group", config.group_column)):
        if src_col and src_col in frame.columns:
            columns[out_col] = pd.Series(
                [None if _is_missing(v) else str(v) for v in frame[src_col].tolist()], dtype=str
            )
            used_src.add(src_col)
    annotations, replaced = annotation_columns(
        frame,
        names,
        config.votes_column,
        config.error_column,
        where,
        source,
        config.annotator_column,
    )
    columns.update(annotations)
    used_src |= replaced
    extras: list[str] = []
    for col in frame.columns:
        if col in used_src:
            continue
        name = str(col)
        # An unused column named as another kind's text field (a pair's first text in a single-text
        # mapping) must not make the rows look like that kind.
        while name in columns or name in task_kinds.text_fields():
            name = f"orig_{name}"
        columns[name] = frame[col]
        extras.append(name)
    out = pd.DataFrame(columns)
    out.index = pd.RangeIndex(n)
    out, warnings = storable_columns(out, extras, source)
    return TextDataset(frame=out, label_names=tuple(names), source=source, warnings=tuple(warnings))


_KIND_NAMES = {
    bool: "booleans",
    int: "numbers",
    float: "numbers",
    str: "strings",
    dict: "mappings",
    list: "lists",
}


def _kind_name(value: Any) -> str:
    for kind, name in _KIND_NAMES.items():
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return name
    if isinstance(value, (np.integer, np.floating)):
        return "numbers"
    if isinstance(value, (tuple, np.ndarray)):
        return "lists"
    return type(value).__name__


def _as_text(value: Any) -> Any:
    if _is_missing(value) or isinstance(value, str):
        return None if _is_missing(value) else value
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return json.dumps(value, ensure_ascii=False, default=str)


def storable_columns(
    frame: pd.DataFrame, columns: Sequence[str], source: str
) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` with each of ``columns`` (ordinary extra columns, kept as they are) that Parquet cannot
    store as one type (a number in one row and a mapping in another, strings among numbers, integers
    beyond 64 bits) turned into text: strings as they are, other values as JSON, nulls kept; and one
    warning per such column. The run's copy is then written whatever the extra columns hold."""
    import pyarrow as pa

    out, warnings = frame, []
    for column in columns:
        values = frame[column]
        if values.dtype != object:
            continue
        try:
            pa.array(values, from_pandas=True)
            continue
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            pass
        kinds = sorted({_kind_name(v) for v in values.tolist() if not _is_missing(v)})
        if out is frame:
            out = frame.copy()
        out[column] = pd.Series([_as_text(v) for v in values.tolist()], index=values.index, dtype=object)
        what = (
            f"mixes {' and '.join(kinds)}, which one Parquet column cannot hold together"
            if len(kinds) > 1
            else f"holds {kinds[0]} Parquet cannot store as one type (beyond 64 bits, or mixing kinds inside)"
        )
        warnings.append(
            f"{source}: column {str(column)!r} {what}: kept as text (strings as they are, other values as JSON)"
        )
    return out, warnings


def _encode_labels(values: list, label_names: Sequence[str] | None, field: str, where):
    if label_names is not None:
        names = tuple(str(x) for x in label_names)
        if len(set(names)) != len(names):
            raise DataError(f"label_names has repeated names: {list(names)}", field=field)
        index = {name: k for k, name in enumerate(names)}
        codes = []
        for i, v in enumerate(values):
            codes.append(_one_label(v, names, index, field, where, i))
        return names, codes
    # infer from string labels
    strings = []
    for i, v in enumerate(values):
        if _is_missing(v) or (isinstance(v, str) and not v.strip()):
            raise DataError(
                "missing label; expected a class name in every row", location=where(i), field=field
            )
        if isinstance(v, str):
            s = v.strip()
            if _INT_RE.match(s):
                raise DataError(
                    f"label {v!r} looks like an integer; integer labels need the class names "
                    "(set DataConfig.label_names, e.g. ('entailment', 'neutral', 'contradiction'))",
                    location=where(i),
                    field=field,
                )
            strings.append(s)
        elif _as_int(v) is not None:
            raise DataError(
                f"integer label {v!r} but no class names; set DataConfig.label_names "
                "(e.g. ('entailment', 'neutral', 'contradiction')) to say what each integer means",
                location=where(i),
                field=field,
            )
        else:
            raise DataError(
                f"expected a class name or an integer, got {type(v).__name__} {v!r}",
                location=where(i),
                field=field,
            )
    found = set(strings)
    names = NLI_LABEL_NAMES if found == set(NLI_LABEL_NAMES) else tuple(sorted(found))
    index = {name: k for k, name in enumerate(names)}
    return names, [index[s] for s in strings]


def _one_label(v: Any, names: tuple[str, ...], index: dict[str, int], field: str, where, i: int) -> int:
    if _is_missing(v) or (isinstance(v, str) and not v.strip()):
        raise DataError("missing label; expected a class name in every row", location=where(i), field=field)
    if isinstance(v, str):
        s = v.strip()
        if s in index:
            return index[s]
        if _INT_RE.match(s):
            k = int(s)
        else:
            raise DataError(
                f"unknown label {v!r}; expected one of {list(names)}", location=where(i), field=field
            )
    else:
        k = _as_int(v)
        if k is None:
            raise DataError(
                f"expected a class name or an integer, got {type(v).__name__} {v!r}",
                location=where(i),
                field=field,
            )
    if not 0 <= k < len(names):
        hint = " (-1 often marks 'no gold label': drop those rows first)" if k == -1 else ""
        raise DataError(
            f"integer label {k} out of range; expected 0..{len(names) - 1} for classes {list(names)}{hint}",
            location=where(i),
            field=field,
        )
    return k


def _generate_ids(text_lists: list[list[str]], labels: list[str]) -> list[str]:
    """Content ids: stable under reordering; repeats of identical content get -2, -3, …"""
    seen: dict[str, int] = {}
    ids = []
    for *texts, label in zip(*text_lists, labels, strict=True):
        payload = json.dumps([*texts, label], ensure_ascii=False).encode("utf-8")
        base = "ex-" + hashlib.sha1(payload).hexdigest()[:12]
        count = seen.get(base, 0) + 1
        seen[base] = count
        ids.append(base if count == 1 else f"{base}-{count}")
    return ids
