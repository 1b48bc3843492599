"""How a run's tables are stored: Parquet read by columns, Arrow IPC copies memory-mapped, logits tables
built column by column (an id and ``logit_0``, ``logit_1``, ... per row)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.io import atomic_save


def parquet_columns(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def write_arrow_copy(path: Path, frame: pd.DataFrame) -> Path:
    """``frame`` as an uncompressed Arrow IPC file at ``path`` (atomic), for :func:`read_arrow_copy`."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)

    def save(tmp: Path) -> None:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)

    return atomic_save(path, save)


def read_arrow_copy(path: Path, source: Path, columns: Sequence[str] | None) -> pd.DataFrame | None:
    """The columns of the Arrow copy ``path`` of the Parquet file ``source``, memory-mapped (the frame's
    buffers are the file's pages: nothing decoded); None when there is no copy, it is older than
    ``source`` or cannot be read (then ``source`` is read as before)."""
    import pyarrow as pa

    try:
        if path.stat().st_mtime_ns < source.stat().st_mtime_ns:
            return None
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    except (OSError, pa.ArrowException):
        return None
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    return table.to_pandas()


def one_line(err: BaseException) -> str:
    """An exception as "Type: message" on one line (pyarrow's messages span several)."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def read_columns(path: Path, columns: Sequence[str] | None) -> pd.DataFrame:
    if not path.exists():
        raise FileNotFoundError(path)
    if columns is None:
        return pd.read_parquet(path)
    present = set(parquet_columns(path))
    return pd.read_parquet(path, columns=[c for c in columns if c in present])


def logits_frame(ids, logits: np.ndarray) -> pd.DataFrame:
    """One row per example: id and one float32 column per class (logit_0, logit_1, ...)."""
    frame = pd.DataFrame(
        np.asarray(logits, dtype=np.float32), columns=[f"logit_{c}" for c in range(logits.shape[1])]
    )
    frame.insert(0, "id", pd.Series(list(ids), dtype=str))
    return frame


def arrow_ids(ids):
    """The example ids as an Arrow string array (as pandas' str columns are stored), for :func:`logits_table`."""
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if isinstance(ids, pa.Array):
        return ids.cast(pa.large_string())
    ids = list(ids)
    try:
        return pa.array(ids, type=pa.large_string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):  # not all str (ints, numpy strings)
        return pa.array([str(i) for i in ids], type=pa.large_string())


def logits_table(ids, logits: np.ndarray):
    """:func:`logits_frame` as an Arrow table, built column by column without pandas: id (string) and
    logit_0, logit_1, ... (float32)."""
    import pyarrow as pa

    logits = np.asarray(logits, dtype=np.float32)
    ids = arrow_ids(ids)
    if len(ids) != logits.shape[0]:
        raise ValueError(f"{len(ids)} ids for {logits.shape[0]} rows of logits")
    columns = {"id": ids}
    for c in range(logits.shape[1]):
        columns[f"logit_{c}"] = pa.array(np.ascontiguousarray(logits[:, c]))
    return pa.table(columns)
