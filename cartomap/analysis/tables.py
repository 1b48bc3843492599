"""The selection table a person reads (the rows of a lasso, a box, a filter) and its downloads.

:func:`selection_table` takes the rows of a map frame (:func:`cartomap.analysis.datamap.map_frame`) for
some ids with the columns worth reading, :func:`display_columns` orders them for the page, and
:func:`to_csv_bytes` / :func:`to_jsonl_bytes` are the files the page offers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
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


#: The column of a word's text in a token run's exported tables, beside its key column ``word`` (the word's
#: position in its sentence, :attr:`TaskKind.unit_columns`: kept as it is, so run ids and the keyed metrics
#: do not change).
WORD_TEXT = "word_text"
#: The column of a unit's probability of its predicted class in :func:`set_predictions`.
P_PRED = "p_pred"


def with_word_text(table: pd.DataFrame, run, examples: pd.DataFrame | None = None) -> pd.DataFrame:
    """``table`` (rows keyed by unit id in ``id``) with each word's text as :data:`WORD_TEXT`, after its
    position ``word`` (or after ``id``), for a run whose units are words (token classification); other
    runs' tables as they are. ``examples``: the run's training examples (default: read)."""
    kind = run.task_kind
    if not kind.unit.sentences or WORD_TEXT in table.columns:
        return table
    examples = examples if examples is not None else run.examples(columns=kind.gold_columns)
    ids, _ = kind.unit_ids(examples)
    words = pd.Series([str(w) for row in examples[kind.text_fields[0]] for w in row], index=ids)
    out = table.copy(deep=False)
    at = out.columns.get_loc("word") + 1 if "word" in out.columns else 1
    out.insert(at, WORD_TEXT, words.reindex(table["id"].astype(str)).to_numpy(dtype=object))
    return out


def set_examples(run, source: str) -> pd.DataFrame | None:
    """The examples of a run's evaluated set ``source`` ("dev" or "test_<k>"); None when it has none."""
    if source == "dev":
        return run.dev_examples()
    k = int(source.removeprefix("test_"))
    return run.test_examples(k) if 0 <= k < len(run.test_names) else None


def set_predictions(run, source: str, epoch: int | None = None) -> pd.DataFrame:
    """The model's prediction of every unit of a dev or test set (``source`` "dev" or "test_<k>") at
    ``epoch`` (default: the best on dev, :meth:`Run.best_epoch`), from the logits recorded after each epoch.

    One row per unit: ``id``; a token run's words (the unit id ``<sentence id>#<k>``) with
    ``example_id`` (the sentence), ``word`` (the word's position) and :data:`WORD_TEXT`; a multi-label
    run's (example, label) units with ``example_id`` and ``label``; an example's texts otherwise; then
    ``gold`` and ``predicted`` (class names: a tag, a label, a label unit's absent / present), ``correct``
    and :data:`P_PRED` = max_c softmax(z)_c, the probability of the predicted class (a label unit's row
    (0, z): its sigmoid, or one minus it). RunError when the set was not recorded at that epoch."""
    from cartomap.errors import RunError
    from cartomap.scores.metrics import softmax

    kind = run.task_kind
    frame = set_examples(run, source)
    epoch = run.best_epoch() if epoch is None else epoch
    if frame is None or epoch is None or epoch not in run.dynamics_epochs(source):
        raise RunError(f"run {run.id} has no recorded {source} predictions")
    ids, gold, counts = kind.units(frame, run.label_names)
    probs = softmax(run.read_epoch(source, epoch, ids).astype("float64"))
    predicted = probs.argmax(axis=1)
    out = pd.DataFrame({"id": ids})
    example_ids = frame["id"].astype(str).to_numpy(dtype=object).repeat(counts)
    if kind.unit.sentences:
        words = [str(w) for row in frame[kind.text_fields[0]] for w in row]
        out = out.assign(example_id=example_ids, word=[k for n in counts for k in range(int(n))])
        out[WORD_TEXT] = words
    elif kind.unit.label_sets:
        out = out.assign(example_id=example_ids, label=list(run.label_names) * len(frame))
    else:
        for col in task_kinds.text_fields_in(frame.columns):
            out[col] = frame[col].astype(str).to_numpy()
    names = np.asarray([*kind.unit_classes(run.label_names), ""], dtype=object)  # "": no gold label
    known = (gold >= 0) & (gold < len(names) - 1)
    out["gold"] = names[np.where(known, gold, len(names) - 1)]
    out["predicted"] = names[predicted]
    out["correct"] = gold == predicted
    out[P_PRED] = probs.max(axis=1)
    return out
