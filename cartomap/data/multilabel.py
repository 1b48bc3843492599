"""Read multi-label data: a set of labels per example (one sigmoid output per label), one row each.

The labels of an example come in one of two shapes:

* **a labels column** (``labels_column``, default ``labels``): a list of label names per row, e.g.
  ``["sports", "politics"]`` (a JSON list, a Python list or tuple, a numpy array from Parquet), or a
  delimited string when ``separator`` is given (``"sports|politics"`` with ``separator="|"``, the
  form a CSV cell takes). Names are stripped of surrounding whitespace. With ``label_names`` given,
  an integer in a list is a position in them.
* **one 0/1 column per label** (``label_columns``): the column names are the label names, in the
  given order; a cell holds 0 or 1 (also ``True``/``False``, ``0.0``/``1.0``, ``"0"``/``"1"``).
* **a 0/1 vector per row** in the labels column, with ``label_names``: a list of one 0 or 1 (or
  ``True``/``False``, ``0.0``/``1.0``) per label name, in their order (``[0, 1, 1]``: the second and third labels).
  The whole column decides: every row a list of the same width of nothing but 0/1 (two or more
  numbers) is read so. Its width must be the number of label names; a column of 0/1 pairs
  without a repeated number (``[0, 1]``, ``[1, 0]`` for two labels) is refused, since it reads as
  positions too: write label names there. A list of integers in any other column is positions.

An example with **no label is legal**: multi-label data often has examples to which none of the labels
apply (an empty list ``[]``, an empty string with a separator, a row of zeros); the model learns
"absent" for every label of such an example, and its dynamics are recorded like any other's. A
missing value (null) is not an empty set: it is refused, so that a hole in the file is not read as
"none apply".

The result, :class:`MultiLabelData`, holds a DataFrame with the columns ``id`` (str, unique: from
``id_column`` when given, else ``ex-<n>`` with n the row's 0-based position, so ids do not change when
the file is read again), every other column of the input untouched (the texts among them), and
``labels`` (list of str, in the order of the label space); the label space ``label_names`` (the given
names in their order, else the names found, sorted); and the dense indicator matrix ``indicator``,
bool [N, L], indicator[i, j] = label j applies to example i. :func:`to_indicator` and
:func:`from_indicator` convert between label lists and that matrix.

A bad value raises one :class:`~cartomap.errors.DataError` naming the file, the 1-based physical line
(JSONL, CSV) or the 0-based row (a frame, Parquet) and the field; reading never partially succeeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.io import json_objects

#: The default name of the column (or JSON field) that holds each example's list of labels; also the
#: name of the label-list column of :attr:`MultiLabelData.frame`.
LABELS = "labels"
#: Prefix of the ids made for rows without an id column: ``ex-0``, ``ex-1``, ...
ID_PREFIX = "ex-"
#: Suffixes read as JSON lines by :func:`cartomap.data.loading.read_multilabel` (each also with ``.gz``);
#: others go to :func:`cartomap.data.readers.read_table` (CSV, TSV, Parquet, JSON, a saved Hugging Face dataset).
JSONL_SUFFIXES: tuple[str, ...] = (".jsonl", ".ndjson")
_TRUE = (1, "1", "1.0", "true", "True")
_FALSE = (0, "0", "0.0", "false", "False")


@dataclass(frozen=True, eq=False)
class MultiLabelData:
    """Multi-label examples: ``frame`` (id, the input's other columns untouched, labels), the label
    space ``label_names`` and ``indicator``, bool [N, L] (read-only), indicator[i, j] = label j
    applies to example i. ``lines`` gives each row's physical line (1-based) in its file when the
    file has lines (JSONL, CSV), for messages; ``warnings`` are about data that reads but looks wrong.
    """

    frame: pd.DataFrame
    label_names: tuple[str, ...]
    indicator: np.ndarray
    source: str
    lines: tuple[int, ...] | None = None
    warnings: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def label_counts(self) -> dict[str, int]:
        """How many examples each label applies to, in label-space order."""
        counts = self.indicator.sum(axis=0)
        return {name: int(c) for name, c in zip(self.label_names, counts, strict=True)}

    def __repr__(self) -> str:
        return (
            f"MultiLabelData({self.source!r}, {len(self)} examples, {int(self.indicator.sum())} labels set, "
            f"labels={list(self.label_names)})"
        )


# ----------------------------------------------------------------------------- values


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _type_name(value: Any) -> str:
    return type(value).__name__


def _label_space(label_names: Sequence[str] | None, source: str) -> tuple[str, ...] | None:
    """The given label names checked: strings, non-empty, unique; None when not given."""
    if label_names is None:
        return None
    if isinstance(label_names, str):
        raise DataError(
            f"expected a list of label names, got the string {label_names!r}",
            location=source,
            field="label_names",
        )
    names = tuple(label_names)
    seen: set[str] = set()
    for k, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            raise DataError(
                f"label name {k} is {name!r}; expected a non-empty string",
                location=source,
                field="label_names",
            )
        if name in seen:
            raise DataError(f"label name {name!r} appears twice", location=source, field="label_names")
        seen.add(name)
    if not names:
        raise DataError("no label names; expected at least one", location=source, field="label_names")
    return names


def parse_label_list(
    value: Any,
    *,
    separator: str | None = None,
    label_names: Sequence[str] | None = None,
    where: str = "",
    field: str = LABELS,
) -> list[str]:
    """One example's label names from a labels cell (see the module text): a list (tuple, numpy array)
    of names, or with ``separator`` a delimited string ("" = no labels). With ``label_names`` an
    integer is a position in them and a name outside them is an error. Names are stripped; an empty
    name, a repeated name, a null, or a value of another type raise DataError at ``where``/``field``.
    """
    names = tuple(label_names) if label_names is not None else None
    if _is_missing(value):
        empty = "[] or an empty string" if separator is not None else "[]"
        raise DataError(
            f"missing labels (null); expected a list of label names ({empty} when none apply)",
            location=where or None,
            field=field,
        )
    if isinstance(value, str):
        if separator is None:
            raise DataError(
                f"expected a list of label names, got the string {value!r}; give the separator (e.g. '|') "
                "when the labels are written as one delimited string",
                location=where or None,
                field=field,
            )
        items: list[Any] = [] if not value.strip() else value.split(separator)
    elif isinstance(value, (list, tuple, np.ndarray)):
        items = (
            list(np.asarray(value, dtype=object).ravel()) if isinstance(value, np.ndarray) else list(value)
        )
    else:
        raise DataError(
            f"expected a list of label names, got {_type_name(value)} {value!r}",
            location=where or None,
            field=field,
        )
    out: list[str] = []
    for k, item in enumerate(items):
        if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            if names is None:
                raise DataError(
                    f"label {k} is the integer {item}; expected a label name (integer labels are positions "
                    "in label_names, which are not given)",
                    location=where or None,
                    field=field,
                )
            if not 0 <= int(item) < len(names):
                raise DataError(
                    f"label {k} is {item}, outside [0, {len(names)}) for the {len(names)} label names",
                    location=where or None,
                    field=field,
                )
            item = names[int(item)]
        if not isinstance(item, str):
            raise DataError(
                f"label {k} is {_type_name(item)} {item!r}; expected a label name (a string)",
                location=where or None,
                field=field,
            )
        name = item.strip()
        if not name:
            raise DataError(
                f"empty label name at position {k}; expected a non-empty string"
                + (f" (is there a doubled or trailing {separator!r}?)" if isinstance(value, str) else ""),
                location=where or None,
                field=field,
            )
        if name in out:
            position = items[k] if isinstance(items[k], (int, np.integer)) else None
            raise DataError(
                f"label {name!r} appears twice; expected each label at most once per example"
                + (
                    f" (the integer {position} is a label position; 0/1 per label needs a list of "
                    f"{len(names or ())} numbers 0/1 in every row)"
                    if position is not None
                    else ""
                ),
                location=where or None,
                field=field,
            )
        if names is not None and name not in names:
            raise DataError(
                f"label {name!r} is not one of the label names {list(names)}",
                location=where or None,
                field=field,
            )
        out.append(name)
    return out


def _items(value: Any) -> list[Any] | None:
    """A labels cell's items when it is a list, tuple or array, else None."""
    if isinstance(value, np.ndarray):
        return list(np.asarray(value, dtype=object).ravel())
    return list(value) if isinstance(value, (list, tuple)) else None


def _is_flag(item: Any) -> bool:
    """0 or 1 as an integer, a boolean or a float (a multi-hot vector of floats, as a loss takes it)."""
    if isinstance(item, (float, np.floating)):
        return item in (0.0, 1.0)
    return isinstance(item, (int, np.integer, bool, np.bool_)) and int(item) in (0, 1)


def flag_vectors(
    values: Sequence[Any], label_names: Sequence[str] | None, where: Callable[[int], str], field: str = LABELS
) -> list[list[str]] | None:
    """The label lists of a labels column of 0/1 vectors (see the module text), or None when the column
    is not one: every row a list of the same width >= 2 of nothing but 0/1 (integers, booleans, floats).
    DataError when it is one but its width is not the number of ``label_names``, when the names are
    not given, or when it reads as label positions too (0/1 pairs for two labels, no number repeated)."""
    cells = [_items(v) for v in values]
    if not cells or any(c is None or not all(_is_flag(x) for x in c) for c in cells):
        return None
    rows = [[int(x) for x in c] for c in cells if c is not None]
    width = len(rows[0])
    if width < 2 or any(len(r) != width for r in rows):
        _check_odd_width(rows, label_names, where, field)
        return None
    # booleans and floats are never label positions: such a column reads one way only
    booleans = any(
        isinstance(x, (bool, np.bool_, float, np.floating)) for c in cells if c is not None for x in c
    )
    repeated = any(len(set(r)) < len(r) for r in rows)
    what = f"every row is a list of {width} numbers 0/1"
    if label_names is None:
        raise DataError(
            f"{what}: 0/1 per label needs the label names in their order (--label-names, label_names)",
            location=where(0),
            field=field,
        )
    names = tuple(label_names)
    if width != len(names):
        raise DataError(
            f"{what}, but there are {len(names)} label names {list(names)}: 0/1 per label needs "
            f"{len(names)} numbers a row (read as label positions, they would name a label twice or give "
            "every row the same labels); write label names or one number per label",
            location=where(0),
            field=field,
        )
    if not repeated and not booleans:
        first = rows[0]
        as_flags = [n for n, f in zip(names, first, strict=True) if f]
        raise DataError(
            f"{what}, none repeated: each reads as 0/1 per label and as label positions ({first} is "
            f"{as_flags} or {[names[k] for k in first]}); write label names instead",
            location=where(0),
            field=field,
        )
    return [[n for n, f in zip(names, r, strict=True) if f] for r in rows]


def _check_odd_width(
    rows: list[list[int]], label_names: Sequence[str] | None, where: Callable[[int], str], field: str
) -> None:
    """For a column of 0/1 lists of several widths: DataError at the first row whose width is not one
    number per label when the column is 0/1 per label (a row of one number per label repeats a number,
    so it cannot be label positions); nothing when it may be label positions."""
    if label_names is None:
        return
    width = len(label_names)
    if not any(len(r) == width and len(set(r)) < len(r) for r in rows):
        return  # every row may be label positions
    odd = next(i for i, r in enumerate(rows) if len(r) != width)
    raise DataError(
        f"a list of {len(rows[odd])} numbers 0/1 where the other rows have one per label: 0/1 per label "
        f"needs {width} numbers in every row ({list(label_names)})",
        location=where(odd),
        field=field,
    )


def parse_flag(value: Any, *, where: str = "", field: str | None = None) -> bool:
    """A 0/1 label cell as a bool: 0/1, False/True, 0.0/1.0, "0"/"1" (also "true"/"false");
    anything else (2, -1, 0.5, null, "yes") raises DataError at ``where``/``field``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if _is_missing(value):
        raise DataError("missing value (null); expected 0 or 1", location=where or None, field=field)
    probe = value.strip() if isinstance(value, str) else value
    if isinstance(probe, (int, np.integer, float, np.floating)) and not isinstance(probe, str):
        if probe == 1:
            return True
        if probe == 0:
            return False
    elif probe in _TRUE:
        return True
    elif probe in _FALSE:
        return False
    raise DataError(
        f"value {value!r}; expected 0 or 1 (the label is absent or present)",
        location=where or None,
        field=field,
    )


# ----------------------------------------------------------------------------- indicator matrix


def to_indicator(label_lists: Sequence[Sequence[str]], label_names: Sequence[str]) -> np.ndarray:
    """indicator[i, j] = label_names[j] is in label_lists[i], bool [N, L]. A name outside
    ``label_names`` or a name twice in one list raises DataError naming the row."""
    names = tuple(label_names)
    position = {name: j for j, name in enumerate(names)}
    out = np.zeros((len(label_lists), len(names)), dtype=bool)
    for i, labels in enumerate(label_lists):
        for name in labels:
            j = position.get(name)
            if j is None:
                raise DataError(
                    f"label {name!r} is not one of the label names {list(names)}",
                    location=f"row {i}",
                    field=LABELS,
                )
            if out[i, j]:
                raise DataError(
                    f"label {name!r} appears twice; expected each label at most once per example",
                    location=f"row {i}",
                    field=LABELS,
                )
            out[i, j] = True
    return out


def from_indicator(indicator: np.ndarray, label_names: Sequence[str]) -> list[list[str]]:
    """The label lists of an indicator matrix [N, L] (bool, or 0/1): row i lists the names of its
    True columns in label-space order. The inverse of :func:`to_indicator` up to that order."""
    matrix = np.asarray(indicator)
    names = tuple(label_names)
    if matrix.ndim != 2 or matrix.shape[1] != len(names):
        raise DataError(
            f"expected a matrix [examples, {len(names)} labels], got shape {matrix.shape}", field="indicator"
        )
    if matrix.dtype != bool:
        if matrix.size and not np.isin(matrix, (0, 1)).all():
            raise DataError("expected 0/1 or bool entries", field="indicator")
        matrix = matrix.astype(bool)
    return [[names[j] for j in np.flatnonzero(row)] for row in matrix]


# ----------------------------------------------------------------------------- frames


def _from_label_columns(frame: pd.DataFrame, label_columns, label_names, source: str, where, require):
    """(label names, indicator, label lists, columns used) of one 0/1 column per label (the label space
    in their order); DataError for label_names given too, repeated or missing columns, a bad flag."""
    if label_names is not None:
        raise DataError(
            "the label columns name the labels; label_names applies to a labels column only",
            location=source,
            field="label_names",
        )
    if isinstance(label_columns, str) or len(set(label_columns)) != len(tuple(label_columns)):
        raise DataError(
            f"expected a list of distinct column names, got {label_columns!r}",
            location=source,
            field="label_columns",
        )
    names = tuple(str(c) for c in label_columns)
    _label_space(names, source)  # non-empty strings
    columns = list(label_columns)
    for column in columns:
        require(column, "label")
    indicator = np.zeros((len(frame), len(names)), dtype=bool)
    for j, column in enumerate(columns):
        for i, value in enumerate(frame[column].tolist()):
            indicator[i, j] = parse_flag(value, where=where(i), field=str(column))
    label_lists = from_indicator(indicator, names)
    used = set(columns)
    return names, indicator, label_lists, used


def _from_labels_column(
    frame: pd.DataFrame, labels_column, separator, label_names, source: str, where, require
):
    """(label names, indicator, label lists, columns used) of a labels column: per row a list of names,
    a delimited string (``separator``) or a 0/1 vector; the label space ``label_names`` or the sorted
    names seen (DataError when none is)."""
    column = labels_column or LABELS
    require(column, "labels")
    given = _label_space(label_names, source)
    values = frame[column].tolist()
    vectors = flag_vectors(values, given, where, column)
    lists = (
        vectors
        if vectors is not None
        else [
            parse_label_list(value, separator=separator, label_names=given, where=where(i), field=column)
            for i, value in enumerate(values)
        ]
    )
    names = given if given is not None else tuple(sorted({name for labels in lists for name in labels}))
    if not names:
        raise DataError(
            "no example has a label, so there is no label space; give label_names to train on data "
            "where none apply",
            location=source,
            field=column,
        )
    indicator = to_indicator(lists, names)
    label_lists = from_indicator(indicator, names)
    used = {column}
    return names, indicator, label_lists, used


def from_frame(
    frame: pd.DataFrame,
    *,
    labels_column: str | None = None,
    label_columns: Sequence[str] | None = None,
    separator: str | None = None,
    label_names: Sequence[str] | None = None,
    id_column: str | None = None,
    text_columns: Sequence[str] | None = None,
    source: str = "<frame>",
    lines: Sequence[int] | None = None,
) -> MultiLabelData:
    """Multi-label examples from a loaded DataFrame (see the module text for the accepted shapes).

    Give either ``labels_column`` (default ``labels``; ``separator`` splits delimited strings,
    ``label_names`` fixes the label space) or ``label_columns`` (one 0/1 column per label, the label
    space in their order). ``id_column`` names unique ids; otherwise ids are ``ex-<row>``.
    ``text_columns``, when given, must exist and hold a non-empty string in every row (they are
    checked, not changed). ``lines`` gives each row's physical line in its file, for messages;
    otherwise rows are named by position.
    """
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {_type_name(frame)}", location=source)
    if lines is not None and len(lines) != len(frame):
        raise ValueError("lines must give one line number per row")
    if labels_column is not None and label_columns is not None:
        raise DataError(
            "give either a labels column (a list of names per row) or label columns (one 0/1 column per "
            "label), not both",
            location=source,
            field="label_columns",
        )
    frame = frame.reset_index(drop=True)
    present = [str(c) for c in frame.columns]

    def where(i: int) -> str:
        return f"{source}: line {lines[i]}" if lines is not None else f"{source}: row {i}"

    def require(column: str, what: str) -> None:
        if column not in frame.columns:
            raise DataError(
                f"missing {what} column; the data has columns {present}", location=source, field=column
            )

    if len(frame) == 0:
        raise DataError("no rows; expected at least one example", location=source)
    if label_columns is not None:
        names, indicator, label_lists, used = _from_label_columns(
            frame, label_columns, label_names, source, where, require
        )
    else:
        names, indicator, label_lists, used = _from_labels_column(
            frame, labels_column, separator, label_names, source, where, require
        )

    for column in text_columns if text_columns is not None else ():
        require(column, "text")
        for i, value in enumerate(frame[column].tolist()):
            _check_text(value, where(i), str(column))
    ids = _ids(frame, id_column, where, source)
    if id_column is not None:
        used.add(id_column)
    out: dict[str, Any] = {"id": pd.Series(ids, dtype=str)}
    for column in frame.columns:
        if column in used:
            continue
        name = str(column)
        while name in out or name == LABELS:  # an unused "id" or "labels" column is kept, renamed
            name = f"orig_{name}"
        out[name] = frame[column]
    out[LABELS] = pd.Series(label_lists, dtype=object)
    result = pd.DataFrame(out)
    result.index = pd.RangeIndex(len(result))
    indicator.setflags(write=False)
    return MultiLabelData(
        frame=result,
        label_names=tuple(names),
        indicator=indicator,
        source=source,
        lines=tuple(int(x) for x in lines) if lines is not None else None,
        warnings=tuple(label_warnings(indicator, names, source=source)),
    )


def _check_text(value: Any, where: str, field: str) -> None:
    if isinstance(value, str):
        if not value.strip():
            raise DataError(
                "empty text" + (" (only whitespace)" if value else "") + "; expected a non-empty string",
                location=where,
                field=field,
            )
    elif _is_missing(value):
        raise DataError("missing text (null); expected a non-empty string", location=where, field=field)
    else:
        raise DataError(
            f"expected a text string, got {_type_name(value)} {value!r}", location=where, field=field
        )


def _ids(frame: pd.DataFrame, id_column: str | None, where: Callable[[int], str], source: str) -> list[str]:
    if id_column is None:
        return [f"{ID_PREFIX}{i}" for i in range(len(frame))]
    if id_column not in frame.columns:
        raise DataError(
            f"missing id column; the data has columns {[str(c) for c in frame.columns]}",
            location=source,
            field=id_column,
        )
    ids: list[str] = []
    first: dict[str, int] = {}
    for i, value in enumerate(frame[id_column].tolist()):
        if _is_missing(value) or isinstance(value, (bool, np.bool_, list, dict)) or str(value).strip() == "":
            raise DataError(
                f"missing id; expected a non-empty string or number, got {value!r}",
                location=where(i),
                field=id_column,
            )
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        text = str(value)
        j = first.setdefault(text, i)
        if j != i:
            raise DataError(
                f"id {text!r} repeats the id of {where(j)}; expected unique ids",
                location=where(i),
                field=id_column,
            )
        ids.append(text)
    return ids


def label_warnings(indicator: np.ndarray, label_names: Sequence[str], *, source: str = "") -> list[str]:
    """Messages about labels a sigmoid output learns nothing example-specific from: a label no example
    has (possible when the label space is given) and a label every example has."""
    matrix = np.asarray(indicator, dtype=bool)
    counts = matrix.sum(axis=0)
    prefix = f"{source}: " if source else ""
    out = []
    never = [name for name, c in zip(label_names, counts, strict=True) if c == 0]
    always = [name for name, c in zip(label_names, counts, strict=True) if c == len(matrix)]
    if never:
        out.append(
            f"{prefix}no example has the label{'s' if len(never) > 1 else ''} {never}: its map is all 'absent'"
        )
    if always and len(matrix) > 1:
        out.append(
            f"{prefix}every example has the label{'s' if len(always) > 1 else ''} {always}: its map is all 'present'"
        )
    return out


# ----------------------------------------------------------------------------- files


def parse_multilabel_jsonl(
    text: str,
    source: str = "<text>",
    *,
    labels_field: str | None = None,
    label_fields: Sequence[str] | None = None,
    separator: str | None = None,
    label_names: Sequence[str] | None = None,
    id_field: str | None = None,
    text_fields: Sequence[str] | None = None,
) -> MultiLabelData:
    """Multi-label examples from JSON lines, one object per line (blank lines skipped): the fields
    become columns and :func:`from_frame` reads them, each row named by its physical line. A line
    without the labels field (or one of ``label_fields``, ``id_field`` or ``text_fields``) is refused
    here, so that a missing field is not read as null."""
    records: list[dict] = []
    lines: list[int] = []
    needed = [*(label_fields if label_fields is not None else [labels_field or LABELS])]
    if id_field is not None:
        needed.append(id_field)
    needed.extend(text_fields or ())
    for lineno, where, record in json_objects(text, source):
        for field in needed:
            if field not in record:
                raise DataError(f"missing; the line has fields {sorted(record)}", location=where, field=field)
        records.append(record)
        lines.append(lineno)
    if not records:
        raise DataError("no examples; expected one JSON object per line", location=source)
    frame = pd.DataFrame.from_records(records)
    return from_frame(
        frame,
        labels_column=labels_field if label_fields is None else None,
        label_columns=label_fields,
        separator=separator,
        label_names=label_names,
        id_column=id_field,
        text_columns=text_fields,
        source=source,
        lines=lines,
    )


def records(data: MultiLabelData) -> list[dict[str, Any]]:
    """The examples as JSON-ready dicts (every column of the frame, ``labels`` as a list of names),
    e.g. to write multi-label JSONL that :func:`cartomap.data.loading.read_multilabel` reads back with ``id_column="id"``."""
    out = []
    for row in data.frame.to_dict(orient="records"):
        row[LABELS] = list(row[LABELS])
        out.append(row)
    return out
