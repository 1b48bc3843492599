"""What one item of a token run's review queue is: a word, a sentence, or an entity span.

A token run's detectors score its words (:mod:`cartomap.curation.sources`); a queue can hold them

* ``word`` by word (ids ``<sentence id>#<k>``): a tag to review, the word marked in its sentence;
* by ``sentence`` (ids the sentence ids): one place per sentence, scored by an aggregation of its
  queued words' scores (:mod:`cartomap.scores.aggregate`'s registry: ``min``, ``mean``, ``softmin``; with
  a detector's scores, higher = more suspect, so ``min`` of the words' -score is the worst word's);
* by ``span`` (ids ``<sentence id>#<first>-<last>``, the words first..last): the union of the gold
  entity spans and the spans the model predicts at its last recording, in the sentences of the queued
  words, each scored by its worst queued word (the highest score).

A sentence or span item is decided on one card, the whole sentence: a relabel is the sentence's new
tag list (:mod:`cartomap.curation.tags`), so several words change in one decision.

:func:`group_cards` computes those items' cards (the sentence's words with their gold and predicted
tags and p(predicted), the span, the worst word's p(gold) over the recordings).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.analysis.tokens import split_unit_id
from cartomap.curation.sources import LEVELS, SENTENCE, SPAN, WORD, Candidates, from_detector, queue_ids
from cartomap.curation.tags import encode_tags, entity_spans, scheme_of
from cartomap.errors import CartomapError, RunError
from cartomap.runs.store import Run
from cartomap.scores.metrics import softmax
from cartomap.scores.tokens import sentence_scores

#: The levels whose item is decided as a whole sentence's tag list.
GROUP_LEVELS = (SENTENCE, SPAN)
#: How a span card marks its words in the sentence.
SPAN_MARKS = ("⟦", "⟧")


def check_level(run: Run, level: str) -> str:
    """``level`` when ``run``'s queues can hold it (sentence and span: a run whose examples are sentences
    of words); CartomapError in one line otherwise."""
    if level not in LEVELS:
        raise CartomapError(f"unknown review level {level!r}: expected one of {', '.join(LEVELS)}")
    if level != WORD and not run.task_kind.unit.sentences:
        raise CartomapError(
            f"a review by {level} needs a run of tagged sentences; run {run.id} is a {run.task_kind.name} run"
        )
    return level


def span_id(sentence: str, first: int, last: int) -> str:
    """A span item's id: ``<sentence id>#<first>-<last>`` (words first..last, both in)."""
    return f"{sentence}#{int(first)}-{int(last)}"


def split_span_id(item_id: str) -> tuple[str, int, int]:
    """(sentence id, first word, last word) of :func:`span_id`'s id; CartomapError otherwise."""
    sentence, sep, where = str(item_id).rpartition("#")
    first, dash, last = where.partition("-")
    if not sep or not dash or not first.isdigit() or not last.isdigit() or int(first) > int(last):
        raise CartomapError(f"{item_id!r} is not a span id (<sentence id>#<first word>-<last word>)")
    return sentence, int(first), int(last)


def sentence_of(item_id: str, level: str) -> str:
    """The sentence an item of ``level`` is in (a sentence item: itself)."""
    if level == SENTENCE:
        return str(item_id)
    if level == SPAN:
        return split_span_id(item_id)[0]
    return split_unit_id(item_id)[0]


def _words_by_sentence(words: Candidates) -> dict[str, list[tuple[int, float]]]:
    """{sentence id: [(word index, score), ...]} of word candidates, sentences in their first word's order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for unit, score in zip(words.ids, words.scores, strict=True):
        sentence, k = split_unit_id(unit)
        out.setdefault(sentence, []).append((k, float(score)))
    return out


def by_sentence(words: Candidates, method: str = "min", **options) -> Candidates:
    """One candidate per sentence of the word candidates ``words``, scored by aggregation ``method`` of
    :mod:`cartomap.scores.aggregate` over its words' scores: score(s) = -agg_w(-score(w)) (scores are
    higher = more suspect; the aggregations take lower = worse), so ``min`` gives the worst word's score;
    words without a score left out, a sentence with none NaN."""
    grouped = _words_by_sentence(words)
    names = list(grouped)
    scored = [(g, k, -s) for g, name in enumerate(names) for k, s in grouped[name] if math.isfinite(s)]
    values = np.full(len(names), np.nan)
    if scored:
        group, word, quality = (np.asarray(c) for c in zip(*scored, strict=True))
        table = sentence_scores(quality, group, word, method=method, n_sentences=len(names), **options)
        values = -table["score"].to_numpy(dtype=np.float64)
    return Candidates(
        tuple(names), tuple(float(v) for v in values), f"{words.queued_by} by sentence ({method})", SENTENCE
    )


def predicted_codes(run: Run) -> dict[str, int] | None:
    """{word id: the tag code of highest probability at the last recording}, or None without dynamics."""
    try:
        ids, logits = run.dynamics(run.recorded_source())
    except (RunError, OSError, ValueError, KeyError):
        return None
    if logits.ndim != 3 or not logits.shape[0]:
        return None
    return dict(zip((str(i) for i in ids), logits[-1].argmax(axis=1).tolist(), strict=True))


def _sentences(run: Run) -> pd.DataFrame:
    """The run's sentences by id: the words and the gold tag codes."""
    kind = run.task_kind
    examples = run.examples(columns=("id", kind.text_fields[0], kind.label_field))
    return examples.set_index(examples["id"].astype(str))


