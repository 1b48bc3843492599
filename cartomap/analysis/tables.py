"""The selection table a person reads (the rows of a lasso, a box, a filter) and its downloads.

:func:`selection_table` takes the rows of a map frame (:func:`cartomap.analysis.datamap.map_frame`) for
some ids with the columns worth reading, :func:`display_columns` orders them for the page, and
:func:`to_csv_bytes` / :func:`to_jsonl_bytes` are the files the page offers.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from cartomap.analysis.datamap import (
    LABEL_COLUMNS,
    SENTENCE,
    axis_of,
    positions_of,
    table_metric_columns,
    unique_ids,
)
from cartomap.tasks import registry as task_kinds


def selection_table(frame: pd.DataFrame, ids: Iterable[str], texts: bool = True) -> pd.DataFrame:
    """Rows of ``frame`` for ``ids`` (in the order given, unknown or filtered-out ids skipped),
    with the columns a person reads: id, texts, gold, predicted, genre, metrics. ``texts=False``: without
    the texts (a selection of 700k of 2M pairs is taken in a fraction of the time; the page adds them to
    the rows it lists by calling this again on those ids)."""
    wanted = unique_ids(ids)
    text_columns = (*task_kinds.text_fields(), SENTENCE) if texts else ()
    shown = ("id", *text_columns, *LABEL_COLUMNS, "gold", "predicted", "genre")
    cols = [c for c in shown if c in frame.columns]
    cols += [c for c in table_metric_columns(frame.attrs.get("unit")) if c in frame.columns and c not in cols]
    cols += [c for c in SEED_COLUMNS if c in frame.columns and c not in cols]  # a map over seeds
    human = ("agreement", "human_entropy", "human_majority_share", "human_n", "gold_disagrees")
    cols += [c for c in human if c in frame.columns]  # data with votes
    cols += [c for c in frame.columns if str(c).startswith("votes_") and c not in cols]
    return frame[cols].iloc[positions_of(frame, wanted)].reset_index(drop=True)  # only these columns taken


#: Columns of a seeds experiment's per-example table (:func:`cartomap.scores.stability.seed_table`) a
#: map over seeds keeps beside the usual ones.
SEED_COLUMNS = (
    "region_majority",
    "region_agreement",
    "region_votes",
    "stable",
    "confidence_std",
    "variability_std",
)


#: What a person reads first in the selection table: the label, the model's prediction and where the
#: example sits on the map; then its texts and everything else (:func:`display_columns`).
LEADING_COLUMNS = ("gold", "predicted", "confidence", "variability", "region")


def display_columns(table: pd.DataFrame) -> list[str]:
    """The columns of a :func:`selection_table` in the order the page shows them: :data:`LEADING_COLUMNS`
    (with the map's own axis, when it is another score, before variability), the texts, the id, then the
    rest as they come (downloads keep the table's own order)."""
    leading = list(LEADING_COLUMNS)
    axis = axis_of(table)
    if axis not in leading:
        leading.insert(leading.index("variability"), axis)
    first = [c for c in (*leading, *task_kinds.text_fields(), "id") if c in table.columns]
    return first + [c for c in table.columns if c not in first]


def to_csv_bytes(table: pd.DataFrame) -> bytes:
    """UTF-8 CSV with a header row, no index."""
    return table.to_csv(index=False).encode("utf-8")


def to_jsonl_bytes(table: pd.DataFrame) -> bytes:
    """One JSON object per row (UTF-8, non-ASCII kept), NaN as null."""
    if table.empty:
        return b""
    text = table.to_json(orient="records", lines=True, force_ascii=False, double_precision=15)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")
