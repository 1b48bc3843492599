"""Every label-error detector in one registry: name -> a small pure function, higher = more suspect.

Each detector takes one :class:`DetectorInputs` (arrays aligned with the gold labels) and returns a
float score [N] where **higher = more likely a label error** (cleanlab's convention, negated where a
library scores quality). Each declares what it needs (:attr:`Detector.needs`), so a caller lists the
detectors a run can have (:func:`available`) and scores them all (:func:`score_all`):

* ``dynamics``: the run's own training dynamics, raw logits [E, N, C] in sample (Model 0), or the
  data-map metric column the detector reads (``metrics``: the run's metrics file, aligned);
* ``oof``: out-of-fold raw logits [N, C] (k-fold models that never trained on the example: a pruning
  experiment's folds, the noise benchmark's);
* ``seeds``: the per-example table of a seeds experiment (``<metric>_mean`` / ``<metric>_std``), aligned;
* ``folds``: the k-fold models' own training dynamics (:func:`fold_table`): every example is in the
  training part of k - 1 of them, so the mean of their in-sample confidence and AUM is a k - 1 model
  signal that costs no training beyond the out-of-fold logits.

* ``sentences``: the sentence of every unit of a token run (its words grouped by sentence, words of one
  sentence next to each other), for cleanlab's token classification (:mod:`cartomap.scores.token_quality`:
  out-of-fold word probabilities per sentence, :mod:`cartomap.experiments.token_folds`).

* ``embeddings``: one vector per example ([CLS] of the trained model, aligned), for the label
  disagreement of its nearest neighbours (exact cosine: O(N^2 H), so callers pass them for runs of a
  size where that is quick, :data:`MAX_KNN_EXAMPLES`).

A detector may need several kinds of input (the rank ensembles need two). It also declares the units it
serves (:attr:`Detector.units`: ``example``, ``word``, ``label``, :class:`cartomap.tasks.units.Unit`; every
unit by default): inputs of another unit (:attr:`DetectorInputs.unit`) leave it out, as neither available
nor lacking anything. The metric columns the detectors read are the map's score columns of a unit
(:func:`metric_columns`, with the ambiguity scores: :func:`cartomap.scores.columns.score_columns`), which
every map frame carries, so a detector registered here (:func:`register`) reaches the map of every unit it
serves, its colour menu, the truth report and ``cartomap export`` with no other change.

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

from cartomap import plugins
from cartomap.errors import DataError
from cartomap.scores import consensus, noise, token_quality
from cartomap.scores.metrics import aum, el2n, forgetfulness, gold_probabilities, softmax
from cartomap.tasks.units import Unit

DYNAMICS = "dynamics"
OOF = "oof"
SEEDS = "seeds"
FOLDS = "folds"
EMBEDDINGS = "embeddings"
SENTENCES = "sentences"
INPUT_KINDS = (DYNAMICS, OOF, SEEDS, FOLDS, EMBEDDINGS, SENTENCES)
#: k of the neighbour-label detector (SimiFeat's default, Zhu et al., 2022).
KNN_K = 10
#: Callers pass embeddings to the detectors up to this many examples: the exact k-NN over all pairs
#: (:func:`cartomap.scores.knn.cosine_top_k`, 384 dims, 1 thread) took 2.7 s at 5,000 and 31 s at 20,000
#: here, quadratic in N; the truth report runs in the page, so the cap keeps it to seconds.
MAX_KNN_EXAMPLES = 10_000
#: The fold runs' metric columns :func:`fold_table` reads (what their callers read of each fold run).
FOLD_INPUTS = ("confidence", "aum")
#: Columns of :func:`fold_table`: mean in-sample confidence and AUM over the fold models that trained on
#: an example (``fold_<input>`` of :data:`FOLD_INPUTS`), and how many did.
FOLD_COLUMNS = (*(f"fold_{c}" for c in FOLD_INPUTS), "fold_models")
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
    folds: Any = None  # the fold models' in-sample table (FOLD_COLUMNS, aligned; :func:`fold_table`)
    embeddings: Any = None  # [N, H] one vector per example ([CLS] of the trained model), aligned
    sentences: Any = None  # [N] a token run's sentence of every word (words of a sentence contiguous)
    n_classes: int | None = field(default=None)
    unit: Unit | str | None = None  # what one row is (a word, an (example, label) unit); None: any unit

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

    def _column(self, table, column: str, what: str, field_name: str) -> np.ndarray:
        if table is None or column not in table:
            raise DataError(f"the {what} has no column {column!r}", field=field_name)
        values = np.asarray(table[column], dtype=np.float64)
        if values.shape != (np.asarray(self.labels).shape[0],):
            raise DataError(
                f"the {what} has {values.shape[0]} rows, expected one per example", field=field_name
            )
        return values

    def seed_column(self, column: str) -> np.ndarray:
        return self._column(self.seeds, column, "seed table", SEEDS)

    def fold_column(self, column: str) -> np.ndarray:
        return self._column(self.folds, column, "fold table", FOLDS)


@dataclass(frozen=True)
class Detector:
    """A registered detector: ``fn(inputs) -> float [N]``, higher = more suspect."""

    name: str
    fn: Callable[[DetectorInputs], np.ndarray]
    needs: str | tuple[str, ...]  # of INPUT_KINDS, one or several (a tuple after init)
    metrics: tuple[str, ...] = ()  # metric columns that stand in for the dynamics (all of them)
    seed_columns: tuple[str, ...] = ()  # seed-table columns it reads
    title: str = ""  # its name for people (pages, reports); ``name`` is the handle options and files use
    units: tuple[Unit, ...] = tuple(Unit)  # the units it scores (every unit by default)

    def __post_init__(self) -> None:
        needs = (self.needs,) if isinstance(self.needs, str) else tuple(self.needs)
        unknown = [n for n in needs if n not in INPUT_KINDS]
        if not needs or unknown:
            raise ValueError(f"detector {self.name!r}: unknown input kind(s) {unknown or needs}")
        object.__setattr__(self, "needs", needs)
        units = (self.units,) if isinstance(self.units, str) else tuple(self.units)
        strange = [u for u in units if u not in {m.value for m in Unit}]
        if not units or strange:
            raise ValueError(f"detector {self.name!r}: unknown unit(s) {strange or units}")
        object.__setattr__(self, "units", tuple(Unit(u) for u in units))

    def serves(self, unit) -> bool:
        """Whether it scores units of ``unit`` (None: any unit)."""
        return unit is None or Unit(unit) in self.units

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()

    def is_available(self, inputs: DetectorInputs) -> bool:
        return not self.missing(inputs)

    def missing(self, inputs: DetectorInputs) -> list[str]:
        """The kinds of input (:attr:`needs`) that ``inputs`` lack for this detector, in order."""
        return [need for need in self.needs if not self._has(need, inputs)]

    def _has(self, need: str, inputs: DetectorInputs) -> bool:
        if need == DYNAMICS:
            if inputs.dynamics is not None:
                return True
            return (
                bool(self.metrics)
                and inputs.metrics is not None
                and all(m in inputs.metrics for m in self.metrics)
            )
        if need == OOF:
            return inputs.oof_logits is not None
        if need == FOLDS:
            return inputs.folds is not None and all(c in inputs.folds for c in FOLD_COLUMNS[:2])
        if need == EMBEDDINGS:
            return inputs.embeddings is not None
        if need == SENTENCES:
            return inputs.sentences is not None
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


def _token_probs(inputs: DetectorInputs) -> tuple[np.ndarray, np.ndarray]:
    """(gold tags [M], softmax of the out-of-fold word logits [M, C]) of a token run's words."""
    return inputs.y(), softmax(inputs.oof(), axis=1)


