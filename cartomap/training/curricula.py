"""Training orders: which rows every optimisation step sees (RoNLI curricula, METHODS.md section 4).

A :class:`Plan` lists, for every optimisation step, the row indices of its batch. Every order runs
the same number of steps as its baseline (the paper's fair-comparison rule)::

    steps_per_epoch = ceil(len(baseline_pool) / batch_size)      total_steps = epochs * steps_per_epoch

where the baseline pool is all rows, oversampled when the order oversamples. Orders:

* ``shuffled`` / ``oversampled``: every step from the (oversampled) pool of all rows.
* ``e2l``, ``ambiguous``, ``h2l``, ``e2l+ambiguous``: every step from that cartography group
  (groups by rank, :func:`cartography_groups`).
* curricula ``length``, ``sts``, ``cart``, ``cart++``, ``cart-stra++``: rows are sorted easy to hard;
  stage k trains on the first ``fractions[k]`` of the sorted list for a share ``steps[k] / sum(steps)``
  of the first ``curriculum_share`` of all steps; a final "all data" stage of standard training on
  all rows takes the remaining steps.

Batching rule (all orders): a stage's pool is shuffled by successive passes, pass p a permutation
drawn from ``np.random.default_rng([seed, stage index, p])``; the passes are concatenated and cut
into full batches of ``batch_size``. A batch may thus straddle two passes (it never comes out
smaller than ``batch_size``), and a pool smaller than a batch repeats rows inside one batch.

Oversampling (public RoNLI code): ``factor_c = max_k count_k // count_c`` on the rows in use, each
row of class c repeated factor_c times; a curriculum oversamples every stage's pool on its own rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cartomap.config import ORDERS, OrderConfig
from cartomap.errors import DataError
from cartomap.scores import ambiguity
from cartomap.scores.metrics import (
    AMBIGUOUS,
    EASY,
    HARD,
    cartcl_pp_difficulty,
    cartcl_pp_difficulty_code,
    regions_by_rank,
)

# --------------------------------------------------------------------------- names and defaults

E2L, A, H2L = "E2L", "A", "H2L"
#: Short group names (as in the RoNLI paper) -> region names of :mod:`cartomap.scores.metrics`.
GROUPS: dict[str, str] = {E2L: EASY, A: AMBIGUOUS, H2L: HARD}
#: Subset orders -> the groups they train on.
SUBSETS: dict[str, tuple[str, ...]] = {
    "e2l": (E2L,),
    "ambiguous": (A,),
    "h2l": (H2L,),
    "e2l+ambiguous": (E2L, A),
}
#: Staged curricula (easy-to-hard stages, then standard training on all data).
CURRICULA: tuple[str, ...] = ("length", "sts", "cart", "cart++", "cart-stra++")
#: Orders that do not oversample unless ``OrderConfig.oversample`` says so; all others do (the paper
#: oversamples every Ro-BERT variant after the plain baseline).
NOT_OVERSAMPLED_BY_DEFAULT: tuple[str, ...] = ("shuffled",)
#: Cart-CL++ difficulty variants (``OrderConfig.difficulty``).
DIFFICULTIES: tuple[str, ...] = ("paper", "code")
#: Name of the final stage of standard training, and of the single stage of shuffled orders.
ALL_DATA = "all data"

# Stage defaults, from the public RoNLI code (github.com/Eduard6421/RONLI; docs/curricula.md cites
# every version read). The code runs every stage as a separate Lightning Trainer with its own
# max_steps; its last stage (100 % of the list) goes on as standard training. cartomap gives a
# curriculum the first ``curriculum_share`` (0.5) of the baseline's steps, split in proportion to the
# ``steps`` below, then trains on all data: the tuples are chosen so that with the default share every
# stage gets the same share of all steps as in the code (the code's last stage = cartomap's last stage
# + the standard training after it).

#: Cart-CL unlocks 30 % / 66 % / 100 % of the E2L -> A -> H2L list (NLIDatasetCurriculumFull.py).
CART_FRACTIONS: tuple[float, ...] = (0.3, 0.66, 1.0)
#: Cart-CL in the code's latest version of bert_curriculum_full.py (c6f7d1a): max_steps 350 / 700 /
#: 3150 (4200 in all); under the half-curriculum rule: 350 / 700 / 1050, then 2100 on all data.
CART_STEPS: tuple[int, ...] = (350, 700, 1050)
#: Cart-CL as cartomap did before (the paper's prose; an older code comment, "(1010/2)/3" per stage).
CART_EQUAL_STEPS: tuple[int, ...] = (1, 1, 1)
#: Cart-CL++ in the code's head version ("Latest version of nli dataset"): NLIDatasetCurriculum.py
#: unlocks 60 / 80 / 100 % (as METHODS.md says) with max_steps 100 / 200 / 1000 (1300 in all); under the
#: half-curriculum rule: 100 / 200 / 350, then 650 on all data.
CART_PP_FRACTIONS: tuple[float, ...] = (0.6, 0.8, 1.0)
CART_PP_STEPS: tuple[int, ...] = (100, 200, 350)
#: Cart-CL++ of the earlier commit 5f84fd3: 30 / 60 / 100 % with max_steps 175 / 350 / 1575 (2100 in
#: all); under the half-curriculum rule: 175 / 350 / 525, then 1050 on all data.
CART_PP_5F84FD3_FRACTIONS: tuple[float, ...] = (0.3, 0.6, 1.0)
CART_PP_5F84FD3_STEPS: tuple[int, ...] = (175, 350, 525)
#: Cart-Stra-CL++ unlocks 20 / 40 / 60 / 80 / 100 % of every class's own sorted list
#: (NLIDataModuleCurriculumDiverse.py).
CART_STRA_FRACTIONS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
#: Cart-Stra-CL++ in the code: max_steps 100 / 200 / 300 / 400 / 1500 (2500 in all, the last stage
#: being all data); under the half-curriculum rule: 100 / 200 / 300 / 400 / 250, then 1250 on all data.
CART_STRA_STEPS: tuple[int, ...] = (100, 200, 300, 400, 250)
#: Length-CL and STS-CL are not in the public code: they unlock their sorted lists like Cart-CL++.
LENGTH_FRACTIONS, LENGTH_STEPS = CART_PP_FRACTIONS, CART_PP_STEPS
STS_FRACTIONS, STS_STEPS = CART_PP_FRACTIONS, CART_PP_STEPS

#: Named stage schedules an order may take instead of its default ({order: {name: (fractions, steps)}});
#: ``--schedule NAME`` fills ``OrderConfig.fractions`` and ``steps`` with them.
SCHEDULES: dict[str, dict[str, tuple[tuple[float, ...], tuple[int, ...]]]] = {
    "cart++": {
        "ronli-head": (CART_PP_FRACTIONS, CART_PP_STEPS),
        "ronli-5f84fd3": (CART_PP_5F84FD3_FRACTIONS, CART_PP_5F84FD3_STEPS),
    },
    "cart": {
        "ronli-head": (CART_FRACTIONS, CART_STEPS),
        "equal-thirds": (CART_FRACTIONS, CART_EQUAL_STEPS),
    },
    "cart-stra++": {"ronli-head": (CART_STRA_FRACTIONS, CART_STRA_STEPS)},
}

DEFAULT_FRACTIONS: dict[str, tuple[float, ...]] = {
    "length": LENGTH_FRACTIONS,
    "sts": STS_FRACTIONS,
    "cart": CART_FRACTIONS,
    "cart++": CART_PP_FRACTIONS,
    "cart-stra++": CART_STRA_FRACTIONS,
}
DEFAULT_STEPS: dict[str, tuple[int, ...]] = {
    "length": LENGTH_STEPS,
    "sts": STS_STEPS,
    "cart": CART_STEPS,
    "cart++": CART_PP_STEPS,
    "cart-stra++": CART_STRA_STEPS,
}

CARTOGRAPHY_COLUMNS: tuple[str, ...] = ("confidence", "variability")


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True, eq=False)
class Stage:
    """A run of consecutive steps that all draw their batches from one pool."""

    name: str  # e.g. "30%", "20% per class", "E2L", "all data"
    start_step: int  # first step (0-based) of the stage
    n_steps: int  # may be 0 when a short run leaves a stage no steps
    pool: np.ndarray  # row indices of the stage, after oversampling (so with repeats)


@dataclass(frozen=True, eq=False)
class Plan:
    """Row indices for every optimisation step, and the stages they come from."""

    batches: list[np.ndarray]  # one int64 array of row indices per step; len == total steps
    steps_per_epoch: int  # the baseline's: ceil(len(baseline pool) / batch_size)
    stages: list[Stage]
    labels: np.ndarray | None = field(default=None, repr=False)  # per row, for stage_table's class counts

    @property
    def total_steps(self) -> int:
        return len(self.batches)

    @property
    def epochs(self) -> int:
        return self.total_steps // self.steps_per_epoch

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The batches of epoch ``epoch`` (0-based): ``batches[epoch * spe : (epoch + 1) * spe]``."""
        if not 0 <= epoch < self.epochs:
            raise ValueError(f"epoch must be in [0, {self.epochs}), got {epoch}")
        spe = self.steps_per_epoch
        return self.batches[epoch * spe : (epoch + 1) * spe]

    def stage_table(self, label_names: list[str] | tuple[str, ...] | None = None) -> pd.DataFrame:
        """One row per stage: name, start_step, n_steps, pool_size (with repeats), unique_rows, and
        the pool's count of every class (with repeats), in columns named by ``label_names`` or by the
        class index as a string ("0", "1", ...)."""
        n_classes = _n_classes(self.labels, label_names)
        names = list(label_names) if label_names is not None else [str(c) for c in range(n_classes)]
        rows = []
        for stage in self.stages:
            row = {
                "name": stage.name,
                "start_step": stage.start_step,
                "n_steps": stage.n_steps,
                "pool_size": int(stage.pool.size),
                "unique_rows": int(np.unique(stage.pool).size),
            }
            if self.labels is not None:
                counts = np.bincount(self.labels[stage.pool], minlength=n_classes)
                row.update({name: int(k) for name, k in zip(names, counts, strict=True)})
            rows.append(row)
        return pd.DataFrame(rows)


