"""Consensus-based pruning of suspect labels (the SNLI cleaning paper; METHODS.md section 3).

The pure computational core: k-fold assignment, mismatch categories ``PXGY`` (predicted X, gold Y),
model confidence of a mismatch on raw logits, threshold selection and sweeps, and the Model 0 /
Model 1 mismatch analysis on the test set, and the categories named by their labels
("P:neutral G:entailment"; the shorthand PXGY only in the NLI class order). No training happens here: callers train on 9 folds,
score the held-out fold and pass the logits in.

Shapes used throughout:

* ``logits``: ``[N, C]`` raw scores (not probabilities; values above 4 occur)
* ``gold`` / ``labels`` / ``pred``: ``[N]`` integer class indices in ``[0, C)``
  (NLI: 0 entailment, 1 neutral, 2 contradiction)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from cartomap.errors import DataError

#: The category pruned in the paper: predicted neutral, gold entailment.
DEFAULT_CATEGORIES: tuple[str, ...] = ("P1G0",)
#: The paper's threshold on model confidence (4.0 is suggested as stricter).
DEFAULT_THRESHOLD = 2.0
#: Thresholds for :func:`threshold_sweep`: 0, 0.5, ..., 6.
DEFAULT_SWEEP: tuple[float, ...] = tuple(float(t) for t in np.arange(0.0, 6.01, 0.5))

#: :func:`mismatch_types` codes.
TYPE_NONE, TYPE_ONLY_MODEL0, TYPE_ONLY_MODEL1, TYPE_BOTH = 0, 1, 2, 3


# --------------------------------------------------------------------------- validation


def as_labels(values, name: str, n: int | None = None, n_classes: int | None = None) -> np.ndarray:
    """Return ``values`` as int64 [N] or raise DataError (wrong rank, length, non-integer, out of range)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"expected a 1-d array of class indices, got shape {arr.shape}", field=name)
    if n is not None and arr.shape[0] != n:
        raise DataError(f"expected {n} entries (one per example), got {arr.shape[0]}", field=name)
    non_integer = arr.size and not np.issubdtype(arr.dtype, np.integer)
    if non_integer and (not np.issubdtype(arr.dtype, np.number) or not np.all(np.equal(np.mod(arr, 1), 0))):
        raise DataError("must be integer class indices", field=name)
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise DataError(f"class index {int(arr.min())} is negative", field=name)
    if n_classes is not None and arr.size and arr.max() >= n_classes:
        bad = int(np.flatnonzero(arr >= n_classes)[0])
        raise DataError(
            f"class index {int(arr[bad])} of example {bad} is outside [0, {n_classes})", field=name
        )
    return arr


