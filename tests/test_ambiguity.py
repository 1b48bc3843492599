"""The second-axis scores (cartomap.scores.ambiguity) against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cartomap.errors import DataError
from cartomap.scores import ambiguity

# Three examples x four recordings, three classes; gold labels 0, 1, 2.
#   A: sure and right at every recording.
#   B: a tie between classes 0 and 1 (argmax takes class 0: wrong) at recordings 1 and 3, sure and right
#      at 2 and 4.
#   C: uniform over the three classes at every recording (argmax: class 0, wrong).
THIRD = 1 / 3
PROBS = np.array(
    [
        [[1, 0, 0], [0.5, 0.5, 0], [THIRD, THIRD, THIRD]],
        [[1, 0, 0], [0, 1, 0], [THIRD, THIRD, THIRD]],
        [[1, 0, 0], [0.5, 0.5, 0], [THIRD, THIRD, THIRD]],
        [[1, 0, 0], [0, 1, 0], [THIRD, THIRD, THIRD]],
    ],
    dtype=np.float64,
)
LABELS = np.array([0, 1, 2])
LN2_LN3 = math.log(2) / math.log(3)
H_MEAN_B = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) / math.log(3)  # mean of B: [.25, .75, 0]

EXPECTED = {
    "variability": [0.0, 0.25, 0.0],
    "mean_entropy": [0.0, LN2_LN3 / 2, 1.0],
    "gold_bernoulli": [0.0, 0.125, 2 / 9],
    "margin_gap": [0.0, 0.5, 1.0],
    "entropy_of_mean": [0.0, H_MEAN_B, 1.0],
    "last_entropy": [0.0, 0.0, 1.0],
    "epoch_disagreement": [0.0, H_MEAN_B - LN2_LN3 / 2, 0.0],
    "forgetting": [0.0, 1.0, 0.0],  # B: right at 2, wrong at 3
    "learned_late": [0.0, 0.75, 1.0],  # B: right from recording 4 on; C never
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_score_by_hand(name):
    got = ambiguity.score(name, PROBS, LABELS)
    np.testing.assert_allclose(got, EXPECTED[name], atol=1e-12)


def test_every_registered_score_is_checked_here():
    assert set(ambiguity.SCORES) == set(EXPECTED) | {"margin_spread"}
    assert set(ambiguity.MAP_SCORES) <= set(ambiguity.SCORES)


def test_two_classes_and_p_zero_one():
    probs = np.array([[[0.2, 0.8], [1.0, 0.0]], [[0.2, 0.8], [1.0, 0.0]]])  # [E=2, N=2, C=2]
    labels = np.array([1, 1])
    h = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8)) / math.log(2)
    np.testing.assert_allclose(ambiguity.score("mean_entropy", probs, labels), [h, 0.0], atol=1e-12)
    np.testing.assert_allclose(ambiguity.score("margin_gap", probs, labels), [0.4, 0.0], atol=1e-12)
    np.testing.assert_allclose(ambiguity.score("gold_bernoulli", probs, labels), [0.16, 0.0], atol=1e-12)
    # the second example is sure and wrong: no entropy, but never learned
    np.testing.assert_allclose(ambiguity.score("learned_late", probs, labels), [0.0, 1.0])


def test_margin_spread_on_logits():
    logits = np.array([[[0.0, 1.0, -5.0]], [[0.0, 3.0, 2.0]]])  # gold 1: margins 1 and 1; then 1 and 3
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    # margins: recording 1: z1 - max(z0, z2) = 1 - 0 = 1; recording 2: 3 - 2 = 1 -> std 0
    np.testing.assert_allclose(ambiguity.score("margin_spread", probs, np.array([1]), logits), [0.0])
    logits[1, 0, 2] = 0.0  # now 3 - 0 = 3: margins 1 and 3, std 1
    np.testing.assert_allclose(ambiguity.score("margin_spread", probs, np.array([1]), logits), [1.0])
    with pytest.raises(DataError, match="logits"):
        ambiguity.score("margin_spread", probs, np.array([1]))


def test_one_recording_and_ties_between_examples():
    one = PROBS[:1]
    np.testing.assert_allclose(ambiguity.score("variability", one, LABELS), [0, 0, 0])
    np.testing.assert_allclose(ambiguity.score("mean_entropy", one, LABELS), [0, LN2_LN3, 1])
    np.testing.assert_allclose(ambiguity.score("forgetting", one, LABELS), [0, 0, 0])


def test_scores_picks_names_and_leaves_out_logit_scores_without_logits():
    out = ambiguity.scores(PROBS, LABELS)
    assert tuple(out) == ambiguity.MAP_SCORES
    out = ambiguity.scores(PROBS, LABELS, names=("mean_entropy", "margin_spread"))
    assert list(out) == ["mean_entropy"]


def test_unknown_name_and_bad_shapes_are_one_error():
    with pytest.raises(DataError, match="unknown ambiguity score 'spread'.*variability"):
        ambiguity.score("spread", PROBS, LABELS)
    with pytest.raises(DataError, match=r"\[E, N, C\]"):
        ambiguity.score("mean_entropy", PROBS[0], LABELS)
    with pytest.raises(DataError, match="no recordings"):
        ambiguity.score("mean_entropy", PROBS[:0], LABELS)


def test_higher_is_more_ambiguous_for_every_score():
    """A is sure and right at every recording, C undecided at every one: every score ranks C at least as
    ambiguous as A, and every bounded score stays in its range."""
    logits = np.log(np.clip(PROBS, 1e-9, 1))
    for name, entry in ambiguity.SCORES.items():
        values = ambiguity.score(name, PROBS, LABELS, logits)
        assert values[2] >= values[0], name
        if entry.range is not None:
            assert entry.range[0] - 1e-12 <= values.min() and values.max() <= entry.range[1] + 1e-12, name


# --------------------------------------------------------------------------- the region rule on an axis


def _frame():
    import pandas as pd

    # variability ranks d first, mean entropy ranks a first
    return pd.DataFrame(
        {
            "id": list("abcd"),
            "confidence": [0.9, 0.8, 0.3, 0.6],
            "variability": [0.01, 0.02, 0.03, 0.30],
            "mean_entropy": [0.90, 0.10, 0.20, 0.05],
        }
    )


def test_region_rule_ranks_on_its_axis():
    from cartomap.scores.metrics import RegionRule

    frame = _frame()
    by_var = RegionRule(fraction=0.25, axis="variability").regions(frame)
    by_entropy = RegionRule(fraction=0.25, axis="mean_entropy").regions(frame)
    assert by_var.tolist() == ["easy-to-learn", "easy-to-learn", "hard-to-learn", "ambiguous"]
    assert by_entropy.tolist() == ["ambiguous", "easy-to-learn", "hard-to-learn", "easy-to-learn"]
    # by threshold: each axis has its own default cut (variability 0.2); one given is used as is
    assert RegionRule(method="threshold", axis="variability").ambiguous_var == 0.2
    default = RegionRule(method="threshold")
    assert default.ambiguous_var == ambiguity.get(default.axis).threshold
    rule = RegionRule(method="threshold", axis="mean_entropy", ambiguous_var=0.15)
    assert rule.regions(frame).tolist() == ["ambiguous", "easy-to-learn", "ambiguous", "easy-to-learn"]
    assert "mean entropy ≥ 0.15" in rule.describe()
    assert "highest mean entropy (mean entropy ≥ 0.900 here)" in RegionRule(
        fraction=0.25, axis="mean_entropy"
    ).describe(frame["mean_entropy"].to_numpy())


def test_region_rule_checks_its_axis_and_reads_old_saved_rules_as_variability():
    from cartomap.scores.metrics import RegionRule

    with pytest.raises(DataError, match="unknown ambiguity axis 'spread'"):
        RegionRule(axis="spread")
    saved = {"method": "rank", "fraction": 0.5, "ambiguous_var": 0.2, "conf_split": 0.5}  # before axes
    assert RegionRule.from_dict(saved).axis == "variability"
    rule = RegionRule(axis="mean_entropy", fraction=0.4)
    assert RegionRule.from_dict(rule.to_dict()) == rule
    frame = _frame().drop(columns="mean_entropy")
    with pytest.raises(DataError, match="no mean_entropy column"):
        rule.regions(frame)


def test_compute_metrics_carries_the_map_scores_and_ranks_on_the_rule_s_axis():
    from cartomap.scores.metrics import METRIC_COLUMNS, RegionRule, compute_metrics

    logits = np.log(np.clip(PROBS, 1e-12, 1))
    frame = compute_metrics(logits, LABELS, regions=RegionRule(fraction=1 / 3, axis="mean_entropy"))
    assert list(frame.columns) == list(METRIC_COLUMNS)
    for name in ambiguity.MAP_SCORES:
        np.testing.assert_allclose(frame[name], EXPECTED[name], atol=1e-9)
    assert frame["region"].tolist() == ["easy-to-learn", "easy-to-learn", "ambiguous"]  # C: entropy 1
    assert frame.attrs["regions"]["axis"] == "mean_entropy"


def test_a_metrics_file_written_before_the_scores_is_computed_again(tmp_path, tiny_model):
    """An old run's metrics.parquet without the new score columns: asked for them, the run computes its
    metrics again from its dynamics and keeps the file."""
    import pandas as pd

    from cartomap.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from cartomap.data.loading import load_dataset
    from cartomap.runs.store import RunStore
    from cartomap.training.loop import train_or_load

    demo = load_dataset(DataConfig(path="demo:dev"))
    small = tmp_path / "small.jsonl"
    rows = demo.frame.head(24)
    rows.assign(label=[demo.label_names[v] for v in rows["label"]])[
        ["id", "premise", "hypothesis", "label"]
    ].to_json(small, orient="records", lines=True)
    config = RunConfig(
        data=DataConfig(path=str(small)),
        dev=None,
        model=ModelConfig(name_or_path=tiny_model, max_length=32),
        train=TrainConfig(epochs=2, batch_size=8, save_checkpoints=False),
    )
    run = train_or_load(config, RunStore(tmp_path))
    path = run.metrics_path()
    whole = pd.read_parquet(path)
    old = whole.drop(columns=[c for c in ambiguity.MAP_SCORES if c != "variability"])
    old.to_parquet(path)
    frame = run.metrics(columns=("id", "confidence", "mean_entropy"))
    np.testing.assert_allclose(frame["mean_entropy"], whole["mean_entropy"])
    assert "mean_entropy" in pd.read_parquet(path).columns  # kept
