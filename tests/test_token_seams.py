"""A token run through the commands that print, count, compare, embed, export and draw it: every one
uses the token kind's region rule (by threshold), words carry their text, and nothing ends in a traceback
(issue 39's token seams). Hand-set runs of tests/token_fixture.py: no training unless a test says so."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from token_fixture import OVER_EPOCHS, make_token_run

from cartomap import cli
from cartomap.analysis.datamap import with_regions
from cartomap.experiments.seeds import (
    SUMMARY,
    seeds_results,
    create_seeds_from_runs,
    region_table,
    summary_lines,
)
from cartomap.experiments.store import ExperimentStore
from cartomap.scores.metrics import RegionRule
from cartomap.scores.stability import region_agreement_pairwise


def call(*args) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([str(a) for a in args])
    return code, out.getvalue()


def counts_line(frame) -> str:
    counts = frame["region"].value_counts().to_dict()
    return "  regions: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def test_show_counts_the_regions_of_the_token_kinds_rule(tmp_path):
    """`cartomap show` of a token run prints the regions its map draws (by threshold), not the rank
    rule's (the fixture's words split differently by the two)."""
    run = make_token_run(tmp_path / "cache", tmp_path, OVER_EPOCHS)
    metrics = run.metrics()
    threshold = with_regions(metrics, run.region_rule())
    assert run.region_rule().method == "threshold"
    ranked = with_regions(metrics, RegionRule())
    assert counts_line(threshold) != counts_line(ranked)  # the fixture tells them apart
    code, out = call("--cache", tmp_path / "cache", "show", run.id)
    assert code == 0, out
    assert counts_line(threshold) in out.splitlines()


#: p(gold) of a second seed: "Arnold", "Paris" and "The" (sent-0#0, #4, sent-2#0) learned at once, "cat" later.
OTHER_SEED = np.array(
    [
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.6, 0.9, 0.1, 0.9, 0.2, 0.9],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.7, 0.9, 0.2, 0.9, 0.6, 0.9],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9],
    ]
)


def test_seeds_agreement_is_the_token_kinds_regions(tmp_path):
    """A seeds experiment of token runs compares the regions their maps draw (the kind's threshold rule),
    says so, and reports the agreement over the words not easy in both seeds."""
    cache = tmp_path / "cache"
    base = make_token_run(cache, tmp_path, OVER_EPOCHS, seed=1)
    other = make_token_run(cache, tmp_path, OTHER_SEED, seed=2)
    store = ExperimentStore(cache)
    exp = create_seeds_from_runs(store, base, [other])
    summary = seeds_results(exp, store.runs)[SUMMARY]
    rule = base.region_rule()
    by_kind = {s: with_regions(r.metrics(), rule) for s, r in ((1, base), (2, other))}
    by_rank = {s: with_regions(r.metrics(), RegionRule()) for s, r in ((1, base), (2, other))}
    assert region_agreement_pairwise(by_kind) != pytest.approx(region_agreement_pairwise(by_rank))
    assert summary["region_agreement"] == pytest.approx(region_agreement_pairwise(by_kind))
    assert summary["regions"]["method"] == "threshold"
    # by threshold, seed 1's ambiguous words are 0, 4, 5, 7, 8, 9, seed 2's 5, 7, 9 (the rest easy): 8 of
    # 11 agree; of the 6 not easy in both, 3
    assert summary["region_agreement"] == pytest.approx(8 / 11)
    assert summary["region_agreement_not_easy"] == pytest.approx(3 / 6)
    lines = "\n".join(summary_lines(summary))
    assert "by threshold on" in lines and "not easy in both" in lines
    assert "words not easy-to-learn in both seeds" in " ".join(region_table(summary)["measure"])


@pytest.mark.parametrize("command", [("review-queue", "create"), ("truth",), ("noise-benchmark",)])
def test_detector_help_lists_the_registered_detectors(monkeypatch, command):
    """The help of the commands that take or score detectors names them, read from the registry when
    the parser is built: one registered later is listed too."""
    from cartomap.scores import detectors

    extra = detectors.Detector("zz_test_detector", detectors.aum_detector, detectors.DYNAMICS, ("aum",))
    monkeypatch.setitem(detectors.REGISTRY, extra.name, extra)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.build_parser().parse_args([*command, "--help"])
    text = " ".join(out.getvalue().split())
    for name in detectors.REGISTRY:
        assert name in text
