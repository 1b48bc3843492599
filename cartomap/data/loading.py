"""Load labelled datasets (text pairs, single texts, tagged sentences, label sets) into one validated shape.

A kind's files are read by its reader (:data:`READERS`, by :attr:`~cartomap.tasks.base.TaskKind.reader`).
A table of one label per example (:mod:`cartomap.data.readers`: a file or saved dataset as a raw frame)
ends in :func:`cartomap.data.mapping.build_dataset` (also :func:`from_frame`), which maps the configured
columns onto cartomap's fields and validates every row. A bad row raises one :class:`DataError`
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

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.config import DEMO_DEV, DEMO_NER_DEV, DEMO_NER_TRAIN, DEMO_TRAIN, DataConfig
from cartomap.data import conll, multilabel
from cartomap.data.dataset import TextDataset
from cartomap.data.mapping import NLI_LABEL_NAMES, build_dataset, storable_columns
from cartomap.data.readers import read_hub, read_source, read_table
from cartomap.errors import DataError
from cartomap.io import MAX_DECOMPRESSED, MAX_DECOMPRESSED_ENV, gunzip, max_decompressed  # noqa: F401 (re-exported)
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TaskKind

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
    demo), its columns mapped onto ``kind``'s fields by :func:`cartomap.data.mapping.build_dataset`."""
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
    return build_dataset(frame, config, source, names, lines, names_given=label_names is not None)


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
    return build_dataset(frame, config, source, names, lines, names_given=label_names is not None)


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