def cleanlab_token_issue(inputs: DetectorInputs) -> np.ndarray:
    """s_w = [w flagged by cleanlab.token_classification.filter.find_label_issues] + (1 - q_w), q_w the
    word's label quality p_w(gold) by cleanlab.token_classification.rank.get_label_quality_scores, on
    out-of-fold word probabilities grouped by sentence; in [0, 2]. Flagged words first, each group by
    quality. Higher = more likely a mislabelled word."""
    y, p = _token_probs(inputs)
    flagged = token_quality.issue_mask(y, p, inputs.sentences)
    word, _ = token_quality.quality_scores(y, p, inputs.sentences)
    return flagged.astype(np.float64) + 1.0 - word


def cleanlab_sentence_quality(inputs: DetectorInputs) -> np.ndarray:
    """s_w = 1 - Q_s(w), Q_s the label quality of word w's sentence by
    cleanlab.token_classification.rank.get_label_quality_scores with its default sentence score (the min
    of its words' p(gold)), on out-of-fold word probabilities; in [0, 1], every word of a sentence alike.
    Higher = the sentence more likely holds a label error."""
    y, p = _token_probs(inputs)
    return 1.0 - token_quality.quality_scores(y, p, inputs.sentences)[1]


def cleanlab_sentence_softmin(inputs: DetectorInputs) -> np.ndarray:
    """s_w = 1 - Q_s(w), as :func:`cleanlab_sentence_quality` with cleanlab's ``softmin`` sentence score
    (a mean of the words' p(gold) weighted towards the lowest, temperature 0.05). Higher = more suspect."""
    y, p = _token_probs(inputs)
    return 1.0 - token_quality.quality_scores(y, p, inputs.sentences, sentence_method="softmin")[1]


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


