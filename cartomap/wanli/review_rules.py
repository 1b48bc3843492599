"""WaNLI Stage 4's rules, as pure functions: how the two reviewers' answers on a generated pair become one
decision (discard, keep with a label, or keep a revision; ties broken by a seeded coin per item), and how
much the reviewers agree (Cohen's kappa over the pairs both labelled).

The review's database and export are :mod:`cartomap.wanli.review`'s; the page that asks for the answers
is ``pages/review.py``.

Aggregation (METHODS.md §2, Stage 4), on the first two annotators of an item (by their first
action on it; a third review is kept but not used):

* ``discarded``: either annotator discarded it → discarded;
* ``both_revised``: both revised → one revision picked at random (seeded), with its annotator's label;
* only one revised: if the revision changes only punctuation, case or whitespace
  (``one_revised_minor``), the revised text is kept, otherwise (``one_revised_major``) the
  unrevised text. **Label (a decision of cartomap; the paper does not say):** the label comes
  from an annotator who labelled the text that is kept. For a major revision that is only the
  annotator who did not revise (the reviser's label is about a different text). For a minor
  revision both labelled the same meaning, so it is treated like two labels of one text: the
  shared label when they agree, else one picked at random (seeded);
* both labelled as is: the shared label (``agreed``), or one of the two picked at random,
  seeded (``disagreed_random``).

Every random pick uses ``random.Random(f"{seed}:{gen_id}")``: reproducible, and independent of
the order of the items.

Agreement: Cohen's κ over the items whose first two annotators both labelled them without
revision (WaNLI reached 0.60). Rater 1 is the annotator who reviewed the item first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cartomap.wanli.filtering import normalize_text

#: What a reviewer can do with a generated pair.
ACTIONS = ("label", "revise", "discard")
REVIEWERS = 2  # WaNLI: two annotators per example


# --------------------------------------------------------------------------- aggregation: pure functions
@dataclass(frozen=True)
class Review:
    """One annotator's (latest) review of one item."""

    annotator: str
    action: str  # "label", "revise" or "discard"
    label: str | None = None
    premise: str | None = None  # the revised texts (action "revise" only)
    hypothesis: str | None = None


@dataclass(frozen=True)
class Decision:
    """The aggregated outcome of an item's two reviews."""

    status: str  # "keep" or "discard"
    rule: str  # which aggregation case decided it
    premise: str | None = None
    hypothesis: str | None = None
    label: str | None = None
    revised: bool = False  # whether the kept text is a revision
    label_random: bool = False  # whether the label was picked at random between two


def minor_change(original: tuple[str, str], revised: tuple[str, str]) -> bool:
    """Whether a revision changes only punctuation, case or whitespace (of premise and hypothesis)."""
    return all(normalize_text(a) == normalize_text(b) for a, b in zip(original, revised, strict=True))


def decide_discard(a: Review, b: Review) -> Decision | None:
    """Discarded when either annotator discarded; None otherwise."""
    if "discard" in (a.action, b.action):
        return Decision(status="discard", rule="discarded")
    return None


def _pick_label(a: Review, b: Review, rng: random.Random) -> tuple[str | None, bool]:
    """The shared label, or one of two different labels at random: (label, picked at random)."""
    if a.label == b.label:
        return a.label, False
    return rng.choice([a.label, b.label]), True


def decide_both_revised(a: Review, b: Review, rng: random.Random) -> Decision:
    """Both revised: one revision at random (seeded), with the label its annotator gave."""
    chosen = rng.choice([a, b])
    return Decision("keep", "both_revised", chosen.premise, chosen.hypothesis, chosen.label, revised=True)


def decide_one_revised(premise: str, hypothesis: str, a: Review, b: Review, rng: random.Random) -> Decision:
    """Exactly one of ``a`` and ``b`` revised (see the module docstring for the label)."""
    reviser, other = (a, b) if a.action == "revise" else (b, a)
    if minor_change((premise, hypothesis), (reviser.premise or "", reviser.hypothesis or "")):
        label, at_random = _pick_label(reviser, other, rng)
        return Decision(
            "keep", "one_revised_minor", reviser.premise, reviser.hypothesis, label, True, at_random
        )
    return Decision("keep", "one_revised_major", premise, hypothesis, other.label, revised=False)


def decide_both_labelled(premise: str, hypothesis: str, a: Review, b: Review, rng: random.Random) -> Decision:
    """Both labelled the text as is: the shared label, or one of the two at random (seeded)."""
    label, at_random = _pick_label(a, b, rng)
    rule = "disagreed_random" if at_random else "agreed"
    return Decision("keep", rule, premise, hypothesis, label, revised=False, label_random=at_random)


