"""Reading a dataset before its column mapping is known: the preview and a first guess of the mapping.

Pure logic behind the data-source forms of the dashboard (no Streamlit here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.config import DEMO_DEV, DEMO_TRAIN
from cartomap.data.loading import demo_path
from cartomap.data.readers import FORMATS, read_table
from cartomap.errors import DataError
from cartomap.tasks import registry as task_kinds

#: The format choices of a form: "auto" (from the file's suffix) or one of the readers.
FORMAT_CHOICES = ("auto", *FORMATS)

_LABELS = ("label", "gold_label", "labels", "class", "target")

_IDS = ("id", "pairID", "uid", "guid", "idx")

_GENRES = ("genre", "domain", "source")


def preview_table(path: str, format: str = "auto", split: str | None = None, rows: int = 5):
    """(first ``rows`` rows, number of rows) of the raw table at ``path``, before column mapping.

    ``path`` may be ``demo:train`` / ``demo:dev``. Hub datasets (``hf:NAME``) have no preview.
    Raises DataError naming the file.
    """
    path = str(path).strip()
    if not path:
        raise DataError("no data chosen: enter a path")
    if path in (DEMO_TRAIN, DEMO_DEV):
        frame, _ = read_table(demo_path(path.split(":", 1)[1]), "jsonl" if format == "auto" else format)
    elif path.startswith("hf:"):
        raise DataError("no preview for hub datasets: type the column names", location=path)
    else:
        frame, _ = read_table(Path(path).expanduser(), format, split or None)
    return frame.head(rows).reset_index(drop=True), len(frame)


def guess_columns(columns: list[str], frame: pd.DataFrame | None = None) -> dict[str, Any]:
    """A first mapping for ``columns``: text_columns (1 or 2: the first names a task kind knows, else the
    first column of strings), label, id ('' = generate), genre (or None)."""
    cols = [str(c) for c in columns]
    present = set(cols)
    known = task_kinds.guess_text_columns(cols)
    if known is not None:
        text = list(known)
    else:
        single = None
        if frame is not None:  # first column holding strings
            single = next((c for c in cols if frame[c].map(lambda v: isinstance(v, str)).all()), None)
        text = [single or (cols[0] if cols else "")]
    label = next((c for c in _LABELS if c in present), None)
    if label is None:
        label = next((c for c in cols if c not in text), "")
    return {
        "text_columns": text,
        "label_column": label,
        "id_column": next((c for c in _IDS if c in present), ""),
        "genre_column": next((c for c in _GENRES if c in present), None),
    }


def parse_names(text: str | None) -> tuple[str, ...] | None:
    """'a, b, c' -> ('a', 'b', 'c'); blank -> None. Repeated names are an error."""
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    if not names:
        return None
    if len(set(names)) != len(names):
        raise DataError(f"label names repeat a name: {list(names)}; give each class once, in order")
    return names
