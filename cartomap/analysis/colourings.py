"""What a data map can be coloured by: every per-example score a run's map frame carries.

Pure functions of a map frame (:func:`cartomap.analysis.datamap.map_frame`, or the map over seeds,
:func:`cartomap.analysis.seed_maps.seed_map_frame`); no streamlit here.

* :data:`CATEGORICAL`: the colourings drawn with a discrete palette, one trace per level (correctness
  bucket "k/E", gold label, region, genre, seeds agreeing on the region, gold vs the annotators'
  majority); their names are those :func:`cartomap.analysis.figures.data_map_figure` has always taken.
* :data:`CONTINUOUS`: the scores drawn with a continuous colour scale and a colour bar: AUM, EL2N,
  forgetting events, the seeds' agreement and spread, the annotators' entropy and majority share.
* every ambiguity score on the map of the frame's unit (``ambiguity: <label>``, higher = more ambiguous;
  :func:`cartomap.scores.ambiguity.map_scores`) and every label-error detector of
  :mod:`cartomap.scores.detectors` serving that unit that the frame can feed (``detector: <title>``, higher
  = more suspect), continuous too: asked of the registries when called, so a score or detector
  registered later is offered wherever its unit and inputs are.
* :func:`available`: the colourings a frame offers, in display order (a run without votes has no human
  agreement, a run without a seeds experiment no seed agreement, ...); :func:`get`, :func:`values`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import frame_memo
from cartomap.scores import ambiguity, detectors
from cartomap.scores.columns import score_columns

CATEGORICAL = "categorical"
CONTINUOUS_KIND = "continuous"
#: Prefix of the colourings by a label-error detector.
DETECTOR_PREFIX = "detector: "
#: Prefix of the colourings by an ambiguity score.
AMBIGUITY_PREFIX = "ambiguity: "


@dataclass(frozen=True)
class Colouring:
    """One way of colouring the map: ``name`` (what the picker shows), ``kind`` (categorical or
    continuous), the frame ``column`` it reads (``None`` for a detector, computed from several), the
    colour bar / legend ``title``, and for a continuous one its plotly ``scale``."""

    name: str
    kind: str
    column: str | None
    title: str
    scale: str = "Viridis"
    detector: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in (CATEGORICAL, CONTINUOUS_KIND):
            raise ValueError(
                f"colouring {self.name!r}: kind must be categorical or continuous, got {self.kind!r}"
            )

    @property
    def continuous(self) -> bool:
        return self.kind == CONTINUOUS_KIND


#: The categorical colourings, in display order (the names of cartomap.analysis.figures).
CATEGORICAL_COLOURINGS = (
    Colouring("correctness", CATEGORICAL, "bucket", "correct in k of E epochs"),
    Colouring("label", CATEGORICAL, "gold", "gold label"),
    Colouring("region", CATEGORICAL, "region", "region"),
    Colouring("genre", CATEGORICAL, "genre", "genre"),
    Colouring("region agreement", CATEGORICAL, "region_votes", "seeds agreeing on the region"),
    Colouring("gold vs majority", CATEGORICAL, "agreement", "gold label vs the annotators' majority"),
)
#: The continuous scores, in display order. Scales run from blue/green (fine) to red (suspect) where the
#: score has a direction.
CONTINUOUS_COLOURINGS = (
    Colouring("AUM", CONTINUOUS_KIND, "aum", "AUM (low = suspect)", scale="RdBu"),
    Colouring("EL2N", CONTINUOUS_KIND, "el2n", "EL2N (first epoch)", scale="RdBu_r"),
    Colouring("forgetfulness", CONTINUOUS_KIND, "forgetfulness", "forgetting events", scale="Reds"),
    Colouring(
        "seed agreement",
        CONTINUOUS_KIND,
        "region_agreement",
        "share of seeds giving the majority region",
        scale="RdYlGn",
    ),
    Colouring("seed spread", CONTINUOUS_KIND, "confidence_std", "confidence std over seeds", scale="YlOrRd"),
    Colouring("human entropy", CONTINUOUS_KIND, "human_entropy", "human entropy (bits)", scale="RdYlGn_r"),
    Colouring(
        "human majority share",
        CONTINUOUS_KIND,
        "human_majority_share",
        "annotators' majority share",
        scale="RdYlGn",
    ),
)
BUILT_IN = {c.name: c for c in (*CATEGORICAL_COLOURINGS, *CONTINUOUS_COLOURINGS)}
#: Columns that must be present (and hold a value) for a colouring beyond its own column.
_NEEDS = {"gold vs majority": ("human_entropy",), "label": ("label",)}


def _has_values(frame: pd.DataFrame, column: str) -> bool:
    if column not in frame.columns:
        return False
    series = frame[column]
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        return bool(np.isfinite(series.to_numpy(dtype=np.float64)).any())
    return bool(series.notna().any())


def _valued(frame: pd.DataFrame) -> frozenset[str]:
    """The columns a map colouring may read (the built-in ones', the score columns of the frame's unit)
    that ``frame`` holds a value of, computed once per frame (:func:`cartomap.analysis.datamap.frame_memo`:
    a map frame is read-only, and the page asks on every rerun)."""
    wanted = {c.column for c in BUILT_IN.values()} | {c for cs in _NEEDS.values() for c in cs}
    wanted = tuple(sorted(wanted | set(score_columns(unit_of(frame)))))
    return frame_memo(
        frame, ("valued", wanted), lambda: frozenset(c for c in wanted if _has_values(frame, c))
    )


def unit_of(frame: pd.DataFrame):
    """What a map frame's rows are about (its ``attrs["unit"]``, :func:`cartomap.analysis.datamap.build_map_frame`;
    None when unknown: any unit's scores are offered)."""
    return frame.attrs.get("unit")


