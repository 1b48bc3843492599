"""Text search over a map's examples: the rows whose texts hold a piece of text, or match a regular
expression, ignoring case.

The texts searched are the text fields of the run's task kind that the frame has (a pair's premise and
hypothesis, a text, a word of a token run's word-level map; :func:`cartomap.tasks.registry.text_fields_in`);
a row matches when any of them does. Vectorised with Arrow's string kernels (``pyarrow.compute``:
``match_substring``, ``match_substring_regex``), so 2M pairs take a fraction of a second; regular
expressions are RE2's (Python's ``re`` syntax without look-arounds and back-references), which run in
time linear in the text: a pattern typed into a shared dashboard cannot stall it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cartomap.errors import CartomapError
from cartomap.tasks import registry as task_kinds

#: The longest query (characters).
MAX_QUERY = 1_000
#: How a search is made: the text as typed, or a regular expression.
SUBSTRING, REGEX = "substring", "regex"
MODES = (SUBSTRING, REGEX)


def text_fields(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` a search looks in: its task kind's text fields."""
    return list(task_kinds.text_fields_in(frame.columns))


def check_query(query: str, mode: str = SUBSTRING) -> str:
    """``query`` as searched; CartomapError (one line) for an empty or too long query, an unknown mode or
    a regular expression RE2 cannot read."""
    if mode not in MODES:
        raise CartomapError(f"unknown search mode {mode!r}: expected one of {', '.join(MODES)}")
    text = str(query or "")
    if not text.strip():
        raise CartomapError("type some text to search for")
    if len(text) > MAX_QUERY:
        raise CartomapError(f"a search has at most {MAX_QUERY:,} characters ({len(text):,} given)")
    bad = next((c for c in text if 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:  # a lone surrogate: no text holds it (UTF-8 cannot encode it)
        raise CartomapError(
            f"the search holds U+{ord(bad):04X}, half of a character (a lone surrogate): type the text again"
        )
    if mode == REGEX:
        try:
            pc.match_substring_regex(pa.array([""]), pattern=text, ignore_case=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            reason = str(err).split(":", 1)[-1].strip() or "invalid"
            raise CartomapError(
                f"not a regular expression this search reads ({reason}; RE2 syntax: no look-arounds or "
                "back-references), or search for the text as typed"
            ) from None
    return text


def _column(values: pd.Series) -> pa.ChunkedArray:
    """A text column as Arrow strings (no copy for pandas' Arrow-backed strings); missing values stay null."""
    try:
        array = pa.array(values, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        array = pa.array(
            [None if v is None else str(v) for v in values.astype(object)], type=pa.large_string()
        )
    array = array if isinstance(array, pa.ChunkedArray) else pa.chunked_array([array])
    if pa.types.is_dictionary(array.type):  # a categorical column: its values
        array = pc.cast(array, array.type.value_type)
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):  # a sentence's words: joined
        array = pc.binary_join(pc.cast(array, pa.list_(pa.large_string())), pa.scalar(" ", pa.large_string()))
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = pc.cast(array, pa.large_string())
    return array


def matches(
    frame: pd.DataFrame, query: str, mode: str = SUBSTRING, fields: Sequence[str] | None = None
) -> np.ndarray:
    """A boolean mask over ``frame``'s rows: any of ``fields`` (default :func:`text_fields`) holds
    ``query`` (``mode`` substring: as typed; regex: a match of the regular expression anywhere in it),
    case ignored. CartomapError when the query cannot be searched (:func:`check_query`) or the frame has
    none of the fields."""
    query = check_query(query, mode)
    fields = list(fields) if fields is not None else text_fields(frame)
    fields = [f for f in fields if f in frame.columns]
    if not fields:
        raise CartomapError("these examples have no text to search")
    mask = np.zeros(len(frame), dtype=bool)
    for field in fields:
        column = _column(frame[field])
        if mode == REGEX:
            hit = pc.match_substring_regex(column, pattern=query, ignore_case=True)
        else:
            hit = pc.match_substring(column, pattern=query, ignore_case=True)
        mask |= pc.fill_null(hit, False).to_numpy(zero_copy_only=False).astype(bool)
    return mask


def search_ids(
    frame: pd.DataFrame, query: str, mode: str = SUBSTRING, fields: Sequence[str] | None = None
) -> list[str]:
    """The ids of the rows of ``frame`` that :func:`matches` finds, in frame order."""
    mask = matches(frame, query, mode, fields)
    return [str(i) for i in frame["id"].to_numpy(dtype=object)[mask]]
