"""Human judgement of every example: per-class vote counts and what they say about the gold label.

Pure numerics on a vote matrix ``votes`` [N, C] (non-negative integers: how many annotators chose
class c for example i; ChaosNLI's 100 votes, or SNLI/MNLI's 5 ``annotator_labels`` counted) and the
gold labels [N]. :func:`human_columns` gives the derived columns a run keeps next to its examples:

* ``human_n``: n_i = sum_c v_i,c, the number of votes;
* ``human_majority``: the class with the most votes; -1 (:data:`NO_MAJORITY`) when two or more classes
  tie for the most (no majority to compare with);
* ``human_majority_share``: max_c v_i,c / n_i in [1/C, 1], higher = the annotators agree more;
* ``human_entropy``: H_i = -sum_c p_i,c log2 p_i,c with p = v / n, **in bits** (log base 2, 0 log 0 = 0),
  in [0, log2 C], higher = the annotators disagree more. Bits are ChaosNLI's convention: its
  ``entropy`` field for votes {12, 68, 20} is 1.2098 bits (= 0.8386 nats; :func:`entropy_nats`);
* ``gold_disagrees``: v_i,gold < max_c v_i,c, the gold label has fewer votes than the most voted
  class: probably an error by the annotators' own account. With a majority this is gold !=
  human_majority. Ties (:data:`NO_MAJORITY`) follow the same rule: a tie the gold label is part of
  (50/50 between gold and another class) is no disagreement, a tie of other classes (gold 0, two
  others 50 each) is one; no votes: False. ChaosNLI's own ``majority`` label breaks ties by label
  order, so on its ties that include gold it can differ from gold where this says False.
"""

from __future__ import annotations

import numpy as np

from cartomap.config import MAX_VOTES
from cartomap.errors import DataError

NO_MAJORITY = -1
#: The derived columns of :func:`human_columns`, in order.
HUMAN_COLUMNS: tuple[str, ...] = (
    "human_n",
    "human_majority",
    "human_majority_share",
    "human_entropy",
    "gold_disagrees",
)


def check_counts(values, noun: str, shape: str, field: str, min_columns: int = 1) -> np.ndarray:
    """``values`` as an int64 count matrix, or DataError naming ``field``: not 2-d (``shape`` says what
    was expected, e.g. "[examples, classes >= 2]"), fewer than ``min_columns`` columns, negative or not
    whole numbers. Shared by vote counts and the reviewers' category counts (:mod:`.agreement`)."""
    v = np.asarray(values)
    if v.ndim != 2 or v.shape[1] < min_columns:
        raise DataError(f"expected {noun} {shape}, got shape {v.shape}", field=field)
    if v.size and not np.issubdtype(v.dtype, np.integer):
        f = v.astype(np.float64)
        if not np.all(np.isfinite(f)) or not np.all(f == np.round(f)):
            raise DataError(f"{noun} must be whole numbers", field=field)
    v = v.astype(np.int64)
    if v.size and v.min() < 0:
        raise DataError(f"{noun} must not be negative", field=field)
    return v


def check_votes(votes) -> np.ndarray:
    """``votes`` as int64 [N, C], or DataError (not 2-d, negative, not whole numbers, more than
    :data:`cartomap.config.MAX_VOTES` votes for an example: sums and shares would no longer be exact)."""
    raw = np.asarray(votes)
    if raw.size and raw.ndim == 2 and np.issubdtype(raw.dtype, np.number):
        # checked before the int64 cast, which would wrap: in float (exact enough to compare at 1e9)
        f = raw.astype(np.float64)
        if np.any(f > MAX_VOTES) or np.any(np.nansum(np.clip(f, 0, None), axis=1) > MAX_VOTES):
            raise DataError(f"more than {MAX_VOTES:,} votes for an example", field="votes")
    return check_counts(votes, "vote counts", "[examples, classes >= 2]", "votes", min_columns=2)


def vote_shares(votes) -> np.ndarray:
    """p_i,c = v_i,c / n_i, float [N, C]; NaN rows where an example has no votes."""
    v = check_votes(votes).astype(np.float64)
    n = v.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, v / np.where(n > 0, n, 1.0), np.nan)


def entropy_bits(votes) -> np.ndarray:
    """H_i = -sum_c p_i,c log2 p_i,c (bits; 0 log 0 = 0), float [N]; NaN without votes.

    0 = every annotator chose the same class; log2 C = the votes are spread evenly (higher = more
    disagreement). ChaosNLI's ``entropy`` field uses bits."""
    p = vote_shares(votes)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    out = -terms.sum(axis=1)
    out[np.isnan(p).any(axis=1)] = np.nan
    return out + 0.0  # no -0.0


def entropy_nats(votes) -> np.ndarray:
    """The same entropy with the natural log (nats): :func:`entropy_bits` x ln 2."""
    return entropy_bits(votes) * np.log(2.0)


def majority(votes) -> tuple[np.ndarray, np.ndarray]:
    """(majority class int64 [N], its share float [N]): the class with the most votes, or
    :data:`NO_MAJORITY` (-1) where several classes tie for the most (or there are no votes); share =
    most votes / n (NaN without votes)."""
    v = check_votes(votes)
    top = v.max(axis=1) if v.size else np.zeros(v.shape[0], dtype=np.int64)
    n = v.sum(axis=1)
    ties = (v == top[:, None]).sum(axis=1) > 1
    cls = np.argmax(v, axis=1).astype(np.int64) if v.size else np.zeros(0, dtype=np.int64)
    cls[ties | (n == 0)] = NO_MAJORITY
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, top / np.where(n > 0, n, 1), np.nan)
    return cls, share.astype(np.float64)


def human_columns(votes, gold) -> dict[str, np.ndarray]:
    """The columns of :data:`HUMAN_COLUMNS` (see the module docstring) for votes [N, C] and gold [N]."""
    v = check_votes(votes)
    g = np.asarray(gold, dtype=np.int64)
    if g.shape != (v.shape[0],):
        raise DataError(f"expected {v.shape[0]} gold labels, got shape {g.shape}", field="gold")
    cls, share = majority(v)
    return {
        "human_n": v.sum(axis=1).astype(np.int64),
        "human_majority": cls,
        "human_majority_share": share,
        "human_entropy": entropy_bits(v),
        "gold_disagrees": gold_disagrees(v, g),
    }


def gold_disagrees(votes, gold) -> np.ndarray:
    """bool [N]: the gold label has fewer votes than the most voted class (see the module text: a tie
    including gold is no disagreement, one without it is; no votes: False)."""
    v = check_votes(votes)
    g = np.asarray(gold, dtype=np.int64)
    if not v.size:
        return np.zeros(v.shape[0], dtype=bool)
    return v[np.arange(v.shape[0]), g] < v.max(axis=1)


def counts_from_labels(labels, n_classes: int) -> np.ndarray:
    """One example's annotator labels (class indices) as vote counts int64 [C]."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=n_classes)[:n_classes].astype(np.int64)
