"""The data map over epochs: the map after k recordings and the selection's paths, on a hand-checked fixture."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cartomap.analysis import epochs, overlay_figures
from cartomap.config import TrainConfig
from cartomap.errors import DataError


def _logit(p: float) -> list[float]:
    """Two-class logits whose softmax gives class 0 the probability ``p``."""
    return [math.log(p / (1 - p)), 0.0]


# gold-label probability per recording (3 recordings):
#   a (gold 0): 0.25, 0.75, 0.50
#   b (gold 1): 0.50, 0.50, 0.80   (class 1's probability: class 0 gets 1 - p)
#   c (gold 0): 0.90, 0.90, 0.90
GOLD = {"a": [0.25, 0.75, 0.5], "b": [0.5, 0.5, 0.8], "c": [0.9, 0.9, 0.9]}
IDS = ["a", "b", "c"]
LABELS = np.array([0, 1, 0])


def _logits() -> np.ndarray:
    out = np.zeros((3, 3, 2))
    for n, i in enumerate(IDS):
        for e, p in enumerate(GOLD[i]):
            out[e, n] = _logit(p) if LABELS[n] == 0 else _logit(1 - p)
    return out


def test_trajectories_by_hand():
    traj = epochs.trajectories(_logits(), LABELS, IDS, ["b", "a"])
    assert list(traj.columns) == ["id", "k", "confidence", "variability"]
    assert traj["id"].tolist() == ["b", "b", "a", "a"]  # selection order, k ascending
    assert traj["k"].tolist() == [2, 3, 2, 3]
    # b: k=2 mean(0.5, 0.5) = 0.5, std 0; k=3 mean 0.6, std sqrt((0.01 + 0.01 + 0.04) / 3)
    # a: k=2 mean(0.25, 0.75) = 0.5, std 0.25; k=3 mean 0.5, std sqrt((0.0625 + 0.0625 + 0) / 3)
    assert traj["confidence"].tolist() == pytest.approx([0.5, 0.6, 0.5, 0.5])
    assert traj["variability"].tolist() == pytest.approx([0.0, math.sqrt(0.02), 0.25, math.sqrt(0.125 / 3)])


def test_the_last_point_of_a_path_is_the_map_of_every_recording_and_each_point_the_map_after_k():
    logits = _logits()
    traj = epochs.trajectories(logits, LABELS, IDS, IDS).set_index(["id", "k"])
    for k in (2, 3):
        frame = epochs.map_at(logits, LABELS, k, IDS).set_index("id")
        for i in IDS:
            assert traj.loc[(i, k), "confidence"] == pytest.approx(frame.loc[i, "confidence"])
            assert traj.loc[(i, k), "variability"] == pytest.approx(frame.loc[i, "variability"])


def test_map_at_k():
    logits = _logits()
    one = epochs.map_at(logits, LABELS, 1, IDS)
    assert one["confidence"].tolist() == pytest.approx([0.25, 0.5, 0.9])
    assert one["variability"].tolist() == pytest.approx([0, 0, 0])
    assert one.attrs["n_epochs"] == 1 and one.attrs["epochs_recorded"] == 3
    two = epochs.map_at(logits, LABELS, 2, IDS)
    assert two["confidence"].tolist() == pytest.approx([0.5, 0.5, 0.9])
    assert two["correct_count"].tolist() == [1, 0, 2]  # b: 0.5 vs 0.5 ties to class 0, not gold 1
    for bad in (0, 4):
        with pytest.raises(DataError, match="between 1 and 3"):
            epochs.map_at(logits, LABELS, bad, IDS)


def test_trajectories_drop_unknown_and_repeated_ids_and_keep_the_first_limit():
    traj = epochs.trajectories(_logits(), LABELS, IDS, ["x", "c", "c", "a", "b"], limit=2)
    assert traj["id"].unique().tolist() == ["c", "a"]
    c = traj[traj["id"] == "c"]
    assert c["confidence"].tolist() == pytest.approx([0.9, 0.9]) and c[
        "variability"
    ].tolist() == pytest.approx([0, 0])
    empty = epochs.trajectories(_logits(), LABELS, IDS, ["x"])
    assert empty.empty and list(empty.columns) == ["id", "k", "confidence", "variability"]
    assert epochs.trajectories(_logits()[:1], LABELS, IDS, IDS).empty  # one recording: no path


def test_trajectories_leave_out_the_burn_in_of_each_map():
    # skip_epochs=1 on the training pass: the maps of 2 and 3 recordings leave out the first one
    burn_in = epochs.burn_ins(TrainConfig(epochs=3, skip_epochs=1), "train", [0, 1, 2])
    assert burn_in == {1: 0, 2: 1, 3: 1}
    traj = epochs.trajectories(_logits(), LABELS, IDS, ["a"], burn_in=burn_in)
    # a: k=2 -> recording 1 only (0.75); k=3 -> recordings 1, 2 (0.75, 0.5)
    assert traj["confidence"].tolist() == pytest.approx([0.75, 0.625])
    assert traj["variability"].tolist() == pytest.approx([0.0, 0.125])
    frame = epochs.map_at(_logits(), LABELS, 3, IDS, burn_in=burn_in[3]).set_index("id")
    assert frame.loc["a", "confidence"] == pytest.approx(0.625)


def test_paths_over_the_map_escape_ids_and_select_nothing():
    traj = pd.DataFrame(
        {
            "id": ["<b>x</b>", "<b>x</b>", "y", "y"],
            "k": [2, 3, 2, 3],
            "confidence": [0.5, 0.6, 0.2, 0.3],
            "variability": [0.1, 0.7, 0.0, 0.1],
        }
    )
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.update_layout(xaxis=dict(range=[0, 0.5]))
    overlay_figures.add_trajectories(fig, traj, current_k=2)
    paths, now = fig.data
    assert paths.name.startswith(overlay_figures.TRAJECTORY_TRACE) and paths.customdata is None
    assert list(paths.x) == [0.1, 0.7, None, 0.0, 0.1, None]
    assert all("<b>x" not in h for h in paths.hovertext) and "&lt;b&gt;x" in paths.hovertext[0]
    assert list(now.x) == [0.1, 0.0] and now.customdata is None  # the points of the map after 2
    assert fig.layout.xaxis.range[1] == pytest.approx(0.7 * 1.05)  # widened to show the whole path
    assert overlay_figures.figure_ids(fig) == []
