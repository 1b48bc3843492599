"""bench/bench_token_detectors.py end to end at a toy size: every detector judged at every level, and a
rerun reloads the runs with the compute saved when they trained."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_bench_scores_every_token_detector_and_reloads_its_runs(tiny_model, tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "bench"))
    bench = importlib.import_module("bench_token_detectors")
    argv = ["--sentences", "12", "--epochs", "1", "--folds", "2", "--seeds", "0", "--rate", "0.2"]
    argv += ["--model", tiny_model, "--max-length", "96", "--cache", str(tmp_path / "c")]
    assert bench.main([*argv, "--out", str(tmp_path / "a.json")]) == 0
    rows = json.loads((tmp_path / "a.json").read_text())["rows"]
    levels = {r["level"] for r in rows}
    assert {"word", "sentence", "sentence: type", "sentence: spurious"} <= levels
    detectors = {r["detector"] for r in rows}
    assert {"cleanlab_token_issue", "cleanlab_sentence_quality", "aum", "datamap_confidence"} <= detectors
    assert "consensus_p1g0" not in detectors  # NLI's category
    assert all(0.0 <= r["auroc"] <= 1.0 for r in rows if r["auroc"] == r["auroc"])
    first = {(r["detector"], r["level"]): r["train_cpu_s"] for r in rows}
    # a rerun trains nothing and reports the compute saved when the runs trained
    assert bench.main([*argv, "--out", str(tmp_path / "b.json")]) == 0
    again = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert {(r["detector"], r["level"]): r["train_cpu_s"] for r in again} == first
    out = capsys.readouterr().out
    assert "| level | detector |" not in out  # a plain table without --markdown