def check_logits(logits, gold) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(logits float64 [N, C], gold int64 [N])`` or raise DataError."""
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2:
        raise DataError(f"expected a 2-d array [examples, classes], got shape {z.shape}", field="logits")
    if z.shape[1] < 2:
        raise DataError("need at least 2 classes", field="logits")
    g = as_labels(gold, "gold", n=z.shape[0], n_classes=z.shape[1])
    return z, g


# --------------------------------------------------------------------------- folds


def stratified_folds(labels, k: int = 10, seed: int = 0) -> np.ndarray:
    """Fold index in ``[0, k)`` per example: sklearn ``StratifiedKFold(k, shuffle=True, random_state=seed)``.

    Example ``i`` is held out in fold ``folds[i]``; train on ``folds != f``, score ``folds == f``.
    Every class must have at least ``k`` examples (else DataError, a ValueError).
    """
    y = as_labels(labels, "labels")
    if int(k) != k or k < 2:
        raise DataError(f"k must be an integer >= 2, got {k!r}", field="k")
    k = int(k)
    if y.size < k:
        raise DataError(f"{y.size} examples cannot be split into {k} folds", field="labels")
    classes, counts = np.unique(y, return_counts=True)
    small = [(int(c), int(n)) for c, n in zip(classes, counts, strict=True) if n < k]
    if small:
        desc = ", ".join(f"class {c}: {n}" for c, n in small)
        raise DataError(
            f"every class needs at least k={k} examples for stratified folds ({desc})", field="labels"
        )
    folds = np.empty(y.size, dtype=np.int64)
    from sklearn.model_selection import StratifiedKFold  # imported when used: sklearn takes ~0.6 s

    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    for f, (_, held_out) in enumerate(splitter.split(np.zeros(y.size), y)):
        folds[held_out] = f
    return folds


# --------------------------------------------------------------------------- mismatches


def predictions(logits) -> np.ndarray:
    """pred_i = argmax_k z_i,k (first maximum wins ties, as np.argmax), int64 [N]."""
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2:
        raise DataError(f"expected a 2-d array [examples, classes], got shape {z.shape}", field="logits")
    return np.argmax(z, axis=1).astype(np.int64)


def mismatch_category(pred, gold) -> np.ndarray:
    """Category string per example: ``"P{pred}G{gold}"`` where pred != gold, ``""`` where they match."""
    g = as_labels(gold, "gold")
    p = as_labels(pred, "pred", n=g.size)
    out = np.array(
        [f"P{a}G{b}" if a != b else "" for a, b in zip(p.tolist(), g.tolist(), strict=True)], dtype=object
    )
    return out.astype(str) if out.size else np.array([], dtype=str)


def mismatch_matrix(pred, gold, n_classes: int) -> pd.DataFrame:
    """Counts ``M[X, Y] = #{i : pred_i = X, gold_i = Y}``: rows ``P0..``, columns ``G0..``.

    The diagonal counts correct predictions; off-diagonal cell (X, Y) is the size of category PXGY.
    """
    g = as_labels(gold, "gold", n_classes=n_classes)
    p = as_labels(pred, "pred", n=g.size, n_classes=n_classes)
    counts = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(counts, (p, g), 1)
    return pd.DataFrame(
        counts, index=[f"P{c}" for c in range(n_classes)], columns=[f"G{c}" for c in range(n_classes)]
    )


def model_confidence(logits, gold) -> np.ndarray:
    """conf_i = |z_i[pred_i] - z_i[gold_i]| on raw logits, pred_i = argmax_k z_i,k; float [N].

    Zero where the prediction matches the gold label. Higher (on a mismatch) = the model is surer
    the gold label is wrong = more likely mislabelled.
    """
    z, g = check_logits(logits, gold)
    rows = np.arange(z.shape[0])
    p = np.argmax(z, axis=1)
    return np.abs(z[rows, p] - z[rows, g])


def select_suspects(
    logits,
    gold,
    categories: Iterable[str] | None = DEFAULT_CATEGORIES,
    threshold: float = DEFAULT_THRESHOLD,
) -> np.ndarray:
    """Bool mask [N]: category(i) in ``categories`` and conf_i > ``threshold`` (strictly; ties kept).

    ``categories=None`` selects among all mismatches. True = suspect, to be pruned.
    """
    z, g = check_logits(logits, gold)
    cats = mismatch_category(np.argmax(z, axis=1), g)
    conf = model_confidence(z, g)
    chosen = cats != "" if categories is None else np.isin(cats, list(categories))
    return chosen & (conf > threshold)


def threshold_sweep(
    logits,
    gold,
    categories: Sequence[str] = DEFAULT_CATEGORIES,
    thresholds: Sequence[float] = DEFAULT_SWEEP,
) -> pd.DataFrame:
    """How many examples each threshold would prune: count of conf_i > t per category.

    One row per threshold: ``threshold``, one column per category, and ``total`` (their sum).
    Counts are non-increasing in the threshold.
    """
    z, g = check_logits(logits, gold)
    cats = mismatch_category(np.argmax(z, axis=1), g)
    conf = model_confidence(z, g)
    categories = list(categories)
    rows = []
    for t in thresholds:
        above = conf > t
        row = {"threshold": float(t)}
        for c in categories:
            row[c] = int(np.sum(above & (cats == c)))
        row["total"] = int(sum(row[c] for c in categories))
        rows.append(row)
    return pd.DataFrame(rows, columns=["threshold", *categories, "total"])


# --------------------------------------------------------------------------- Model 0 vs Model 1


def mismatch_types(gold, pred0, pred1) -> np.ndarray:
    """Type per test example, int [N]: 1 = only Model 0 mismatches, 2 = only Model 1, 3 = both, 0 = neither."""
    g = as_labels(gold, "gold")
    m0 = as_labels(pred0, "pred0", n=g.size) != g
    m1 = as_labels(pred1, "pred1", n=g.size) != g
    return (m0.astype(np.int64) * TYPE_ONLY_MODEL0 + m1.astype(np.int64) * TYPE_ONLY_MODEL1).astype(np.int64)


def confidence_change(logits0, logits1, gold) -> tuple[np.ndarray, np.ndarray]:
    """``(conf0, conf1 - conf0)`` with conf_m = :func:`model_confidence` of model m, float [N] each.

    For the change plot: x = Model 0's confidence, y = change (Model 1 - Model 0); negative = Model 1
    is less sure of its mismatch (0 counts as the confidence of a correct prediction).
    """
    conf0 = model_confidence(logits0, gold)
    conf1 = model_confidence(logits1, gold)
    if conf0.shape != conf1.shape:
        raise DataError(f"logits0 has {conf0.size} examples, logits1 {conf1.size}", field="logits1")
    return conf0, conf1 - conf0


def pruned_ids(ids, mask) -> np.ndarray:
    """The ids where ``mask`` is True (the examples to drop), in input order."""
    ids = np.asarray(ids)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != ids.shape[:1]:
        raise DataError(f"mask has shape {mask.shape}, expected ({ids.shape[0]},)", field="mask")
    return ids[mask]


# --------------------------------------------------------------------------- mismatch categories by name
_CATEGORY = re.compile(r"^P(\d+)G(\d+)$")


#: A category named by its labels: "P:neutral G:entailment" (a comma may separate the two parts).
_NAMED_CATEGORY = re.compile(r"^P:\s*(?P<pred>.+?)\s*[\s,]\s*G:\s*(?P<gold>.+?)\s*$")


#: The class order in which the shorthand PXGY means what the NLI papers say (P1G0: predicted neutral, gold
#: entailment); with any other order the shorthand is refused and categories are named by label.
NLI_ORDER: tuple[str, ...] = ("entailment", "neutral", "contradiction")


#: Names of the Model 0 / Model 1 mismatch types on the test set (cartomap.scores.consensus.mismatch_types).
TYPE_NAMES = {
    TYPE_ONLY_MODEL0: "Type 1: only Model 0",
    TYPE_ONLY_MODEL1: "Type 2: only Model 1",
    TYPE_BOTH: "Type 3: both",
}


def category_name(pred: int, gold: int, label_names: Sequence[str]) -> str:
    """(1, 0) with NLI labels -> "P:neutral G:entailment": a mismatch category named by its labels."""
    return f"P:{label_names[pred]} G:{label_names[gold]}"


def normalize_category(text: str) -> str:
    """A category as given, in canonical spelling: "P1G0" (shorthand) or "P:neutral G:entailment" (named).
    DataError for anything else, or for a correct prediction."""
    text = str(text).strip()
    named = _NAMED_CATEGORY.match(text)
    if named:
        if named["pred"] == named["gold"]:
            raise DataError(f"{text!r} is a correct prediction, not a mismatch", field="categories")
        return f"P:{named['pred']} G:{named['gold']}"
    pred, gold = parse_category(text)
    return f"P{pred}G{gold}"


def resolve_category(text: str, label_names: Sequence[str]) -> str:
    """The PXGY code of a category for classes ``label_names``.

    A named category ("P:neutral G:entailment") is looked up by label; the shorthand PXGY is accepted
    only when the classes are in the NLI order entailment, neutral, contradiction, where P1G0 means
    "predicted neutral, gold entailment" as in the papers. In any other order it would silently mean
    something else, so it is refused with the named form to use instead."""
    names = [str(n) for n in label_names]
    canonical = normalize_category(text)
    named = _NAMED_CATEGORY.match(canonical)
    if named:
        unknown = [n for n in (named["pred"], named["gold"]) if n not in names]
        if unknown:
            raise DataError(
                f"{canonical!r}: no class {unknown[0]!r}; the classes are {names}", field="categories"
            )
        return f"P{names.index(named['pred'])}G{names.index(named['gold'])}"
    pred, gold = parse_category(canonical)
    if max(pred, gold) >= len(names):
        raise DataError(f"{canonical} names a class outside [0, {len(names)})", field="categories")
    if tuple(names) != NLI_ORDER:
        raise DataError(
            f"{canonical} is NLI shorthand for the class order {', '.join(NLI_ORDER)}; these classes are "
            f"{', '.join(names)}, so name the category by its labels, e.g. "
            f"{category_name(pred, gold, names)!r} (predicted {names[pred]}, gold {names[gold]})",
            field="categories",
        )
    return canonical


def resolve_categories(categories: Iterable[str], label_names: Sequence[str]) -> list[str]:
    """:func:`resolve_category` of each, as sorted distinct PXGY codes."""
    return sorted({resolve_category(c, label_names) for c in categories})


def parse_category(text: str) -> tuple[int, int]:
    """``"P1G0"`` -> (1, 0): (predicted class, gold class). DataError unless PXGY with X != Y."""
    match = _CATEGORY.match(str(text).strip().upper())
    if not match:
        raise DataError(
            f"{text!r} is not a mismatch category: expected 'P:<predicted label> G:<gold label>' "
            "(e.g. 'P:neutral G:entailment') or the NLI shorthand PXGY (e.g. P1G0)",
            field="categories",
        )
    pred, gold = int(match[1]), int(match[2])
    if pred == gold:
        raise DataError(
            f"{text!r}: P{pred}G{gold} is a correct prediction, not a mismatch", field="categories"
        )
    return pred, gold


def all_categories(n_classes: int) -> list[str]:
    """Every mismatch category PXGY (X != Y), ordered by X then Y: P0G1, P0G2, P1G0, ..."""
    return [f"P{x}G{y}" for x in range(n_classes) for y in range(n_classes) if x != y]


def category_label(category: str, label_names: Sequence[str]) -> str:
    """A PXGY code by its labels: "P1G0" -> "P:neutral G:entailment", with the shorthand added where it
    means that (classes in the NLI order): "P:neutral G:entailment (P1G0)"."""
    pred, gold = parse_category(category)
    if max(pred, gold) >= len(label_names):
        return category
    name = category_name(pred, gold, label_names)
    return f"{name} ({category})" if tuple(str(n) for n in label_names) == NLI_ORDER else name
