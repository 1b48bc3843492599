"""Every label-error detector in one registry: name -> a small pure function, higher = more suspect.

Each detector takes one :class:`DetectorInputs` (arrays aligned with the gold labels) and returns a
float score [N] where **higher = more likely a label error** (cleanlab's convention, negated where a
library scores quality). Each declares what it needs (:attr:`Detector.needs`), so a caller lists the
detectors a run can have (:func:`available`) and scores them all (:func:`score_all`):

* ``dynamics``: the run's own training dynamics, raw logits [E, N, C] in sample (Model 0), or the
  data-map metric column the detector reads (``metrics``: the run's metrics file, aligned);
* ``oof``: out-of-fold raw logits [N, C] (k-fold models that never trained on the example: a pruning
  experiment's folds, the noise benchmark's);
* ``seeds``: the per-example table of a seeds experiment (``<metric>_mean`` / ``<metric>_std``), aligned.

The noise benchmark (:mod:`cartomap.experiments.noise_benchmark`), the truth report
(:mod:`cartomap.analysis.truth`), ``cartomap export`` (detectors.parquet) and the Prune labels page use
this registry; add a detector here and all of them have it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.scores import consensus, noise
from cartomap.scores.metrics import aum, el2n, forgetfulness, gold_probabilities, softmax

DYNAMICS = "dynamics"
OOF = "oof"
SEEDS = "seeds"
#: Forgetting's score of a never-learned example (the reference's 1000 forgetting events).
NEVER_LEARNED_SCORE = 1000.0


@dataclass(frozen=True)
class DetectorInputs:
    """What detectors score from; every array has one row per example, in the order of ``labels``."""

    labels: Any  # [N] gold class indices (the labels being checked)
    dynamics: Any = None  # [E, N, C] raw logits of the run's own training (in sample)
    metrics: Any = None  # data-map metric columns (a DataFrame or {column: [N]}), e.g. the run's metrics
    oof_logits: Any = None  # [N, C] out-of-fold raw logits
    seeds: Any = None  # seeds experiment per-example table (confidence_mean, confidence_std, ...)
    n_classes: int | None = field(default=None)

    def y(self) -> np.ndarray:
        return consensus.as_labels(self.labels, "labels")

    def metric(self, column: str) -> np.ndarray | None:
        if self.metrics is None or column not in self.metrics:
            return None
        values = np.asarray(self.metrics[column], dtype=np.float64)
        if values.shape != (np.asarray(self.labels).shape[0],):
            raise DataError(
                f"metric {column!r} has {values.shape}, expected one value per example", field=column
            )
        return values

    def logits(self) -> np.ndarray:
        z = np.asarray(self.dynamics, dtype=np.float64)
        if z.ndim != 3 or z.shape[1] != np.asarray(self.labels).shape[0]:
            raise DataError(
                f"dynamics must be [epochs, {len(self.labels)}, classes], got {z.shape}", field="dynamics"
            )
        return z

    def oof(self) -> np.ndarray:
        z, _ = consensus.check_logits(self.oof_logits, self.labels)
        return z

    def seed_column(self, column: str) -> np.ndarray:
        table = self.seeds
        if column not in table:
            raise DataError(f"the seed table has no column {column!r}", field="seeds")
        values = np.asarray(table[column], dtype=np.float64)
        if values.shape != (np.asarray(self.labels).shape[0],):
            raise DataError(
                f"the seed table has {values.shape[0]} rows, expected one per example", field="seeds"
            )
        return values


@dataclass(frozen=True)
class Detector:
    """A registered detector: ``fn(inputs) -> float [N]``, higher = more suspect."""

    name: str
    fn: Callable[[DetectorInputs], np.ndarray]
    needs: str  # DYNAMICS, OOF or SEEDS
    metrics: tuple[str, ...] = ()  # metric columns that stand in for the dynamics (all of them)
    seed_columns: tuple[str, ...] = ()  # seed-table columns it reads
    title: str = ""

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()

    def is_available(self, inputs: DetectorInputs) -> bool:
        if self.needs == DYNAMICS:
            if inputs.dynamics is not None:
                return True
            return (
                bool(self.metrics)
                and inputs.metrics is not None
                and all(m in inputs.metrics for m in self.metrics)
            )
        if self.needs == OOF:
            return inputs.oof_logits is not None
        return inputs.seeds is not None and all(c in inputs.seeds for c in self.seed_columns)

    def __call__(self, inputs: DetectorInputs) -> np.ndarray:
        return np.asarray(self.fn(inputs), dtype=np.float64)


# --------------------------------------------------------------------------- the detectors


def datamap_confidence(inputs: DetectorInputs) -> np.ndarray:
    """s_i = 1 - confidence_i, confidence_i = mean_e p_e(y_i) (Swayamdipta et al., 2020), in [0, 1].

    Higher = the model gave the gold label little probability over training = more suspect."""
    conf = inputs.metric("confidence")
    if conf is None:
        conf = gold_probabilities(softmax(inputs.logits()), inputs.y()).mean(axis=0)
    return noise.datamap_scores(conf)


def aum_detector(inputs: DetectorInputs) -> np.ndarray:
    """s_i = -AUM_i, AUM_i = mean_e (z_e,i[y_i] - max_{k != y_i} z_e,i[k]) (Pleiss et al., 2020).

    Higher = the gold logit stayed below another class's (negative margin) = more suspect."""
    values = inputs.metric("aum")
    if values is None:
        values = aum(inputs.logits(), inputs.y())
    return noise.aum_scores(values)