def fold_confidence(inputs: DetectorInputs) -> np.ndarray:
    """s_i = 1 - mean_{f: i in train(f)} confidence_f,i: 1 - data-map confidence of the k - 1 fold models
    that trained on the example (in sample), averaged, in [0, 1]. Higher = models that saw the example
    still gave its gold label little probability = more suspect."""
    return 1.0 - inputs.fold_column("fold_confidence")


def fold_aum(inputs: DetectorInputs) -> np.ndarray:
    """s_i = -mean_{f: i in train(f)} AUM_f,i: -AUM (Pleiss et al., 2020) averaged over the k - 1 fold
    models that trained on the example. Higher = its gold logit stayed below another class's in models
    that fitted it = more suspect."""
    return -inputs.fold_column("fold_aum")


def neighbour_disagreement(inputs: DetectorInputs) -> np.ndarray:
    """s_i = 1 - (1/k) sum_{j in kNN(i)} [y_j = y_i]: the share of the example's k = 10 nearest neighbours
    (cosine of the [CLS] embeddings, the example itself left out) whose label is not its label, in [0, 1]
    (the neighbour vote of SimiFeat, Zhu et al., 2022). Higher = its neighbourhood is labelled otherwise
    = more suspect."""
    from cartomap.scores.knn import cosine_top_k

    vectors = np.asarray(inputs.embeddings)
    y = inputs.y()
    if vectors.ndim != 2 or vectors.shape[0] != y.size:
        raise DataError(f"embeddings must be [{y.size}, hidden], got {vectors.shape}", field="embeddings")
    idx, _ = cosine_top_k(vectors, np.arange(y.size), KNN_K)
    valid = idx >= 0
    same = np.where(valid, y[np.where(valid, idx, 0)] == y[:, None], False)
    counted = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, 1.0 - same.sum(axis=1) / np.maximum(counted, 1), 0.0)


def rank_average(*scores) -> np.ndarray:
    """s_i = (1 / M) sum_m rank(s_m)_i / N: the mean of each score's normalised rank (ties averaged), in
    (0, 1]. Unsupervised: nothing is fitted, so it cannot be tuned to the truth it is judged on.
    Higher = more suspect by the M scores together."""
    from scipy.stats import rankdata

    arrays = [np.asarray(s, dtype=np.float64) for s in scores]
    if not arrays or any(a.ndim != 1 or a.shape != arrays[0].shape for a in arrays):
        raise DataError("rank_average needs one or more scores of equal length", field="scores")
    n = arrays[0].size
    ranks = []
    for a in arrays:  # a missing score (NaN) ranks as the least suspect
        filled = np.where(np.isnan(a), -np.inf, a)
        ranks.append(rankdata(filled, method="average") / max(n, 1))
    return np.mean(ranks, axis=0)


def rank_oof_folds(inputs: DetectorInputs) -> np.ndarray:
    """s_i = rank_average(oof_margin, fold_aum)_i: the out-of-fold margin (what models that never saw the
    example predict) and the in-sample AUM of the k - 1 fold models that did, by mean normalised rank.
    Same training as cleanlab's out-of-fold probabilities (the k fold models, nothing more).
    Higher = more suspect by both."""
    return rank_average(oof_margin(inputs), fold_aum(inputs))


def rank_oof_dynamics(inputs: DetectorInputs) -> np.ndarray:
    """s_i = rank_average(oof_margin, aum)_i: the out-of-fold margin and -AUM of the run's own training
    (Model 0), by mean normalised rank. Needs Model 0 beside the k fold models (k + 1 trainings).
    Higher = more suspect by both."""
    return rank_average(oof_margin(inputs), aum_detector(inputs))


#: The scores ``bench/fit_detector.py`` combines with :func:`rank_logistic` (registered detectors, each
#: turned into its normalised rank): what a pruning experiment (out-of-fold logits, the fold models'
#: training passes) and its Model 0 (the run's own dynamics) give, k + 1 trainings in all.
FITTED_FEATURES = (
    "oof_margin",
    "fold_aum",
    "fold_confidence",
    "aum",
    "datamap_confidence",
    "el2n",
    "forgetting",
)


