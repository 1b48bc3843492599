"""The score columns of a unit's data map, asked of the registries: the one list every map carries.

A map frame of any unit (an example's, a word's and its sentence's, an (example, label) unit's and its
example's), its colour menu, the truth report and ``cartomap export`` ask :func:`score_columns` which
columns of a metrics file they carry beside the map's own (confidence, correctness, region, ...): every
ambiguity score every metrics file carries that serves the unit
(:func:`cartomap.scores.ambiguity.map_scores`), then every metric column a detector serving the unit reads
(:func:`cartomap.scores.detectors.metric_columns`). Nothing else spells that list: a statistic or a
detector registered with its inputs and units is in it.
"""

from __future__ import annotations

from cartomap.scores import ambiguity, detectors
from cartomap.tasks import reserved
from cartomap.tasks.units import Unit


def score_columns(unit=Unit.EXAMPLE) -> tuple[str, ...]:
    """The score columns of ``unit``'s map (a :class:`cartomap.tasks.units.Unit`; None: every unit's), each
    once, in order: the ambiguity scores on the map, then the detectors' metric columns."""
    return tuple(dict.fromkeys((*ambiguity.map_scores(unit), *detectors.metric_columns(unit))))


reserved.reserve_from(
    "a data-map score of the registries",
    lambda: (*score_columns(None), *detectors.names(), *ambiguity.SCORES),
)
