"""cleanlab's token classification on flat words: label issues, word and sentence label quality.

cleanlab's ``token_classification`` functions take one list per sentence (its words' gold tags, its
words' predicted probabilities [W, C]); cartomap keeps words **flat** (the M words of all sentences one
after another, :mod:`cartomap.scores.tokens`), each with the key of its sentence. These wrappers cut the
flat arrays into sentences by that key, call cleanlab, and hand the results back flat, in word order:

* :func:`issue_mask`: ``cleanlab.token_classification.filter.find_label_issues`` (confident learning on
  the words) as a bool [M];
* :func:`quality_scores`: ``cleanlab.token_classification.rank.get_label_quality_scores``: each word's
  label quality (self-confidence, p(gold)) and its sentence's (``min`` over its words, cleanlab's default,
  or ``softmin``), both [M], in [0, 1], higher = better labelled.

The probabilities should be out-of-sample (k-fold held-out: :mod:`cartomap.experiments.token_folds`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cartomap.errors import DataError
from cartomap.tasks.base import word_key

#: cleanlab's default way of scoring a sentence from its words (``get_label_quality_scores``).
CLEANLAB_SENTENCE_METHOD = "min"


def sentence_keys(unit_ids: Sequence[str]) -> np.ndarray:
    """The sentence id of every word id ``<sentence id>#<k>`` (object [M]); DataError for an id without
    ``#<k>`` (:func:`cartomap.tasks.base.word_key`)."""
    return np.asarray([word_key(unit)[0] for unit in unit_ids], dtype=object)


def split_by_sentence(sentences) -> list[np.ndarray]:
    """The word positions of each sentence, sentences in order of their first word. DataError when a
    sentence's words are not contiguous (flat order is sentence after sentence)."""
    keys = np.asarray(sentences)
    if keys.size == 0:
        return []
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    groups = np.split(np.arange(keys.size), starts[1:])
    if len({keys[g[0]] for g in groups}) != len(groups):
        raise DataError("the words of a sentence must be next to each other", field="sentences")
    return groups


def _lists(labels, probs, sentences) -> tuple[list, list, list[np.ndarray]]:
    y = np.asarray(labels, dtype=np.int64)
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != y.size or np.asarray(sentences).shape != (y.size,):
        raise DataError(
            f"expected probabilities [{y.size}, classes] and a sentence key per word, got {p.shape}",
            field="pred_probs",
        )
    groups = split_by_sentence(sentences)
    return [y[g].tolist() for g in groups], [p[g] for g in groups], groups


def issue_mask(labels, probs, sentences) -> np.ndarray:
    """Bool [M]: the words ``cleanlab.token_classification.filter.find_label_issues`` flags (True = likely
    mislabelled), one job (cleanlab's default process pool can hang in a threaded process)."""
    from cleanlab.token_classification.filter import find_label_issues

    y, p, groups = _lists(labels, probs, sentences)
    out = np.zeros(sum(len(g) for g in groups), dtype=bool)
    if not groups:
        return out
    for s, w in find_label_issues(y, p, n_jobs=1):
        out[groups[int(s)][int(w)]] = True
    return out


def quality_scores(
    labels, probs, sentences, sentence_method: str = CLEANLAB_SENTENCE_METHOD
) -> tuple[np.ndarray, np.ndarray]:
    """(word quality [M], the quality of each word's sentence [M]) by
    ``cleanlab.token_classification.rank.get_label_quality_scores`` (word: self-confidence p(gold);
    sentence: ``min`` or ``softmin`` of its words'), in [0, 1]; higher = better labelled."""
    from cleanlab.token_classification.rank import get_label_quality_scores

    y, p, groups = _lists(labels, probs, sentences)
    word = np.zeros(sum(len(g) for g in groups), dtype=np.float64)
    sentence = np.zeros_like(word)
    if not groups:
        return word, sentence
    per_sentence, per_word = get_label_quality_scores(y, p, sentence_score_method=sentence_method)
    for g, s_score, w_scores in zip(groups, per_sentence, per_word, strict=True):
        word[g] = np.asarray(w_scores, dtype=np.float64)
        sentence[g] = float(s_score)
    return word, sentence
