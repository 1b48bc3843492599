"""The stability of a data map over seeds (cartomap.scores.stability) on hand-made frames whose means,
spreads, majorities and agreements are known by hand; scipy's spearmanr is the oracle for Spearman."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from cartomap.errors import DataError
from cartomap.scores.metrics import AMBIGUOUS, EASY, HARD, RegionRule
from cartomap.scores.stability import (
    align_frames,
    majority_region,
    pairwise_spearman,
    region_agreement_pairwise,
    seed_table,
    spearman_brown,
    stability_summary,
    stable_share,
)

IDS = ["a", "b", "c", "d"]


def frame(conf, var, corr, aum, regions, predicted=(0, 1, 2, 0), ids=IDS, labels=(0, 1, 2, 0)):
    out = pd.DataFrame(
        {
            "id": list(ids),
            "index": np.arange(len(ids)),
            "label": list(labels),
            "predicted": list(predicted),
            "confidence": conf,
            "variability": var,
            "correctness": corr,
            "aum": aum,
            "never_learned": [False] * len(ids),
            "region": list(regions),
        }
    )
    out.attrs["n_epochs"] = 2
    # Cartography's maps (regions by variability): the one axis these frames have
    out.attrs["regions"] = RegionRule(axis="variability").to_dict()
    return out


@pytest.fixture()
def frames() -> dict[int, pd.DataFrame]:
    # regions per example over seeds 42, 43, 44: a E,E,A; b A,A,H; c H,H,H; d E,A,A
    return {
        42: frame([0.9, 0.5, 0.1, 0.8], [0.1, 0.3, 0.05, 0.2], [1.0, 0.5, 0.0, 1.0], [2.0, 0.0, -1.0, 1.0],
                  [EASY, AMBIGUOUS, HARD, EASY], predicted=(0, 1, 0, 0)),
        43: frame([0.7, 0.4, 0.2, 0.6], [0.2, 0.1, 0.1, 0.3], [1.0, 0.5, 0.0, 0.5], [1.0, 0.5, -2.0, 0.0],
                  [EASY, AMBIGUOUS, HARD, AMBIGUOUS], predicted=(0, 2, 1, 0)),
        44: frame([0.8, 0.3, 0.0, 0.7], [0.3, 0.2, 0.0, 0.1], [0.5, 0.0, 0.0, 1.0], [0.0, -1.0, -3.0, 2.0],
                  [AMBIGUOUS, HARD, HARD, AMBIGUOUS], predicted=(1, 2, 2, 0)),
    }  # fmt: skip


def test_means_spreads_and_mean_map(frames):
    table = seed_table(frames)
    assert table["id"].tolist() == IDS and table["label"].tolist() == [0, 1, 2, 0]
    assert np.allclose(table["confidence_mean"], [0.8, 0.4, 0.1, 0.7])
    assert np.allclose(table["confidence"], table["confidence_mean"])  # drawable as a map
    assert np.allclose(table["variability_mean"], [0.2, 0.2, 0.05, 0.2])
    # population std over seeds: conf of a = 0.9, 0.7, 0.8 -> sqrt(((0.1)^2 + (0.1)^2 + 0) / 3)
    assert table["confidence_std"].iloc[0] == pytest.approx(np.sqrt(0.02 / 3))
    assert table["correctness_std"].iloc[2] == 0.0
    assert np.allclose(table["aum_mean"], [1.0, -0.5 / 3, -2.0, 1.0])
    assert "index_mean" not in table.columns and "label_mean" not in table.columns
    assert "never_learned_mean" not in table.columns  # booleans are no metric to average
    # the mean map's region, by rank: 1 of 4 ambiguous (round(4/3)); the highest mean variability,
    # ties by index -> a (0.2); the rest by mean confidence >= 0.5
    assert table["region"].tolist() == [AMBIGUOUS, HARD, HARD, EASY]
    # the class most seeds predicted, ties to the lowest
    assert table["predicted"].tolist() == [0, 2, 0, 0]
    assert table.attrs["seeds"] == [42, 43, 44] and table.attrs["n_seeds"] == 3
    assert table.attrs["n_epochs"] == 2


def test_majority_agreement_votes_and_per_seed_columns(frames):
    table = seed_table(frames)
    assert table["region_majority"].tolist() == [EASY, AMBIGUOUS, HARD, AMBIGUOUS]
    assert np.allclose(table["region_agreement"], [2 / 3, 2 / 3, 1.0, 2 / 3])
    assert table["region_votes"].tolist() == ["2/3", "2/3", "3/3", "2/3"]
    assert table["stable"].tolist() == [False, False, True, False]
    assert table["variability@seed43"].tolist() == [0.2, 0.1, 0.1, 0.3]
    assert table["region@seed44"].tolist() == [AMBIGUOUS, HARD, HARD, AMBIGUOUS]
    for m in ("confidence", "variability", "correctness", "region"):
        assert {f"{m}@seed{s}" for s in (42, 43, 44)} <= set(table.columns)


def test_ties_follow_easy_ambiguous_hard():
    regions = np.array([[EASY, HARD, AMBIGUOUS, HARD], [AMBIGUOUS, AMBIGUOUS, HARD, HARD]], dtype=object)
    majority, votes = majority_region(regions)
    assert majority.tolist() == [EASY, AMBIGUOUS, AMBIGUOUS, HARD]
    assert votes.tolist() == [1, 1, 1, 2]


def test_rows_are_aligned_by_id(frames):
    shuffled = dict(frames)
    shuffled[43] = frames[43].iloc[[3, 1, 0, 2]]
    assert seed_table(shuffled).equals(seed_table(frames))
    assert pairwise_spearman(shuffled, "variability") == pytest.approx(
        pairwise_spearman(frames, "variability")
    )


def test_pairwise_spearman_matches_scipy(frames):
    for metric in ("confidence", "variability", "correctness", "aum"):
        expected = np.mean(
            [spearmanr(frames[s][metric], frames[t][metric]).statistic for s, t in combinations(frames, 2)]
        )
        assert pairwise_spearman(frames, metric) == pytest.approx(expected)
    # two seeds that rank alike: 1; reversed: -1
    f = frames[42]
    same = f.assign(variability=f["variability"] * 2)
    rev = f.assign(variability=-f["variability"])
    assert pairwise_spearman({0: f, 1: same}, "variability") == pytest.approx(1.0)
    assert pairwise_spearman({0: f, 1: rev}, "variability") == pytest.approx(-1.0)


def test_region_agreement_and_stable_share(frames):
    # pairs: (42, 43) agree on a, b, c -> 3/4; (42, 44) on c, ... : c only -> 1/4; (43, 44) on c, d -> 2/4
    assert region_agreement_pairwise(frames) == pytest.approx((3 / 4 + 1 / 4 + 2 / 4) / 3)
    assert stable_share(frames) == pytest.approx(1 / 4)


def test_spearman_brown():
    assert spearman_brown(0.5, 1) == pytest.approx(0.5)
    assert spearman_brown(0.5, 2) == pytest.approx(2 / 3)  # 2 * 0.5 / 1.5
    assert spearman_brown(0.23, 3) == pytest.approx(0.69 / 1.46)
    assert spearman_brown(1.0, 5) == pytest.approx(1.0)
    assert np.isnan(spearman_brown(float("nan"), 3))
    with pytest.raises(DataError):
        spearman_brown(0.5, 0)


def test_summary_is_json_ready_and_consistent(frames):
    summary = stability_summary(frames)
    json.dumps(summary, allow_nan=False)
    assert summary["n_seeds"] == 3 and summary["seeds"] == [42, 43, 44] and summary["n_examples"] == 4
    assert set(summary["spearman"]) == {"confidence", "variability", "correctness", "aum"}
    rho = summary["spearman"]["variability"]
    assert rho == pytest.approx(pairwise_spearman(frames, "variability"))
    assert summary["spearman_brown"]["variability"] == pytest.approx(spearman_brown(rho, 3))
    assert summary["region_agreement"] == pytest.approx(region_agreement_pairwise(frames))
    assert summary["stable_share"] == pytest.approx(seed_table(frames)["stable"].mean())


def test_a_constant_metric_gives_none_not_nan(frames):
    flat = {s: f.assign(correctness=1.0) for s, f in frames.items()}
    summary = stability_summary(flat)
    assert summary["spearman"]["correctness"] is None and summary["spearman_brown"]["correctness"] is None


def test_bad_input_says_which_seed(frames):
    other = dict(frames)
    other[44] = frames[44].assign(id=["a", "b", "c", "zz"])
    with pytest.raises(DataError, match="seed 44.*differ.*'d'"):
        seed_table(other)
    with pytest.raises(DataError, match="seed 43.*differ"):
        align_frames({42: frames[42], 43: frames[43].iloc[:3]})
    with pytest.raises(DataError, match="seed 43.*label"):
        seed_table({42: frames[42], 43: frames[43].assign(label=[1, 1, 2, 0])})
    with pytest.raises(DataError, match="seed 42.*more than once"):
        seed_table({42: frames[42].assign(id=["a", "a", "c", "d"])})
    with pytest.raises(DataError, match="at least 2"):
        pairwise_spearman({42: frames[42]}, "variability")
    with pytest.raises(DataError, match="at least 2"):
        region_agreement_pairwise({42: frames[42]})
    with pytest.raises(DataError, match="at least 2"):
        stability_summary({42: frames[42]})
    with pytest.raises(DataError, match="no seeds"):
        seed_table({})
    with pytest.raises(DataError, match="no column 'el2n'"):
        pairwise_spearman(frames, "el2n")


def test_one_seed_is_a_table_of_itself(frames):
    table = seed_table({42: frames[42]})
    assert np.allclose(table["confidence"], frames[42]["confidence"])
    assert (table["confidence_std"] == 0).all() and table["stable"].all()
    assert table["region_votes"].tolist() == ["1/1"] * 4