def aggregate_pair(premise: str, hypothesis: str, a: Review, b: Review, rng: random.Random) -> Decision:
    """WaNLI's aggregation of two reviews of the text (``premise``, ``hypothesis``)."""
    for review in (a, b):
        if review.action not in ACTIONS:
            raise ValueError(f"unknown review action {review.action!r}")
    discarded = decide_discard(a, b)
    if discarded is not None:
        return discarded
    revised = [r.action == "revise" for r in (a, b)]
    if all(revised):
        return decide_both_revised(a, b, rng)
    if any(revised):
        return decide_one_revised(premise, hypothesis, a, b, rng)
    return decide_both_labelled(premise, hypothesis, a, b, rng)


def item_rng(seed: int, gen_id: str) -> random.Random:
    """The random generator of one item's picks: depends on the seed and the item only."""
    return random.Random(f"{seed}:{gen_id}")


def _ordered(reviews: pd.DataFrame) -> pd.DataFrame:
    key = "first_action_id" if "first_action_id" in reviews.columns else None
    return reviews.sort_values(key, kind="stable") if key else reviews


def _as_review(row: Any) -> Review:
    def text(value: Any) -> str | None:
        return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)

    return Review(
        annotator=str(row["annotator"]),
        action=str(row["action"]),
        label=text(row.get("label")),
        premise=text(row.get("premise")),
        hypothesis=text(row.get("hypothesis")),
    )


def aggregate(items: pd.DataFrame, reviews: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """One row per item: its aggregated outcome.

    ``items``: gen_id, premise, hypothesis (+ intended_label, seed_id, group); ``reviews``: the
    latest review per (gen_id, annotator) (:meth:`ReviewDB.reviews`). An item with fewer than two
    reviews is ``pending``. Columns: gen_id, status (keep, discard, pending), rule, premise,
    hypothesis, label, revised, label_random, annotators, n_reviews, original_premise,
    original_hypothesis, intended_label, seed_id, group.
    """
    by_item = (
        {gid: part for gid, part in _ordered(reviews).groupby("gen_id", sort=False)} if len(reviews) else {}
    )
    rows = []
    for item in items.to_dict("records"):
        gid = str(item["gen_id"])
        part = by_item.get(gid)
        n = 0 if part is None else len(part)
        base = {
            "gen_id": gid,
            "original_premise": item["premise"],
            "original_hypothesis": item["hypothesis"],
            "intended_label": item.get("intended_label"),
            "seed_id": item.get("seed_id"),
            "group": item.get("group"),
            "n_reviews": n,
        }
        if n < REVIEWERS:
            pending = {
                "status": "pending",
                "rule": "needs_two_reviews",
                "revised": False,
                "label_random": False,
            }
            rows.append({**base, **pending, "annotators": []})
            continue
        a, b = (_as_review(r) for r in part.head(REVIEWERS).to_dict("records"))
        decision = aggregate_pair(str(item["premise"]), str(item["hypothesis"]), a, b, item_rng(seed, gid))
        rows.append({**base, **decision.__dict__, "annotators": [a.annotator, b.annotator]})
    columns = [
        "gen_id",
        "status",
        "rule",
        "premise",
        "hypothesis",
        "label",
        "revised",
        "label_random",
        "annotators",
        "n_reviews",
        "original_premise",
        "original_hypothesis",
        "intended_label",
        "seed_id",
        "group",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame["revised"] = frame["revised"].astype(bool)
    frame["label_random"] = frame["label_random"].astype(bool)
    return frame


# --------------------------------------------------------------------------- agreement
def kappa_pairs(reviews: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Labels of rater 1 and rater 2 on the items both first annotators labelled without revision."""
    first, second = [], []
    if not len(reviews):
        return first, second
    for _, part in _ordered(reviews).groupby("gen_id", sort=False):
        if len(part) < REVIEWERS:
            continue
        a, b = part.head(REVIEWERS).to_dict("records")
        if a["action"] == "label" and b["action"] == "label":
            first.append(str(a["label"]))
            second.append(str(b["label"]))
    return first, second


def kappa_of(first: Sequence[Any], second: Sequence[Any]) -> float:
    """Cohen's κ of two raters' labels (scikit-learn's ``cohen_kappa_score``): (p_o - p_e) / (1 - p_e),
    p_o the share of items they agree on, p_e the agreement their label shares give by chance. NaN
    when there are none, or when chance agreement is 1 (both gave one and the same label throughout)."""
    if len(first) != len(second):
        raise ValueError("both raters need the same number of labels")
    a, b = [str(v) for v in first], [str(v) for v in second]
    if not a or len(set(a) | set(b)) < 2:
        return float("nan")
    from sklearn.metrics import cohen_kappa_score  # imported when used: sklearn takes ~0.6 s

    return float(cohen_kappa_score(a, b))


def cohen_kappa(reviews: pd.DataFrame) -> float:
    """Cohen's κ on the examples both annotators labelled without revision (see :func:`kappa_pairs`)."""
    return kappa_of(*kappa_pairs(reviews))
