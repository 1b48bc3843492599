"""Atomic file writes: write to a temporary file in the same folder, then rename.

A reader never sees a half-written file, and a crash leaves the old file intact. A folder is written the
same way (:func:`atomic_folder`: checkpoints, resume points, models). A write that fails removes its
temporary file or folder, and a library's failed write (safetensors, torch, pyarrow) is raised as the
OSError it stands for, naming the file (:func:`as_os_error`): a full disk is one line for the user.
Also the one gzip reader every data reader shares (:func:`gunzip`: every member, output capped before
it is produced).
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError, DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as a package
    import tomli as tomllib


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would have given; mkstemp makes files 0600


#: Rust's ``std::io::Error`` as safetensors words it: "... No space left on device (os error 28)".
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def as_os_error(err: BaseException, path: str | Path, tmp: str | Path | None = None) -> OSError | None:
    """The OSError a failed write of ``path`` stands for, naming ``path``: an OSError without a file name
    (pyarrow's, Python's own write) or naming the temporary ``tmp`` (a file or folder removed by now)
    gets ``path`` and its errno's plain words; safetensors' error ("... (os error 28)") becomes the
    OSError of that errno. ``err`` itself for an OSError that names another file or has no errno; None
    for anything else (a bug is never dressed up as a disk error)."""
    if isinstance(err, OSError):
        if err.errno is None or err.filename is not None and not _inside(err.filename, tmp):
            return err
        return OSError(err.errno, os.strerror(err.errno), os.fspath(path))
    match = _RUST_OS_ERROR.search(str(err))
    if match is not None and type(err).__name__ == "SafetensorError":
        code = int(match.group(1))
        return OSError(code, os.strerror(code), os.fspath(path))
    return None


def _inside(filename, tmp) -> bool:
    """Whether ``filename`` is the temporary ``tmp`` or a file in it."""
    if tmp is None:
        return False
    name, tmp = Path(os.fsdecode(filename)), Path(tmp)
    return name == tmp or tmp in name.parents


def _raise_as_os_error(err: BaseException, path, tmp=None) -> None:
    """Raise :func:`as_os_error`'s OSError for ``err`` when it is another exception (else return)."""
    mapped = as_os_error(err, path, tmp) if isinstance(err, Exception) else None
    if mapped is not None and mapped is not err:
        raise mapped from err


#: The temporary names of atomic writes, written once: a file ``.<name>.<8 random characters>.tmp``
#: (:func:`tempfile.mkstemp`'s) beside ``<name>``, a folder ``.tmp-<name>`` beside the folder
#: (:func:`atomic_folder`; the run store's new folders add their host and process). :func:`is_temporary`
#: tells them; ``cartomap repair`` removes the ones a killed process left.
TEMP_FILE_SUFFIX, TEMP_FOLDER_PREFIX = ".tmp", ".tmp-"
_TEMP_FILE = re.compile(r"\..+\.[a-z0-9_]{8}" + re.escape(TEMP_FILE_SUFFIX))


def temp_file_prefix(name: str) -> str:
    """The start of the temporary name of an atomic write of the file ``name``."""
    return f".{name}."


def temp_folder(folder: str | Path, *unique: Any) -> Path:
    """The temporary folder an atomic write of ``folder`` fills first (``.tmp-<name>``, ``-``-joined
    with ``unique`` parts such as the host and process when several processes may write it)."""
    folder = Path(folder)
    return folder.parent / "-".join([f"{TEMP_FOLDER_PREFIX}{folder.name}", *map(str, unique)])


def is_temporary(path: str | Path) -> bool:
    """Whether ``path`` is named as an atomic write's temporary file or folder (:data:`TEMP_FILE_SUFFIX`,
    :data:`TEMP_FOLDER_PREFIX`)."""
    name = Path(path).name
    return name.startswith(TEMP_FOLDER_PREFIX) or _TEMP_FILE.fullmatch(name) is not None


def _atomic(path: Path, write: Callable[[Path], None]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_file_prefix(path.name), suffix=TEMP_FILE_SUFFIX)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        _raise_as_os_error(err, path, tmp)
        raise
    return path


