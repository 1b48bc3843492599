"""Map a raw frame of one label per example onto a task kind's fields and validate every row.

:func:`build_dataset` is where every table reader of :mod:`cartomap.data.loading` ends: the configured
columns become cartomap's (``id``, the kind's text fields, ``label`` as int codes into the label names,
``genre``/``group``, the vote and error columns), ids are read or generated from the content, every row
is checked, and the first bad one raises a :class:`~cartomap.errors.DataError` naming the file, its line
(or row), the field and what was expected. :func:`storable_columns` turns extra columns Parquet cannot
store as one type into text, with a warning each.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import DataConfig
from cartomap.data.annotations import annotation_columns
from cartomap.data.dataset import TextDataset
from cartomap.errors import DataError
from cartomap.tasks import registry as task_kinds

#: The NLI classes in their usual order: the order of a file's labels when they are these three names.
NLI_LABEL_NAMES: tuple[str, ...] = ("entailment", "neutral", "contradiction")
_INT_RE = re.compile(r"^[+-]?\d+$")


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


def _check_columns(frame: pd.DataFrame, text_cols: tuple[str, ...], label_column: str, source: str) -> None:
    """DataError unless ``frame`` has every text column and the label column, and at least one row."""
    present = [str(c) for c in frame.columns]
    needed = [*text_cols, label_column]
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


def _read_texts(frame: pd.DataFrame, text_cols: tuple[str, ...], out_text, where) -> dict[str, list[str]]:
    """The kind's text fields (``out_text``) from ``text_cols`` in order, as strings; DataError at the
    first empty, only-whitespace, null or non-string text (``where(i)`` names its row)."""
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
    return texts


def _check_classes(names, codes, names_given: bool, source: str, label_column: str) -> None:
    """DataError for fewer than two classes, or (names not given) every row of one label."""
    if len(names) < 2:
        raise DataError(
            f"fewer than two classes ({list(names)}); a classifier needs at least two",
            location=source,
            field=label_column,
        )
    if not names_given:
        used = len(set(codes))
        if used < 2:
            raise DataError(
                f"every row has the same label {names[codes[0]]!r}; expected at least two classes",
                location=source,
                field=label_column,
            )


def _read_ids(frame: pd.DataFrame, id_col: str, lines: Sequence[int] | None, where) -> list[str]:
    """The ids of column ``id_col`` as strings (integral numbers without ".0"); DataError at a missing
    or blank id, or at the second row of a duplicate (naming the first)."""
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
    return ids


def _extra_columns(frame: pd.DataFrame, columns: dict[str, Any], used_src: set) -> list[str]:
    """Add the columns of ``frame`` not in ``used_src`` to ``columns`` as they are (renamed "orig_<name>"
    while taken, or named as a kind's text field); their names."""
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
    return extras


def build_dataset(
    frame: pd.DataFrame,
    config: DataConfig,
    source: str,
    label_names: Sequence[str] | None,
    lines: Sequence[int] | None,
    names_given: bool,
) -> TextDataset:
    """The :class:`TextDataset` of ``frame`` mapped by ``config``: its text, label, id, genre/group and
    annotation columns become cartomap's, the rest kept as extras; the first bad row raises a DataError
    naming ``source`` and its line (``lines[i]``) or row."""

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
    _check_columns(frame, text_cols, config.label_column, source)
    frame = frame.reset_index(drop=True)
    n = len(frame)
    out_text = task.text_fields
    texts = _read_texts(frame, text_cols, out_text, where)

    # labels
    names, codes = _encode_labels(
        frame[config.label_column].tolist(), label_names, config.label_column, where
    )
    _check_classes(names, codes, names_given, source, config.label_column)
    label_list = [names[c] for c in codes]

    # ids
    id_col = config.id_column
    if id_col and id_col in frame.columns:
        ids = _read_ids(frame, id_col, lines, where)
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
    extras = _extra_columns(frame, columns, used_src)
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
