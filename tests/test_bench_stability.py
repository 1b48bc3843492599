"""bench/bench_stability.py's second-axis comparison on maps worked out by hand."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        yield importlib.import_module("bench_stability")
    finally:
        sys.path.remove(str(ROOT / "bench"))


def _map(conf, stat):
    return pd.DataFrame(
        {"confidence": conf, "correctness": conf, "s": stat},
        index=pd.Index([f"x{i}" for i in range(6)], name="id"),
    )


def test_axis_row_by_hand(bench):
    conf = [0.9, 0.8, 0.7, 0.3, 0.2, 0.6]
    a = _map(conf, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # ambiguous (top third): x4, x5
    b = _map(conf, [0.1, 0.2, 0.3, 0.4, 0.6, 0.5])  # same two, ranks of the top two swapped
    c = _map(conf, [0.6, 0.2, 0.3, 0.4, 0.5, 0.1])  # ambiguous: x0, x4
    row = bench.axis_row({1: a, 2: b, 3: c}, "s", None)
    rho_ab, rho_ac, rho_bc = 1 - 6 * 2 / (6 * 35), 1 - 6 * 50 / (6 * 35), 1 - 6 * 42 / (6 * 35)
    assert row["rho"] == pytest.approx(np.mean([rho_ab, rho_ac, rho_bc]))
    assert row["rho_confidence"] == pytest.approx(1.0)
    # regions: a = b = [E, E, E, H, A, A]; c = [A, E, E, H, A, E] (x5 has confidence 0.6: easy)
    assert row["regions"] == pytest.approx(np.mean([1.0, 4 / 6, 4 / 6]))
    assert row["ambiguous_kept"] == pytest.approx(np.mean([1.0, 0.5, 0.5]))
    assert row["all_same"] == pytest.approx(4 / 6)


def test_axis_row_with_people(bench, monkeypatch):
    monkeypatch.setattr(bench, "BOOTSTRAP", 50)
    conf = [0.9, 0.8, 0.7, 0.3, 0.2, 0.6]
    stat = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    maps = {1: _map(conf, stat), 2: _map(conf, stat)}
    human = pd.DataFrame(
        {
            "id": [f"x{i}" for i in range(6)],
            "entropy": [0.0, 0.1, 0.2, 0.3, 0.4, np.nan],  # x5 has no votes
            "error": [False, False, False, True, True, np.nan],
            "bert_correct": [100, 90, 80, 70, 60, 50],
        }
    )
    row = bench.axis_row(maps, "s", human)
    assert row["h1_rho_h"] == pytest.approx(1.0)
    assert row["h1_auroc"] == pytest.approx(1.0) and row["h1_ap"] == pytest.approx(1.0)
    assert row["h1_rho_bert"] == pytest.approx(-1.0)  # over all six, voted or not
    assert row["h1_rho_conf_h"] == pytest.approx(-1.0)
    value, low, high = row["hm_rho_h"]
    assert value == pytest.approx(1.0) and low <= value <= high


def test_mean_maps_groups_consecutive_seeds(bench):
    frames = {s: _map([0.5] * 6, [float(s)] * 6) for s in (1, 2, 3, 4, 5)}
    maps = bench.mean_maps(frames, 2)
    assert list(maps) == ["1+2", "3+4"]  # seed 5 has no partner
    assert maps["3+4"]["s"].tolist() == [3.5] * 6


def test_view_logits_keeps_the_view_s_recordings(bench):
    logits = np.arange(16)[:, None, None] * np.ones((16, 1, 2))  # 4 epochs x 4 points
    pick = bench.view_logits(logits, "eval", 4, 2, 2)[:, 0, 0]
    assert pick.tolist() == [9, 11, 13, 15]  # epochs 3-4, the middle and the end of each
    assert bench.view_logits(logits, "eval", 4, 4, 3)[:, 0, 0].tolist() == [12, 13, 14, 15]
    assert bench.view_logits(logits, "eval", 4, 1, 0)[:, 0, 0].tolist() == [3, 7, 11, 15]
