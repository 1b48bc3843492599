"""The data map's second axis: how ambiguous an example is, from its recorded predictions.

Dataset Cartography puts an example at (variability, confidence): variability is the spread of the
gold label's probability over the recordings. It is a second moment of four or five numbers, and much
of it is *when* a seed's model happened to learn the example, so two seeds agree on it far less than on
confidence (docs/stability.md). The scores here are other answers to "how undecided is the model about
this example", each computed from the same recordings (probabilities [E, N, C], gold labels [N], and
for some the raw logits); most are means over the recordings (first moments), which noise averages out
of. Every score is a small pure function, **higher = more ambiguous**, registered by name in
:data:`SCORES` (cleanlab style: pick one by its name, :func:`score`; :func:`register` adds one).

Each declares what it needs (:attr:`AmbiguityScore.needs`: the recordings' probabilities, and for some the
raw logits), which units it serves (:attr:`AmbiguityScore.units`: ``example``, ``word``, ``label``;
:class:`cartomap.tasks.units.Unit`) and whether every metrics file carries it as a column
(:attr:`AmbiguityScore.on_map`): those are the map's score columns of a unit (:func:`map_scores`), which
the map frames of every unit, their colour menu, the truth report and ``cartomap export`` ask for.

Entropies are divided by log C, so they lie in [0, 1] whatever the number of classes (a two-class
unit of a token or multi-label run and a three-class NLI pair on one scale); 0 * log 0 = 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import xlogy

from cartomap import plugins
from cartomap.errors import DataError
from cartomap.tasks.units import Unit

#: What a statistic reads (:attr:`AmbiguityScore.needs`): the recordings' probabilities [E, N, C], the raw
#: logits [E, N, C].
RECORDINGS = "recordings"
LOGITS = "logits"
#: Cartography's axis (the std of p(gold) over the recordings).
VARIABILITY = "variability"


def _gold(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """p_e(y*) [E, N]."""
    return np.take_along_axis(probs, labels[None, :, None], axis=-1)[..., 0]


def _entropy(probs: np.ndarray) -> np.ndarray:
    """H(p) / log C over the last axis (0 for one class)."""
    n_classes = probs.shape[-1]
    if n_classes < 2:
        return np.zeros(probs.shape[:-1])
    return -np.sum(xlogy(probs, probs), axis=-1) / np.log(n_classes)


def variability(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """std_e p_e(y*) (population std): Dataset Cartography's variability. Zero for one recording."""
    return np.std(_gold(probs, labels), axis=0)


