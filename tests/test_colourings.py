"""What a data map can be coloured by (cartomap.analysis.colourings), continuous colour scales and the map
split by gold label (cartomap.analysis.figures)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis import colourings, figures, map_points, seed_maps, selection
from cartomap.analysis import datamap as dm
from cartomap.scores.metrics import compute_metrics

LABELS = ("entailment", "neutral", "contradiction")


def _frame(n: int = 60, votes: bool = False, seeds: bool = False, genre: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    labels = np.arange(n) % 3
    logits = rng.normal(size=(3, n, 3)).astype(np.float32)
    logits[:, np.arange(n), labels] += np.linspace(-1, 3, n)
    ids = [f"ex{i}" for i in range(n)]
    examples = pd.DataFrame({"id": ids, "premise": [f"<b>p{i}</b>" for i in range(n)], "label": labels})
    if genre:
        examples["genre"] = np.where(np.arange(n) % 2, "fiction", "travel")
    if votes:
        examples["human_n"] = 5
        examples["human_majority"] = labels
        examples["human_majority_share"] = np.linspace(0.4, 1.0, n)
        examples["human_entropy"] = np.linspace(1.5, 0.0, n)
        examples["gold_disagrees"] = np.arange(n) % 7 == 0
    metrics = compute_metrics(logits, labels, ids=ids)
    if seeds:
        metrics["region_agreement"] = np.where(np.arange(n) % 2, 1.0, 2 / 3)
        metrics["region_votes"] = np.where(np.arange(n) % 2, "3/3", "2/3")
        metrics["region_majority"] = metrics["region"]
        metrics["stable"] = np.arange(n) % 2 == 1
        metrics["confidence_std"] = np.linspace(0.0, 0.3, n)
        return seed_maps.seed_map_frame(metrics, examples, LABELS, 3)
    return dm.build_map_frame(metrics, examples, LABELS)


def test_a_plain_run_offers_its_metrics_and_detectors_but_no_votes_or_seeds():
    offered = colourings.available(_frame())
    assert list(offered)[:3] == ["correctness", "label", "region"]
    assert {"AUM", "EL2N", "forgetfulness"} <= set(offered)
    for absent in ("genre", "human entropy", "human majority share", "gold vs majority", "seed agreement"):
        assert absent not in offered
    assert "seed spread" not in offered and "region agreement" not in offered
    detectors = [n for n in offered if n.startswith(colourings.DETECTOR_PREFIX)]
    assert {offered[n].detector for n in detectors} == {"datamap_confidence", "aum", "el2n", "forgetting"}
    assert all(offered[n].continuous for n in ("AUM", "EL2N", "forgetfulness", *detectors))
    assert not any(offered[n].continuous for n in ("correctness", "label", "region"))


def test_votes_genre_and_seeds_add_their_colourings():
    offered = colourings.available(_frame(votes=True, genre=True))
    assert {"genre", "human entropy", "human majority share", "gold vs majority"} <= set(offered)
    assert offered["human entropy"].continuous and not offered["gold vs majority"].continuous
    seeded = colourings.available(_frame(seeds=True))
    assert {"region agreement", "seed agreement", "seed spread"} <= set(seeded)
    # the seeds' spread feeds the seed detectors
    assert "seed_spread" in {c.detector for c in seeded.values()}


def test_an_empty_score_column_is_not_offered():
    frame = _frame()
    frame["aum"] = np.nan
    assert "AUM" not in colourings.available(frame)
    assert "aum" not in {c.detector for c in colourings.available(frame).values()}  # nothing to score from
    with pytest.raises(ValueError, match="cannot be coloured by 'AUM'"):
        colourings.get(frame, "AUM")


def test_values_of_a_metric_and_a_detector():
    frame = _frame()
    offered = colourings.available(frame)
    assert np.array_equal(colourings.values(frame, offered["AUM"]), frame["aum"].to_numpy())
    conf = offered[colourings.DETECTOR_PREFIX + "1 − confidence"]
    assert np.allclose(colourings.values(frame, conf), 1 - frame["confidence"].to_numpy())
    with pytest.raises(ValueError, match="categorical"):
        colourings.values(frame, offered["region"])


def _scatter(fig):
    return [t for t in fig.data if t.type == "scattergl"]


def test_every_colouring_draws_every_point():
    frame = _frame(votes=True, seeds=True, genre=True)
    for name, colouring in colourings.available(frame).items():
        fig = figures.data_map_figure(frame, color_by=name)
        ids = sorted(i for t in _scatter(fig) for i in t.customdata)
        assert ids == sorted(frame["id"]), name
        has_bar = any(t.marker.showscale for t in _scatter(fig))
        assert has_bar == colouring.continuous, name


def test_a_continuous_colouring_has_a_colour_bar_and_greys_rows_without_a_value():
    frame = _frame().copy()
    frame.loc[:4, "aum"] = np.nan
    fig = figures.data_map_figure(frame, color_by="AUM")
    scored, missing = _scatter(fig)
    assert scored.marker.colorbar.title.text.startswith("AUM")
    assert len(scored.customdata) == len(frame) - 5 and missing.name == "no value (5)"
    assert list(scored.marker.color) == pytest.approx(frame["aum"].to_numpy()[5:])
    assert "AUM (low = suspect): " in scored.hovertext[0]
    assert "<b>" not in scored.hovertext[0]  # the data stays escaped
    with pytest.raises(ValueError):
        figures.data_map_figure(_frame(), color_by="human entropy")  # no votes
    with pytest.raises(ValueError):
        figures.data_map_figure(frame, color_by="nope")


def test_colour_range_ignores_a_far_outlier():
    values = np.r_[np.linspace(0, 3, 200), 1000.0]
    lo, hi = map_points.finite_range(values)
    assert lo == pytest.approx(np.percentile(values, 1)) and hi < 10


def test_split_by_gold_label_one_panel_per_class_on_shared_axes():
    frame = _frame()
    fig = figures.facet_map_figure(frame, color_by="region", highlight_ids=["ex0", "ex4"])
    assert fig.layout.meta["facets"] == list(LABELS)
    for k, label in enumerate(LABELS):
        axis = "x" if k == 0 else f"x{k + 1}"
        ids = {i for t in _scatter(fig) if t.xaxis == axis and t.name != "selected" for i in t.customdata}
        assert ids == set(frame.loc[frame["gold"] == label, "id"]), label
    assert fig.layout.xaxis2.matches == "x" and fig.layout.yaxis3.matches == "y"
    rings = [t for t in _scatter(fig) if t.name == "selected"]
    assert sorted(i for t in rings for i in t.customdata) == ["ex0", "ex4"]
    # one legend entry per level, not one per panel
    assert sum(t.showlegend is not False for t in _scatter(fig) if t.name != "selected") == len(
        set(frame["region"])
    )
    continuous = figures.facet_map_figure(frame, color_by="EL2N")
    scored = [t for t in _scatter(continuous) if t.marker.showscale is not None]
    assert len({(t.marker.cmin, t.marker.cmax) for t in scored}) == 1  # one colour scale for all panels


def test_a_lasso_on_one_panel_selects_that_class_only():
    frame = _frame()
    facets = list(LABELS)
    box = {"xref": "x2", "yref": "y2", "x": [-1, 5], "y": [-1, 2]}  # everything, on the neutral panel
    event = {"selection": {"points": [], "box": [box], "lasso": []}}
    got = selection.resolve_facet_selection(frame, event, facets)
    assert got == frame.loc[frame["gold"] == "neutral", "id"].tolist()
    lasso = {"xref": "x", "yref": "y", "x": [-1, 5, 5, -1], "y": [-1, -1, 2, 2]}
    event = {"selection": {"points": [], "box": [], "lasso": [lasso]}}
    assert (
        selection.resolve_facet_selection(frame, event, facets)
        == frame.loc[frame["gold"] == "entailment", "id"].tolist()
    )
    clicked = {"selection": {"points": [{"customdata": "ex5"}], "box": [], "lasso": []}}
    assert selection.resolve_facet_selection(frame, clicked, facets) == ["ex5"]
    off = {"xref": "x9", "yref": "y9", "x": [-1, 5], "y": [-1, 2]}
    assert selection.resolve_facet_selection(frame, {"selection": {"box": [off]}}, facets) == []