def el2n_detector(inputs: DetectorInputs) -> np.ndarray:
    """s_i = EL2N_i = ||softmax(z_0,i) - onehot(y_i)||_2 at the first recorded epoch (Paul et al., 2021),
    in [0, sqrt 2]. Higher = far from the gold label early in training = harder / more suspect."""
    values = inputs.metric("el2n")
    if values is None:
        values = el2n(softmax(inputs.logits()), inputs.y(), epoch=0)
    return np.asarray(values, dtype=np.float64)


def forgetting_detector(inputs: DetectorInputs) -> np.ndarray:
    """s_i = forgetting events (correct -> incorrect between consecutive epochs, Toneva et al., 2019);
    a never-learned example scores :data:`NEVER_LEARNED_SCORE` (1000, the reference's value).

    Higher = learned and forgotten more often, or never learned = more suspect."""
    counts = inputs.metric("forgetfulness")
    never = inputs.metric("never_learned")
    if counts is None or never is None:
        counts, never = forgetfulness(softmax(inputs.logits()), inputs.y())
    return np.where(np.asarray(never, dtype=bool), NEVER_LEARNED_SCORE, np.asarray(counts, dtype=np.float64))


def oof_margin(inputs: DetectorInputs) -> np.ndarray:
    """s_i = max_{k != y_i} z_i,k - z_i[y_i] on out-of-fold raw logits (-(gold logit - best other)).

    Higher = a model that never saw the example prefers another class by more = more suspect
    (:func:`cartomap.scores.noise.margin_scores`)."""
    return noise.margin_scores(inputs.oof(), inputs.y())


def oof_self_confidence(inputs: DetectorInputs) -> np.ndarray:
    """s_i = 1 - p_i(y_i), p = softmax of the out-of-fold logits, in [0, 1].

    Higher = a model that never saw the example gives its gold label little probability = more suspect."""
    p = softmax(inputs.oof(), axis=1)
    y = inputs.y()
    return 1.0 - p[np.arange(y.size), y]


def cleanlab_self_confidence(inputs: DetectorInputs) -> np.ndarray:
    """s_i = 1 - cleanlab.rank.get_label_quality_scores(y, softmax(oof logits))_i (cleanlab's reference
    implementation; its default method is self-confidence, p_i(y_i)), in [0, 1].

    Higher = lower label quality = more suspect."""
    return noise.cleanlab_scores(softmax(inputs.oof(), axis=1), inputs.y())


#: The consensus rule's category: predicted neutral (1), gold entailment (0).
CONSENSUS_CATEGORY = consensus.DEFAULT_CATEGORIES[0]