def _n_classes(labels: np.ndarray | None, label_names) -> int:
    n = int(labels.max()) + 1 if labels is not None and labels.size else 0
    if label_names is not None:
        if len(label_names) < n:
            raise DataError(f"{len(label_names)} names for {n} classes", field="label_names")
        n = len(label_names)
    return n


# --------------------------------------------------------------------------- building blocks


def oversample(indices: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Repeat minority-class rows (public RoNLI code): factor_c = max_k n_k // n_c, counted on the rows
    ``indices`` only; every row of class c appears factor_c times, consecutively, in input order.

    ``labels`` is the label of every row of the dataset (``labels[indices]`` are the rows in use).
    Classes absent from ``indices`` play no part. Factors are >= 1 (the largest class gets 1).
    """
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size == 0:
        return indices
    row_labels = np.asarray(labels)[indices]
    counts = np.bincount(row_labels)
    present = counts > 0
    factors = np.zeros_like(counts)
    factors[present] = counts.max() // counts[present]
    return np.repeat(indices, factors[row_labels])


def oversample_factors(indices: np.ndarray, labels: np.ndarray) -> dict[int, int]:
    """{class: factor} as :func:`oversample` uses it, for the classes present in ``indices``."""
    row_labels = np.asarray(labels)[np.asarray(indices, dtype=np.int64)]
    counts = np.bincount(row_labels) if row_labels.size else np.zeros(0, dtype=np.int64)
    return {int(c): int(counts.max() // n) for c, n in enumerate(counts) if n > 0}


def uses_oversampling(order: OrderConfig) -> bool:
    """``order.oversample``, or when None the order's default: on for all but "shuffled"."""
    if order.oversample is not None:
        return bool(order.oversample)
    return order.name not in NOT_OVERSAMPLED_BY_DEFAULT


def needs_columns(order: OrderConfig) -> tuple[str, ...]:
    """The per-row columns of ``table`` that an order needs (``()`` for shuffled / oversampled)."""
    _check_name(order)
    if order.name == "length":
        return ("length",)
    if order.name == "sts":
        return ("similarity",)
    axis = order.ambiguity  # variability, the papers' (or another ambiguity score)
    if order.name in ("cart++", "cart-stra++"):
        _check_difficulty(order)
        return ("confidence", axis) if order.difficulty == "paper" else ("correct_count", axis)
    if order.name == "cart" or order.name in SUBSETS:
        return ("confidence", axis)
    return ()


def cartography_groups(
    table: pd.DataFrame, fraction: float, axis: str = ambiguity.VARIABILITY
) -> dict[str, np.ndarray]:
    """{"E2L", "A", "H2L": bool mask per row} by rank (:func:`cartomap.scores.metrics.regions_by_rank`):
    n = round(fraction * N) rows each; E2L = highest confidence, A = highest variability (or the
    ambiguity score ``axis``), H2L = lowest confidence. Groups may overlap and need not cover the data."""
    _check_columns(table, ("confidence", axis), "cartography groups")
    if not 0.0 < fraction <= 1.0:
        raise DataError(f"must be in (0, 1], got {fraction}", field="region_fraction")
    regions = regions_by_rank(table["confidence"].to_numpy(), table[axis].to_numpy(), fraction)
    return {short: regions[region] for short, region in GROUPS.items()}


def cart_list(table: pd.DataFrame, fraction: float, axis: str = ambiguity.VARIABILITY) -> np.ndarray:
    """Cart-CL's list of rows: E2L, then A, then H2L, each group in the order the reference's selection
    writes it (cartography's ``write_filtered_data``, in the RoNLI fork too): E2L by confidence
    descending, A by variability (or the ambiguity score ``axis``) descending, H2L by confidence ascending
    (ties by row index). A row in two groups appears once, at its first group.

    Rows outside every group are not in the list (as in the public code, whose curriculum file holds
    the de-duplicated groups only, and as the paper's critique of Cart-CL says: they are left out);
    they come in with the final "all data" stage.
    """
    groups = cartography_groups(table, fraction, axis)
    conf = table["confidence"].to_numpy(dtype=np.float64)
    var = table[axis].to_numpy(dtype=np.float64)
    orders = {
        E2L: np.argsort(-conf, kind="stable"),
        A: np.argsort(-var, kind="stable"),
        H2L: np.argsort(conf, kind="stable"),
    }
    taken = np.zeros(len(table), dtype=bool)
    parts = []
    for name in (E2L, A, H2L):
        order = orders[name]
        rows = order[groups[name][order] & ~taken[order]]
        taken[rows] = True
        parts.append(rows)
    return np.concatenate(parts).astype(np.int64)


def difficulty_scores(table: pd.DataFrame, order: OrderConfig) -> np.ndarray:
    """Per-row difficulty of a curriculum, lower = easier = trained on first.

    * length: the token count (shorter first).
    * sts: -similarity (most similar premise-hypothesis pairs first).
    * cart++ / cart-stra++, difficulty "paper": s = 1 - c + v if c > 0.5 else 3 - c - v;
      "code": s = (1 - count) + (1 - v if v < 0.5 else v), count = correct epochs (:mod:`cartomap.scores.metrics`);
      v = variability, or the order's ambiguity score (``order.ambiguity``).
    * cart: the row's position in :func:`cart_list`, +inf for rows outside every group.
    """
    columns = needs_columns(order)
    if order.name not in CURRICULA:
        raise DataError(f"order {order.name!r} has no difficulty score; curricula: {list(CURRICULA)}")
    _check_columns(table, columns, f"order {order.name!r}")
    if order.name == "length":
        return table["length"].to_numpy(dtype=np.float64)
    if order.name == "sts":
        return -table["similarity"].to_numpy(dtype=np.float64)
    if order.name == "cart":
        scores = np.full(len(table), np.inf)
        ordered = cart_list(table, order.region_fraction, order.ambiguity)
        scores[ordered] = np.arange(ordered.size)
        return scores
    var = table[order.ambiguity].to_numpy(dtype=np.float64)
    if order.difficulty == "paper":
        return cartcl_pp_difficulty(table["confidence"].to_numpy(dtype=np.float64), var)
    return cartcl_pp_difficulty_code(table["correct_count"].to_numpy(dtype=np.float64), var)


def schedule(order_name: str, name: str) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(fractions, steps) of the named schedule ``name`` of an order (:data:`SCHEDULES`)."""
    options = SCHEDULES.get(order_name, {})
    if name not in options:
        known = ", ".join(f"{o}: {', '.join(v)}" for o, v in SCHEDULES.items())
        raise DataError(
            f"order {order_name!r} has no schedule {name!r}; schedules: {known}", field="schedule"
        )
    return options[name]


def resolved_fractions(order: OrderConfig) -> tuple[float, ...]:
    """``order.fractions`` or the order's default; checked: increasing in (0, 1], the last 1."""
    fractions = tuple(order.fractions) or DEFAULT_FRACTIONS[order.name]
    ok = (
        all(0.0 < f <= 1.0 for f in fractions)
        and all(a < b for a, b in zip(fractions[:-1], fractions[1:], strict=True))
        and math.isclose(fractions[-1], 1.0)
    )
    if not ok:
        raise DataError(
            f"stage fractions of {order.name!r} must increase within (0, 1] and end with 1, got {list(fractions)}",
            field="fractions",
        )
    return fractions


def resolved_steps(order: OrderConfig) -> tuple[int, ...]:
    """``order.steps`` or the order's default; one positive relative length per stage fraction."""
    fractions = resolved_fractions(order)
    steps = tuple(order.steps) or DEFAULT_STEPS[order.name]
    if len(steps) != len(fractions):
        raise DataError(
            f"{len(steps)} stage lengths {list(steps)} for {len(fractions)} stage fractions "
            f"{list(fractions)} of {order.name!r}; give one per fraction",
            field="steps",
        )
    if any(s <= 0 for s in steps):
        raise DataError(f"stage lengths must be positive, got {list(steps)}", field="steps")
    return steps


def split_steps(total: int, weights: tuple[int, ...]) -> list[int]:
    """Split ``total`` steps in proportion to ``weights`` (largest remainder; sums to ``total``).

    Ties in the remainder go to the earlier stage.
    """
    weights_arr = np.asarray(weights, dtype=np.float64)
    exact = total * weights_arr / weights_arr.sum()
    counts = np.floor(exact).astype(np.int64)
    left = total - int(counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:left]] += 1
    return [int(c) for c in counts]


