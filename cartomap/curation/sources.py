"""The examples a review queue holds: from a detector's top k, a saved group or selection, or a
pruning experiment's suspects.

Each source gives :class:`Candidates`: example ids of the run, the score that queued them (higher =
more suspect; NaN where the source has none) and ``queued_by``, which the decisions file carries:
``detector:<name>``, ``group:<name>``, ``pruning:<experiment id>`` or ``selection``.

Detectors fed by the run's own dynamics or metrics are scored here; those that need a pruning
experiment's out-of-fold logits or a seeds experiment's table take them as arguments (experiments
are a package of the same layer: the CLI and the page find them, e.g. with
:func:`cartomap.experiments.pruning.oof_of_run`). A pruning experiment's suspects come in as its
results' ``oof`` frame (:func:`from_suspects`).

A multi-label run's detectors score its (example, label) units, and its queue holds units
(``<example id>#<j>``: does label j apply to this text?), queued one of two ways (``per``,
:data:`QUEUE_PER`): every unit on its own (:data:`PER_UNIT`, the default: a text may be asked about
several of its labels), or each example once (:data:`PER_EXAMPLE`), scored from its labels by the
aggregation of the run's combined map (:data:`EXAMPLE_AGGREGATION`) and asked about its most suspect
label (:func:`per_example`). Either way a decision is about one label of one text: relabel toggles that
label's presence, remove drops the text.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cartomap.errors import CartomapError, DataError, RunError
from cartomap.runs.groups import load_group
from cartomap.runs.store import Run
from cartomap.scores import detectors
from cartomap.scores.label_examples import example_scores
from cartomap.scores.metrics import REGIONS, RegionRule
from cartomap.scores.token_quality import sentence_keys
from cartomap.tasks.base import unit_id_of

SELECTION = "selection"
#: What one item of a queue is (:mod:`cartomap.curation.levels`): a word (or an example), a sentence, an
#: entity span.
WORD, SENTENCE, SPAN = "word", "sentence", "span"
LEVELS = (WORD, SENTENCE, SPAN)
#: How a multi-label run's queue holds its suspects: each (example, label) unit on its own, or each
#: example once at its most suspect label.
PER_UNIT, PER_EXAMPLE = "unit", "example"
QUEUE_PER = (PER_UNIT, PER_EXAMPLE)
#: How a per-example queue scores an example from its labels' suspicion: the aggregation of a multi-label
#: run's saved combined map (:func:`cartomap.scores.label_examples.combined_map`: an example at its worst
#: label), here on the negated scores (lower = worse), so an example is as suspect as its most suspect label.
EXAMPLE_AGGREGATION = "min"


@dataclass(frozen=True)
class Candidates:
    """Examples to review: ``ids`` with their ``scores`` (NaN: none), and who queued them; ``level``: what
    an id is (:data:`LEVELS`: a word or an example, a token run's sentence or entity span)."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    queued_by: str
    level: str = WORD

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.scores):
            raise CartomapError(f"{len(self.ids)} ids but {len(self.scores)} scores")
        if len(set(self.ids)) != len(self.ids):
            raise CartomapError("an example is queued twice: the ids of a queue must be unique")
        if not self.queued_by.strip():
            raise CartomapError("a queue needs to say what queued its examples")
        if self.level not in LEVELS:
            raise CartomapError(f"unknown review level {self.level!r}: expected one of {', '.join(LEVELS)}")

    def ordered(self, top: int | None = None) -> Candidates:
        """Highest score first (examples without a score after those with one, in their given order);
        the first ``top`` only when given."""
        if top is not None and (int(top) != top or top < 1):
            raise CartomapError(f"the number of examples to queue must be >= 1, got {top!r}")
        keys = [(-s if not math.isnan(s) else math.inf, i) for i, s in enumerate(self.scores)]
        order = [i for _, i in sorted(keys)][: top or None]
        return Candidates(
            tuple(self.ids[i] for i in order),
            tuple(self.scores[i] for i in order),
            self.queued_by,
            self.level,
        )


def queue_ids(run: Run) -> list[str]:
    """What a queue of ``run`` holds: its examples' ids, or a token run's words (``<sentence id>#<k>``)."""
    if run.task_kind.unit.sentences:
        return run.unit_labels("train", labels=False)[0]
    if run.task_kind.unit.label_sets:  # a multi-label run's (example, label) units, <example id>#<j>
        return run.unit_labels("train", labels=False)[0]
    return run.examples(columns=("id",))["id"].astype(str).tolist()


def check_per(run: Run, per: str | None) -> str:
    """``per`` (:data:`QUEUE_PER`; None: :data:`PER_UNIT`) checked against ``run``: a queue per example is
    for a multi-label run (whose units are an example's labels); DataError naming the option otherwise."""
    per = per or PER_UNIT
    if per not in QUEUE_PER:
        raise DataError(f"unknown queue unit {per!r}; expected one of {', '.join(QUEUE_PER)}", field="per")
    if per == PER_EXAMPLE and not run.task_kind.unit.label_sets:
        raise DataError(
            f"a queue per example is for multi-label runs (an example of its labels); run {run.id} is "
            f"{run.task_kind.name}",
            field="per",
        )
    return per