def atomic_folder(folder: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary folder beside ``folder`` (``.tmp-<name>``), then put it in
    ``folder``'s place. A failure removes the temporary folder (nothing half-written is left, the old
    ``folder`` is untouched) and raises a library's disk error as the OSError it stands for, naming the
    folder (:func:`as_os_error`)."""
    folder = Path(folder)
    tmp = temp_folder(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        _raise_as_os_error(err, folder, tmp)
        raise
    return folder


class _RecordingFile:
    """A file object for ``torch.save`` that keeps the OSError of a failed write: torch reports it only as
    "unexpected pos" (a RuntimeError), so :func:`torch_save` raises the OSError instead."""

    def __init__(self, handle):
        self.handle, self.error = handle, None

    def write(self, data):
        try:
            return self.handle.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self):
        return self.handle.flush()


def torch_save(obj: Any, path: str | Path) -> None:
    """``torch.save(obj, path)``; a write that fails (a full disk) raises its OSError naming ``path``,
    not torch's RuntimeError."""
    import torch

    path = Path(path)
    try:
        with open(path, "wb") as handle:
            recorder = _RecordingFile(handle)
            try:
                torch.save(obj, recorder)
            except RuntimeError:
                if recorder.error is None:
                    raise
                raise recorder.error from None
    except OSError as err:
        _raise_as_os_error(err, path)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return _atomic(Path(path), lambda p: p.write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


#: How a table of texts is written (:func:`atomic_write_parquet` ``texts=True``): zstd in row groups of
#: 128k rows reads in half the time of pyarrow's default (snappy, row groups of 1M rows), the row
#: groups decoded in parallel: the two texts of 2,000,000 pairs in 0.43 s instead of 0.9-2.1 s, and a
#: third smaller on disk (docs/benchmarks.md). Numbers compress little: other tables keep the default.
TEXT_PARQUET = {"compression": "zstd", "row_group_size": 131_072}


def atomic_write_parquet(path: str | Path, frame, *, texts: bool = False) -> Path:
    """Write a pandas DataFrame as Parquet (pyarrow), atomically; ``texts``: a table of texts (a run's
    copies of its data), written as :data:`TEXT_PARQUET` says."""
    options = TEXT_PARQUET if texts else {}
    return _atomic(Path(path), lambda p: frame.to_parquet(p, index=False, **options))


def atomic_save(path: str | Path, save: Callable[[Path], None]) -> Path:
    """Call ``save(tmp_path)`` and move the result to ``path`` (for torch/safetensors/figures)."""
    return _atomic(Path(path), save)


#: Free bytes below which a disk counts as full for :func:`disk_full`.
FULL_BELOW = 1 << 20


def disk_full(path: str | Path) -> bool:
    """Whether the filesystem of ``path`` (or of the nearest folder above it that exists) has less than
    :data:`FULL_BELOW` bytes free for this process: what a library's vague I/O error (SQLite's "disk
    I/O error") means when it is so."""
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        return shutil.disk_usage(path).free < FULL_BELOW
    except OSError:
        return False


def file_stamp(path: str | Path) -> tuple[int, int] | tuple[()]:
    """(modification time in ns, size) of a file, () when it cannot be read: a cache key part that
    changes when the file does."""
    try:
        stat = Path(path).expanduser().stat()
    except OSError:
        return ()
    return (stat.st_mtime_ns, stat.st_size)


def read_json(path: str | Path) -> Any:
    """The JSON of one of cartomap's own files (a run's status, config, history, ...); ValueError for one
    that is not JSON, not UTF-8 or nested too deeply (a hand-edited file: the caller says it is damaged),
    OSError when it cannot be read. Files a person edits are read by :func:`read_json_file`."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


#: Linux has open-file-description locks (``F_OFD_SETLK``): the one kind a reader can *query*
#: (``F_OFD_GETLK``) without taking it, on a read-only descriptor. Elsewhere: flock.
_OFD = hasattr(fcntl, "F_OFD_SETLK") and hasattr(fcntl, "F_OFD_GETLK")
_FLOCK = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (Linux, 64-bit off_t)


def _whole_file(lock_type: int) -> bytes:
    return struct.pack(_FLOCK, lock_type, os.SEEK_SET, 0, 0, 0)


def lock_file(lock_path: str | Path):
    """Hold an exclusive lock on ``lock_path`` for as long as the returned handle is open (released
    when the process dies); BlockingIOError when another process holds it. Needs write access."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_path, "a")  # noqa: SIM115 - kept open on purpose
    try:
        if _OFD:
            fcntl.fcntl(handle, fcntl.F_OFD_SETLK, _whole_file(fcntl.F_WRLCK))
        else:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        handle.close()
        if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise BlockingIOError(err.errno, f"{lock_path} is locked by another process") from None
        raise
    return handle


def is_locked(lock_path: str | Path) -> bool:
    """Whether some process holds :func:`lock_file`'s lock on ``lock_path`` (kept by hand: filelock cannot
    ask whether a lock is held without taking it, and a reader of a read-only store cannot take one). A pure query: the file is
    opened read-only (a read-only store is browsable) and no lock is taken, so a trainer starting at
    this instant is never refused because of a reader. (Without OFD locks, outside Linux, a shared
    flock is tried for an instant on the read-only descriptor.) False when the file cannot be opened."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        if _OFD:
            answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _whole_file(fcntl.F_WRLCK))
            return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def writable(path: str | Path) -> bool:
    """Whether this process may write in folder ``path`` (or, when it does not exist yet, in the nearest
    folder above it that does): False on a read-only mount or copy."""
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return os.access(path, os.W_OK)


def refuse_overwrite(paths, force: bool = False, flag: str = "--force") -> None:
    """Raise CartomapError naming every path of ``paths`` that exists, unless ``force``: a command that
    writes a user's path never replaces a file without being told to."""
    if force:
        return
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing:
        shown = ", ".join(existing[:5]) + (f" and {len(existing) - 5} more" if len(existing) > 5 else "")
        raise CartomapError(f"{shown} exist{'s' if len(existing) == 1 else ''}; pass {flag} to replace")


# --------------------------------------------------------------------------- gzip
GZIP_MAGIC = b"\x1f\x8b"
#: The UTF-8 byte order mark some editors put first (dropped on reading).
UTF8_BOM = b"\xef\xbb\xbf"
#: The most bytes a compressed file may expand to (a small .gz can hold gigabytes of zeros): 2 GiB,
#: raised with the environment variable ``CARTOMAP_MAX_DECOMPRESSED`` (bytes, or e.g. ``8G``, ``500M``).
MAX_DECOMPRESSED = 2 * 1024**3
MAX_DECOMPRESSED_ENV = "CARTOMAP_MAX_DECOMPRESSED"
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def max_decompressed() -> int:
    """The decompressed-size cap in bytes: ``CARTOMAP_MAX_DECOMPRESSED`` or :data:`MAX_DECOMPRESSED`."""
    text = os.environ.get(MAX_DECOMPRESSED_ENV, "").strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return MAX_DECOMPRESSED
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)", text)
    if not match:
        raise DataError(
            f"{MAX_DECOMPRESSED_ENV}={os.environ[MAX_DECOMPRESSED_ENV]!r}: expected a size such as 4G, 500M "
            "or a number of bytes"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def gunzip(data: bytes, source: str, limit: int | None = None) -> bytes:
    """Decompress gzip ``data`` (every member), refusing output past ``limit`` bytes (default
    :func:`max_decompressed`) before it is produced: DataError naming the cap and how to raise it."""
    limit = max_decompressed() if limit is None else limit
    compressed, parts, size = len(data), [], 0
    while data:
        if data[:2] != GZIP_MAGIC:
            raise DataError("not a valid gzip file (data after the last gzip member)", location=source)
        inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            part = inflate.decompress(data, limit + 1 - size)
        except zlib.error as e:
            raise DataError(f"not a valid gzip file ({e})", location=source) from None
        parts.append(part)
        size += len(part)
        if size > limit:
            raise DataError(
                f"the file expands to more than {_size(limit)} when decompressed ({compressed:,} bytes "
                f"compressed): refused before memory runs out; set {MAX_DECOMPRESSED_ENV} (e.g. 8G) to "
                "allow more",
                location=source,
            )
        if not inflate.eof:
            raise DataError("not a valid gzip file (it ends before its last member does)", location=source)
        data = inflate.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_data_bytes(path, source: str) -> bytes:
    """A data file's bytes: gunzipped (:func:`gunzip`) when they start with the gzip mark, whatever the
    name (a name ending in .gz without the mark is a DataError saying so), the UTF-8 byte order mark
    dropped. Every reader of a user's data file reads it through this."""
    data = Path(path).read_bytes()
    if data[:2] == GZIP_MAGIC:
        data = gunzip(data, source)
    elif Path(path).suffix.lower() == ".gz":
        raise DataError(
            f"the name ends in .gz but the file is not gzip-compressed (it starts with {data[:8]!r}); "
            "rename it without .gz if it is plain text, or compress it with gzip",
            location=source,
        )
    return data[len(UTF8_BOM) :] if data[:3] == UTF8_BOM else data


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text; a DataError naming the line, the column and the byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        line_start = data.rfind(b"\n", 0, e.start) + 1
        raise DataError(
            f"bytes are not valid UTF-8 (byte 0x{data[e.start]:02x} at byte offset {e.start}, "
            f"column {e.start - line_start + 1} of the line); save the file as UTF-8",
            location=f"{source}: line {line}",
        ) from None


def json_objects(text: str, source: str):
    """Each non-blank line of JSON Lines ``text`` as (line number, "<source>: line N", the object); a
    DataError naming the line for malformed JSON, nesting too deep, or a value that is no object."""
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{source}: line {lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"malformed JSON ({e.msg} at column {e.colno}); expected one JSON object per line",
                location=where,
            ) from None
        except RecursionError:
            raise DataError("JSON nested too deeply", location=where) from None
        if not isinstance(record, dict):
            raise DataError(f"expected a JSON object per line, got {type(record).__name__}", location=where)
        yield lineno, where, record


# --------------------------------------------------------------------------- files a person edits
# One checked reader per format for every file cartomap reads that a person may have edited (saved
# views, the team file, imported tool exports, ids files, guidelines, config files): a file that cannot
# be read is one CartomapError naming the file (and the line or field) and what was expected, never a
# traceback (RecursionError, OverflowError, UnicodeDecodeError, ...).


def read_user_text(path: str | Path, what: str) -> str:
    """The text of a file a person may edit (``what`` it should hold, for messages: "a saved view", "a
    team file"): UTF-8, its byte order mark dropped. DataError naming the file when it is missing, cannot
    be read or is not UTF-8 (naming the line and the byte)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"no such file (expected {what})", location=str(path)) from None
    except OSError as err:
        raise DataError(
            f"cannot be read ({err.strerror or err}; expected {what})", location=str(path)
        ) from None
    return decode_utf8(data[len(UTF8_BOM) :] if data[:3] == UTF8_BOM else data, str(path))


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json_text(text: str, source: str, what: str) -> Any:
    """The JSON value of ``text`` (of ``source``, a file name); DataError naming the source, the line and
    ``what`` was expected for malformed JSON, nesting too deep, a number out of range (``1e400``, NaN,
    an integer of thousands of digits)."""
    try:
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise DataError(
            f"not valid JSON ({e.msg} at column {e.colno}); expected {what}",
            location=f"{source}: line {e.lineno}",
        ) from None
    except RecursionError:
        raise DataError(f"JSON nested too deeply; expected {what}", location=source) from None
    except ValueError as e:  # a number out of range; an integer past Python's digit limit
        raise DataError(f"{str(e).split(';')[0]}; expected {what}", location=source) from None


def read_json_file(path: str | Path, what: str) -> Any:
    """:func:`parse_json_text` of the file ``path`` read by :func:`read_user_text`."""
    return parse_json_text(read_user_text(path, what), str(path), what)


def parse_toml_text(text: str, source: str, what: str) -> dict[str, Any]:
    """The tables of TOML ``text`` (of ``source``); DataError naming the source, the line and column and
    ``what`` was expected for TOML that is not valid or is nested too deeply."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"not valid TOML: {e}; expected {what}", location=source) from None
    except RecursionError:
        raise DataError(f"TOML nested too deeply; expected {what}", location=source) from None


def read_ids_file(path: str | Path) -> list[str]:
    """The example ids of a file of one id per line (blank lines skipped, spaces around an id dropped);
    CartomapError naming the file (and the line and byte that are not UTF-8)."""
    text = read_user_text(path, "one example id per line")
    return [line.strip() for line in text.splitlines() if line.strip()]
