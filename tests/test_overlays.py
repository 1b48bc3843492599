"""What the Data map draws over its points: a focused example's neighbours, a WaNLI batch's pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis import figures, overlay_figures, overlays
from cartomap.errors import CartomapError, DataError
from cartomap.scores import ambiguity
from cartomap.scores.metrics import RegionRule


def map_frame() -> pd.DataFrame:
    """Five examples of Dataset Cartography's map (its rule on variability): ids a..e, gold labels and their
    place (x = variability, y = confidence)."""
    frame = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "<e>"],
            "label": [0, 0, 1, 0, 1],
            "gold": ["entailment", "entailment", "neutral", "entailment", "neutral"],
            "predicted": ["entailment"] * 5,
            "variability": [0.10, 0.20, 0.30, 0.40, 0.05],
            "confidence": [0.9, 0.8, 0.7, 0.6, 0.1],
            "correctness": [1.0, 1.0, 0.5, 0.5, 0.0],
            "bucket": ["1.0", "1.0", "0.5", "0.5", "0.0"],
            "region": ["easy-to-learn"] * 5,
        }
    )
    frame.attrs["regions"] = RegionRule(axis=ambiguity.VARIABILITY).to_dict()
    return frame


def test_neighbour_overlay_places_the_seed_and_its_neighbours_on_the_map():
    out = overlays.neighbour_overlay(map_frame(), "b", ["c", "a", "c", "b", "zz"])
    assert list(out.columns) == list(overlays.NEIGHBOUR_COLUMNS)
    assert out["id"].tolist() == ["b", "c", "a"]  # seed first, repeats and the seed itself dropped
    assert out["role"].tolist() == ["seed", "neighbour", "neighbour"]
    assert out["rank"].tolist() == [0, 1, 2]
    assert out["x"].tolist() == [0.20, 0.30, 0.10] and out.attrs["axis"] == ambiguity.VARIABILITY
    assert out["y"].tolist() == [0.8, 0.7, 0.9]
    assert out["label"].tolist() == ["entailment", "neutral", "entailment"]
    assert out["same_label"].tolist() == [True, False, True]
    assert out.attrs["missing"] == 1  # "zz" is not on the map


def test_neighbour_overlay_of_a_focus_not_on_the_map_is_empty():
    out = overlays.neighbour_overlay(map_frame(), "nope", ["a"])
    assert out.empty and list(out.columns) == list(overlays.NEIGHBOUR_COLUMNS)


def test_neighbour_markers_hover_ids_and_labels_escaped_and_select_by_id():
    frame = map_frame()
    fig = figures.data_map_figure(frame)
    before = overlay_figures.figure_ids(fig)
    overlay_figures.add_neighbour_overlay(fig, overlays.neighbour_overlay(frame, "<e>", ["c", "a"]))
    trace = next(t for t in fig.data if str(t.name).startswith(overlay_figures.NEIGHBOUR_TRACE))
    assert list(trace.customdata) == ["<e>", "c", "a"]
    assert list(trace.marker.symbol) == ["star", "diamond", "diamond-open"]  # a: another label than <e>
    assert trace.hovertext[0].startswith("id: &lt;e&gt;<br>focused example · label neutral")
    assert all("<e>" not in h for h in trace.hovertext)
    assert "variability %{x:.3f}" in trace.hovertemplate  # the map's axis, from the overlay
    assert overlay_figures.figure_ids(fig) == before  # the markers are not counted as points again


def filtered_frame() -> pd.DataFrame:
    """A filtered batch as Stage 3 writes it: two pairs removed by heuristics (no score), one removed for
    low max variability, two kept."""
    return pd.DataFrame(
        {
            "gen_id": ["g0", "g1", "g2", "g3", "<g4>"],
            "intended_label": ["entailment", "neutral", "neutral", "entailment", "neutral"],
            "premise": ["p"] * 5,
            "hypothesis": ["h"] * 5,
            "removed_by": ["too_short", "same_text", "low_max_variability", None, None],
            "max_variability": [np.nan, np.nan, 0.05, 0.3, 0.25],
            "kept": [False, False, False, True, True],
        }
    )


def test_generated_overlay_scored_pairs_by_status_without_a_confidence():
    out = overlays.generated_overlay(filtered_frame())
    assert list(out.columns) == list(overlays.GENERATED_COLUMNS)
    assert out["gen_id"].tolist() == ["g2", "g3", "<g4>"]
    assert out["status"].tolist() == ["low_max_variability", "kept", "kept"]
    assert out["x"].tolist() == [0.05, 0.3, 0.25]
    assert out["y"].isna().all()  # Stage 3 estimates no confidence
    assert out["label"].tolist() == ["neutral", "entailment", "neutral"]
    assert out.attrs == {"n_total": 5, "n_unscored": 2, "has_y": False}


def test_generated_overlay_uses_a_confidence_when_the_table_has_one():
    frame = filtered_frame().assign(confidence=[np.nan, np.nan, 0.4, 0.9, 0.6])
    out = overlays.generated_overlay(frame)
    assert out["y"].tolist() == [0.4, 0.9, 0.6] and out.attrs["has_y"]


def test_generated_overlay_names_the_missing_column():
    with pytest.raises(DataError, match=r"the filtered table of b1: missing column\(s\) max_variability"):
        overlays.generated_overlay(
            filtered_frame().drop(columns="max_variability"), "the filtered table of b1"
        )


def test_generated_pairs_without_confidence_go_on_a_strip_above_the_map():
    frame = map_frame()
    fig = figures.data_map_figure(frame)
    overlay_figures.add_generated_overlay(fig, overlays.generated_overlay(filtered_frame()))
    traces = {t.name: t for t in fig.data if str(t.name).startswith(overlay_figures.GENERATED_TRACE)}
    assert set(traces) == {"generated pairs: kept (2)", "generated pairs: removed (1)"}
    kept = traces["generated pairs: kept (2)"]
    assert kept.yaxis == "y3" and kept.customdata is None  # a lasso over them selects no example
    assert sorted(kept.x) == [0.25, 0.3]
    assert all(0.5 <= y <= 0.9 for y in kept.y)  # the kept row of the strip
    assert all(0.1 <= y <= 0.5 for y in traces["generated pairs: removed (1)"].y)
    assert any("generated &lt;g4&gt;" in h for h in kept.hovertext)
    assert fig.layout.yaxis.domain[1] < fig.layout.yaxis3.domain[0]  # the strip does not cover the map
    assert fig.layout.xaxis.range[1] >= 0.3  # the widest generated pair is inside the x range


def test_generated_pairs_with_a_confidence_go_on_the_map():
    fig = figures.data_map_figure(map_frame())
    scored = overlays.generated_overlay(filtered_frame().assign(confidence=[0, 0, 0.4, 0.9, 0.6]))
    overlay_figures.add_generated_overlay(fig, scored)
    traces = [t for t in fig.data if str(t.name).startswith(overlay_figures.GENERATED_TRACE)]
    assert {t.yaxis for t in traces} == {"y"} and "yaxis3" not in fig.layout.to_plotly_json()


def test_focus_neighbour_ids_any_label_and_same_label(tmp_path):
    from test_app_datamap import make_run

    from cartomap.training.embeddings import save_embeddings

    run = make_run(tmp_path / "cache")
    examples = run.examples(columns=["id", "label"])
    ids = examples["id"].astype(str).tolist()
    labels = examples["label"].to_numpy()
    # every example far apart (own axis), but the focus 0 and its 3 hand-placed neighbours share axis 0
    vectors = np.eye(len(ids), dtype=np.float32)
    other = int(np.flatnonzero(labels != labels[0])[0])
    same = [int(i) for i in np.flatnonzero(labels == labels[0])[1:3]]
    for row, weight in ((other, 3.0), (same[0], 2.0), (same[1], 1.0)):
        vectors[row, 0] = weight  # nearer to the focus the larger the weight
    save_embeddings(run, ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    found = overlays.focus_neighbour_ids(run, ids[0], k=2)
    assert found["any label"] == [ids[other], ids[same[0]]]
    assert found["same label"] == [ids[same[0]], ids[same[1]]]
    with pytest.raises(CartomapError, match="not an example"):
        overlays.focus_neighbour_ids(run, "nope", k=2)


def test_a_neighbour_filtered_out_of_the_map_is_still_in_sight():
    frame = map_frame()
    fig = figures.data_map_figure(frame[frame["variability"] < 0.25])  # d (variability 0.4) filtered out
    assert fig.layout.xaxis.range[1] < 0.4
    overlay_figures.add_neighbour_overlay(fig, overlays.neighbour_overlay(frame, "a", ["d"]))
    assert fig.layout.xaxis.range[1] >= 0.4