def per_example(run: Run, candidates: Candidates, method: str = EXAMPLE_AGGREGATION) -> Candidates:
    """A multi-label run's candidates of every unit (in :func:`queue_ids` order) as one per example: the
    unit of its most suspect label, scored s(i) = -agg_j(-s(i, j)) by the aggregation ``method`` of the
    run's combined map (:func:`cartomap.scores.label_examples.example_scores` on the negated scores, so
    with ``min`` s(i) = max_j s(i, j); higher = more suspect, as every detector). A unit without a score
    counts as the least suspect of its example."""
    n_labels = len(run.label_names)
    if n_labels == 0 or len(candidates.ids) % n_labels:
        raise CartomapError(
            f"{len(candidates.ids)} scores are not every label of every example of run {run.id}"
        )
    scores = np.asarray(candidates.scores, dtype=np.float64).reshape(-1, n_labels)
    finite = np.isfinite(scores)
    floor = scores[finite].min() - 1.0 if finite.any() else 0.0
    table = example_scores(-np.where(finite, scores, floor), method=method)
    worst = np.maximum(table["worst_label"].to_numpy(dtype=np.int64), 0)
    units = np.asarray(candidates.ids, dtype=object).reshape(-1, n_labels)
    ids = tuple(str(u) for u in units[np.arange(len(units)), worst])
    return Candidates(
        ids,
        tuple(float(-s) for s in table["score"]),
        f"{candidates.queued_by} per example ({method} over its labels)",
    )


def worst_units(run: Run, ids: Sequence[str]) -> list[str]:
    """A multi-label run's example ids as the units of their worst label on the run's combined map (the
    label a point of the combined map sits at); unit ids and other ids as they are."""
    if not run.task_kind.unit.label_sets:
        return list(ids)
    combined = run.example_metrics()
    worst = dict(zip(combined["id"].astype(str), combined["worst_label"].astype(int), strict=True))
    return [unit_id_of(i, max(worst[i], 0)) if i in worst else i for i in ids]


def _aligned(table: pd.DataFrame | None, ids: list[str]) -> pd.DataFrame | None:
    if table is None:
        return None
    by_id = table.assign(id=table["id"].astype(str)).drop_duplicates("id").set_index("id")
    return by_id.reindex(ids).reset_index() if set(ids) <= set(by_id.index) else None


def has_dynamics(run: Run) -> bool:
    """Whether the run recorded training dynamics (cheap: lists the epoch files)."""
    try:
        return bool(run.dynamics_epochs(run.recorded_source()))
    except (RunError, OSError, ValueError):
        return False


def detector_inputs(
    run: Run,
    oof_logits=None,
    seeds: pd.DataFrame | None = None,
    with_dynamics: bool = True,
    folds: pd.DataFrame | None = None,
) -> detectors.DetectorInputs:
    """What the detectors can score on ``run``: its gold labels, its metrics, its training dynamics (in
    example order; read only ``with_dynamics``: every epoch of every example), plus out-of-fold logits
    [N, C], a seeds table and the fold models' in-sample table when given. A token run's are its words'
    (its tags, each word's metrics and dynamics: suspects of mislabelled tags)."""
    ids, labels = run.unit_labels("train")
    dynamics = None
    if with_dynamics:
        try:
            dyn_ids, logits = run.dynamics(run.recorded_source())
            pos = {str(i): k for k, i in enumerate(dyn_ids)}
            if logits.size and all(i in pos for i in ids):
                dynamics = logits[:, [pos[i] for i in ids], :]
        except (RunError, OSError, ValueError, KeyError):
            dynamics = None
    try:
        metrics = _aligned(run.metrics(), ids)
    except (RunError, OSError, ValueError):
        metrics = None
    return detectors.DetectorInputs(
        labels=labels,
        dynamics=dynamics,
        metrics=metrics,
        oof_logits=oof_logits,
        seeds=_aligned(seeds, ids),
        folds=_aligned(folds, ids),
        sentences=sentence_keys(ids) if run.task_kind.unit.sentences else None,
    )


def available_detectors(
    run: Run, oof_logits=None, seeds: pd.DataFrame | None = None, folds: pd.DataFrame | None = None
) -> list[str]:
    """The registered detectors ``run`` has the inputs for (registry order), without reading its dynamics:
    with recorded dynamics every detector of the dynamics counts as available (when it has its other
    inputs)."""
    inputs = detector_inputs(run, oof_logits, seeds, with_dynamics=False, folds=folds)
    found = set(detectors.available(inputs))
    if has_dynamics(run):
        with_dyn = dataclasses.replace(inputs, dynamics=np.zeros((1, len(inputs.labels), 1)))
        found |= {
            n
            for n in detectors.names()
            if detectors.DYNAMICS in detectors.get(n).needs and detectors.get(n).is_available(with_dyn)
        }
    return [n for n in detectors.names() if n in found]


