"""The final decision of every queued example, and how much the annotators agree.

**The rule** (every annotator of an item counts once, with their latest decision; an item may have
more than k annotators when two decided it at the same moment):

* the votes are the item's non-unsure decisions, ``relabel`` to different classes being different
  votes (``relabel:<label>``);
* the value with the most votes wins when no other value has as many (a plurality; with two or three
  annotators that is a majority) → keep, remove, or relabel with that label;
* a tie for the most votes → ``unsure``; only unsure decisions → ``unsure``; no decision → ``unreviewed``.

``label`` is the final class: the new one for relabel, else the original gold label.

Agreement statistics (Fleiss' κ, Krippendorff's α, each annotator's agreement with the others, each
item's consensus) come from :mod:`cartomap.scores.agreement` on the long table item / annotator /
value (:meth:`cartomap.curation.store.QueueDB.long_table`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from cartomap.curation.store import from_value

#: The columns of the decisions file, in order (the retrain experiment reads them by name).
DECISION_COLUMNS = (
    "id",
    "decision",
    "label",
    "original_label",
    "decided_by",
    "n_annotators",
    "queued_by",
    "score",
)
FINAL = ("keep", "relabel", "remove", "unsure", "unreviewed")


def final_decision(values: Sequence[str]) -> tuple[str, str | None]:
    """(decision, new label for relabel else None) of one item's values (see the module docstring)."""
    if not values:
        return "unreviewed", None
    votes = Counter(v for v in values if v != "unsure")
    if not votes:
        return "unsure", None
    ranked = votes.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return "unsure", None
    return from_value(ranked[0][0])


def aggregate(items: pd.DataFrame, latest: pd.DataFrame) -> pd.DataFrame:
    """The decisions table: one row per item of ``items`` (id, gold, queued_by, score; queue order),
    columns :data:`DECISION_COLUMNS`. ``latest``: item_id, annotator, decision, label (the latest
    decision per annotator, ordered by their first decision: :meth:`QueueDB.latest`)."""
    by_item: dict[str, list[tuple[str, str]]] = {}
    for row in latest.to_dict("records"):
        label = row.get("label")
        label = None if label is None or (isinstance(label, float) and math.isnan(label)) else str(label)
        value = f"relabel:{label}" if row["decision"] == "relabel" else str(row["decision"])
        by_item.setdefault(str(row["item_id"]), []).append((str(row["annotator"]), value))
    rows = []
    for item in items.to_dict("records"):
        item_id = str(item["id"])
        decided = by_item.get(item_id, [])
        decision, new_label = final_decision([v for _, v in decided])
        gold = str(item["gold"])
        score = item.get("score")
        rows.append(
            {
                "id": item_id,
                "decision": decision,
                "label": new_label if decision == "relabel" else gold,
                "original_label": gold,
                "decided_by": ",".join(a for a, _ in decided),
                "n_annotators": len(decided),
                "queued_by": str(item.get("queued_by") or ""),
                "score": float("nan") if score is None or pd.isna(score) else float(score),
            }
        )
    frame = pd.DataFrame(rows, columns=list(DECISION_COLUMNS))
    frame["n_annotators"] = frame["n_annotators"].astype("int64")
    frame["score"] = frame["score"].astype("float64")
    return frame


def counts(decisions: pd.DataFrame) -> dict[str, int]:
    """How many items have each final decision (every value of :data:`FINAL`, zeros included)."""
    found = decisions["decision"].value_counts()
    return {d: int(found.get(d, 0)) for d in FINAL}


def agreement(long: pd.DataFrame) -> dict[str, Any]:
    """The annotators' agreement on the long table (item, annotator, value), "unsure" left out as in the
    rule above: ``summary`` (:func:`cartomap.scores.agreement.agreement_summary`: Fleiss' κ, Krippendorff's
    α, observed agreement, each with the reason when undefined), ``annotators`` (each against the majority
    of the others) and ``items`` (each item's consensus)."""
    from cartomap.scores import agreement as stats

    return {
        "summary": stats.agreement_summary(long),
        "annotators": stats.annotator_agreement(long),
        "items": stats.item_consensus(long),
    }
