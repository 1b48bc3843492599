"""The column names the library's own tables put beside a kind's text fields, which no kind may take.

A run's examples are joined with what the library computes about them into one table per view: the data
map's frame (:func:`cartomap.analysis.datamap.map_frame`: metrics, gold and prediction, a word's sentence,
a multi-label point's label, votes), its selection table and downloads (:mod:`cartomap.analysis.tables`,
a map over seeds), and a review queue's cards (:mod:`cartomap.curation.queue`). A text field named like
one of those columns would be two columns of one name (``context``, a word's sentence on a word-level map:
``'DataFrame' object has no attribute 'dtype'``), or would silently hide one of them. So the names are
reserved here, below every table that adds them, and :class:`cartomap.tasks.base.TaskKind` refuses a text
field named so when the kind is made. ``tests/test_kind_conformance.py`` builds every such table of a run
of every kind and checks that each column it adds beside the kind's own fields is reserved here, so this
list cannot fall behind the tables. The score columns a unit's map carries are not listed here: their
registries own them (:mod:`cartomap.scores.columns`, which reserves them through :func:`reserve_from`
when it is imported; a run is prepared only after it is, so a kind that takes one is refused then at the
latest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

#: What each reserved name is, by the part of the library that adds it (for the one-line refusal).
_GROUPS: dict[str, tuple[str, ...]] = {
    "an example's or unit's id": ("id",),
    "the map's gold label, prediction and region": (
        "gold",
        "predicted",
        "label",
        "predicted_label",
        "bucket",
        "region",
        "agreement",
    ),
    "a data-map metric": (
        "index",
        "confidence",
        "variability",
        "correctness",
        "correct_count",
        "forgetfulness",
        "never_learned",
        "threshold_closeness",
        "difficulty",
        "difficulty_code",
    ),
    "an ambiguity score the map can be drawn on": (
        "entropy_of_mean",
        "last_entropy",
        "epoch_disagreement",
        "margin_spread",
        "learned_late",
    ),
    "a word's sentence on a word-level map": ("context",),
    "a unit's key (a word of a sentence, a label of an example)": (
        "word",
        "sentence",
        "sentence_id",
        "word_index",
        "example",
        "example_id",
        "label_index",
        "label_name",
    ),
    "a multi-label map's label columns, a sentence map's worst word": (
        "label_set",
        "worst_label",
        "worst_label_name",
        "worst_confidence",
        "worst_score",
        "worst_word",
        "n_labels",
        "n_present",
        "n_scored",
        "n_words",
        "score",
    ),
    "the genre and the human judgement the map carries": (
        "genre",
        "human_n",
        "human_majority",
        "human_majority_share",
        "human_entropy",
        "gold_disagrees",
    ),
    "a map over seeds": (
        "region_majority",
        "region_agreement",
        "region_votes",
        "stable",
        "confidence_std",
        "variability_std",
    ),
    "a review card": (
        "position",
        "queued_by",
        "gold_index",
        "p_predicted",
        "p_gold",
        "p_gold_epochs",
        "votes",
        "seed_list",
        "p_gold_seeds",
    ),
}
#: Every reserved name and what it is.
RESERVED: Mapping[str, str] = MappingProxyType({n: what for what, names in _GROUPS.items() for n in names})
#: Reserved beginnings of names: a class's votes on the map (``votes_<class>``), a review card's
#: neighbours (``neighbour_ids``, ``neighbour_<text field>``).
PREFIXES: Mapping[str, str] = MappingProxyType(
    {"votes_": "a class's votes", "neighbour_": "a review card's neighbours"}
)


#: Others who reserve names, asked at every check (a statistic or detector registered later counts):
#: (what the names hold, the names now).
_PROVIDERS: list[tuple[str, Callable[[], Iterable[str]]]] = []


def reserve_from(what: str, names: Callable[[], Iterable[str]]) -> None:
    """Reserve the names ``names()`` gives whenever a name is checked (the score registries' columns)."""
    _PROVIDERS.append((what, names))


def reserved(name: str) -> str | None:
    """What the library's tables keep under column ``name`` (for the refusal), or None when it is free."""
    if name in RESERVED:
        return RESERVED[name]
    for what, names in _PROVIDERS:
        if name in set(names()):
            return what
    return next((what for prefix, what in PREFIXES.items() if str(name).startswith(prefix)), None)
