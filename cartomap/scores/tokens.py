"""Training dynamics of token classification (named entities, part of speech): per word and per sentence.

Small pure functions on numpy arrays. Sentences have different lengths, so words are kept **flat**:
the M words of all sentences one after another, each named by the key (``sentence``, ``word``): the
0-based sentence index and the 0-based word index inside it (:func:`flat_keys` makes the keys from
the sentence lengths). Shapes used throughout:

* ``word_ids``: a fast tokenizer's ``encoding.word_ids()``, one entry per sub-token, None for the
  special tokens
* ``probs``: ``[E, M, C]`` probabilities of every tag per epoch and word
* ``gold_probs``: ``[E, M]`` probability of the gold tag after each epoch
* ``correct``: ``[E, M]`` bool, the word's predicted tag was its gold tag at that epoch
* ``sentence``, ``word``: ``[M]`` int keys

A word is scored by its first sub-token (the Hugging Face convention for token classification: the
other sub-tokens get the label -100, which the loss ignores). Word metrics are the sequence-level
data-map metrics of :mod:`cartomap.scores.metrics` applied to each word as if it were an example
(with word logits ``[E, M, C]`` at hand, :func:`cartomap.scores.metrics.compute_metrics` on them gives
every metric of that module per word, AUM and EL2N included, rows in flat order); a sentence is then
scored from its words' scores by an aggregation picked by name
(:data:`SENTENCE_METHODS`: ``min``, ``mean``, ``softmin``; the ones of :mod:`cartomap.scores.aggregate`
offered for words), as cleanlab's token-classification
``get_label_quality_scores`` does (there a sentence's label quality is the min over its tokens by
default). Each docstring gives the formula and the direction of the score.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import aggregate, ambiguity, metrics
from cartomap.scores.columns import score_columns
from cartomap.tasks.units import Unit

#: The label of the sub-tokens that are not scored (special tokens, a word's later pieces): the
#: ``ignore_index`` of PyTorch's cross-entropy, which Hugging Face's token-classification models use.
IGNORE_INDEX = -100
#: cleanlab's default temperature of the ``softmin`` sentence score.
DEFAULT_SOFTMIN_TEMPERATURE = aggregate.WORD_SOFTMIN_TEMPERATURE

WORD_COLUMNS: tuple[str, ...] = (
    "sentence",
    "word",
    *metrics.UNIT_METRICS,
    *(name for name in ambiguity.MAP_SCORES if name != ambiguity.VARIABILITY),  # where the words have them
    "region",
)
SENTENCE_COLUMNS: tuple[str, ...] = ("sentence", "n_words", "score", "worst_word", "worst_score")


# --------------------------------------------------------------------------- sub-token alignment


def _check_word_ids(word_ids: Sequence[int | None]) -> list[int | None]:
    ids = list(word_ids)
    previous = -1
    for position, w in enumerate(ids):
        if w is None:
            continue
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 0:
            raise DataError(
                f"sub-token {position} has word id {w!r}; expected None or a word index >= 0",
                field="word_ids",
            )
        if w < previous:
            raise DataError(
                f"sub-token {position} has word id {w} after word {previous}: the word ids of one sentence "
                "must not decrease (encode one sentence, not a pair)",
                field="word_ids",
            )
        previous = int(w)
    return ids


def first_subword_alignment(word_ids: Sequence[int | None], n_words: int | None = None) -> np.ndarray:
    """first[w] = the position of word w's first sub-token in ``word_ids``, int [W].

    W = ``n_words`` when given (the sentence's length), else 1 + the largest word id. A word with no
    sub-token (cut off by truncation at ``max_length``, or a word the tokenizer drops) gets -1.
    """
    ids = _check_word_ids(word_ids)
    seen = [int(w) for w in ids if w is not None]
    count = (max(seen) + 1 if seen else 0) if n_words is None else int(n_words)
    if seen and max(seen) >= count:
        raise DataError(f"word id {max(seen)} is outside a sentence of {count} words", field="word_ids")
    first = np.full(count, -1, dtype=np.int64)
    for position, w in enumerate(ids):
        if w is not None and first[w] < 0:
            first[w] = position
    return first


def align_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> np.ndarray:
    """Sub-token labels, int [T]: label[t] = word_labels[w] when sub-token t is the first of word w,
    else :data:`IGNORE_INDEX` (-100: special tokens, a word's later sub-tokens)."""
    labels = np.asarray(word_labels, dtype=np.int64)
    first = first_subword_alignment(word_ids, n_words=len(labels))
    out = np.full(len(word_ids), IGNORE_INDEX, dtype=np.int64)
    kept = first >= 0
    out[first[kept]] = labels[kept]
    return out


def gather_words(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The rows of sub-token ``values`` ([T, ...], e.g. logits [T, C]) at each word's first sub-token:
    [W, ...]; a word without a sub-token (first = -1) gets NaN."""
    values = np.asarray(values, dtype=np.float64)
    first = np.asarray(first, dtype=np.int64)
    out = np.full((len(first), *values.shape[1:]), np.nan)
    kept = first >= 0
    out[kept] = values[first[kept]]
    return out


# --------------------------------------------------------------------------- flat keys


def flat_keys(lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(sentence [M], word [M]) for sentences of ``lengths`` words, words in order: sentence i repeats
    lengths[i] times, word counts 0 .. lengths[i] - 1."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1 or (lengths.size and lengths.min() < 0):
        raise DataError("expected a list of sentence lengths >= 0", field="lengths")
    sentence = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    word = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)
    return sentence, word


def split_flat(values: np.ndarray, lengths: Sequence[int]) -> list[np.ndarray]:
    """Flat per-word ``values`` ([M, ...], words in :func:`flat_keys` order) back into one array per
    sentence."""
    return np.split(np.asarray(values), np.cumsum(np.asarray(lengths, dtype=np.int64))[:-1])


def _check_keys(sentence: np.ndarray, word: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    sentence = np.asarray(sentence)
    word = np.asarray(word)
    for name, keys in (("sentence", sentence), ("word", word)):
        if keys.shape != (n,):
            raise DataError(f"expected {n} keys (one per word), got shape {keys.shape}", field=name)
        if n and (not np.issubdtype(keys.dtype, np.integer) or keys.min() < 0):
            raise DataError("expected integer indices >= 0", field=name)
    sentence = sentence.astype(np.int64, copy=False)
    word = word.astype(np.int64, copy=False)
    if n:
        order = np.lexsort((word, sentence))
        same = (np.diff(sentence[order]) == 0) & (np.diff(word[order]) == 0)
        if same.any():
            k = order[int(np.flatnonzero(same)[0]) + 1]
            raise DataError(
                f"key (sentence {int(sentence[k])}, word {int(word[k])}) appears twice; expected one row per word",
                field="word",
            )
    return sentence, word


# --------------------------------------------------------------------------- word metrics


def correct_from_probs(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """correct[e, m] = (argmax_k probs[e, m, k] == labels[m]), bool [E, M]; the first maximum wins
    ties, as np.argmax (and :func:`cartomap.scores.metrics.correctness`)."""
    return np.argmax(np.asarray(probs), axis=-1) == np.asarray(labels)[None, :]


def word_metrics(
    gold_probs: np.ndarray,
    correct: np.ndarray,
    sentence: np.ndarray,
    word: np.ndarray,
    *,
    regions: metrics.RegionRule | None = None,
    axes: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """One row per word (the columns of :data:`WORD_COLUMNS` it has), from ``gold_probs`` [E, M] and
    ``correct`` [E, M] with their keys ``sentence`` and ``word`` [M], rows in the given order.

    The sequence-level definitions (Swayamdipta et al., 2020; Toneva et al., 2019), per word m:
    confidence = mean_e p_e(y*) (higher = easier); variability = std_e p_e(y*), ddof 0 (higher = more
    ambiguous); correctness = (1/E) sum_e correct_e (higher = easier); correct_count = sum_e correct_e;
    forgetfulness = #{e : correct_e and not correct_e+1} (higher = less stable); never_learned = no
    epoch correct; region = :func:`cartomap.scores.metrics.region_partition` over all words by ``regions``
    (default :class:`~cartomap.scores.metrics.RegionRule`), on the rule's axis.

    ``axes``: the words' other ambiguity scores ({name of :data:`cartomap.scores.ambiguity.MAP_SCORES`:
    values [M]}, :func:`cartomap.scores.ambiguity.scores` of their tag probabilities), carried as columns.
    p(gold) alone gives only variability: a rule on another axis needs that axis among ``axes``
    (:func:`word_metrics_from_probs` computes them all), else DataError naming it.
    """
    gold = np.asarray(gold_probs, dtype=np.float64)
    hits = np.asarray(correct)
    if gold.ndim != 2 or gold.shape[0] == 0:
        raise DataError(
            f"expected a 2-d array [epochs >= 1, words], got shape {gold.shape}", field="gold_probs"
        )
    if hits.shape != gold.shape:
        raise DataError(f"expected shape {gold.shape} like gold_probs, got {hits.shape}", field="correct")
    if hits.dtype != bool:
        raise DataError(f"expected a bool array, got dtype {hits.dtype}", field="correct")
    if not np.all(np.isfinite(gold)) or gold.min(initial=0.0) < 0 or gold.max(initial=0.0) > 1:
        raise DataError("expected probabilities in [0, 1]", field="gold_probs")
    sentence, word = _check_keys(sentence, word, gold.shape[1])
    conf = metrics.confidence(gold)
    var = metrics.variability(gold)
    others = {}
    for name, values in (axes or {}).items():
        if name not in ambiguity.MAP_SCORES:
            raise DataError(
                f"not a score of the map; expected one of {', '.join(ambiguity.MAP_SCORES)}", field=name
            )
        values = np.asarray(values, dtype=np.float64)
        if values.shape != conf.shape:
            raise DataError(
                f"expected {len(conf)} values (one per word), got shape {values.shape}", field=name
            )
        if name != ambiguity.VARIABILITY:
            others[name] = values
    rule = regions or metrics.RegionRule()
    on_axis = {ambiguity.VARIABILITY: var, **others}.get(rule.axis)
    if on_axis is None:
        raise DataError(
            f"the regions are drawn on {rule.axis} ({rule.axis_label}), which p(gold) alone does not give: "
            "pass the words' tag probabilities (word_metrics_from_probs) or their scores (axes)",
            field=rule.axis,
        )
    frame = pd.DataFrame(
        {
            "sentence": sentence,
            "word": word,
            "confidence": conf,
            "variability": var,
            **metrics.hit_columns(hits),
            **others,
            "region": metrics.region_partition(conf, on_axis, rule),
        },
    )
    frame = frame[[c for c in WORD_COLUMNS if c in frame.columns]]
    frame.attrs["regions"] = rule.to_dict()
    return frame


def word_metrics_from_probs(
    probs: np.ndarray,
    labels: np.ndarray,
    sentence: np.ndarray,
    word: np.ndarray,
    *,
    regions: metrics.RegionRule | None = None,
) -> pd.DataFrame:
    """:func:`word_metrics` from the tag probabilities ``probs`` [E, M, C] and gold tags ``labels`` [M]:
    p_e(y*) = probs[e, m, labels[m]], correct = argmax == gold, and every ambiguity score of the map
    (:func:`cartomap.scores.ambiguity.scores` over all the tags: a word's as a sequence's example's)."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim != 3:
        raise DataError(f"expected a 3-d array [epochs, words, tags], got shape {probs.shape}", field="probs")
    if labels.shape != (probs.shape[1],):
        raise DataError(
            f"expected {probs.shape[1]} gold tags (one per word), got shape {labels.shape}", field="labels"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= probs.shape[2]):
        raise DataError(f"gold tags must be in [0, {probs.shape[2]})", field="labels")
    gold = metrics.gold_probabilities(probs, labels)
    axes = ambiguity.scores(probs, labels)
    return word_metrics(gold, correct_from_probs(probs, labels), sentence, word, regions=regions, axes=axes)


# --------------------------------------------------------------------------- sentence scores


def _groups(scores: np.ndarray, sentence: np.ndarray, word: np.ndarray):
    """(order, starts, group sentence ids): rows sorted by sentence, then score, then word."""
    order = np.lexsort((word, scores, sentence))
    sorted_sentence = sentence[order]
    starts = np.flatnonzero(np.r_[True, sorted_sentence[1:] != sorted_sentence[:-1]]) if len(order) else order
    return order, starts, sorted_sentence[starts] if len(order) else sorted_sentence


def _by_sentence(
    method: str, scores: np.ndarray, sentence: np.ndarray, **options
) -> tuple[np.ndarray, np.ndarray]:
    """(the sentence indices that have words, sorted; their scores by the aggregation ``method`` of
    :mod:`cartomap.scores.aggregate`), the words of a sentence taken from the lowest score up."""
    scores, sentence = np.asarray(scores), np.asarray(sentence)
    order, starts, ids = _groups(scores, sentence, np.zeros_like(sentence))
    values, _ = aggregate.aggregate(
        scores[order], _group_ranks(starts, len(order)), len(starts), method=method, unit=Unit.WORD, **options
    )
    return ids, values


def _group_ranks(starts: np.ndarray, n: int) -> np.ndarray:
    """0, 1, ... per group of the sorted rows: group k repeats (starts[k + 1] - starts[k]) times."""
    return np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))


