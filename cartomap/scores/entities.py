"""Entity-level scores of a sequence tagger (named entities): precision, recall and F1 of whole entities per
type, micro- and macro-averaged, as the field reports them (CoNLL's ``conlleval``; the ``seqeval`` library,
which computes them here).

An entity is a span of words with one type, read from BIO tags. A predicted entity is right only when
its span and its type both equal a gold entity's; per word accuracy counts every ``O`` word, entity F1
does not (on a corpus where ``O`` is 87 % of the words, a tagger that finds no entity at all is 87 %
accurate and scores F1 = 0). For each type t, with tp the predicted entities that are right, pred and
gold the numbers of predicted and gold entities:

* precision_t = tp / pred, recall_t = tp / gold, F1_t = 2 P R / (P + R) (0 where a count is 0);
  higher = better, all three in [0, 1]; support_t = gold;
* micro: the same on the counts summed over the types; macro: the unweighted mean of the types'
  values (every type that occurs in the gold or the predicted tags). Support of both: all gold entities.

How tags are read into entities (``scheme``):

* ``None`` (the default): ``conlleval``'s reading (seqeval's default mode), which reads IOB1 and IOB2
  alike: an entity opens at ``B-X``, and at ``I-X`` after ``O`` or after a tag of another type (IOB1,
  where ``I-`` opens an entity and ``B-`` only separates two adjacent ones of one type; and a
  tagger's ``I-X`` that follows ``O`` in IOB2 output); ``E-``/``S-`` (IOBES) close one.
* ``"IOB1"``, ``"IOB2"``, ``"IOE1"``, ``"IOE2"``, ``"IOBES"``, ``"BILOU"``: seqeval's strict mode for that
  scheme: only tag sequences valid in it make an entity (an ``I-X`` after ``O`` in IOB2 makes none).

Gold and predicted tags are lists of tag strings, one list per sentence, of equal lengths.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

#: Strict-mode schemes of seqeval that ``scheme`` may name.
SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
#: The averaged rows of :func:`entity_scores` (after the types, in this order).
AVERAGES = ("micro", "macro")
#: The values of each row.
FIELDS = ("precision", "recall", "f1", "support")
_SEQEVAL_ROWS = {"micro": "micro avg", "macro": "macro avg"}


def entity_scores(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], scheme: str | None = None
) -> dict[str, dict[str, float]]:
    """{type: {precision, recall, f1, support}, ..., "micro": {...}, "macro": {...}} of ``predicted``
    against ``gold`` (see the module text; types sorted, support a whole number). Empty when neither side
    has an entity (the scores are undefined). ValueError when the sentences or their lengths differ, or
    for an unknown ``scheme``."""
    from seqeval.metrics import classification_report

    gold = [list(tags) for tags in gold]
    predicted = [list(tags) for tags in predicted]
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    for k, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sentence {k}: {len(g)} gold tags but {len(p)} predicted")
    options: dict = {}
    if scheme is not None:
        if scheme not in SCHEMES:
            raise ValueError(f"unknown tagging scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
        import seqeval.scheme

        options = {"mode": "strict", "scheme": getattr(seqeval.scheme, scheme)}
    if not gold:
        return {}
    with warnings.catch_warnings():  # a type without entities on one side: 0 by definition, not a warning
        warnings.simplefilter("ignore")
        report = classification_report(gold, predicted, output_dict=True, zero_division=0, **options)
    types = sorted(k for k in report if not k.endswith(" avg"))
    if not types:  # no entity on either side (in strict mode: no valid one)
        return {}
    out = {t: _row(report[t]) for t in types}
    for name, key in _SEQEVAL_ROWS.items():
        out[name] = _row(report[key])
    return out


def _row(values: Mapping[str, float]) -> dict[str, float]:
    return {
        "precision": float(values["precision"]),
        "recall": float(values["recall"]),
        "f1": float(values["f1-score"]),
        "support": int(values["support"]),
    }


def tags_by_sentence(
    codes: Sequence[int], counts: Sequence[int], tag_names: Sequence[str]
) -> list[list[str]]:
    """Flat per-word tag codes (sentence after sentence, ``counts[i]`` words in sentence i) as one list of
    tag names per sentence: the input :func:`entity_scores` takes."""
    names = [str(t) for t in tag_names]
    out, at = [], 0
    flat = [int(c) for c in codes]
    for n in counts:
        out.append([names[c] for c in flat[at : at + int(n)]])
        at += int(n)
    if at != len(flat):
        raise ValueError(f"{len(flat)} tags for {at} words")
    return out


def entity_table(scores: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """:func:`entity_scores` (or a run's saved copy of them) as a frame: one row per type, then micro and
    macro; columns precision, recall, f1, support (index named "entity")."""
    rows = {k: {f: v.get(f) for f in FIELDS} for k, v in scores.items()}
    order = sorted(k for k in rows if k not in AVERAGES) + [k for k in AVERAGES if k in rows]
    table = pd.DataFrame([rows[k] for k in order], index=pd.Index(order, name="entity"), columns=list(FIELDS))
    return table.astype({"precision": float, "recall": float, "f1": float})


def micro_f1(scores: Mapping[str, Mapping[str, float]]) -> float:
    """The micro-averaged entity F1 of :func:`entity_scores` (NaN when the scores are empty)."""
    value = scores.get("micro", {}).get("f1")
    return float(value) if value is not None else math.nan


# ----------------------------------------------------------------------------- a run's history


#: The end of every history key holding a set's micro entity F1 (:func:`f1_key`).
F1_SUFFIX = "_entity_f1"


def f1_key(prefix: str) -> str:
    """The history key of a set's micro entity F1 per epoch: ``dev_entity_f1``, ``test_0_entity_f1``."""
    return f"{prefix}{F1_SUFFIX}"


def scores_key(prefix: str) -> str:
    """The history key of a set's whole :func:`entity_scores` per epoch: ``dev_entities``, ``test_0_entities``."""
    return f"{prefix}_entities"


def history_record(
    prefix: str, logits, labels: Sequence[int], counts: Sequence[int], tag_names: Sequence[str]
) -> dict:
    """The entity scores of one set at one epoch as history keys (:func:`f1_key`, :func:`scores_key`),
    the prediction the argmax of ``logits`` [words, tags]; {} when the set has no entity to score."""
    gold = tags_by_sentence(labels, counts, tag_names)
    predicted = tags_by_sentence(np.asarray(logits).argmax(1), counts, tag_names)
    scores = entity_scores(gold, predicted)
    return {f1_key(prefix): micro_f1(scores), scores_key(prefix): scores} if scores else {}
