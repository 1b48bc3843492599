"""Several annotations per example: per-class vote counts, each annotator's label, known errors.

A column of human judgements has one of two roles, and the role says how a list in it is read:

* **vote counts** (``DataConfig.votes_column``, ``--votes-column``; found by name: the first of
  :data:`VOTES_NAMES`, ChaosNLI's ``votes`` / ``label_count``): a mapping label -> count, or a list of
  one count per class **in label order** (ChaosNLI's ``label_count`` ``[12, 68, 20]``). A list of
  another length, or of label names, is refused: it is not counts.
* **annotator labels** (``DataConfig.annotator_column``, ``--annotator-column``; found by name: the
  first of :data:`ANNOTATOR_NAMES`, SNLI/MNLI's ``annotator_labels``, ChaosNLI's ``original_labels``):
  a list of label names or indices, one per annotator. A mapping is refused: it is counts.

Either may be a JSON string (CSV/TSV cells). A column named explicitly is the only one used; naming
both is an error. Found by name, vote counts are preferred to annotator labels. A mapping's keys are
label names (or indices) with surrounding whitespace ignored, as labels are; two keys naming the same
class (``"neutral"`` and ``" neutral"``) are refused, never summed. An example has at most
:data:`MAX_VOTES` votes.

* known errors: the first of :data:`ERROR_NAMES`, booleans (``true``/``false``, 1/0, yes/no).

A column found by name (not named explicitly) none of whose values is a mapping or a list (an
up-vote count called ``votes``, say) is left alone as an ordinary extra column; once one value is,
the column is read as votes and every other value must be too (or null).

Votes may cover only some examples (ChaosNLI relabelled a subset of MultiNLI): a null cell means "no
votes for this example"; its counts are all 0 (``human_n`` 0), its human columns are NaN / -1 and it
is left out of every human statistic (the truth report evaluates the examples with votes only).

A loaded dataset keeps them normalised: one int64 column per class ``votes_<label>``
(:func:`vote_columns`) and ``is_error`` (bool). The run store adds the derived columns of
:func:`cartomap.scores.human.human_columns` (``human_n``, ``human_majority`` (-1: tie),
``human_majority_share``, ``human_entropy`` (bits), ``gold_disagrees``) to the run's own copy
(examples.parquet). Those columns are found again when a run's copy is loaded (experiments on a run's
data keep them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import MAX_VOTES
from cartomap.errors import DataError

#: Column roles (:func:`find_votes_column`): per-class vote counts, or one label per annotator.
COUNTS, LABELS = "counts", "labels"
#: What each role's values may be, for messages.
FORMS = {
    COUNTS: "a mapping label -> count or a list of one count per class in label order",
    LABELS: "a list of label names or indices, one per annotator",
}
#: The option and DataConfig field that name each role's column, for messages.
OPTIONS = {
    COUNTS: "--votes-column (DataConfig.votes_column)",
    LABELS: "--annotator-column (DataConfig.annotator_column)",
}
VOTES_NAMES: tuple[str, ...] = ("votes", "vote_counts", "label_counts", "label_count")
ANNOTATOR_NAMES: tuple[str, ...] = ("annotator_labels", "original_labels", "annotations")
ERROR_NAMES: tuple[str, ...] = ("is_error", "label_error", "is_label_error", "label_issue")
#: The normalised known-error column of a run's copy.
ERROR_COLUMN = "is_error"
#: The prefix of the per-class vote columns: ``votes_<label name>``.
VOTES_PREFIX = "votes_"
#: The columns the run store derives from the votes (:func:`cartomap.scores.human.human_columns`): a
#: loaded run copy's are dropped, since the store computes them again.
DERIVED_COLUMNS: tuple[str, ...] = (
    "human_n",
    "human_majority",
    "human_majority_share",
    "human_entropy",
    "gold_disagrees",
)
_INT = re.compile(r"^[+-]?\d+$")
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}

Where = Callable[[int], str]


def vote_columns(label_names) -> list[str]:
    """The normalised per-class vote columns: ``votes_<label name>`` in class order."""
    return [f"{VOTES_PREFIX}{name}" for name in label_names]


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _absent(value: Any) -> bool:
    """A null (a key absent in a row of a struct column), not NaN."""
    return value is None or value is pd.NA


def _looks_like_votes(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip()[:1] in ("{", "[")
    return isinstance(value, (Mapping, list, tuple, np.ndarray))


def _holds_votes(values: pd.Series) -> bool:
    """Whether any value of a column is a mapping or a list (or one as a JSON string)."""
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return False
    return any(not _missing(v) and _looks_like_votes(v) for v in values.tolist())


def find_votes_column(
    frame: pd.DataFrame,
    option: str | None,
    label_names: Sequence[str],
    annotator_option: str | None = None,
    source: str | None = None,
) -> tuple[str, str] | None:
    """(the column holding human judgements, its role :data:`COUNTS` or :data:`LABELS`), or None.

    ``option`` names the vote counts' column, ``annotator_option`` the annotator labels' ("" = none of
    that role; naming both is a DataError). Neither named: the normalised ``votes_<label>`` columns
    (returns ``"votes_*"``), else the first name of :data:`VOTES_NAMES` (counts), then of
    :data:`ANNOTATOR_NAMES` (labels), any of whose values is a mapping or a list."""
    if option and annotator_option:
        raise DataError(
            f"both a votes column ({option!r}) and an annotator column ({annotator_option!r}) are named; "
            "name one: --votes-column for per-class counts, --annotator-column for each annotator's label",
            location=source,
            field="votes_column",
        )
    if option:
        return option, COUNTS
    if annotator_option:
        return annotator_option, LABELS
    if option is None and all(c in frame.columns for c in vote_columns(label_names)):
        return "votes_*", COUNTS
    searched = [(VOTES_NAMES, COUNTS)] if option is None else []
    searched += [(ANNOTATOR_NAMES, LABELS)] if annotator_option is None else []
    for names, role in searched:
        for name in names:
            if name in frame.columns and _holds_votes(frame[name]):
                return name, role
    return None


def find_error_column(frame: pd.DataFrame, option: str | None) -> str | None:
    """``option`` when given ("" = none), else the first of :data:`ERROR_NAMES` the frame has."""
    if option == "":
        return None
    if option is not None:
        return option
    return next((n for n in ERROR_NAMES if n in frame.columns), None)


def _class_of(
    value: Any, names: Sequence[str], index: dict[str, int], what: str, where: str, field: str
) -> int:
    if isinstance(value, str):
        s = value.strip()
        if s in index:
            return index[s]
        if not _INT.match(s):
            raise DataError(
                f"{what} {value!r} is not in the label set {list(names)}", location=where, field=field
            )
        k = int(s)
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise DataError(
            f"{what} must be a label name or index, got {type(value).__name__} {value!r}",
            location=where,
            field=field,
        )
    else:
        if not math.isfinite(float(value)) or not float(value).is_integer():
            raise DataError(f"{what} {value!r} is not a whole class index", location=where, field=field)
        k = int(value)
    if not 0 <= k < len(names):
        raise DataError(
            f"{what} {k} is not in the label set (indices 0..{len(names) - 1} for {list(names)})",
            location=where,
            field=field,
        )
    return k


def _count(value: Any, label: str, where: str, field: str) -> int:
    """One whole, non-negative count of at most :data:`MAX_VOTES` (a null is 0; NaN is refused: it is
    no count, and reading it as 0 would hide it)."""
    if _absent(value):
        return 0  # a key absent in this row of a Parquet struct column
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        raise DataError(
            f"the count of {label!r} is NaN; expected a whole number of votes (null or no key for none)",
            location=where,
            field=field,
        )
    if isinstance(value, str) and _INT.match(value.strip()):
        value = int(value.strip())
    ok = isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not ok or not math.isfinite(float(value)) or not float(value).is_integer():
        raise DataError(
            f"the count of {label!r} must be a whole number of votes, got {value!r}",
            location=where,
            field=field,
        )
    if value < 0:
        raise DataError(f"the count of {label!r} is negative ({value!r})", location=where, field=field)
    if value > MAX_VOTES:
        raise DataError(
            f"the count of {label!r} is {int(value):,}; expected at most {MAX_VOTES:,} votes per example",
            location=where,
            field=field,
        )
    return int(value)


def _checked_total(counts: np.ndarray, where: str, field: str) -> np.ndarray:
    total = int(sum(int(c) for c in counts))  # Python ints: no wrap-around
    if total > MAX_VOTES:
        raise DataError(
            f"the counts add up to {total:,} votes; expected at most {MAX_VOTES:,} per example",
            location=where,
            field=field,
        )
    return counts


def _other_role(role: str, field: str) -> str:
    """The hint of a message refusing a value in the other role's form."""
    other = LABELS if role == COUNTS else COUNTS
    noun = "each annotator's label" if other == LABELS else "per-class counts"
    return f"if it holds {noun}, name the column with {OPTIONS[other].split(' (')[0]} {field}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, np.integer, float, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _counts_of_list(items: list, names: list[str], where: str, field: str) -> np.ndarray:
    """A list in a vote-count column: one count per class in label order."""
    n = len(names)
    other = next(
        (v for v in items if not (_is_number(v) or (isinstance(v, str) and _INT.match(v.strip())))), None
    )
    if other is not None or len(items) != n:
        got = f"{other!r}" if other is not None else f"{len(items)} number{'s' if len(items) != 1 else ''}"
        raise DataError(
            f"a list of vote counts holds one whole number per class in label order ({n} for {names}), "
            f"got {got}; {_other_role(COUNTS, field)}",
            location=where,
            field=field,
        )
    counts = np.array([_count(v, names[k], where, field) for k, v in enumerate(items)], dtype=np.int64)
    if counts.sum() == 0:
        raise DataError("no votes (every count is 0)", location=where, field=field)
    return _checked_total(counts, where, field)