def run_scheme(run: Run) -> str | None:
    """The BIO scheme of ``run``'s gold tags as its file has them (:func:`cartomap.curation.tags.scheme_of`:
    IOB1, IOB2, or None)."""
    names = np.asarray(run.label_names, dtype=object)
    tags = _sentences(run)[run.task_kind.label_field]
    return scheme_of([list(names[np.asarray(t, dtype=np.int64)]) for t in tags])


def by_span(run: Run, words: Candidates) -> Candidates:
    """One candidate per entity span (gold or predicted at the last recording, the union) of the sentences
    of the word candidates ``words``, scored by its worst queued word: score = max of its words' scores
    (NaN when none of its words is scored); spans holding no queued word are left out."""
    names = np.asarray(run.label_names, dtype=object)
    sentences = _sentences(run)
    predicted = predicted_codes(run) or {}
    tags = run.task_kind.label_field
    ids, scores = [], []
    for sentence, scored in _words_by_sentence(words).items():
        score_of = dict(scored)
        gold = list(names[np.asarray(sentences.loc[sentence, tags], dtype=np.int64)])
        found = {(s, e) for s, e, _ in entity_spans(gold)}
        if predicted:
            guess = [str(names[predicted[f"{sentence}#{k}"]]) for k in range(len(gold))]
            found |= {(s, e) for s, e, _ in entity_spans(guess)}
        for first, last in sorted(found):
            inside = [score_of[k] for k in range(first, last + 1) if k in score_of]
            if not inside:
                continue
            finite = [s for s in inside if math.isfinite(s)]
            ids.append(span_id(sentence, first, last))
            scores.append(max(finite) if finite else math.nan)
    if not ids:
        raise CartomapError(f"no gold or predicted entity holds any of the {len(words.ids):,} queued words")
    return Candidates(tuple(ids), tuple(scores), f"{words.queued_by} by span", SPAN)


def regroup(run: Run, words: Candidates, level: str, method: str = "min") -> Candidates:
    """Word candidates of a token run as candidates of ``level`` (:func:`by_sentence` with ``method``,
    :func:`by_span`; ``word``: as they are)."""
    check_level(run, level)
    if level == WORD:
        return words
    if words.level != WORD:
        raise CartomapError(f"candidates by {words.level} cannot be grouped again by {level}")
    return by_sentence(words, method) if level == SENTENCE else by_span(run, words)


def from_detector_by(run: Run, name: str, top: int, level: str = WORD, method: str = "min", **options):
    """The ``top`` items of ``level`` detector ``name`` finds most suspect on a run (``options``: those of
    :func:`cartomap.curation.sources.from_detector`): every word scored, then grouped (:func:`regroup`)."""
    if check_level(run, level) == WORD:
        return from_detector(run, name, top, **options)
    words = from_detector(run, name, max(len(queue_ids(run)), 1), **options)
    return regroup(run, words, level, method).ordered(top)


# --------------------------------------------------------------------------- the cards
def _marked(words: Sequence[str], first: int, last: int) -> str:
    """The sentence's words joined by spaces, words first..last between :data:`SPAN_MARKS`."""
    out = [str(w) for w in words]
    if 0 <= first <= last < len(out):
        out[first] = SPAN_MARKS[0] + out[first]
        out[last] = out[last] + SPAN_MARKS[1]
    return " ".join(out)


def _probabilities(run: Run) -> tuple[dict[str, int], np.ndarray] | None:
    """({word id: row}, softmax probabilities [E, words, tags]) of the run's recordings, or None."""
    try:
        ids, logits = run.dynamics(run.recorded_source())
    except (RunError, OSError, ValueError, KeyError):
        return None
    if logits.ndim != 3 or not logits.shape[0]:
        return None
    return {str(i): k for k, i in enumerate(ids)}, softmax(np.asarray(logits, dtype=np.float64))


