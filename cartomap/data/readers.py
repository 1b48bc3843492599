"""Reading a dataset's file into a raw DataFrame: JSON Lines, JSON, CSV, TSV (each optionally gzip-compressed),
Parquet, a folder saved with ``datasets``' ``save_to_disk``, or a Hugging Face Hub dataset.

The format comes from the file name unless given. A malformed file raises one :class:`DataError` naming
the file and the line (text formats, 1-based physical line; CSV/TSV count the header as line 1); the
readers also return each row's line, so the mapping that follows (:mod:`cartomap.data.loading`) names it
too. CSV/TSV columns are all strings.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.errors import DataError
from cartomap.io import decode_utf8, read_data_bytes

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet", "hf")


_SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


#: JSON nested deeper than this is refused (Python's parser would otherwise end in a RecursionError).
MAX_JSON_DEPTH = 100


def read_table(
    path: str | Path, format: str = "auto", split: str | None = None
) -> tuple[pd.DataFrame, list[int] | None]:
    """Read a file or saved Hugging Face dataset as a raw DataFrame.

    Returns the frame and, for line-based formats (JSONL, CSV, TSV), the 1-based
    physical line of each row (``None`` for Parquet / Hugging Face: rows are then
    named by 0-based position). CSV/TSV columns are all strings.
    """
    frame, lines, _ = read_source(Path(path), format, split, str(path))
    return frame, lines


def _resolve_format(path: Path, fmt: str, source: str) -> str:
    if fmt != "auto":
        fmt = fmt.lower()
        if fmt in ("ndjson", "jsonlines"):
            fmt = "jsonl"
        if fmt not in FORMATS:
            raise DataError(
                f"unknown format {fmt!r}; expected auto or one of {', '.join(FORMATS)}", location=source
            )
        return fmt
    if path.is_dir():
        return "hf"
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    if suffix in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffix]
    raise DataError(
        f"cannot tell the format from the file name (suffix {suffix or '(none)'!r}); "
        "expected .jsonl, .json, .ndjson, .csv, .tsv (optionally .gz), .parquet, or a folder "
        "saved with datasets' save_to_disk; or set the format explicitly",
        location=source,
    )


def read_source(path: Path, fmt: str, split: str | None, source: str):
    """The file or saved dataset at ``path`` (``fmt``: auto or one of :data:`FORMATS`; ``split`` of a saved
    dataset with several) -> (frame, lines or None, {column: class names} or None); ``source`` names it in
    errors."""
    if not path.exists():
        raise DataError(f"file not found: {path}", location=source)
    fmt = _resolve_format(path, fmt, source)
    if fmt == "hf":
        return _read_hf_disk(path, split, source)
    if path.is_dir():
        raise DataError(f"expected a file for format {fmt!r}, found a folder", location=source)
    if fmt == "parquet":
        return _read_parquet(path, source), None, None
    data = _read_bytes(path, source)
    if fmt in ("jsonl", "json") and not re.match(rb"\s*\[", data):
        fast = _parse_jsonl_arrow(data)
        if fast is not None:
            return (*fast, None)
    if fmt in ("jsonl", "json"):
        frame, lines = _parse_json(data, source, allow_array=fmt == "json")
    else:
        frame, lines = _parse_delimited(data, source, "," if fmt == "csv" else "\t")
    return frame, lines, None


def _read_bytes(path: Path, source: str) -> bytes:
    data = read_data_bytes(path, source)
    if not data.strip():
        raise DataError("the file is empty; expected a header and/or at least one row", location=source)
    return data


def _parse_json(data: bytes, source: str, allow_array: bool):
    text = decode_utf8(data, source)
    if allow_array and text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(
                f"malformed JSON ({e.msg} at line {e.lineno} column {e.colno})", location=source
            ) from None
        except RecursionError:
            raise DataError(_too_deep(text), location=source) from None
        for i, rec in enumerate(records):
            if not isinstance(rec, dict):
                raise DataError(
                    f"expected a JSON object per row, got {_json_type(rec)}", location=f"{source}: row {i}"
                )
            _check_depth(rec, f"{source}: row {i}")
        return _records_frame(records), None
    records, lines = [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"malformed JSON ({e.msg} at column {e.colno}); expected one JSON object per line",
                location=f"{source}: line {lineno}",
            ) from None
        except RecursionError:
            raise DataError(_too_deep(line), location=f"{source}: line {lineno}") from None
        if not isinstance(rec, dict):
            raise DataError(
                f"expected a JSON object per line, got {_json_type(rec)}", location=f"{source}: line {lineno}"
            )
        _check_depth(rec, f"{source}: line {lineno}")
        records.append(rec)
        lines.append(lineno)
    return _records_frame(records), lines


def _too_deep(text: str) -> str:
    depth = deepest = 0
    for char in text[:1_000_000]:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return (
        f"JSON nested {deepest:,} levels deep; expected a flat object of texts and a label "
        f"(at most {MAX_JSON_DEPTH} levels)"
    )


def _check_depth(value: Any, where: str) -> None:
    """DataError when a parsed value nests deeper than MAX_JSON_DEPTH (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise DataError(
                f"JSON nested more than {MAX_JSON_DEPTH} levels deep; expected a flat object of texts and a label",
                location=where,
            )
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


_BLANK_LINE = re.compile(rb"(?:^|\n)[ \t\r\f\v]*(?:\n|$)")


_LONG_INTEGER = re.compile(rb"[:\[,]\s*-?\d{19,}")  # beyond int64: json.loads keeps it exact, Arrow not


def _parse_jsonl_arrow(data: bytes) -> tuple[pd.DataFrame, list[int]] | None:
    """JSON Lines read by pyarrow's multi-threaded reader (several times faster than a json.loads per
    line), or None wherever its result could differ from :func:`_parse_json`'s: blank lines (line
    numbers), malformed or mixed-type input (that parser then names the line), nested values, text
    Arrow would read as timestamps, integers beyond int64."""
    import pyarrow as pa
    import pyarrow.json as pj

    body = data[:-1] if data.endswith(b"\n") else data
    if _BLANK_LINE.search(body):
        return None
    try:
        table = pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(block_size=1 << 24))
        table.validate(full=True)  # the reader does not check UTF-8 itself
    except (pa.ArrowException, ValueError):  # malformed, not UTF-8, a type changing between rows
        return None
    n_lines = body.count(b"\n") + 1
    scalar = (
        pa.types.is_null,
        pa.types.is_boolean,
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_string,
    )
    if table.num_rows != n_lines or not all(any(f(t) for f in scalar) for t in table.schema.types):
        return None
    if any(pa.types.is_floating(t) for t in table.schema.types) and _LONG_INTEGER.search(data):
        return None
    return table.to_pandas(), list(range(1, n_lines + 1))


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _records_frame(records: list[dict]) -> pd.DataFrame:
    columns: dict[str, None] = {}
    for rec in records:
        for key in rec:
            columns.setdefault(key, None)
    return pd.DataFrame.from_records(records, columns=list(columns))


