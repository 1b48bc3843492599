"""The label-noise benchmark: the scoring step on hand-made logits, and the whole orchestration on a tiny BERT."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cartomap.cli import main
from cartomap.config import DataConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.experiments import noise_benchmark as nb
from cartomap.runs.store import RunStore

FLIPS = [2, 7, 10]


def planted(n: int = 12):
    """Noisy labels 0,1,2,0,1,2,...; the flipped rows are predicted as another class by a margin of 5."""
    y = np.arange(n) % 3
    flipped = np.zeros(n, dtype=bool)
    flipped[FLIPS] = True
    logits = np.zeros((n, 3))
    logits[np.arange(n), y] = 3.0  # clean rows: the (noisy = true) label wins by 3
    for i in FLIPS:
        logits[i] = 0.0
        logits[i, (y[i] + 1) % 3] = 5.0  # flipped rows: the true label beats the noisy one by 5
    confidence = np.where(flipped, 0.1, 0.9)
    aum = np.where(flipped, -2.0, 2.0)
    return y, flipped, logits, confidence, aum


def fold_table(n: int = 12):
    """The fold models' in-sample table: the flipped rows' gold logit stayed below (AUM -1)."""
    flipped = np.isin(np.arange(n), FLIPS)
    return pd.DataFrame(
        {
            "id": [str(i) for i in range(n)],
            "fold_confidence": np.where(flipped, 0.3, 0.8),
            "fold_aum": np.where(flipped, -1.0, 1.5),
            "fold_models": 2,
        }
    )


def test_scoring_puts_planted_flips_first():
    y, flipped, logits, confidence, aum = planted()
    table = nb.score_methods(
        y, flipped, logits, confidence, aum, threshold=2.0, folds=fold_table()
    ).set_index("method")
    assert list(table.index) == list(nb.METHODS)
    assert (table["k"] == 3).all() and (table["n"] == 12).all()
    for method in nb.RANKING_METHODS:
        assert table.loc[method, "precision_at_k"] == 1.0, method
        assert table.loc[method, "recall_at_k"] == 1.0, method
        assert table.loc[method, "average_precision"] == pytest.approx(1.0), method
        assert pd.isna(table.loc[method, "n_selected"])
    # the consensus rule selects exactly the rows whose prediction beats the label by more than 2
    assert table.loc[nb.CONSENSUS, ["n_selected", "precision", "recall"]].tolist() == [3, 1.0, 1.0]
    assert table.loc[nb.CLEANLAB_ISSUES, "recall"] == 1.0
    assert pd.isna(table.loc[nb.CONSENSUS, "precision_at_k"])


def test_scoring_sees_a_bad_detector():
    y, flipped, logits, confidence, aum = planted()
    table = nb.score_methods(y, flipped, logits, 1.0 - confidence, aum, threshold=6.0).set_index("method")
    assert table.loc[nb.DATAMAP_CONFIDENCE, "precision_at_k"] == 0.0  # confidence reversed: flips ranked last
    assert table.loc[nb.AUM, "precision_at_k"] == 1.0
    # nothing beats the label by more than 6: an empty set has recall 0 and no precision
    assert table.loc[nb.CONSENSUS, "n_selected"] == 0 and table.loc[nb.CONSENSUS, "recall"] == 0.0
    assert pd.isna(table.loc[nb.CONSENSUS, "precision"])


def test_scoring_rejects_misaligned_inputs():
    y, flipped, logits, confidence, aum = planted()
    with pytest.raises(DataError, match="one row per example"):
        nb.score_methods(y, flipped[:-1], logits, confidence, aum)


def test_class_balanced_sample_is_exact():
    demo = load_dataset(DataConfig(path="demo:dev"))
    sample = nb.class_balanced_sample(demo, 91, seed=3)
    assert len(sample) == 91
    assert sorted(np.bincount(sample.labels).tolist()) == [30, 30, 31]
    assert sample.ids == nb.class_balanced_sample(demo, 91, seed=3).ids
    with pytest.raises(DataError, match="class-balanced sample"):
        nb.class_balanced_sample(demo, 10_000)


def test_markdown_marks_not_applicable_cells():
    y, flipped, logits, confidence, aum = planted()
    rows = nb.score_methods(y, flipped, logits, confidence, aum)  # no fold table: those methods left out
    assert nb.FOLD_AUM not in set(rows["method"]) and nb.RANK_OOF_MODEL0 in set(rows["method"])
    rows.insert(0, "rate", 0.25)
    rows.insert(0, "setting", "symmetric")
    text = nb.to_markdown(rows)
    lines = text.splitlines()
    assert lines[0].startswith("| setting | rate | method |") and len(lines) == 2 + len(nb.METHODS) - 2
    assert "| symmetric | 0.25 | kfold_margin | 12 | 3 | 1.000 | 1.000 | 1.000 | – | – | – |" in lines


def test_benchmark_end_to_end_on_a_tiny_model(tiny_model, cache, capsys):
    cfg = nb.NoiseBenchmarkConfig(
        data="demo:dev", n=90, folds=3, epochs=1, model=tiny_model, max_length=48, learning_rate=1e-3
    )
    table = nb.run_noise_benchmark(cfg, cache, echo=lambda _: None)
    assert list(table.columns) == list(nb.TABLE_COLUMNS)
    assert len(table) == 2 * len(nb.METHODS)
    for setting in ("symmetric", "asymmetric"):
        part = table[table["setting"] == setting]
        assert list(part["method"]) == list(nb.METHODS)
    assert (table["k"] == 9).all() and (table["n"] == 90).all()  # round(0.1 * 90) flipped
    assert table["precision_at_k"].between(0, 1).sum() == 2 * len(nb.RANKING_METHODS)
    saved = pd.read_parquet(table.attrs["path"])
    pd.testing.assert_frame_equal(saved, table, check_dtype=False)
    demo = nb.class_balanced_sample(load_dataset(DataConfig(path="demo:dev")), 90)
    assert table.attrs["diagnostics"]["truncation_rate"] == nb.truncation_rate(demo, tiny_model, 48)
    assert nb.truncation_rate(demo, tiny_model, 5) == 1.0 and nb.truncation_rate(demo, tiny_model, 512) == 0.0

    # Model 0 + 3 folds per setting; each setting's held-out folds cover every example once
    runs = RunStore(cache).list()
    assert len(runs) == 2 * (1 + 3)
    for setting in ("symmetric", "asymmetric"):
        held = [
            r.test_examples(0)["id"].tolist()
            for r in runs
            if r.config.tests and r.config.tests[0].name.startswith(f"noise {setting} ")
        ]
        assert len(held) == 3
        ids = [i for fold in held for i in fold]
        assert len(ids) == 90 and len(set(ids)) == 90

    # a rerun reloads every run (nothing new trained) and gives the same table; the CLI prints it
    messages = []
    again = nb.run_noise_benchmark(cfg, cache, echo=messages.append)
    pd.testing.assert_frame_equal(again, table)
    assert sum("reloaded" in m for m in messages) == 8 and not any("trained in" in m for m in messages)
    argv = ["--cache", str(cache), "noise-benchmark", "--data", "demo:dev", "--n", "90", "--folds", "3"]
    argv += ["--epochs", "1", "--model", tiny_model, "--max-length", "48", "--lr", "1e-3", "--markdown"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| asymmetric | 0.1 | consensus |" in out
    assert len(RunStore(cache).list()) == 8