def _card(sentence: str, words, gold_codes, first: int, last: int, names, found) -> dict:
    """One group item's card fields (see :func:`group_cards`)."""
    gold = [str(names[c]) for c in gold_codes]
    card = {
        "sentence_id": sentence,
        "span_first": first,
        "span_last": last,
        "words": [str(w) for w in words],
        "gold_tags": gold,
        "gold": encode_tags(gold),
        "gold_index": -1,
    }
    if found is None:
        return {
            **card,
            "predicted_tags": [],
            "p_predicted_words": [],
            "predicted": None,
            "worst_word": -1,
            "p_predicted": math.nan,
            "p_gold": math.nan,
            "p_gold_epochs": [],
        }
    rows_of, probs = found
    rows = np.asarray([rows_of[f"{sentence}#{k}"] for k in range(len(gold))], dtype=np.int64)
    final = probs[-1, rows]  # [words, tags]
    pred = final.argmax(axis=1)
    p_gold = final[np.arange(len(rows)), np.asarray(gold_codes, dtype=np.int64)]
    lo, hi = (first, last) if first >= 0 else (0, len(rows) - 1)
    worst = lo + int(np.argmin(p_gold[lo : hi + 1]))
    predicted = [str(names[p]) for p in pred]
    return {
        **card,
        "predicted_tags": predicted,
        "p_predicted_words": final[np.arange(len(rows)), pred].tolist(),
        "predicted": encode_tags(predicted),
        "worst_word": worst,
        "p_predicted": float(final[worst, pred[worst]]),
        "p_gold": float(p_gold[worst]),
        "p_gold_epochs": probs[:, rows[worst], int(gold_codes[worst])].tolist(),
    }


def group_cards(run: Run, candidates: Candidates) -> pd.DataFrame:
    """One row per candidate of a sentence or span level, in their order: id, position, score, queued_by,
    level, the text field (the sentence, a span's words marked), sentence_id, span_first / span_last (-1
    for a sentence), words, gold_tags, predicted_tags, p_predicted_words (per word), gold and predicted
    (the tag lists as one value, :func:`cartomap.curation.tags.encode_tags`), worst_word (the lowest
    p(gold) at the last recording, in the span), its p_predicted, p_gold and p_gold_epochs; votes None and
    no neighbours."""
    level = check_level(run, candidates.level)
    names = np.asarray(run.label_names, dtype=object)
    kind = run.task_kind
    field, tags = kind.text_fields[0], kind.label_field
    sentences = _sentences(run)
    found = _probabilities(run)
    rows = []
    for position, (item, score) in enumerate(zip(candidates.ids, candidates.scores, strict=True)):
        sentence, first, last = (item, -1, -1) if level == SENTENCE else split_span_id(item)
        if sentence not in sentences.index:
            raise CartomapError(f"{item!r}: run {run.id} has no sentence {sentence!r}")
        words = list(sentences.loc[sentence, field])
        if last >= len(words):
            raise CartomapError(f"{item!r}: sentence {sentence!r} has {len(words)} words")
        card = _card(sentence, words, sentences.loc[sentence, tags], first, last, names, found)
        text = _marked(words, first, last) if level == SPAN else " ".join(str(w) for w in words)
        rows.append(
            {
                "id": item,
                "position": position,
                "score": float(score),
                "queued_by": candidates.queued_by,
                "level": level,
                field: text,
                **card,
            }
        )
    frame = pd.DataFrame(rows)
    frame["votes"] = None
    for column in ("ids", "labels", "similarity", field):
        frame[f"neighbour_{column}"] = [[] for _ in range(len(frame))]
    return frame


#: Columns of :func:`card_words`, in order.
CARD_WORD_COLUMNS = ("word", "token", "in_span", "gold", "predicted", "p_predicted", "new")


def card_words(card: dict, new_tags: Sequence[str] | None = None) -> pd.DataFrame:
    """A sentence or span card's sentence, one row per word (:data:`CARD_WORD_COLUMNS`): its index, the
    word, whether it is in the span under review (every word of a sentence item), its gold and predicted
    tags, p(predicted) at the last recording (NaN without recordings) and ``new_tags`` (the reviewer's
    edit; the gold tags without one)."""

    def listed(key: str) -> list:
        value = card.get(key)
        return [] if value is None or isinstance(value, float) else list(value)

    words, gold = [str(w) for w in listed("words")], [str(t) for t in listed("gold_tags")]
    predicted, probs = listed("predicted_tags"), listed("p_predicted_words")
    first, last = int(card.get("span_first", -1)), int(card.get("span_last", -1))
    n = len(words)
    return pd.DataFrame(
        {
            "word": np.arange(n, dtype=np.int64),
            "token": words,
            "in_span": [first < 0 or first <= k <= last for k in range(n)],
            "gold": gold,
            "predicted": [str(t) for t in predicted] if len(predicted) == n else [""] * n,
            "p_predicted": np.asarray(probs if len(probs) == n else [np.nan] * n, dtype=np.float64),
            "new": list(new_tags) if new_tags is not None else gold,
        },
        columns=list(CARD_WORD_COLUMNS),
    )