def feature_ranks(inputs: DetectorInputs, names=FITTED_FEATURES) -> pd.DataFrame:
    """One column per detector of ``names``: its scores' normalised ranks in (0, 1] (ties averaged, a
    NaN score the least suspect; :func:`rank_average` of one score). Ranks, not raw scores, so that
    weights fitted on one dataset carry to another whatever the scale of its logits."""
    return pd.DataFrame({name: rank_average(score(name, inputs)) for name in names})


def fit_rank_weights(ranks: pd.DataFrame, flipped, c: float = 1.0) -> dict[str, float]:
    """{feature: weight} of an L2-regularised logistic regression (scikit-learn, inverse strength ``c``)
    of ``flipped`` [N] on the columns of ``ranks`` (:func:`feature_ranks`), intercept left out of the
    result (it changes no ranking). A positive weight: a higher rank of that score = more likely flipped."""
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(flipped, dtype=bool)
    x = np.asarray(ranks, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != y.size or y.all() or not y.any():
        raise DataError(
            f"fit_rank_weights needs one row of ranks per example ({x.shape} for {y.size}) and both "
            "flipped and clean examples",
            field="flipped",
        )
    model = LogisticRegression(C=c, max_iter=1000).fit(x, y)
    return {str(name): float(w) for name, w in zip(ranks.columns, model.coef_[0], strict=True)}


def rank_logistic(inputs: DetectorInputs, weights: Mapping[str, float]) -> np.ndarray:
    """s_i = sum_m w_m r_m,i: the normalised ranks r_m of the registered detectors named by ``weights``
    (e.g. :data:`FITTED_FEATURES`), weighted as :func:`fit_rank_weights` fitted them on planted label
    flips (``bench/fit_detector.py``). Not in the registry: fitted on SNLI's planted flips the weights
    came out as about equal parts out-of-fold margin and Model 0's -AUM, the rest near 0, i.e. about
    ``rank_oof_dynamics``, which needs no fitting (docs/benchmarks.md). Higher = more suspect."""
    if not weights:
        raise DataError("rank_logistic needs the weight of one or more detectors", field="weights")
    ranks = feature_ranks(inputs, tuple(weights))
    return ranks.to_numpy(dtype=np.float64) @ np.asarray(
        [weights[n] for n in ranks.columns], dtype=np.float64
    )


def fold_table(frames, ids) -> pd.DataFrame:
    """The fold models' in-sample signal per example: ``id`` and :data:`FOLD_COLUMNS`, rows in ``ids``
    order. ``frames`` are the fold runs' metrics tables (``id``, ``confidence``, ``aum``), each covering
    the examples that fold trained on; an example in none of them gets NaN and 0 models."""
    order = pd.Index([str(i) for i in ids], name="id")
    parts = []
    for frame in frames:
        part = frame[["id", *FOLD_INPUTS]].copy()
        part["id"] = part["id"].astype(str)
        parts.append(part.drop_duplicates("id"))
    stacked = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["id", *FOLD_INPUTS])
    grouped = stacked.groupby("id")
    out = pd.DataFrame(
        {
            "fold_confidence": grouped["confidence"].mean(),
            "fold_aum": grouped["aum"].mean(),
            "fold_models": grouped["confidence"].size(),
        }
    ).reindex(order)
    out["fold_models"] = out["fold_models"].fillna(0).astype(np.int64)
    return out.reset_index()


