"""Atomic file writes: write to a temporary file in the same folder, then rename.

A reader never sees a half-written file, and a crash leaves the old file intact.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would have given; mkstemp makes files 0600


def _atomic(path: Path, write: Callable[[Path], None]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return _atomic(Path(path), lambda p: p.write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_parquet(path: str | Path, frame) -> Path:
    """Write a pandas DataFrame as Parquet (pyarrow), atomically."""
    return _atomic(Path(path), lambda p: frame.to_parquet(p, index=False))


def atomic_save(path: str | Path, save: Callable[[Path], None]) -> Path:
    """Call ``save(tmp_path)`` and move the result to ``path`` (for torch/safetensors/figures)."""
    return _atomic(Path(path), save)


def file_stamp(path: str | Path) -> tuple[int, int] | tuple[()]:
    """(modification time in ns, size) of a file, () when it cannot be read: a cache key part that
    changes when the file does."""
    try:
        stat = Path(path).expanduser().stat()
    except OSError:
        return ()
    return (stat.st_mtime_ns, stat.st_size)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def is_locked(lock_path: str | Path) -> bool:
    """Whether some process holds an exclusive flock on ``lock_path`` (released when it dies)."""
    lock_path = Path(lock_path)
    if not lock_path.exists():
        return False
    with open(lock_path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def refuse_overwrite(paths, force: bool = False, flag: str = "--force") -> None:
    """Raise CartomapError naming every path of ``paths`` that exists, unless ``force``: a command that
    writes a user's path never replaces a file without being told to."""
    if force:
        return
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing:
        shown = ", ".join(existing[:5]) + (f" and {len(existing) - 5} more" if len(existing) > 5 else "")
        raise CartomapError(f"{shown} exist{'s' if len(existing) == 1 else ''}; pass {flag} to replace")