def region_ids(run: Run, region: str, rule: RegionRule | None = None) -> set[str]:
    """The ids of ``run``'s examples (a token run's words) in ``region`` of its map by ``rule`` (default: by
    rank on the default ambiguity axis), from the run's main metrics."""
    if region not in REGIONS:
        raise DataError(f"unknown region {region!r}; expected one of {', '.join(REGIONS)}", field="region")
    rule = rule or run.region_rule()
    metrics = run.metrics(columns=("id", "confidence", rule.axis))
    regions = rule.regions(metrics)
    return set(metrics["id"].astype(str).to_numpy()[regions == region].tolist())


def in_region(run: Run, candidates: Candidates, region: str, rule: RegionRule | None = None) -> Candidates:
    """``candidates`` restricted to the examples in ``region`` of the run's map (:func:`region_ids`), in
    their order; ``queued_by`` says so. CartomapError when none is left."""
    rule = rule or run.region_rule()
    keep = region_ids(run, region, rule)
    rows = [k for k, i in enumerate(candidates.ids) if i in keep]
    if not rows:
        raise CartomapError(f"none of the {len(candidates.ids):,} examples is {region} by {rule.axis_label}")
    return Candidates(
        tuple(candidates.ids[k] for k in rows),
        tuple(candidates.scores[k] for k in rows),
        f"{candidates.queued_by} in {region} by {rule.axis}",
    )


def from_detector(
    run: Run,
    name: str,
    top: int,
    oof_logits=None,
    seeds: pd.DataFrame | None = None,
    folds: pd.DataFrame | None = None,
    region: str | None = None,
    rule: RegionRule | None = None,
    per: str | None = None,
) -> Candidates:
    """The ``top`` examples detector ``name`` finds most suspect on ``run`` (among those in ``region`` of
    its map by ``rule`` when given: e.g. the most suspect of the ambiguous examples). A multi-label run's
    are its (example, label) units, each on its own or one per example (``per``, :func:`per_example`)."""
    per = check_per(run, per)
    detector = detectors.get(name)
    inputs = detector_inputs(run, oof_logits, seeds, with_dynamics=False, folds=folds)  # metrics may do
    if not detector.is_available(inputs) and detectors.DYNAMICS in detector.needs:
        inputs = detector_inputs(run, oof_logits, seeds, folds=folds)
    if not detector.is_available(inputs):
        have = ", ".join(detectors.available(inputs)) or "none"
        raise DataError(
            f"run {run.id} has no {' and '.join(detector.missing(inputs))} inputs for detector {name!r} "
            f"(it can use: {have})",
            field="detector",
        )
    values = detector(inputs)
    ids = queue_ids(run)
    found = Candidates(tuple(ids), tuple(float(v) for v in values), f"detector:{name}")
    if per == PER_EXAMPLE:
        found = per_example(run, found)
    if region is not None:
        found = in_region(run, found, region, rule)
    return found.ordered(top)


def from_group(run: Run, name: str) -> Candidates:
    """The examples of saved group ``name`` (a lasso selection, a neighbour group), in its order."""
    group = load_group(run, name)
    ids = [str(i) for i in group.get("ids", [])]
    return from_selection(run, ids, queued_by=f"group:{name}")


def from_selection(
    run: Run, ids: Sequence[str], scores: Sequence[float] | None = None, queued_by: str = SELECTION
) -> Candidates:
    """Any examples of ``run`` (with their scores when given); unknown ids are refused. A multi-label
    run's examples are queued at their worst label (:func:`worst_units`), its units as they are."""
    ids = worst_units(run, [str(i) for i in ids])
    if not ids:
        raise CartomapError("nothing to queue: the selection is empty")
    known = set(queue_ids(run))
    unknown = [i for i in ids if i not in known]
    if unknown:
        what = run.task_kind.unit.ids_described if not run.task_kind.unit.per_example else "examples"
        raise CartomapError(f"{len(unknown)} ids are not {what} of run {run.id}, e.g. {unknown[:3]}")
    ids = list(dict.fromkeys(ids))
    values = [math.nan] * len(ids) if scores is None else [float(s) for s in scores]
    return Candidates(tuple(ids), tuple(values), queued_by).ordered()


def from_suspects(run: Run, oof: pd.DataFrame, experiment_id: str) -> Candidates:
    """A pruning experiment's suspects: the ``oof`` rows of its results marked ``suspect``, scored by
    their confidence |z[pred] - z[gold]| (most confident first)."""
    for column in ("id", "suspect", "confidence"):
        if column not in oof.columns:
            raise DataError(f"the pruning results have no {column!r} column", field=column)
    picked = oof[oof["suspect"].to_numpy(dtype=bool)]
    if picked.empty:
        raise CartomapError(f"pruning experiment {experiment_id} found no suspects")
    return from_selection(
        run,
        picked["id"].astype(str).tolist(),
        np.asarray(picked["confidence"], dtype=np.float64).tolist(),
        queued_by=f"pruning:{experiment_id}",
    )
