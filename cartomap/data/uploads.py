"""Uploaded datasets: saved once under ``<cache>/uploads/<sha256>.<ext>``, then read like any file.

The name is the sha256 of the bytes plus a suffix from a fixed list, so the same upload is
stored once, a run made from it finds its data again on resume, and nothing in the uploaded
file name reaches the file system.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cartomap.errors import DataError
from cartomap.io import atomic_write_bytes

# Longest first, so ".jsonl.gz" wins over ".gz".
UPLOAD_SUFFIXES = (
    ".jsonl.gz",
    ".ndjson.gz",
    ".json.gz",
    ".csv.gz",
    ".tsv.gz",
    ".parquet",
    ".ndjson",
    ".jsonl",
    ".json",
    ".csv",
    ".tsv",
    ".pq",
)
# What st.file_uploader's ``type`` accepts (it checks the last suffix only).
UPLOAD_TYPES = ("jsonl", "ndjson", "json", "csv", "tsv", "parquet", "pq", "gz")
MAX_UPLOAD_MB = 200


def upload_suffix(filename: str) -> str:
    """The supported suffix of ``filename`` (``".csv"``, ``".jsonl.gz"``, ...), or a DataError naming it."""
    lower = filename.lower()
    for suffix in UPLOAD_SUFFIXES:
        if lower.endswith(suffix):
            return suffix
    raise DataError(
        f"unsupported file type; expected one of {', '.join(UPLOAD_SUFFIXES)}",
        location=f"upload {filename!r}",
    )


def save_upload(data: bytes, filename: str, cache_root: str | Path, max_mb: int = MAX_UPLOAD_MB) -> Path:
    """Save uploaded bytes as ``<cache_root>/uploads/<sha256>.<ext>`` (once) and return the path.

    Raises DataError, naming the uploaded file, for an unsupported type, an empty file or
    one larger than ``max_mb`` megabytes.
    """
    suffix = upload_suffix(filename)
    where = f"upload {filename!r}"
    if not data:
        raise DataError("the file is empty; expected a header and/or at least one row", location=where)
    if len(data) > max_mb * 1024 * 1024:
        raise DataError(f"the file is {len(data) / 2**20:.0f} MB; the limit is {max_mb} MB", location=where)
    path = Path(cache_root) / "uploads" / f"{hashlib.sha256(data).hexdigest()}{suffix}"
    if not (path.exists() and path.stat().st_size == len(data)):
        atomic_write_bytes(path, data)
    return path