def parse_votes(
    value: Any, label_names: Sequence[str], where: str, field: str, role: str = COUNTS
) -> np.ndarray:
    """One cell as vote counts int64 [C], read in its column's ``role``: :data:`COUNTS` (a mapping
    label -> count, or a list of one count per class in label order) or :data:`LABELS` (a list of
    labels, names or indices, one per annotator); either as a JSON string. DataError naming ``where``
    and ``field`` otherwise (the other role's form included)."""
    names = [str(n) for n in label_names]
    index = {n: k for k, n in enumerate(names)}
    expected = FORMS[role]
    if _missing(value):
        return np.zeros(len(names), dtype=np.int64)  # no votes for this example (a null cell)
    if isinstance(value, str):
        text = value.strip()
        if text[:1] not in ("{", "["):
            raise DataError(f"expected {expected}, got the string {value!r}", location=where, field=field)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"malformed JSON in the votes ({e.msg})", location=where, field=field) from None
        except RecursionError:
            raise DataError(
                f"JSON nested too deep; expected {expected}", location=where, field=field
            ) from None
    if isinstance(value, Mapping):
        if role == LABELS:
            raise DataError(
                f"a mapping is per-class counts, not annotator labels; expected {expected}: "
                f"{_other_role(LABELS, field)}",
                location=where,
                field=field,
            )
        if not value:
            raise DataError(f"empty mapping; expected {expected}", location=where, field=field)
        counts = np.zeros(len(names), dtype=np.int64)
        keys: dict[int, Any] = {}
        for key, n in value.items():
            k = _class_of(key, names, index, "vote for label", where, field)
            if _absent(n):
                continue  # a key absent in this row of a Parquet struct column
            if k in keys:
                raise DataError(
                    f"the keys {keys[k]!r} and {key!r} both name label {names[k]!r} (keys are matched "
                    "to label names without surrounding spaces); expected each label once",
                    location=where,
                    field=field,
                )
            keys[k] = key
            counts[k] = _count(n, str(key), where, field)
        if counts.sum() == 0:
            raise DataError("no votes (every count is 0)", location=where, field=field)
        return _checked_total(counts, where, field)
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if not items:
            raise DataError(f"empty list; expected {expected}", location=where, field=field)
        if role == COUNTS:
            return _counts_of_list(items, names, where, field)
        if len(items) > MAX_VOTES:
            raise DataError(
                f"{len(items):,} annotator labels; expected at most {MAX_VOTES:,} per example",
                location=where,
                field=field,
            )
        counts = np.zeros(len(names), dtype=np.int64)
        for item in items:
            if _missing(item):
                raise DataError("an annotator label is missing (null)", location=where, field=field)
            if isinstance(item, (Mapping, list, tuple, np.ndarray)):
                raise DataError(
                    f"an annotator label is {type(item).__name__} {item!r}; expected {expected}",
                    location=where,
                    field=field,
                )
            counts[_class_of(item, names, index, "annotator label", where, field)] += 1
        return counts
    raise DataError(f"expected {expected}, got {type(value).__name__} {value!r}", location=where, field=field)


