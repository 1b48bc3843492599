"""The measured stability the Data map's seeds block quotes: every map axis measured for every recording
setting, and the caption quoting the axis the map is drawn on."""

from __future__ import annotations

import dataclasses

import pytest

from cartomap.analysis.stability_reference import MEASURED, measured_caption, measured_stability
from cartomap.config import TrainConfig
from cartomap.scores import ambiguity
from cartomap.scores.metrics import DEFAULT_AXIS


def test_every_measured_row_has_every_map_axis_in_range():
    for row in MEASURED:
        assert set(row["figures"]) == {"SNLI", "MultiNLI"}
        for figures in row["figures"].values():
            assert 0.0 < figures["confidence_spearman"] <= 1.0
            assert set(figures["axes"]) == set(ambiguity.MAP_SCORES)
            for measured in figures["axes"].values():
                assert set(measured) == {
                    "spearman",
                    "region_agreement",
                    "ambiguous_kept",
                    "same_in_all_seeds",
                }
                assert all(0.0 <= v <= 1.0 for v in measured.values())
                # in all three seeds is never more than in a pair on average
                assert measured["same_in_all_seeds"] <= measured["region_agreement"]


def test_the_caption_quotes_the_maps_axis():
    row = measured_stability(TrainConfig())  # the default recording
    assert row is not None and (row["record"], row["record_points"], row["skip_epochs"]) == ("eval", 1, 0)
    default = measured_caption(row)
    assert ambiguity.get(DEFAULT_AXIS).label in default
    snli = row["figures"]["SNLI"]["axes"][DEFAULT_AXIS]["spearman"]
    assert f"Spearman {snli:.2f} / " in default and "Three seeds" in default
    cartography = measured_caption(row, "variability")
    var = row["figures"]["SNLI"]["axes"]["variability"]["spearman"]
    assert "agreed on variability" in cartography and f"Spearman {var:.2f} / " in cartography
    assert cartography != default or DEFAULT_AXIS == "variability"


@pytest.mark.parametrize("change", [{"record_points": 3}, {"skip_epochs": 2}])
def test_a_setting_never_measured_has_no_row(change):
    assert measured_stability(dataclasses.replace(TrainConfig(), **change)) is None
