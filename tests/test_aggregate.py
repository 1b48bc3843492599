"""Aggregating unit scores to groups: a sentence from its words (token runs), an example from its
labels (multi-label runs). The pins below fix the exact floats the two kinds give on small hand fixtures
(the last bit included: sums run in a fixed order, so a refactoring that reorders them shows here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.scores import aggregate, label_examples, tokens

# ----------------------------------------------------------------------------- the word table
#
# Three sentences; word confidences (lower = worse):
#   sentence 0: 0.6, 0.9
#   sentence 1: 0.7
#   sentence 2: 0.3, 0.1, 0.2   (0.1 + 0.2 + 0.3 is 0.6 or 0.6000000000000001 by the order of the sums)
WORD_CONF = np.array([0.6, 0.9, 0.7, 0.3, 0.1, 0.2])
SENTENCE = np.array([0, 0, 1, 2, 2, 2])
WORD = np.array([0, 1, 0, 0, 1, 2])

# ----------------------------------------------------------------------------- the label tables
#
# Two labels (toxic, insult), three examples; label confidences and gold labels:
#   example 0: 0.65 (present), 0.5 (absent)
#   example 1: 0.5 (present), 0.3 (present)
#   example 2: 0.9 (absent), 0.65 (absent)   no gold label
LABEL_CONF = np.array([[0.65, 0.5], [0.5, 0.3], [0.9, 0.65]])
LABEL_GOLD = np.array([[True, False], [True, True], [False, False]])
# Four labels, two examples: sums of three or four floats, whose order shows in the last bit.
WIDE_CONF = np.array([[0.3, 0.1, 0.2, 0.4], [0.7, 0.1, 0.1, 0.2]])
WIDE_GOLD = np.array([[True, True, True, False], [False, True, True, True]])


def _sentence(method: str, **options) -> list[float]:
    return tokens.sentence_scores(WORD_CONF, SENTENCE, WORD, method=method, **options)["score"].tolist()


def _example(method: str, conf=LABEL_CONF, gold=LABEL_GOLD, **options) -> list[float]:
    return label_examples.example_scores(conf, gold, method=method, **options)["score"].tolist()


def test_sentence_scores_pinned():
    e = math.exp
    assert _sentence("min") == [0.6, 0.7, 0.1]
    # mean: sentence 2 sums its words from the lowest score up, 0.1 + (0.2 + 0.3) = 0.6, / 3
    assert _sentence("mean") == pytest.approx([0.75, 0.7, 0.2])
    assert _sentence("mean") == [0.75, 0.7, 0.19999999999999998]
    # softmin, t = 0.05: weights exp((1 - s) / t) relative to the worst word's: s0 1, e^-6; s2 1, e^-2, e^-4
    soft = [(0.6 + 0.9 * e(-6)) / (1 + e(-6)), 0.7, (0.1 + 0.2 * e(-2) + 0.3 * e(-4)) / (1 + e(-2) + e(-4))]
    assert _sentence("softmin") == pytest.approx(soft)
    assert _sentence("softmin") == [0.6007417869469904, 0.7, 0.1149062907779132]
    hot = [(0.6 * e(0.4) + 0.9 * e(0.1)) / (e(0.4) + e(0.1)), 0.7]
    assert _sentence("softmin", temperature=1.0)[:2] == pytest.approx(hot)
    assert _sentence("softmin", temperature=1.0) == [0.7276672449565024, 0.7, 0.1933444204244802]
    assert _sentence("softmin", temperature=0) == _sentence("min")
    assert _sentence("softmin", temperature=math.inf) == _sentence("mean")
    table = tokens.sentence_scores(WORD_CONF, SENTENCE, WORD)
    assert table["worst_word"].tolist() == [0, 0, 1] and table["worst_score"].tolist() == [0.6, 0.7, 0.1]
    assert table["n_words"].tolist() == [2, 1, 3]


def test_sentence_functions_keep_their_signature():
    # f(word scores, sentence, **options) -> (the sentence ids that have words, their scores)
    for method, expected in (("min", [0.6, 0.1]), ("mean", [0.75, 0.19999999999999998])):
        ids, values = tokens.SENTENCE_METHODS[method](WORD_CONF[[0, 1, 3, 4, 5]], SENTENCE[[0, 1, 3, 4, 5]])
        assert ids.tolist() == [0, 2] and values.tolist() == expected
    ids, values = tokens.softmin_score(WORD_CONF, SENTENCE, temperature=1.0)
    assert ids.tolist() == [0, 1, 2] and values.tolist() == [0.7276672449565024, 0.7, 0.1933444204244802]
    assert tokens.sentence_method("mean") is tokens.mean_score
    assert set(tokens.SENTENCE_METHODS) == {"min", "mean", "softmin"}


def test_sentence_scores_agree_with_cleanlab_on_the_word_table():
    from cleanlab.token_classification.rank import _softmin_sentence_score

    parts = tokens.split_flat(WORD_CONF, [2, 1, 3])
    for t in (0.05, 1.0):
        assert _sentence("softmin", temperature=t) == pytest.approx(
            _softmin_sentence_score(parts, temperature=t)
        ), t
    assert _sentence("min") == [float(min(p)) for p in parts]


def test_example_scores_pinned():
    e = math.exp
    assert _example("min") == [0.5, 0.3, 0.65]
    assert _example("mean") == [0.575, 0.4, 0.775]
    present = _example("present_only")
    assert present[:2] == [0.65, 0.4] and math.isnan(present[2])  # no gold label: no score
    # softmin, t = 0.1: weights exp((1 - s) / t) relative to the worst label's: e^-1.5, e^-2, e^-2.5
    soft = [(0.5 + 0.65 * e(-1.5)) / (1 + e(-1.5)), (0.3 + 0.5 * e(-2)) / (1 + e(-2))]
    soft.append((0.65 + 0.9 * e(-2.5)) / (1 + e(-2.5)))
    assert _example("softmin") == pytest.approx(soft)
    assert _example("softmin") == [0.5273638285709535, 0.32384058440442354, 0.668964545005311]
    # ema, alpha 0.8, scores high to low: 0.8 * low + 0.2 * high
    assert _example("ema") == pytest.approx([0.53, 0.34, 0.7])
    assert _example("ema") == [0.53, 0.33999999999999997, 0.7]
    table = label_examples.example_scores(LABEL_CONF, LABEL_GOLD, method="present_only")
    assert table["n_scored"].tolist() == [1, 2, 0] and table["worst_label"].tolist() == [0, 1, -1]


def test_wide_example_scores_pinned():
    # sums run label by label: (0.3 + 0.1) + 0.2 = 0.6000000000000001, / 3
    assert _example("present_only", WIDE_CONF, WIDE_GOLD) == pytest.approx([0.2, 0.4 / 3])
    assert _example("present_only", WIDE_CONF, WIDE_GOLD) == [0.20000000000000004, 0.13333333333333333]
    assert _example("mean", WIDE_CONF, WIDE_GOLD) == [0.25, 0.27499999999999997]
    assert _example("min", WIDE_CONF, WIDE_GOLD) == [0.1, 0.1]
    assert _example("softmin", WIDE_CONF, WIDE_GOLD) == [0.150734726541423, 0.11614743102141906]
    # ema, alpha 0.8: (0.4, 0.3, 0.2, 0.1) -> 0.4, 0.32, 0.224, 0.1248
    assert _example("ema", WIDE_CONF, WIDE_GOLD) == pytest.approx([0.1248, 0.108])
    assert _example("ema", WIDE_CONF, WIDE_GOLD) == [0.12480000000000001, 0.10800000000000001]


def test_example_scores_agree_with_cleanlab_on_the_label_table():
    from cleanlab.multilabel_classification.rank import get_label_quality_scores

    for conf, gold in ((LABEL_CONF, LABEL_GOLD), (WIDE_CONF, WIDE_GOLD)):
        labels = [np.flatnonzero(row).tolist() for row in gold]
        pred_probs = np.where(gold, conf, 1.0 - conf)  # cleanlab's self-confidence of label j is conf
        assert _example("ema", conf, gold) == pytest.approx(get_label_quality_scores(labels, pred_probs))
        for t in (0.1, 1.0):
            kwargs = {"method": "softmin", "temperature": t}
            reference = get_label_quality_scores(labels, pred_probs, aggregator_kwargs=kwargs)
            assert _example("softmin", conf, gold, temperature=t) == pytest.approx(reference), t


def test_example_functions_keep_their_signature():
    # f(label scores [N, L], gold [N, L], **options) -> (scores [N], the labels counted [N, L])
    values, counted = label_examples.EXAMPLE_METHODS["present_only"](WIDE_CONF, WIDE_GOLD)
    assert values.tolist() == [0.20000000000000004, 0.13333333333333333]
    assert counted.tolist() == WIDE_GOLD.tolist()
    values, counted = label_examples.ema_score(WIDE_CONF, WIDE_GOLD, alpha=0.5)
    assert values.tolist() == pytest.approx([0.1875, 0.1875]) and counted.all()
    values, counted = label_examples.mean_score(np.zeros((2, 0)), np.zeros((2, 0), dtype=bool))
    assert np.isnan(values).all() and counted.shape == (2, 0)
    assert label_examples.example_method("ema") is label_examples.ema_score
    assert set(label_examples.EXAMPLE_METHODS) == {"min", "mean", "present_only", "softmin", "ema"}


# ----------------------------------------------------------------------------- every registered method


def _cases():
    """(name, unit kind, options) for every registered aggregation and every kind it is offered for,
    with its default options and, where it has one, a second temperature or alpha."""
    for name, chosen in aggregate.AGGREGATIONS.items():
        for unit, defaults in chosen.units.items():
            yield name, unit, {}
            for option, value in defaults.items():
                yield name, unit, {option: value * 4 if option == "temperature" else value / 2}


CASES = list(_cases())


def _flat_fixture(rng, n_groups=12):
    """Flat units of ``n_groups`` groups of 1 to 6 units (group 3 has none), rows shuffled; the
    present marks leave group 5 with no counted unit."""
    sizes = rng.integers(1, 7, size=n_groups)
    sizes[3] = 0
    group = rng.permutation(np.repeat(np.arange(n_groups), sizes))
    values = rng.uniform(size=len(group))
    present = rng.uniform(size=len(group)) < 0.6
    present[group == 5] = False
    present[np.flatnonzero(group == 0)[0]] = True
    return values, group, present


def _run(name, unit, options, values, group=None, n_groups=None, present=None):
    scores, counted = aggregate.aggregate(
        values, group, n_groups, method=name, unit=unit, present=present, **options
    )
    return scores, counted


@pytest.mark.parametrize(("name", "unit", "options"), CASES)
def test_every_method_conforms_on_flat_units(name, unit, options):
    rng = np.random.default_rng(len(name))
    values, group, present = _flat_fixture(rng)
    scores, counted = _run(name, unit, options, values, group, 13, present)
    assert scores.shape == (13,)  # one per group, 12 empty as well
    for g in range(13):
        mine = values[(group == g) & counted]
        if not mine.size:  # groups 3 and 12 have no unit; 5 has no present one
            assert np.isnan(scores[g]), g
        else:
            assert mine.min() <= scores[g] <= mine.max(), g  # so in [0, 1] for confidences
    assert np.isnan(scores[[3, 12]]).all()
    # a one-unit group scores its unit
    single, _ = _run(name, unit, options, np.array([0.37]), np.array([0]), present=np.array([True]))
    assert single.tolist() == [0.37]
    # the order of the units does not matter (but for the last bit of a sum)
    order = rng.permutation(len(values))
    again, _ = _run(name, unit, options, values[order], group[order], 13, present[order])
    assert again == pytest.approx(scores, rel=1e-12, nan_ok=True)


@pytest.mark.parametrize(("name", "unit", "options"), CASES)
def test_every_method_conforms_on_rows_as_on_flat_units(name, unit, options):
    rng = np.random.default_rng(7)
    rows = rng.uniform(size=(9, 5))
    present = rng.uniform(size=(9, 5)) < 0.5
    present[2] = False
    scores, counted = _run(name, unit, options, rows, present=present)
    assert scores.shape == (9,) and counted.shape == (9, 5)
    group = np.repeat(np.arange(9), 5)
    flat, _ = _run(name, unit, options, rows.ravel(), group, present=present.ravel())
    assert scores == pytest.approx(flat, rel=1e-12, nan_ok=True)
    assert np.isnan(scores[2]) == aggregate.AGGREGATIONS[name].needs_present
    empty, _ = _run(name, unit, options, np.zeros((3, 0)), present=np.zeros((3, 0), dtype=bool))
    assert empty.shape == (3,) and np.isnan(empty).all()


@pytest.mark.parametrize(("name", "unit", "options"), CASES)
def test_raising_one_unit_never_lowers_its_group_where_the_method_is_monotone(name, unit, options):
    rng = np.random.default_rng(11)
    rows = rng.uniform(size=(40, 4))
    present = np.ones((40, 4), dtype=bool)
    before, _ = _run(name, unit, options, rows, present=present)
    lowered = 0
    for step in (0.01, 0.1, 0.5):
        for j in range(4):
            raised = rows.copy()
            raised[:, j] = np.minimum(raised[:, j] + step, 1.0)
            after, _ = _run(name, unit, options, raised, present=present)
            lowered += int((after < before).sum())
    if aggregate.AGGREGATIONS[name].monotone:
        assert lowered == 0
    else:  # the flag is not a guess: softmin does lower some groups here
        assert lowered > 0


def test_softmin_is_not_monotone_by_hand():
    # t = 0.05: raising the good word 0.9 -> 1.0 moves weight onto the bad word 0.5
    before = aggregate.group_softmin(np.array([0.5, 0.9]), np.array([0, 0]))[0]
    after = aggregate.group_softmin(np.array([0.5, 1.0]), np.array([0, 0]))[0]
    assert after < before
    assert before == pytest.approx((0.5 + 0.9 * math.exp(-8)) / (1 + math.exp(-8)))


# ----------------------------------------------------------------------------- the registry


def test_names_by_unit_kind_and_the_kinds_registries():
    from cartomap.cli.runs import SENTENCE_METHOD_CHOICES

    assert aggregate.names("word") == ("min", "mean", "softmin") == SENTENCE_METHOD_CHOICES
    assert aggregate.names("label") == ("min", "mean", "present_only", "softmin", "ema")
    assert tuple(tokens.SENTENCE_METHODS) == aggregate.names("word")
    assert tuple(label_examples.EXAMPLE_METHODS) == aggregate.names("label")
    assert (
        aggregate.AGGREGATIONS["softmin"].units["word"]["temperature"] == tokens.DEFAULT_SOFTMIN_TEMPERATURE
    )
    assert aggregate.AGGREGATIONS["softmin"].units["label"]["temperature"] == 0.1


def test_an_unknown_or_foreign_method_is_one_error_listing_the_names():
    with pytest.raises(DataError, match=r"unknown sentence score 'max'; expected one of min, mean, softmin"):
        tokens.sentence_scores(WORD_CONF, SENTENCE, WORD, method="max")
    with pytest.raises(
        DataError, match=r"'present_only' \(present_only scores examples from their labels only\)"
    ):
        tokens.sentence_scores(WORD_CONF, SENTENCE, WORD, method="present_only")
    with pytest.raises(DataError, match="expected one of min, mean, present_only, softmin, ema") as caught:
        label_examples.example_scores(LABEL_CONF, method="median")
    assert caught.value.field == "method"
    with pytest.raises(DataError, match="present_only needs the gold labels"):
        label_examples.example_scores(LABEL_CONF, method="present_only")


def test_a_registered_aggregation_serves_the_kinds_it_names(monkeypatch):
    def group_max(values, group=None, n_groups=None, *, counted=None):
        return -aggregate.group_min(-np.asarray(values), group, n_groups, counted=counted)

    monkeypatch.setitem(
        aggregate.AGGREGATIONS,
        "max",
        aggregate.Aggregation("max", group_max, "its best unit", units={"word": {}}),
    )
    assert _sentence("max") == [0.9, 0.7, 0.3]
    ids, values = tokens.sentence_method("max")(WORD_CONF, SENTENCE)
    assert ids.tolist() == [0, 1, 2] and values.tolist() == [0.9, 0.7, 0.3]
    with pytest.raises(DataError, match="max scores sentences from their words only"):
        label_examples.example_scores(LABEL_CONF, method="max")
    with pytest.raises(DataError, match="already registered"):
        aggregate.register(aggregate.Aggregation("max", group_max, "again"))


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: aggregate.Aggregation("x", aggregate.group_min, "", units={"sentence": {}}), "units"),
        (lambda: aggregate.Aggregation("no spaces", aggregate.group_min, ""), "name"),
        (lambda: aggregate.Aggregation("p", aggregate.group_mean, "", needs_present=True), "units"),
        (lambda: aggregate.names("token"), "unit"),
        (lambda: aggregate.group_mean(np.ones(3), np.array([0, 1])), "group"),
        (lambda: aggregate.group_mean(np.ones(2), np.array([0, -1])), "group"),
        (lambda: aggregate.group_mean(np.ones(2), np.array([0, 4]), 3), "group"),
        (lambda: aggregate.group_mean(np.ones(3)), "values"),
        (lambda: aggregate.group_mean(np.ones((2, 2)), n_groups=3), "n_groups"),
        (lambda: aggregate.group_mean(np.ones((2, 2)), counted=np.ones(4, dtype=bool)), "counted"),
        (lambda: aggregate.aggregate(np.ones((2, 2)), method="present_only"), "present"),
        (lambda: aggregate.group_softmin(np.ones(2), np.zeros(2, dtype=int), temperature=-1), "temperature"),
        (lambda: aggregate.group_ema(np.ones(2), np.zeros(2, dtype=int), alpha=1.5), "alpha"),
    ],
)
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(DataError) as caught:
        call()
    assert caught.value.field == field