def parse_error(value: Any, where: str, field: str) -> bool:
    """One known-error cell as a bool: true/false (any case), 1/0, yes/no; DataError otherwise."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, (float, np.floating)) and value in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    what = "missing value (null)" if _missing(value) else f"{type(value).__name__} {value!r}"
    raise DataError(
        f"expected a boolean (true/false) marking a known error, got {what}", location=where, field=field
    )


def annotation_columns(
    frame: pd.DataFrame,
    label_names: Sequence[str],
    votes_option: str | None,
    error_option: str | None,
    where: Where,
    source: str,
    annotator_option: str | None = None,
) -> tuple[dict[str, Any], set[str]]:
    """(the normalised columns to add, the source columns they replace) for a loaded frame.

    Validates every row (DataError naming the row and field). Empty when the frame has neither votes
    nor a known-error column."""
    out: dict[str, Any] = {}
    used: set[str] = set()
    found = find_votes_column(frame, votes_option, label_names, annotator_option, source)
    names = [str(n) for n in label_names]
    if found is not None:
        column, role = found
        if column == "votes_*":
            cols = vote_columns(names)
            parts = []
            for k, c in enumerate(cols):
                values = frame[c]
                if pd.api.types.is_integer_dtype(values) and ((values >= 0) & (values <= MAX_VOTES)).all():
                    parts.append(values.to_numpy(dtype=np.int64))
                else:
                    parts.append(
                        np.array(
                            [_count(v, names[k], where(i), c) for i, v in enumerate(values.tolist())],
                            dtype=np.int64,
                        )
                    )
            matrix = np.stack(parts, axis=1).astype(np.int64)
            for i in np.flatnonzero(matrix.sum(axis=1) > MAX_VOTES):  # each count <= MAX_VOTES: no wrap
                _checked_total(matrix[i], where(int(i)), cols[0])
            used.update(cols)
        else:
            if column not in frame.columns:
                noun = "votes" if role == COUNTS else "annotator"
                raise DataError(
                    f"no {noun} column {column!r}; the data has columns {[str(c) for c in frame.columns]}",
                    location=source,
                    field=column,
                )
            rows = [
                parse_votes(v, names, where(i), column, role) for i, v in enumerate(frame[column].tolist())
            ]
            matrix = np.stack(rows).astype(np.int64) if rows else np.zeros((0, len(names)), np.int64)
            used.add(column)
        for k, name in enumerate(vote_columns(names)):
            out[name] = pd.Series(matrix[:, k], dtype=np.int64)
        used.update(c for c in DERIVED_COLUMNS if c in frame.columns)  # the run store derives them again
    error = find_error_column(frame, error_option)
    if error is not None:
        if error not in frame.columns:
            raise DataError(
                f"no error column {error!r}; the data has columns {[str(c) for c in frame.columns]}",
                location=source,
                field=error,
            )
        flags = [parse_error(v, where(i), error) for i, v in enumerate(frame[error].tolist())]
        out[ERROR_COLUMN] = pd.Series(np.asarray(flags, dtype=bool))
        used.add(error)
    return out, used


def votes_matrix(examples: pd.DataFrame, label_names: Sequence[str]) -> np.ndarray | None:
    """The vote counts [N, C] of a run's examples (its normalised ``votes_<label>`` columns), or None."""
    cols = vote_columns([str(n) for n in label_names])
    if not all(c in examples.columns for c in cols):
        return None
    return examples[cols].to_numpy(dtype=np.int64)
