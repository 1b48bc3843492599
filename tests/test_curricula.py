"""Training orders and curricula (cartomap/training/curricula.py) on tiny fixtures computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.config import ORDERS, OrderConfig
from cartomap.errors import DataError
from cartomap.scores.metrics import cartcl_pp_difficulty, cartcl_pp_difficulty_code
from cartomap.training.curricula import (
    ALL_DATA,
    CURRICULA,
    SUBSETS,
    Plan,
    batches_from_pool,
    cart_list,
    cartography_groups,
    difficulty_scores,
    needs_columns,
    oversample,
    oversample_factors,
    resolved_fractions,
    resolved_steps,
    schedule,
    split_steps,
    training_plan,
)

# Ten rows. With region_fraction 0.3 every group holds round(3.0) = 3 rows:
#   E2L (highest confidence) = {0, 1, 2}; A (highest variability) = {5, 3, 4}; H2L (lowest confidence) =
#   {9, 8, 7}; row 6 is in no group.
# Cart-CL++ paper score s = 1 - c + v if c > 0.5 else 3 - c - v:
#   row: 0 .06, 1 .12, 2 .18, 3 .70, 4 .65, 5 2.15 (c = .5 is not > .5), 6 2.45, 7 2.75, 8 2.86, 9 2.93
#   sorted: 0 1 2 4 3 5 6 7 8 9
# Labels are skewed: the easy rows are all class 0.
CONF = [0.95, 0.90, 0.85, 0.60, 0.55, 0.50, 0.45, 0.20, 0.10, 0.05]
VAR = [0.01, 0.02, 0.03, 0.30, 0.20, 0.35, 0.10, 0.05, 0.04, 0.02]
LABELS = np.array(
    [0, 0, 0, 0, 1, 0, 1, 2, 2, 2]
)  # counts 5 / 2 / 3 -> factors 1 / 2 / 1, 12 rows oversampled
LENGTH = [7, 3, 9, 3, 1, 8, 2, 6, 5, 4]  # shorter first, ties by index: 4 6 1 3 9 8 7 0 5 2
SIMILARITY = [0.1, 0.9, 0.5, 0.3, 0.2, 0.8, 0.4, 0.7, 0.6, 0.0]  # most similar first: 1 5 7 8 2 6 3 4 0 9


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "confidence": CONF,
            "variability": VAR,
            "correctness": [1.0, 1.0, 0.75, 0.5, 0.5, 0.5, 0.25, 0.0, 0.0, 0.25],
            "correct_count": [4, 4, 3, 2, 2, 2, 1, 0, 0, 1],  # of 4 epochs
            "length": LENGTH,
            "similarity": SIMILARITY,
        }
    )


def plan(table, name, batch_size=2, epochs=3, seed=0, **kw) -> Plan:
    kw.setdefault("region_fraction", 0.3)
    return training_plan(OrderConfig(name=name, **kw), LABELS, batch_size, epochs, seed, table)


def rows(stage) -> set[int]:
    return set(np.unique(stage.pool).tolist())


# --------------------------------------------------------------------------- oversampling


def test_oversample_factors_and_repeats():
    labels = np.array([0, 0, 0, 0, 1, 2, 2])
    assert oversample_factors(np.arange(7), labels) == {0: 1, 1: 4, 2: 2}
    assert oversample(np.arange(7), labels).tolist() == [0, 1, 2, 3, 4, 4, 4, 4, 5, 5, 6, 6]


def test_oversample_counts_only_the_rows_in_use():
    labels = np.array([0, 0, 0, 0, 1, 2, 2])
    # rows 0, 1, 4: class 0 twice, class 1 once -> factors 1 and 2; class 2 is absent
    assert oversample(np.array([0, 1, 4]), labels).tolist() == [0, 1, 4, 4]
    assert oversample(np.array([], dtype=int), labels).size == 0


# --------------------------------------------------------------------------- lengths of runs


def test_total_steps_equal_across_orders(table):
    # oversampled baseline: 12 rows, batch 5 -> 3 steps per epoch, 4 epochs -> 12 steps
    for name in ORDERS:
        p = plan(table, name, batch_size=5, epochs=4, oversample=True)
        assert (p.steps_per_epoch, len(p.batches)) == (3, 12), name
        assert all(len(b) == 5 for b in p.batches), name
        assert sum(s.n_steps for s in p.stages) == 12
    # defaults: every order oversamples but "shuffled" (10 rows -> 2 steps per epoch)
    for name in ORDERS:
        expected = 8 if name == "shuffled" else 12
        assert len(plan(table, name, batch_size=5, epochs=4).batches) == expected, name


def test_split_steps_is_proportional_and_exact():
    assert split_steps(8, (175, 350, 525)) == [1, 3, 4]  # 1.33 / 2.67 / 4
    assert split_steps(9, (175, 350, 525)) == [2, 3, 4]  # 1.5 / 3 / 4.5: the tie goes to the earlier stage
    assert split_steps(8, (1, 1, 1)) == [3, 3, 2]
    assert sum(split_steps(1001, (100, 200, 300, 400, 250))) == 1001


# --------------------------------------------------------------------------- groups and scores


def test_cartography_groups_by_rank(table):
    groups = cartography_groups(table, 0.3)
    assert {k: np.flatnonzero(v).tolist() for k, v in groups.items()} == {
        "E2L": [0, 1, 2],
        "A": [3, 4, 5],
        "H2L": [7, 8, 9],
    }


def test_cart_list_puts_a_row_once_at_its_first_group():
    # n = 2 per group: E2L {0, 1}, A {0, 3}, H2L {3, 2} -> 0 1 | 3 | 2
    overlap = pd.DataFrame({"confidence": [0.9, 0.8, 0.3, 0.2], "variability": [0.3, 0.01, 0.02, 0.25]})
    assert cart_list(overlap, 0.5).tolist() == [0, 1, 3, 2]


def test_cart_list_leaves_out_rows_in_no_group(table):
    # E2L by confidence descending, A by variability descending, H2L by confidence ascending (as the
    # reference's selection writes each group); row 6 is in no group
    assert cart_list(table, 0.3).tolist() == [0, 1, 2, 5, 3, 4, 9, 8, 7]


def test_difficulty_scores(table):
    paper = difficulty_scores(table, OrderConfig(name="cart++"))
    assert np.argsort(paper, kind="stable").tolist() == [0, 1, 2, 4, 3, 5, 6, 7, 8, 9]
    assert paper[5] == pytest.approx(2.15)
    code = difficulty_scores(table, OrderConfig(name="cart-stra++", difficulty="code"))
    np.testing.assert_allclose(code, cartcl_pp_difficulty_code(table["correct_count"], table["variability"]))
    assert difficulty_scores(table, OrderConfig(name="length")).tolist() == LENGTH
    assert difficulty_scores(table, OrderConfig(name="sts")).tolist() == [-s for s in SIMILARITY]
    cart = difficulty_scores(table, OrderConfig(name="cart", region_fraction=0.3))
    assert cart[6] == np.inf and cart[:6].tolist() == [0, 1, 2, 4, 5, 3]


def test_code_difficulty_sorts_by_the_count_first_then_variability():
    # 4 epochs. The public RoNLI code scores (1 - count) + (1 - v): a whole correct epoch outweighs any
    # variability. Row 0: 3 of 4 correct, v .05; row 1: 2 of 4, v .45; rows 2 and 3: 2 of 4, v .30 / .10.
    table = pd.DataFrame({"correct_count": [3, 2, 2, 2], "variability": [0.05, 0.45, 0.30, 0.10]})
    code = difficulty_scores(table, OrderConfig(name="cart++", difficulty="code"))
    assert np.argsort(code, kind="stable").tolist() == [0, 1, 2, 3]  # count descending, then v descending
    np.testing.assert_allclose(code, [-1.05, -0.45, -0.30, -0.10])
    # the score on the fraction (what cartomap computed before) puts row 1 before row 0 at 4 epochs
    fraction = cartcl_pp_difficulty_code(table["correct_count"] / 4, table["variability"])
    assert np.argsort(fraction, kind="stable").tolist()[:2] == [1, 0]
    with pytest.raises(DataError, match="correct_count"):
        difficulty_scores(table.drop(columns="correct_count"), OrderConfig(name="cart++", difficulty="code"))


def test_needs_columns():
    assert needs_columns(OrderConfig(name="shuffled")) == ()
    assert needs_columns(OrderConfig(name="oversampled")) == ()
    assert needs_columns(OrderConfig(name="length")) == ("length",)
    assert needs_columns(OrderConfig(name="sts")) == ("similarity",)
    assert needs_columns(OrderConfig(name="e2l")) == ("confidence", "variability")
    assert needs_columns(OrderConfig(name="cart")) == ("confidence", "variability")
    assert needs_columns(OrderConfig(name="cart++")) == ("confidence", "variability")
    assert needs_columns(OrderConfig(name="cart-stra++", difficulty="code")) == (
        "correct_count",
        "variability",
    )


def test_defaults_from_the_public_code():
    assert resolved_fractions(OrderConfig(name="cart")) == (0.3, 0.66, 1.0)
    assert resolved_steps(OrderConfig(name="cart")) == (350, 700, 1050)
    assert resolved_fractions(OrderConfig(name="cart++")) == (0.6, 0.8, 1.0)
    assert resolved_steps(OrderConfig(name="cart++")) == (100, 200, 350)
    assert resolved_fractions(OrderConfig(name="cart-stra++")) == (0.2, 0.4, 0.6, 0.8, 1.0)
    assert resolved_steps(OrderConfig(name="cart-stra++")) == (100, 200, 300, 400, 250)
    for name in ("length", "sts"):
        assert resolved_fractions(OrderConfig(name=name)) == (0.6, 0.8, 1.0)
    assert schedule("cart++", "ronli-5f84fd3") == ((0.3, 0.6, 1.0), (175, 350, 525))
    assert schedule("cart", "equal-thirds") == ((0.3, 0.66, 1.0), (1, 1, 1))
    with pytest.raises(DataError, match="no schedule 'bogus'"):
        schedule("cart++", "bogus")


def _code_schedule(order: OrderConfig, total: int) -> list[tuple[str, int, int]]:
    """(stage name, steps, unique rows) of a plan of exactly ``total`` steps on 130 balanced rows."""
    rng = np.random.default_rng(0)
    n = 130
    table = pd.DataFrame({"confidence": rng.random(n), "variability": rng.random(n) * 0.4})
    labels = np.arange(n) % 2  # balanced: oversampling changes nothing
    p = training_plan(order, labels, batch_size=13, epochs=total // 10, seed=0, table=table)
    assert len(p.batches) == total
    return [
        (s.name if s.name == ALL_DATA else s.name.split(" ")[0], s.n_steps, len(rows(s))) for s in p.stages
    ]


def test_cart_pp_default_plan_is_the_ronli_head_version():
    # The head version (NLIDatasetCurriculum.py, "Latest version of nli dataset"): the sorted list
    # unlocked 60 / 80 / 100 %, max_steps 100 / 200 / 1000, the last stage being all the data. On a run
    # of the code's 1300 steps cartomap's default plan is that schedule step for step.
    stages = _code_schedule(OrderConfig(name="cart++"), 1300)
    assert stages == [("60%", 100, 78), ("80%", 200, 104), ("100%", 350, 130), (ALL_DATA, 650, 130)]
    # the older commit 5f84fd3: 30 / 60 / 100 %, max_steps 175 / 350 / 1575 of 2100
    fractions, steps = schedule("cart++", "ronli-5f84fd3")
    older = _code_schedule(OrderConfig(name="cart++", fractions=fractions, steps=steps), 2100)
    assert older == [("30%", 175, 39), ("60%", 350, 78), ("100%", 525, 130), (ALL_DATA, 1050, 130)]


def test_cart_default_plan_is_the_ronli_head_version():
    # bert_curriculum_full.py (c6f7d1a): max_steps 350 / 700 / 3150 of 4200; its last stage trains on the
    # curriculum list, then cartomap's fair-comparison half goes on with all data
    stages = _code_schedule(OrderConfig(name="cart"), 4200)
    assert [(name, steps) for name, steps, _ in stages] == [
        ("30%", 350),
        ("66%", 700),
        ("100%", 1050),
        (ALL_DATA, 2100),
    ]


# --------------------------------------------------------------------------- stage contents


def test_cart_stages(table):
    # 10 rows, batch 2 -> 5 steps per epoch, 15 in all; curriculum round(7.5) = 8 steps split 350:700:1050
    # = 1.33 / 2.67 / 4 -> 1 / 3 / 4 (largest remainder)
    p = plan(table, "cart", oversample=False)
    assert [s.name for s in p.stages] == ["30% (E2L)", "66% (E2L+A)", "100% (E2L+A+H2L)", ALL_DATA]
    assert [(s.start_step, s.n_steps) for s in p.stages] == [(0, 1), (1, 3), (4, 4), (8, 7)]
    # list 0 1 2 5 3 4 9 8 7: round(2.7) = 3, round(5.94) = 6, all 9 rows; row 6 only in "all data"
    assert [rows(s) for s in p.stages] == [
        {0, 1, 2},
        {0, 1, 2, 3, 4, 5},
        {0, 1, 2, 3, 4, 5, 7, 8, 9},
        set(range(10)),
    ]
    # which ambiguous rows come first depends on the within-group order: by variability, 5 then 3
    short = plan(table, "cart", oversample=False, fractions=(0.4, 1.0), steps=(1, 1))
    assert rows(short.stages[0]) == {0, 1, 2, 5}


def test_cart_pp_stages(table):
    # sorted 0 1 2 4 3 5 6 7 8 9; 8 curriculum steps split 100:200:350 = 1.23 / 2.46 / 4.31 -> 1 / 3 / 4
    p = plan(table, "cart++", oversample=False)
    assert [s.name for s in p.stages] == ["60%", "80%", "100%", ALL_DATA]
    assert [(s.start_step, s.n_steps) for s in p.stages] == [(0, 1), (1, 3), (4, 4), (8, 7)]
    assert [rows(s) for s in p.stages] == [
        {0, 1, 2, 4, 3, 5},
        {0, 1, 2, 4, 3, 5, 6, 7},
        set(range(10)),
        set(range(10)),
    ]


def test_cart_pp_oversamples_each_stage_on_its_own_rows(table):
    p = plan(table, "cart++")
    # stage 0: class 0 = {0, 1, 2, 3, 5}, class 1 = {4} -> row 4 five times
    assert p.stages[0].pool.tolist() == [0, 1, 2, 4, 4, 4, 4, 4, 3, 5]
    # stage 1 adds 6 (class 1) and 7 (class 2): factors 1 / 2 / 5
    assert np.bincount(p.stages[1].pool, minlength=10).tolist() == [1, 1, 1, 1, 2, 1, 2, 5, 0, 0]


def test_cart_stra_pp_stages(table):
    # per-class easy-to-hard lists: class 0 = 0 1 2 3 5, class 1 = 4 6, class 2 = 7 8 9
    p = plan(table, "cart-stra++", oversample=False)
    assert [rows(s) for s in p.stages[:5]] == [
        {0, 4, 7},  # 20 %: round(1.0), round(0.4) -> at least 1, round(0.6)
        {0, 1, 4, 7},  # 40 %: 2, round(0.8), round(1.2)
        {0, 1, 2, 4, 7, 8},  # 60 %: 3, round(1.2), round(1.8)
        {0, 1, 2, 3, 4, 6, 7, 8},  # 80 %: 4, round(1.6), round(2.4)
        set(range(10)),
    ]
    assert [s.name for s in p.stages][:2] == ["20% per class", "40% per class"]


def test_stratification_keeps_every_class_in_every_stage(table):
    stra = plan(table, "cart-stra++")
    for stage in stra.stages:
        assert set(LABELS[stage.pool]) == {0, 1, 2}, stage.name
    early = plan(table, "cart++").stages[0]
    assert set(LABELS[early.pool]) == {0, 1}  # the skewed fixture: class 2 absent at first


def test_length_and_sts_stages(table):
    length = plan(table, "length", oversample=False)
    assert [rows(s) for s in length.stages[:2]] == [{4, 6, 1, 3, 9, 8}, {4, 6, 1, 3, 9, 8, 7, 0}]
    sts = plan(table, "sts", oversample=False)
    assert [rows(s) for s in sts.stages[:2]] == [{1, 5, 7, 8, 2, 6}, {1, 5, 7, 8, 2, 6, 3, 4}]


def test_custom_fractions_and_steps(table):
    p = plan(table, "length", oversample=False, fractions=(0.5, 1.0), steps=(1, 3), curriculum_share=1.0)
    assert [(s.name, s.n_steps) for s in p.stages] == [("50%", 4), ("100%", 11), (ALL_DATA, 0)]
    assert rows(p.stages[0]) == {4, 6, 1, 3, 9}


def test_batches_come_from_their_stage_pool(table):
    for name in ORDERS:
        p = plan(table, name)
        for stage in p.stages:
            used = np.concatenate(p.batches[stage.start_step : stage.start_step + stage.n_steps] or [[]])
            assert set(used.astype(int).tolist()) <= rows(stage), (name, stage.name)


def test_subsets_only_use_their_group(table):
    expected = {"e2l": {0, 1, 2}, "ambiguous": {3, 4, 5}, "h2l": {7, 8, 9}, "e2l+ambiguous": set(range(6))}
    assert set(expected) == set(SUBSETS)
    for name, group in expected.items():
        p = plan(table, name)
        assert len(p.stages) == 1 and rows(p.stages[0]) == group
        assert set(np.concatenate(p.batches).tolist()) == group, name


def test_final_stage_covers_all_rows(table):
    for name in CURRICULA:
        p = plan(table, name)
        last = p.stages[-1]
        assert last.name == ALL_DATA and rows(last) == set(range(10))
        assert last.start_step + last.n_steps == len(p.batches)
        seen = np.concatenate(p.batches[last.start_step :])
        assert set(seen.tolist()) == set(range(10)), name


# --------------------------------------------------------------------------- batching


def test_batches_are_full_and_passes_are_permutations(table):
    p = plan(table, "shuffled", batch_size=3, epochs=2)
    assert p.steps_per_epoch == 4 and all(len(b) == 3 for b in p.batches)
    stream = np.concatenate(p.batches)
    assert sorted(stream[:10].tolist()) == list(range(10))  # the first pass
    assert sorted(stream[10:20].tolist()) == list(range(10))  # the second, straddling batches 4 and 5
    assert stream.dtype == np.int64


def test_epoch_batches(table):
    p = plan(table, "shuffled")
    assert len(p.epoch_batches(1)) == 5
    assert p.epoch_batches(2)[0] is p.batches[10]
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        p.epoch_batches(3)


def test_deterministic_given_seed(table):
    for name in ("shuffled", "cart-stra++"):
        a, b, c = (plan(table, name, seed=s) for s in (1, 1, 2))
        assert all(np.array_equal(x, y) for x, y in zip(a.batches, b.batches, strict=True))
        assert not all(np.array_equal(x, y) for x, y in zip(a.batches, c.batches, strict=True))


# --------------------------------------------------------------------------- stage table


def test_stage_table(table):
    # oversampled: 12 rows -> 6 steps per epoch, 18 in all; curriculum 9 steps split 100:200:350 = 1.38 /
    # 2.77 / 4.85 -> 1 / 3 / 5
    frame = plan(table, "cart++").stage_table(label_names=("a", "b", "c"))
    assert list(frame.columns) == ["name", "start_step", "n_steps", "pool_size", "unique_rows", "a", "b", "c"]
    assert frame.values.tolist() == [
        ["60%", 0, 1, 10, 6, 5, 5, 0],
        ["80%", 1, 3, 14, 8, 5, 4, 5],
        ["100%", 4, 5, 12, 10, 5, 4, 3],
        [ALL_DATA, 9, 9, 12, 10, 5, 4, 3],
    ]
    plain = plan(table, "shuffled").stage_table()
    assert list(plain.columns)[-3:] == ["0", "1", "2"]
    assert plain.iloc[0][["0", "1", "2"]].tolist() == [5, 2, 3]
    with pytest.raises(DataError, match="2 names for 3 classes"):
        plan(table, "shuffled").stage_table(label_names=("a", "b"))


# --------------------------------------------------------------------------- errors


def test_unknown_order_lists_the_valid_ones(table):
    with pytest.raises(DataError, match=r"unknown order 'bogus'.*'cart-stra\+\+'"):
        training_plan(OrderConfig(name="bogus"), LABELS, 2, 1, 0, table)
    with pytest.raises(DataError, match="unknown order"):
        needs_columns(OrderConfig(name="bogus"))


def test_missing_table_or_column_names_column_and_order(table):
    with pytest.raises(DataError, match=r"order 'cart' needs a table"):
        training_plan(OrderConfig(name="cart"), LABELS, 2, 1, 0, None)
    with pytest.raises(DataError, match=r"'variability'.*order 'cart\+\+' needs column 'variability'"):
        training_plan(OrderConfig(name="cart++"), LABELS, 2, 1, 0, table.drop(columns="variability"))
    with pytest.raises(DataError, match=r"order 'length' needs column 'length'"):
        training_plan(OrderConfig(name="length"), LABELS, 2, 1, 0, table.drop(columns="length"))
    # shuffled needs no table at all
    assert len(training_plan(OrderConfig(name="shuffled"), LABELS, 2, 1, 0).batches) == 5


def test_bad_table_values(table):
    bad = table.assign(similarity=[0.1, None] + SIMILARITY[2:])
    with pytest.raises(DataError, match="row 1"):
        plan(bad, "sts")
    with pytest.raises(DataError, match="table has 9 rows but there are 10 labels"):
        plan(table.iloc[:9], "sts")


@pytest.mark.parametrize(
    "fractions", [(0.5, 0.3, 1.0), (0.3, 0.6), (0.0, 1.0), (0.5, 1.5), (0.5, 0.5, 1.0), (-0.1, 1.0)]
)
def test_bad_fractions(table, fractions):
    with pytest.raises(DataError, match="fractions.*increase within \\(0, 1\\] and end with 1"):
        plan(table, "cart++", fractions=fractions, steps=(1,) * len(fractions))


def test_steps_must_match_fractions(table):
    with pytest.raises(DataError, match=r"3 stage lengths \[1, 2, 3\] for 2 stage fractions"):
        plan(table, "length", fractions=(0.5, 1.0), steps=(1, 2, 3))
    with pytest.raises(DataError, match="3 stage lengths"):  # default fractions of cart-stra++: 5 stages
        plan(table, "cart-stra++", steps=(1, 2, 3))
    with pytest.raises(DataError, match="must be positive"):
        plan(table, "length", fractions=(0.5, 1.0), steps=(0, 1))


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5])
def test_bad_curriculum_share(table, share):
    with pytest.raises(DataError, match=r"curriculum_share.*\(0, 1\]"):
        plan(table, "cart", curriculum_share=share)


def test_other_bad_settings(table):
    with pytest.raises(DataError, match=r"difficulty.*'paper', 'code'"):
        plan(table, "cart++", difficulty="other")
    with pytest.raises(DataError, match="region_fraction"):
        plan(table, "e2l", region_fraction=0.0)
    with pytest.raises(DataError, match="region_fraction"):
        plan(table, "cart", region_fraction=1.5)
    with pytest.raises(DataError, match="has no difficulty score"):
        difficulty_scores(table, OrderConfig(name="e2l"))
    with pytest.raises(DataError, match="batch_size"):
        plan(table, "shuffled", batch_size=0)
    with pytest.raises(DataError, match="epochs"):
        plan(table, "shuffled", epochs=0)


@pytest.mark.parametrize(
    "labels, message",
    [
        (np.array([0, -1, 1]), "negative"),
        (np.array([0.0, 1.5, 1.0]), "integer class indices"),
        (np.zeros((2, 2), dtype=int), "1-d"),
        (np.array([], dtype=int), "non-empty"),
    ],
)
def test_bad_labels(labels, message):
    with pytest.raises(DataError, match=message):
        training_plan(OrderConfig(), labels, 2, 1, 0)


def test_each_stage_draws_its_own_permutations():
    # pass p of stage k is np.random.default_rng([seed, k, p]).permutation(len(pool))
    pool = np.arange(10, 20)
    stream = np.concatenate(batches_from_pool(pool, 5, 3, seed=7, stage=2))
    expected = [pool[np.random.default_rng([7, 2, p]).permutation(10)] for p in (0, 1)]
    assert stream.tolist() == np.concatenate(expected)[:15].tolist()
    other = np.concatenate(batches_from_pool(pool, 5, 3, seed=7, stage=3))
    assert not np.array_equal(stream, other)


def test_cart_stage_names_use_first_groups():
    # E2L {0, 1}, A {0, 3}, H2L {3, 2}: row 0 counts as E2L, row 3 as A
    overlap = pd.DataFrame({"confidence": [0.9, 0.8, 0.3, 0.2], "variability": [0.3, 0.01, 0.02, 0.25]})
    p = training_plan(OrderConfig(name="cart", region_fraction=0.5), np.array([0, 1, 0, 1]), 2, 2, 0, overlap)
    assert [s.name for s in p.stages] == ["30% (E2L)", "66% (E2L+A)", "100% (E2L+A+H2L)", ALL_DATA]
    assert [sorted(rows(s)) for s in p.stages[:3]] == [[0], [0, 1, 3], [0, 1, 2, 3]]


def test_cartography_orders_on_another_ambiguity_score(table):
    """``OrderConfig.ambiguity`` puts another score where the papers use variability: the A group, the
    Cart-CL list's A order and Cart-CL++'s v; variability stays the default."""
    entropy = [0.0, 0.1, 0.2, 0.95, 0.3, 0.35, 0.9, 0.05, 0.4, 0.8]  # A by rank (3 rows): 3, 6, 9
    with_entropy = table.assign(mean_entropy=entropy)
    groups = cartography_groups(with_entropy, 0.3, "mean_entropy")
    assert np.flatnonzero(groups["A"]).tolist() == [3, 6, 9]
    assert groups["E2L"].tolist() == cartography_groups(table, 0.3)["E2L"].tolist()
    order = OrderConfig(name="cart", region_fraction=0.3, ambiguity="mean_entropy")
    assert needs_columns(order) == ("confidence", "mean_entropy")
    # E2L 0 1 2, then A by entropy descending (3, 6, 9), then H2L by confidence ascending (8, 7; 9 is in A)
    assert cart_list(with_entropy, 0.3, "mean_entropy").tolist() == [0, 1, 2, 3, 6, 9, 8, 7]
    paper = difficulty_scores(with_entropy, OrderConfig(name="cart++", ambiguity="mean_entropy"))
    np.testing.assert_allclose(paper, cartcl_pp_difficulty(table["confidence"], entropy))
    with pytest.raises(DataError, match="mean_entropy"):
        difficulty_scores(table, OrderConfig(name="cart++", ambiguity="mean_entropy"))


def test_the_ambiguity_of_an_order_keeps_the_ids_of_runs_made_before_it():
    from cartomap.config import RunConfig

    before = RunConfig(order=OrderConfig(name="cart++", scores="m.parquet")).identity()
    assert "ambiguity" not in before["order"]
    after = RunConfig(
        order=OrderConfig(name="cart++", scores="m.parquet", ambiguity="mean_entropy")
    ).identity()
    assert after["order"]["ambiguity"] == "mean_entropy"
