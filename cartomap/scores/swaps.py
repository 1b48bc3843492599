"""Recurring tag swaps of a token data set: the same word given one gold tag and predicted as another.

cleanlab's ``token_classification.summary.common_label_issues`` counts, over the words it flags, each
(word, given tag, suggested tag); here every word whose prediction is not its gold tag counts, from any
predictions: a run's last recording (in sample, one training) or the out-of-fold predictions of k fold
models (:mod:`cartomap.experiments.token_folds`). A pattern that recurs (``RT`` gold ``O`` predicted
``B-ORG`` four times) is one decision for a reviewer, not four. Pure: flat word arrays in, a table out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.tasks.base import word_key

#: Columns of :func:`swap_table`, in order.
COLUMNS = ("word", "gold", "predicted", "count", "sentences", "example_ids")
#: Sentence ids kept per row as examples.
N_EXAMPLES = 3


def word_texts(sentence_ids: Sequence[str], sentence_words: Sequence[Sequence[str]], unit_ids) -> list[str]:
    """The text of every word id ``<sentence id>#<k>`` of ``unit_ids``: word k of its sentence, the
    sentences given by their ids and word lists."""
    words = dict(zip((str(i) for i in sentence_ids), sentence_words, strict=True))
    out = []
    for unit in unit_ids:
        sentence, k = word_key(unit)
        out.append(str(words[sentence][k]))
    return out


def swap_table(
    words: Sequence[str],
    gold,
    predicted,
    sentences: Sequence[str],
    label_names: Sequence[str],
    min_count: int = 1,
    n_examples: int = N_EXAMPLES,
) -> pd.DataFrame:
    """One row per (word text, gold tag, predicted tag) with gold != predicted: ``count`` = its words,
    ``sentences`` = the distinct sentences they are in, ``example_ids`` = the first ``n_examples`` of those
    sentence ids (their order in the data), tags by name. Rows with count >= ``min_count``, most frequent
    first (then by word). Higher count = a more recurrent pattern."""
    y = np.asarray(gold, dtype=np.int64)
    p = np.asarray(predicted, dtype=np.int64)
    n = y.size
    if p.shape != (n,) or len(words) != n or len(sentences) != n:
        raise DataError(
            f"expected one word text, gold tag, prediction and sentence per word ({n} gold tags)",
            field="words",
        )
    wrong = np.flatnonzero(y != p)
    frame = pd.DataFrame(
        {
            "word": [str(words[i]) for i in wrong],
            "gold": [label_names[y[i]] for i in wrong],
            "predicted": [label_names[p[i]] for i in wrong],
            "sentence": [str(sentences[i]) for i in wrong],
        }
    )
    if frame.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    grouped = frame.groupby(["word", "gold", "predicted"], sort=False)["sentence"]
    table = grouped.agg(
        count="size",
        sentences="nunique",
        example_ids=lambda s: ", ".join(list(dict.fromkeys(s))[:n_examples]),
    ).reset_index()
    table = table[table["count"] >= int(min_count)]
    return table.sort_values(["count", "word"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )[list(COLUMNS)]


def to_markdown(table: pd.DataFrame, top: int = 20) -> str:
    """The first ``top`` rows as a markdown table (``|`` in a word escaped; text, never HTML)."""
    head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)
    rows = [
        "| " + " | ".join(str(row[c]).replace("|", "\\|") for c in COLUMNS) + " |"
        for row in table.head(top).to_dict(orient="records")
    ]
    return "\n".join([head, *rows])