def mean_entropy(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """(1/E) sum_e H(p_e) / log C: the mean predictive entropy, in [0, 1]. Ignores the gold label: an
    example the model is sure of, rightly or wrongly, scores 0; one it splits between classes at every
    recording scores high."""
    return np.mean(_entropy(probs), axis=0)


def gold_bernoulli(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """(1/E) sum_e p_e(y*) (1 - p_e(y*)): the mean variance of "gold or not", in [0, 0.25]; highest when the
    gold label's probability stays near one half. Equals c (1 - c) - variability^2 for the confidence c."""
    gold = _gold(probs, labels)
    return np.mean(gold * (1.0 - gold), axis=0)


def margin_gap(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """1 - (1/E) sum_e (p_e,(1) - p_e,(2)): one minus the mean margin between the two most probable classes
    (whatever the gold label), in [0, 1]; 1 when the top two tie at every recording."""
    if probs.shape[-1] < 2:
        return np.zeros(probs.shape[1])
    top = np.sort(probs, axis=-1)
    return 1.0 - np.mean(top[..., -1] - top[..., -2], axis=0)


def entropy_of_mean(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """H((1/E) sum_e p_e) / log C: the entropy of the mean prediction, in [0, 1]. High also when each
    recording is sure but they disagree with each other."""
    return _entropy(np.mean(probs, axis=0))


def last_entropy(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """H(p_E) / log C: the entropy of the last recording alone (the trained model's uncertainty)."""
    return _entropy(probs[-1])


def epoch_disagreement(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """H(mean_e p_e) / log C - (1/E) sum_e H(p_e) / log C: the mutual information between the prediction
    and the recording (BALD over recordings instead of dropout samples), in [0, 1]: how much the
    recordings disagree beyond each one's own uncertainty."""
    return np.maximum(entropy_of_mean(probs, labels) - mean_entropy(probs, labels), 0.0)


def margin_spread(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """std_e (z_e(y*) - max_{k != y*} z_e(k)) on raw logits: the spread of AUM's margin over the
    recordings (Pleiss et al. average it), in logit units."""
    if logits is None:
        raise DataError("needs the raw logits", field="margin_spread")
    z = np.asarray(logits, dtype=np.float64)
    if z.shape[-1] < 2:
        return np.zeros(z.shape[1])
    gold = _gold(z, labels)
    others = z.copy()
    np.put_along_axis(
        others, np.broadcast_to(labels[None, :, None], (z.shape[0], z.shape[1], 1)), -np.inf, -1
    )
    return np.std(gold - np.max(others, axis=-1), axis=0)


def _correct(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.argmax(probs, axis=-1) == labels[None, :]


def forgetting(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """#{e : correct_e and not correct_(e+1)}: forgetting events between consecutive recordings (Toneva
    et al., 2019), as a float. 0 for an example never learned (they have their own score below)."""
    correct = _correct(probs, labels)
    return np.sum(correct[:-1] & ~correct[1:], axis=0).astype(np.float64)


def learned_late(probs: np.ndarray, labels: np.ndarray, logits=None) -> np.ndarray:
    """e* / E, where e* is the first recording from which the example is predicted right at every later
    one (Toneva et al.'s "learned" epoch); E / E = 1 when it is wrong at the last recording. In [0, 1]:
    0 = right from the first recording on, higher = learned later, 1 = not learned."""
    correct = _correct(probs, labels)
    n_rec = correct.shape[0]
    # the number of recordings at the end that are all correct: the example is learned at E - that
    tail = np.cumprod(correct[::-1], axis=0).sum(axis=0)
    return (n_rec - tail) / n_rec


@dataclass(frozen=True)
class AmbiguityScore:
    """One second-axis statistic: ``name`` (its column in a metrics file), ``label`` (what the map's axis
    says), ``function(probs [E, N, C], labels [N], logits [E, N, C] or None) -> [N]`` (higher = more
    ambiguous), whether it needs the raw logits, its value range (None: unbounded), the units it serves
    (every unit by default) and whether every metrics file carries it (``on_map``)."""

    name: str
    label: str
    function: Callable[..., np.ndarray]
    needs_logits: bool = False
    range: tuple[float, float] | None = (0.0, 1.0)
    threshold: float | None = None  # the region rule "by threshold": ambiguous from this value up
    units: tuple[Unit, ...] = tuple(Unit)
    on_map: bool = False

    def __post_init__(self) -> None:
        units = (self.units,) if isinstance(self.units, str) else tuple(self.units)
        unknown = [u for u in units if u not in {m.value for m in Unit}]
        if not units or unknown:
            raise DataError(
                f"ambiguity score {self.name!r}: units {unknown or '(none)'}; expected some of "
                f"{', '.join(u.value for u in Unit)}",
                field="units",
            )
        object.__setattr__(self, "units", tuple(Unit(u) for u in units))

    @property
    def doc(self) -> str:
        return " ".join((self.function.__doc__ or "").split())

    @property
    def needs(self) -> tuple[str, ...]:
        """What it reads: :data:`RECORDINGS`, and :data:`LOGITS` when it needs the raw logits."""
        return (RECORDINGS, LOGITS) if self.needs_logits else (RECORDINGS,)

    def serves(self, unit) -> bool:
        """Whether it scores units of ``unit`` (None: any unit)."""
        return unit is None or Unit(unit) in self.units


#: Every registered score by name: the built-in ones below, then other packages' (entry points of
#: ``cartomap.ambiguity``, :mod:`cartomap.plugins`), loaded the first time the table is read.
SCORES: dict[str, AmbiguityScore] = plugins.Registry(plugins.AMBIGUITY, AmbiguityScore)
_BUILT_IN = {
    s.name: s
    for s in (
        AmbiguityScore(VARIABILITY, "variability", variability, range=(0.0, 0.5), threshold=0.2, on_map=True),
        AmbiguityScore("mean_entropy", "mean entropy", mean_entropy, threshold=0.5, on_map=True),
        AmbiguityScore(
            "gold_bernoulli",
            "mean p(gold)·(1 − p(gold))",
            gold_bernoulli,
            range=(0.0, 0.25),
            threshold=0.16,
            on_map=True,
        ),
        AmbiguityScore("margin_gap", "1 − mean margin", margin_gap, threshold=0.6, on_map=True),
        AmbiguityScore("entropy_of_mean", "entropy of the mean prediction", entropy_of_mean),
        AmbiguityScore("last_entropy", "entropy at the last recording", last_entropy),
        AmbiguityScore("epoch_disagreement", "disagreement between recordings", epoch_disagreement),
        AmbiguityScore("margin_spread", "spread of the margin (logits)", margin_spread, True, None),
        AmbiguityScore("forgetting", "forgetting events", forgetting, range=None),
        AmbiguityScore("learned_late", "recording learned (share)", learned_late),
    )
}


def map_scores(unit=None) -> tuple[str, ...]:
    """The names of the registered scores every metrics file carries (``on_map``) that serve ``unit``
    (a :class:`cartomap.tasks.units.Unit`; None: any), in registration order, asked when called (a score
    registered later counts): the ambiguity columns of a unit's map frames."""
    return tuple(name for name, s in SCORES.items() if s.on_map and s.serves(unit))


#: The built-in scores a metrics file carries as columns, which a map can put on its second axis or rank
#: its regions by (:func:`map_scores` of the built-in ones); the others are the study's candidates
#: (bench/bench_stability.py), computed on demand.
MAP_SCORES: tuple[str, ...] = tuple(name for name, s in _BUILT_IN.items() if s.on_map)


def register(entry: AmbiguityScore) -> AmbiguityScore:
    """Add ``entry`` to :data:`SCORES`; DataError when its name is taken. With ``on_map`` every metrics
    file computed from then on carries it (:func:`cartomap.scores.metrics.compute_metrics`), and so every
    map frame of the units it serves, their colour menus, the truth report and ``cartomap export``."""
    if entry.name in SCORES:
        raise DataError(f"an ambiguity score named {entry.name!r} is already registered", field="name")
    SCORES[entry.name] = entry
    return entry


SCORES.update(_BUILT_IN)
SCORES.register = register


def get(name: str) -> AmbiguityScore:
    """The registered score ``name``; DataError listing the names otherwise."""
    try:
        return SCORES[name]
    except KeyError:
        raise DataError(f"unknown ambiguity score {name!r}; expected one of {', '.join(SCORES)}") from None


def score(name: str, probs: np.ndarray, labels: np.ndarray, logits: np.ndarray | None = None) -> np.ndarray:
    """Score ``name`` of every example, float64 [N]: ``probs`` [E, N, C] (rows sum to 1), ``labels`` [N]."""
    entry = get(name)
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if probs.ndim != 3 or labels.shape != (probs.shape[1],):
        raise DataError(
            f"expected probabilities [E, N, C] and N labels, got {probs.shape} and {labels.shape}"
        )
    if probs.shape[0] == 0:
        raise DataError("no recordings", field=name)
    return np.asarray(entry.function(probs, labels, logits), dtype=np.float64)


def scores(
    probs: np.ndarray,
    labels: np.ndarray,
    logits: np.ndarray | None = None,
    names: tuple[str, ...] | None = None,
) -> Mapping[str, np.ndarray]:
    """{name: score [N]} for ``names`` (default :data:`MAP_SCORES`); scores that need logits are left out
    when none are given."""
    names = MAP_SCORES if names is None else names
    return {
        n: score(n, probs, labels, logits) for n in names if logits is not None or not get(n).needs_logits
    }