def consensus_p1g0(inputs: DetectorInputs) -> np.ndarray:
    """The consensus rule (the SNLI cleaning paper) as a score, on out-of-fold raw logits.

    For an out-of-fold mismatch of category P1G0 (predicted neutral, gold entailment): s_i = model
    confidence |z_i[pred] - z_i[gold]| > 0. For every other example: s_i = -exp(-m_i) < 0, m_i =
    max_{k != y_i} z_i,k - z_i[y_i] (clipped to [-50, 50]), so they rank below every P1G0 mismatch, by
    their margin. The rule prunes exactly {s > threshold} (threshold >= 0). Higher = more suspect."""
    z = inputs.oof()
    y = inputs.y()
    pred = np.argmax(z, axis=1)
    cats = consensus.mismatch_category(pred, y)
    conf = consensus.model_confidence(z, y)
    margin = np.clip(noise.margin_scores(z, y), -50.0, 50.0)
    return np.where(cats == CONSENSUS_CATEGORY, conf, -np.exp(-margin))


def seed_mean_confidence(inputs: DetectorInputs) -> np.ndarray:
    """s_i = 1 - confidence_mean_i: 1 - data-map confidence averaged over the seeds of a seeds
    experiment, in [0, 1]. Higher = every seed gave the gold label little probability = more suspect."""
    return 1.0 - inputs.seed_column("confidence_mean")


def seed_spread(inputs: DetectorInputs) -> np.ndarray:
    """s_i = confidence_std_i: the population standard deviation of data-map confidence over the seeds.

    Higher = the seeds disagree about the example (unstable, ambiguous) = more suspect."""
    return inputs.seed_column("confidence_std")


REGISTRY: dict[str, Detector] = {
    d.name: d
    for d in (
        Detector("datamap_confidence", datamap_confidence, DYNAMICS, ("confidence",), title="1 − confidence"),
        Detector("aum", aum_detector, DYNAMICS, ("aum",), title="−AUM"),
        Detector("el2n", el2n_detector, DYNAMICS, ("el2n",), title="EL2N (first epoch)"),
        Detector(
            "forgetting",
            forgetting_detector,
            DYNAMICS,
            ("forgetfulness", "never_learned"),
            title="forgetting events",
        ),
        Detector("oof_margin", oof_margin, OOF, title="out-of-fold −margin"),
        Detector("oof_self_confidence", oof_self_confidence, OOF, title="out-of-fold 1 − p(gold)"),
        Detector("cleanlab_self_confidence", cleanlab_self_confidence, OOF, title="cleanlab 1 − quality"),
        Detector("consensus_p1g0", consensus_p1g0, OOF, title="consensus rule (P1G0 confidence)"),
        Detector(
            "seed_mean_confidence",
            seed_mean_confidence,
            SEEDS,
            seed_columns=("confidence_mean",),
            title="1 − mean confidence over seeds",
        ),
        Detector(
            "seed_spread",
            seed_spread,
            SEEDS,
            seed_columns=("confidence_std",),
            title="spread of confidence over seeds",
        ),
    )
}
NAMES: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> Detector:
    """The detector ``name``; DataError listing the registered ones otherwise."""
    if name not in REGISTRY:
        raise DataError(f"unknown detector {name!r}; expected one of {', '.join(NAMES)}", field="detector")
    return REGISTRY[name]


def available(inputs: DetectorInputs) -> list[str]:
    """The names of the detectors ``inputs`` can feed, in registry order."""
    return [name for name, d in REGISTRY.items() if d.is_available(inputs)]


def score(name: str, inputs: DetectorInputs) -> np.ndarray:
    """Detector ``name``'s score of every example (higher = more suspect); DataError when ``inputs``
    lack what it needs."""
    detector = get(name)
    if not detector.is_available(inputs):
        raise DataError(f"detector {name!r} needs {detector.needs} inputs this data lacks", field="detector")
    return detector(inputs)


def score_all(inputs: DetectorInputs, names=None) -> pd.DataFrame:
    """One column per available detector (or per name of ``names``), one row per example."""
    chosen = available(inputs) if names is None else list(names)
    return pd.DataFrame({name: score(name, inputs) for name in chosen})


def descriptions(names=None) -> Mapping[str, str]:
    """{name: first line of the detector's docstring} (its formula), for tables and help texts."""
    return {n: get(n).doc.splitlines()[0] if get(n).doc else "" for n in (names or NAMES)}