def min_score(scores: np.ndarray, sentence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """score(s) = min over the words w of s of score(w): the sentence is as good as its worst word
    (cleanlab's default, ``sentence_score_method="min"``; :func:`cartomap.scores.aggregate.group_min`).
    Lower = more suspect / harder.

    Like every aggregation of :data:`SENTENCE_METHODS` it returns (the sentence indices that have words,
    sorted; their scores); :func:`sentence_scores` picks one by name."""
    return _by_sentence("min", scores, sentence)


def mean_score(scores: np.ndarray, sentence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """score(s) = (1/|s|) sum over the words w of s of score(w) (:func:`cartomap.scores.aggregate.group_mean`,
    summed from the lowest score up). Lower = more suspect / harder; one bad word in a long sentence moves
    it little. Returns (sentence ids, scores)."""
    return _by_sentence("mean", scores, sentence)


def softmin_score(
    scores: np.ndarray, sentence: np.ndarray, temperature: float = DEFAULT_SOFTMIN_TEMPERATURE
) -> tuple[np.ndarray, np.ndarray]:
    """score(s) = sum_w score(w) * softmax_w((1 - score(w)) / t), cleanlab's ``softmin``
    (:func:`cartomap.scores.aggregate.group_softmin`): a weighted mean whose weights grow as a word's
    score falls. t -> 0 gives :func:`min_score` (t = 0 is exactly min), t -> inf :func:`mean_score` (t =
    inf is exactly mean); cleanlab's default t = 0.05. Lower = more suspect / harder; unlike min, every
    word counts a little. Returns (sentence ids, scores)."""
    return _by_sentence("softmin", scores, sentence, temperature=temperature)


#: The sentence aggregations (:func:`cartomap.scores.aggregate.names` for ``"word"``) as functions:
#: f(word scores [M], sentence [M], **options) -> (sentence ids, scores).
SENTENCE_METHODS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "min": min_score,
    "mean": mean_score,
    "softmin": softmin_score,
}


def sentence_method(name: str) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The aggregation ``name`` offered for sentences (:func:`cartomap.scores.aggregate.aggregation`) as
    f(word scores, sentence, **options) -> (sentence ids, scores): the function of
    :data:`SENTENCE_METHODS` for a built-in name; DataError listing the names otherwise."""
    aggregate.aggregation(name, Unit.WORD)
    return SENTENCE_METHODS.get(name) or functools.partial(_by_sentence, name)


def sentence_scores(
    word_scores: np.ndarray,
    sentence: np.ndarray,
    word: np.ndarray,
    *,
    method: str = "min",
    n_sentences: int | None = None,
    **options,
) -> pd.DataFrame:
    """One row per sentence 0 .. n_sentences - 1 (:data:`SENTENCE_COLUMNS`): its number of words, its
    score by ``method`` (:data:`SENTENCE_METHODS`; ``options`` such as ``temperature`` go to it), and
    its worst word: the word index with the lowest score (the lowest index among equals) and that score.

    ``word_scores`` [M] is any per-word score where lower = worse (confidence, correctness, a label
    quality score); the sentence score keeps that direction. ``n_sentences`` defaults to 1 + the
    largest sentence index; a sentence without words gets NaN scores and worst_word -1.
    """
    aggregate.aggregation(method, Unit.WORD)
    scores = np.asarray(word_scores, dtype=np.float64)
    if scores.ndim != 1:
        raise DataError(f"expected one score per word, got shape {scores.shape}", field="word_scores")
    if not np.all(np.isfinite(scores)):
        raise DataError(
            "expected finite scores (a word without a score cannot be ranked)", field="word_scores"
        )
    sentence, word = _check_keys(sentence, word, len(scores))
    count = (int(sentence.max()) + 1 if len(sentence) else 0) if n_sentences is None else int(n_sentences)
    if len(sentence) and sentence.max() >= count:
        raise DataError(
            f"sentence index {int(sentence.max())} is outside {count} sentences", field="sentence"
        )
    # one sort for both: a sentence's words from the lowest score up (the lowest word index among
    # equals), so its sums run in that order and its first word is its worst
    order, starts, worst_ids = _groups(scores, sentence, word)
    values, _ = aggregate.aggregate(
        scores[order], _group_ranks(starts, len(order)), len(starts), method=method, unit=Unit.WORD, **options
    )
    out_score = np.full(count, np.nan)
    out_score[worst_ids] = values
    worst_word = np.full(count, -1, dtype=np.int64)
    worst_score = np.full(count, np.nan)
    worst_word[worst_ids] = word[order[starts]]
    worst_score[worst_ids] = scores[order[starts]]
    return pd.DataFrame(
        {
            "sentence": np.arange(count, dtype=np.int64),
            "n_words": np.bincount(sentence, minlength=count).astype(np.int64),
            "score": out_score,
            "worst_word": worst_word,
            "worst_score": worst_score,
        },
        columns=list(SENTENCE_COLUMNS),
    )


def sentence_metrics(
    words: pd.DataFrame, *, method: str = "min", n_sentences: int | None = None, **options
) -> pd.DataFrame:
    """A sentence-level data map from :func:`word_metrics`' frame: per sentence its confidence by
    ``method`` over its words' confidences (:func:`sentence_scores`, lower = harder), its worst word
    (lowest confidence) and that word's variability, correctness, forgetfulness and the other score
    columns of a word's map the words have (:func:`cartomap.scores.columns.score_columns`: the ambiguity
    scores, the detectors' columns), so that with ``min`` a sentence sits on the map exactly where its
    worst word does, on any axis, and every detector of words scores it as it scores that word."""
    table = sentence_scores(
        words["confidence"].to_numpy(),
        words["sentence"].to_numpy(),
        words["word"].to_numpy(),
        method=method,
        n_sentences=n_sentences,
        **options,
    )
    worst = table[["sentence", "worst_word"]].rename(columns={"worst_word": "word"})
    picked = worst.merge(words, on=["sentence", "word"], how="left")
    out = pd.DataFrame(
        {
            "sentence": table["sentence"],
            "n_words": table["n_words"],
            "confidence": table["score"],
            "worst_word": table["worst_word"],
            "worst_confidence": table["worst_score"],
        }
    )
    for column in ("variability", "correctness", "forgetfulness"):
        out[column] = picked[column].to_numpy(dtype=np.float64)
    for column in score_columns(Unit.WORD):  # the worst word's other score columns, where the words have them
        if column not in out.columns and column in picked.columns:
            out[column] = picked[column].to_numpy(dtype=np.float64)
    return out
