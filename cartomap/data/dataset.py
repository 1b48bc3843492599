"""A validated dataset (:class:`TextDataset`): the rows loading made, their label names, where they came
from and the reader's warnings, with its content fingerprint (what makes two runs' data the same).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TaskKind


@dataclass(frozen=True, eq=False)
class TextDataset:
    """A validated dataset. Treat ``frame`` as read-only: the fingerprint is cached.

    ``warnings``: what the reader found suspicious in the file but is no error (tags that break the
    BIO scheme, blank tokens skipped, a column kept as text); a run keeps them
    (:func:`cartomap.data.checks.label_warnings`). A subset drops them (they count the whole file)."""

    frame: pd.DataFrame
    label_names: tuple[str, ...]
    source: str
    warnings: tuple[str, ...] = ()

    @property
    def task_kind(self) -> TaskKind:
        """The task kind of the rows, from the frame's columns (loading writes its text fields): a loaded
        table has no run to ask, so its columns are read (``registry.of_columns``), once."""
        cached = self.__dict__.get("_task_kind")
        if cached is None:
            cached = task_kinds.of_columns(self.frame.columns)
            object.__setattr__(self, "_task_kind", cached)
        return cached

    @property
    def is_pair(self) -> bool:
        return self.task_kind.is_pair

    @property
    def text_columns(self) -> tuple[str, ...]:
        return self.task_kind.text_fields

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def ids(self) -> list[str]:
        return self.frame["id"].tolist()

    @property
    def labels(self) -> np.ndarray:
        """The gold label of every unit (:meth:`cartomap.tasks.base.TaskKind.units`): of every example, of
        every word of every sentence in order (token classification), or 1/0 for every label of every
        example (multi-label: present or absent)."""
        return self.task_kind.gold(self.frame, self.label_names)

    def __len__(self) -> int:
        return len(self.frame)

    def fingerprint(self) -> str:
        """sha256 of the content that matters: class list, and per row id, texts, label name.

        Order-sensitive, independent of the file format and of extra columns.
        """
        cached = self.__dict__.get("_fingerprint")
        if cached is not None:
            return cached
        h = hashlib.sha256()
        header = {"label_names": list(self.label_names), "text_columns": list(self.text_columns)}
        h.update(json.dumps(header, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        h.update(b"\n")
        columns = ("id", *self.text_columns)
        kind = self.task_kind
        fed = (
            _hash_rows_arrow(h.copy(), self.frame, columns, self.label_names, kind.label_field)
            if kind.unit.per_example
            else None
        )
        if fed is not None:
            h = fed
        elif not kind.unit.per_example:  # lists per row: words (or a text) and the names of its gold
            names = self.label_names
            for row in zip(
                *(self.frame[c].tolist() for c in columns), self.frame[kind.label_field], strict=True
            ):
                out = [list(v) if not isinstance(v, str) else v for v in row[:-1]]
                h.update(
                    json.dumps([*out, kind.gold_names(row[-1], names)], ensure_ascii=False).encode("utf-8")
                )
                h.update(b"\n")
        else:
            cols = [self.frame[c].tolist() for c in columns]
            names = self.label_names
            label_col = [names[i] for i in self.frame[kind.label_field].tolist()]
            for row in zip(*cols, label_col, strict=True):
                h.update(json.dumps(list(row), ensure_ascii=False).encode("utf-8"))
                h.update(b"\n")
        value = h.hexdigest()
        object.__setattr__(self, "_fingerprint", value)
        return value

    def subset(self, mask_or_indices: Any) -> TextDataset:
        """Rows picked by a boolean mask (len == len(self)) or by integer positions."""
        sel = np.asarray(mask_or_indices)
        if sel.dtype == bool:
            if sel.shape != (len(self),):
                raise ValueError(f"boolean mask has length {sel.size}, dataset has {len(self)} rows")
            sel = np.flatnonzero(sel)
        elif sel.size == 0:
            sel = np.zeros(0, dtype=np.int64)
        elif not np.issubdtype(sel.dtype, np.integer):
            raise TypeError(f"subset expects a boolean mask or integer positions, got dtype {sel.dtype}")
        frame = self.frame.iloc[sel].reset_index(drop=True)
        return TextDataset(frame=frame, label_names=self.label_names, source=self.source)

    def __repr__(self) -> str:
        return f"TextDataset({self.source!r}, {len(self)} {self.task_kind.plural()}, labels={list(self.label_names)})"


#: Characters ``json.dumps(..., ensure_ascii=False)`` escapes in a string: quote, backslash, controls.
_JSON_ESCAPED = r'["\\\x00-\x1f]'


_HASH_BLOCK = 1 << 16  # rows per block of :func:`_hash_rows_arrow` (bounds its memory)


def _json_strings(values) -> Any:
    """``json.dumps(v, ensure_ascii=False)`` of every string of an Arrow array, as a large_string
    array; None when the array is not all strings (the caller then hashes row by row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) or values.null_count:
        return None
    values = values.cast(pa.large_string())
    quote, empty = pa.scalar('"', pa.large_string()), pa.scalar("", pa.large_string())
    plain = pc.binary_join_element_wise(quote, values, quote, empty)
    escape = pc.match_substring_regex(values, _JSON_ESCAPED)
    rows = np.flatnonzero(escape.to_numpy(zero_copy_only=False))
    if rows.size == 0:
        return plain
    escaped: list[str | None] = [None] * len(values)
    for row, text in zip(rows.tolist(), values.take(pa.array(rows)).to_pylist(), strict=True):
        escaped[row] = json.dumps(text, ensure_ascii=False)
    return pc.if_else(escape, pa.array(escaped, type=pa.large_string()), plain)


def _one_chunk(values):
    """An Arrow array as one contiguous array (a pandas column backed by Arrow, e.g. after a concat,
    converts to a ChunkedArray; the offsets read below need one buffer)."""
    import pyarrow as pa

    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _hash_rows_arrow(
    h, frame: pd.DataFrame, columns: Sequence[str], label_names: Sequence[str], label_field: str = "label"
):
    """``h`` fed the bytes of :meth:`TextDataset.fingerprint`'s rows, built in Arrow a block at a time
    (about 5x faster than a json.dumps per row; the same bytes). None when a column is not all
    strings (``h`` is then partly fed: pass a copy); the row-by-row path decides those."""
    import pyarrow as pa
    import pyarrow.compute as pc

    large = pa.large_string()
    sep, first, last, empty = (pa.scalar(s, large) for s in (", ", "[", "]\n", ""))
    names = pa.array([json.dumps(str(n), ensure_ascii=False) for n in label_names], type=large)
    try:
        codes = frame[label_field].to_numpy(dtype=np.int64)
        for start in range(0, len(frame), _HASH_BLOCK):
            part = frame.iloc[start : start + _HASH_BLOCK]
            cols = [_json_strings(_one_chunk(pa.array(part[c]))) for c in columns]
            if any(c is None for c in cols):
                return None
            cols.append(names.take(pa.array(codes[start : start + _HASH_BLOCK])))
            pieces: list[Any] = [first]
            for k, col in enumerate(cols):
                pieces += [col, sep if k < len(cols) - 1 else last]
            rows = pc.binary_join_element_wise(*pieces, empty)
            # every row ends with "\n": the data buffer holds the rows one after another
            offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64)[
                rows.offset : rows.offset + len(rows) + 1
            ]
            h.update(memoryview(rows.buffers()[2])[offsets[0] : offsets[-1]])
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, IndexError):
        return None
    return h