#: Every registered detector by name: the built-in ones below, then other packages' (entry points of
#: ``cartomap.detectors``, :mod:`cartomap.plugins`), loaded the first time the table is read.
REGISTRY: dict[str, Detector] = plugins.Registry(plugins.DETECTORS, Detector)
_BUILT_IN: dict[str, Detector] = {
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
        Detector(
            "consensus_p1g0",
            consensus_p1g0,
            OOF,
            title="consensus rule (P1G0 confidence)",
            units=(Unit.EXAMPLE,),  # the rule's category is of NLI pairs' classes
        ),
        Detector(
            "cleanlab_token_issue",
            cleanlab_token_issue,
            (OOF, SENTENCES),
            title="cleanlab token issue (flagged, then 1 − word quality)",
            units=(Unit.WORD,),  # a sentence's words, grouped by their sentence
        ),
        Detector(
            "cleanlab_sentence_quality",
            cleanlab_sentence_quality,
            (OOF, SENTENCES),
            title="cleanlab 1 − sentence quality (min)",
            units=(Unit.WORD,),  # a sentence's words, grouped by their sentence
        ),
        Detector(
            "cleanlab_sentence_softmin",
            cleanlab_sentence_softmin,
            (OOF, SENTENCES),
            title="cleanlab 1 − sentence quality (softmin)",
            units=(Unit.WORD,),  # a sentence's words, grouped by their sentence
        ),
        Detector(
            "fold_confidence", fold_confidence, FOLDS, title="1 − in-sample confidence of the fold models"
        ),
        Detector("fold_aum", fold_aum, FOLDS, title="−AUM of the fold models (in sample)"),
        Detector(
            "neighbour_disagreement",
            neighbour_disagreement,
            EMBEDDINGS,
            title="share of the 10 nearest neighbours labelled otherwise",
        ),
        Detector(
            "rank_oof_folds",
            rank_oof_folds,
            (OOF, FOLDS),
            title="rank mean: out-of-fold −margin + fold models' −AUM",
        ),
        Detector(
            "rank_oof_dynamics",
            rank_oof_dynamics,
            (OOF, DYNAMICS),
            ("aum",),
            title="rank mean: out-of-fold −margin + Model 0's −AUM",
        ),
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
#: The built-in detectors' names (:data:`REGISTRY` when the module is loaded; :func:`names` asks it now).
NAMES: tuple[str, ...] = tuple(_BUILT_IN)


def register(detector: Detector) -> Detector:
    """Add ``detector`` to :data:`REGISTRY`; DataError when its name is taken. Its declared inputs and units
    are all it takes to reach every consumer (module docstring)."""
    if detector.name in REGISTRY:
        raise DataError(f"a detector named {detector.name!r} is already registered", field="name")
    REGISTRY[detector.name] = detector
    return detector


REGISTRY.update(_BUILT_IN)
REGISTRY.register = register


def names(unit=None) -> tuple[str, ...]:
    """The registered detectors' names that serve ``unit`` (None: all), in registry order, asked when
    called (a detector registered later counts)."""
    return tuple(name for name, d in REGISTRY.items() if d.serves(unit))


def metric_columns(unit=None) -> tuple[str, ...]:
    """The metric columns the detectors serving ``unit`` (None: all) read in place of the dynamics
    (:attr:`Detector.metrics`), each once, in registry order: what a map frame of that unit carries for
    them."""
    return tuple(dict.fromkeys(c for name in names(unit) for c in REGISTRY[name].metrics))


def get(name: str) -> Detector:
    """The detector ``name``; DataError listing the registered ones otherwise."""
    if name not in REGISTRY:
        raise DataError(f"unknown detector {name!r}; expected one of {', '.join(names())}", field="detector")
    return REGISTRY[name]


def title(name: str) -> str:
    """How detector ``name`` is shown to people ("−AUM" for ``aum``): every page, menu and report table
    asks this; the registered name stays the handle of options, files and review-queue sources."""
    return get(name).title or name


def available(inputs: DetectorInputs) -> list[str]:
    """The names of the detectors serving ``inputs.unit`` that ``inputs`` can feed, in registry order."""
    return [name for name in names(inputs.unit) if REGISTRY[name].is_available(inputs)]


def unavailable(inputs: DetectorInputs) -> dict[str, list[str]]:
    """{name: the kinds of input it lacks} of the detectors serving ``inputs.unit`` that ``inputs`` cannot
    feed, in registry order (a detector of another unit is neither available nor lacking)."""
    return {
        name: REGISTRY[name].missing(inputs) for name in names(inputs.unit) if REGISTRY[name].missing(inputs)
    }


def score(name: str, inputs: DetectorInputs) -> np.ndarray:
    """Detector ``name``'s score of every example (higher = more suspect); DataError when ``inputs``
    lack what it needs."""
    detector = get(name)
    if not detector.serves(inputs.unit):
        raise DataError(
            f"detector {name!r} scores {', '.join(Unit(u).plural() for u in detector.units)}, not "
            f"{Unit(inputs.unit).plural()}",
            field="detector",
        )
    if not detector.is_available(inputs):
        raise DataError(
            f"detector {name!r} needs {' and '.join(detector.needs)} inputs this data lacks", field="detector"
        )
    return detector(inputs)


def score_all(inputs: DetectorInputs, names=None) -> pd.DataFrame:
    """One column per available detector (or per name of ``names``), one row per example."""
    chosen = available(inputs) if names is None else list(names)
    return pd.DataFrame({name: score(name, inputs) for name in chosen})


def descriptions(names=None) -> Mapping[str, str]:
    """{name: first line of the detector's docstring} (its formula), for tables and help texts."""
    return {n: get(n).doc.splitlines()[0] if get(n).doc else "" for n in (names or REGISTRY)}