def detector_inputs(frame: pd.DataFrame) -> detectors.DetectorInputs:
    """What the detectors can score from a map frame: its unit, its score columns that hold a value (an
    all-missing column feeds nothing) and, for a map over seeds, its mean and spread of confidence as the
    seed table."""
    seeds = None
    if "confidence_std" in frame.columns:
        seeds = {"confidence_mean": frame["confidence"], "confidence_std": frame["confidence_std"]}
    unit = unit_of(frame)
    valued = _valued(frame)
    metrics = {c: frame[c] for c in score_columns(unit) if c in valued}
    return detectors.DetectorInputs(
        labels=frame["label"].to_numpy(dtype=np.int64), metrics=metrics, seeds=seeds, unit=unit
    )


def _ambiguity_colourings(frame: pd.DataFrame) -> list[Colouring]:
    """One continuous colouring per ambiguity score on the map of the frame's unit it holds a value of."""
    out = []
    for name in ambiguity.map_scores(unit_of(frame)):
        if name in _valued(frame):
            label = ambiguity.get(name).label
            title = f"{label} (higher = more ambiguous)"
            out.append(Colouring(AMBIGUITY_PREFIX + label, CONTINUOUS_KIND, name, title, scale="Viridis"))
    return out


def _detector_colourings(frame: pd.DataFrame) -> list[Colouring]:
    if "label" not in frame.columns:
        return []
    inputs = detector_inputs(frame)
    return [
        Colouring(
            DETECTOR_PREFIX + detectors.title(name),
            CONTINUOUS_KIND,
            None,
            f"{detectors.title(name)} (higher = more suspect)",
            scale="YlOrRd",
            detector=name,
        )
        for name in detectors.available(inputs)
    ]


def available(frame: pd.DataFrame) -> dict[str, Colouring]:
    """{name: colouring} of every colouring ``frame`` can be drawn with, in display order: the
    categorical ones whose column it has, the continuous scores it holds a value of, the ambiguity scores
    of its unit's map it holds, then every detector serving its unit that its columns can feed."""
    out = {}
    for colouring in BUILT_IN.values():
        needed = (colouring.column, *_NEEDS.get(colouring.name, ()))
        if all(c in _valued(frame) for c in needed):
            out[colouring.name] = colouring
    for colouring in (*_ambiguity_colourings(frame), *_detector_colourings(frame)):
        out[colouring.name] = colouring
    return out


def known(name: str) -> bool:
    """Whether ``name`` can name a colouring of some map: a built-in one, an ambiguity score's or a
    detector's (whether a given frame offers it is :func:`available`'s)."""
    return name in BUILT_IN or str(name).startswith((AMBIGUITY_PREFIX, DETECTOR_PREFIX))


def get(frame: pd.DataFrame, name: str) -> Colouring:
    """The colouring ``name`` of ``frame``; ValueError naming those it offers otherwise."""
    offered = available(frame)
    if name not in offered:
        raise ValueError(f"this map cannot be coloured by {name!r}; it offers {', '.join(offered)}")
    return offered[name]


def values(frame: pd.DataFrame, colouring: Colouring) -> np.ndarray:
    """A continuous colouring's value of every row of ``frame`` (float, NaN where it has none)."""
    if not colouring.continuous:
        raise ValueError(f"colouring {colouring.name!r} is categorical: it has levels, not values")
    if colouring.detector is not None:
        return detectors.score(colouring.detector, detector_inputs(frame))
    return frame[colouring.column].to_numpy(dtype=np.float64)


# --------------------------------------------------------------------------- other views of the examples


def projection_colourings() -> tuple[Colouring, ...]:
    """What the 2-D projection of the embeddings (:func:`cartomap.analysis.projection.points_frame`: label
    names in ``label``) can be coloured by, in display order: the data map's categories, its confidence and
    every ambiguity score a metrics file carries (:func:`cartomap.scores.ambiguity.map_scores`, asked when
    called, named by their labels), and the annotators' agreement when the data has votes."""
    return (
        Colouring("label", CATEGORICAL, "label", "gold label"),
        Colouring("region", CATEGORICAL, "region", "region"),
        Colouring("confidence", CONTINUOUS_KIND, "confidence", "confidence (data map)", scale="RdYlGn"),
        *(
            Colouring(
                ambiguity.get(axis).label, CONTINUOUS_KIND, axis, f"{ambiguity.get(axis).label} (data map)"
            )
            for axis in ambiguity.map_scores()
        ),
        BUILT_IN["human entropy"],
        BUILT_IN["gold vs majority"],
    )


def for_projection(frame: pd.DataFrame) -> dict[str, Colouring]:
    """{name: colouring} of :func:`projection_colourings` whose column ``frame`` holds a value of."""
    return {c.name: c for c in projection_colourings() if _has_values(frame, c.column)}