def take_fraction(n: int, fraction: float) -> int:
    """round(fraction * n) (half up), at least 1 and at most n."""
    return max(1, min(n, int(math.floor(fraction * n + 0.5))))


def stage_rows(sorted_rows: np.ndarray, fractions: tuple[float, ...]) -> list[np.ndarray]:
    """Stage k holds the first ``take_fraction(len, fractions[k])`` rows of the easy-to-hard list."""
    return [sorted_rows[: take_fraction(sorted_rows.size, f)] for f in fractions]


def stratified_stage_rows(
    sorted_rows: np.ndarray, labels: np.ndarray, fractions: tuple[float, ...]
) -> list[np.ndarray]:
    """Cart-Stra-CL++: stage k holds, for every class present, the first ``fractions[k]`` of that
    class's own easy-to-hard list (at least one row per class), kept in list order."""
    row_labels = labels[sorted_rows]
    stages = []
    for f in fractions:
        keep = np.zeros(sorted_rows.size, dtype=bool)
        for c in np.unique(row_labels):
            positions = np.flatnonzero(row_labels == c)
            keep[positions[: take_fraction(positions.size, f)]] = True
        stages.append(sorted_rows[keep])
    return stages


def batches_from_pool(
    pool: np.ndarray, n_steps: int, batch_size: int, seed: int, stage: int
) -> list[np.ndarray]:
    """``n_steps`` full batches cut from concatenated permutations of ``pool``; pass p is drawn from
    ``np.random.default_rng([seed, stage, p])``. A batch may straddle two passes."""
    if n_steps == 0:
        return []
    if pool.size == 0:
        raise DataError(f"stage {stage} has no rows to draw {n_steps} batches from")
    need = n_steps * batch_size
    passes = -(-need // pool.size)
    stream = np.concatenate(
        [pool[np.random.default_rng([seed, stage, p]).permutation(pool.size)] for p in range(passes)]
    )[:need]
    return [b.astype(np.int64) for b in np.split(stream, n_steps)]


# --------------------------------------------------------------------------- the plan


def training_plan(
    order: OrderConfig,
    labels: np.ndarray,
    batch_size: int,
    epochs: int,
    seed: int,
    table: pd.DataFrame | None = None,
) -> Plan:
    """The batches of every step of a run in order ``order`` (see the module docstring).

    ``labels``: class index per row; ``table``: row-aligned per-row columns (:func:`needs_columns`).
    total steps = epochs * ceil(len(baseline pool) / batch_size) for every order. Deterministic given
    ``seed`` (a non-negative integer).
    """
    _check_name(order)
    labels = _check_labels(labels)
    if batch_size < 1:
        raise DataError(f"must be a positive integer, got {batch_size}", field="batch_size")
    if epochs < 1:
        raise DataError(f"must be a positive integer, got {epochs}", field="epochs")
    columns = needs_columns(order)
    if columns:
        if table is None:
            raise DataError(f"order {order.name!r} needs a table with columns {list(columns)}, got none")
        _check_columns(table, columns, f"order {order.name!r}")
        if len(table) != labels.size:
            raise DataError(f"table has {len(table)} rows but there are {labels.size} labels", field="table")

    over = uses_oversampling(order)

    def pool_of(rows: np.ndarray) -> np.ndarray:
        return oversample(rows, labels) if over else rows.astype(np.int64)

    all_rows = np.arange(labels.size, dtype=np.int64)
    full_pool = pool_of(all_rows)
    steps_per_epoch = -(-full_pool.size // batch_size)
    total = epochs * steps_per_epoch

    if order.name in SUBSETS:
        groups = cartography_groups(table, _region_fraction(order), order.ambiguity)
        mask = np.logical_or.reduce([groups[g] for g in SUBSETS[order.name]])
        plan_stages = [("+".join(SUBSETS[order.name]), total, pool_of(all_rows[mask]))]
    elif order.name in CURRICULA:
        plan_stages = _curriculum_stages(order, labels, table, total, pool_of)
        plan_stages.append((ALL_DATA, total - sum(n for _, n, _ in plan_stages), full_pool))
    else:
        plan_stages = [(ALL_DATA, total, full_pool)]

    stages, batches, start = [], [], 0
    for index, (name, n_steps, pool) in enumerate(plan_stages):
        stages.append(Stage(name=name, start_step=start, n_steps=n_steps, pool=pool))
        batches.extend(batches_from_pool(pool, n_steps, batch_size, seed, index))
        start += n_steps
    return Plan(batches=batches, steps_per_epoch=steps_per_epoch, stages=stages, labels=labels)


def _curriculum_stages(order, labels, table, total, pool_of) -> list[tuple[str, int, np.ndarray]]:
    fractions, weights = resolved_fractions(order), resolved_steps(order)
    if not 0.0 < order.curriculum_share <= 1.0:
        raise DataError(f"must be in (0, 1], got {order.curriculum_share}", field="curriculum_share")
    if order.name == "cart":
        _region_fraction(order)
    scores = difficulty_scores(table, order)
    ordered = np.argsort(scores, kind="stable")  # ties by row index
    ordered = ordered[np.isfinite(scores[ordered])].astype(np.int64)  # cart: only rows in a group
    if order.name == "cart-stra++":
        rows = stratified_stage_rows(ordered, labels, fractions)
        names = [f"{f:.0%} per class" for f in fractions]
    else:
        rows = stage_rows(ordered, fractions)
        names = [f"{f:.0%}" for f in fractions]
    if order.name == "cart":
        names = [f"{name} ({_groups_in(r, table, order)})" for name, r in zip(names, rows, strict=True)]
    n_steps = split_steps(int(math.floor(order.curriculum_share * total + 0.5)), weights)
    return [(name, n, pool_of(r)) for name, n, r in zip(names, n_steps, rows, strict=True)]


def _groups_in(rows: np.ndarray, table: pd.DataFrame, order: OrderConfig) -> str:
    """'E2L+A' etc.: the groups (by first group, as in :func:`cart_list`) with rows in ``rows``."""
    groups = cartography_groups(table, order.region_fraction, order.ambiguity)
    first = np.full(len(table), "", dtype=object)
    for name in (H2L, A, E2L):  # later assignments win: a row's first group
        first[groups[name]] = name
    present = set(first[rows])
    return "+".join(g for g in (E2L, A, H2L) if g in present)


# --------------------------------------------------------------------------- validation


def _check_name(order: OrderConfig) -> None:
    if order.name not in ORDERS:
        raise DataError(f"unknown order {order.name!r}; expected one of {list(ORDERS)}", field="order")


def _check_difficulty(order: OrderConfig) -> None:
    if order.difficulty not in DIFFICULTIES:
        raise DataError(
            f"unknown Cart-CL++ difficulty {order.difficulty!r}; expected one of {list(DIFFICULTIES)}",
            field="difficulty",
        )


def _region_fraction(order: OrderConfig) -> float:
    if not 0.0 < order.region_fraction <= 1.0:
        raise DataError(f"must be in (0, 1], got {order.region_fraction}", field="region_fraction")
    return order.region_fraction


def _check_columns(table: pd.DataFrame | None, columns: tuple[str, ...], what: str) -> None:
    if table is None:
        raise DataError(f"{what} needs a table with columns {list(columns)}, got none")
    for column in columns:
        if column not in table.columns:
            raise DataError(
                f"{what} needs column {column!r}; the table has {list(table.columns)}", field=column
            )
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise DataError(
                f"{what} needs a finite number in every row; row {int(bad[0])} has {table[column].iloc[bad[0]]!r}",
                field=column,
            )


def _check_labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise DataError(
            f"expected a non-empty 1-d array of class indices, got shape {labels.shape}", field="labels"
        )
    is_int = np.issubdtype(labels.dtype, np.integer)
    if not is_int and (not np.issubdtype(labels.dtype, np.floating) or np.any(np.mod(labels, 1) != 0)):
        raise DataError("must be integer class indices", field="labels")
    labels = labels.astype(np.int64)
    if labels.min() < 0:
        raise DataError(f"class index {int(labels.min())} is negative", field="labels")
    return labels