def _parse_delimited(data: bytes, source: str, delimiter: str):
    text = decode_utf8(data, source)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    start = 1
    try:
        for record in reader:
            line = start
            start = reader.line_num + 1
            if not record or (len(record) == 1 and not record[0].strip()):
                continue  # blank line
            if header is None:
                header = record
                seen: set[str] = set()
                for name in header:
                    if name in seen:
                        raise DataError(
                            f"column {name!r} appears twice in the header", location=f"{source}: line {line}"
                        )
                    seen.add(name)
                continue
            if len(record) != len(header):
                raise DataError(
                    f"expected {len(header)} fields as in the header, found {len(record)}",
                    location=f"{source}: line {line}",
                )
            rows.append(record)
            lines.append(line)
    except csv.Error as e:
        raise DataError(
            f"malformed {'CSV' if delimiter == ',' else 'TSV'} ({e})", location=f"{source}: line {start}"
        ) from None
    assert header is not None  # _read_bytes rejected an empty file
    frame = pd.DataFrame(rows, columns=header, dtype=str) if rows else pd.DataFrame(columns=header, dtype=str)
    return frame, lines


def _read_parquet(path: Path, source: str) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as e:  # pyarrow raises many kinds
        raise DataError(f"cannot read as Parquet ({type(e).__name__}: {e})", location=source) from None


def _class_names(features: Any) -> dict[str, tuple[str, ...]]:
    out = {}
    for name, feat in (features or {}).items():
        names = getattr(feat, "names", None)
        if type(feat).__name__ == "ClassLabel" and names:
            out[name] = tuple(names)
    return out


def _pick_split(obj: Any, split: str | None, source: str):
    splits = list(obj.keys())
    if split is None:
        if len(splits) == 1:
            return obj[splits[0]]
        raise DataError(
            f"the dataset has splits {splits}; set DataConfig.split to one of them", location=source
        )
    if split not in obj:
        raise DataError(f"split {split!r} not found; available splits: {splits}", location=source)
    return obj[split]


def _read_hf_disk(path: Path, split: str | None, source: str):
    if not path.is_dir() or not any(
        (path / name).exists() for name in ("dataset_dict.json", "dataset_info.json", "state.json")
    ):
        raise DataError(
            "expected a folder written by datasets' save_to_disk (with dataset_dict.json or state.json)",
            location=source,
        )
    try:
        import datasets

        obj = datasets.load_from_disk(str(path))
    except Exception as e:
        raise DataError(
            f"cannot load the saved Hugging Face dataset ({type(e).__name__}: {e})", location=source
        ) from None
    if isinstance(obj, datasets.DatasetDict):
        obj = _pick_split(obj, split, source)
    return obj.to_pandas(), None, _class_names(obj.features)


def read_hub(name: str, split: str | None, source: str):
    """The Hugging Face Hub dataset ``name`` (its ``split``) -> (frame, None, {column: class names})."""
    try:
        import datasets

        obj = datasets.load_dataset(name, split=split)
        if isinstance(obj, datasets.DatasetDict):
            obj = _pick_split(obj, split, source)
        return obj.to_pandas(), None, _class_names(obj.features)
    except DataError:
        raise
    except Exception as e:
        raise DataError(
            f"cannot load Hugging Face dataset {name!r} (split {split!r}): {type(e).__name__}: {e}",
            location=source,
        ) from None
