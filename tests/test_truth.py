"""The truth report: its statistics against sklearn and scipy, the report of a run with votes, and
`cartomap truth` / `cartomap export` on a tiny model trained on a votes fixture."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score, roc_auc_score

from cartomap.analysis import truth
from cartomap.cli import main
from cartomap.errors import DataError, RunError
from cartomap.runs.store import RunStore
from cartomap.scores import detectors
from cartomap.scores import truth as stats

NLI = ("entailment", "neutral", "contradiction")


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("ties", [False, True])
def test_ap_and_auroc_equal_sklearn(ties):
    rng = np.random.default_rng(3)
    for _ in range(20):
        y = rng.random(200) < 0.15
        s = rng.normal(size=200) + y
        if ties:
            s = np.round(s, 1)
        assert stats.average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)
        assert stats.auroc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert np.isnan(stats.average_precision(np.zeros(5, bool), np.arange(5)))
    assert np.isnan(stats.auroc(np.ones(5, bool), np.arange(5)))


def test_ap_and_auroc_by_hand():
    """Four items each: AP = mean precision at each error's rank; AUROC = share of (error, clean) pairs
    ordered right, a tie counting half; NaN (no warning, no error) when a class is missing."""
    y, s = np.array([1, 0, 1, 0], bool), np.array([0.9, 0.8, 0.7, 0.1])
    assert stats.average_precision(y, s) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert stats.auroc(y, s) == pytest.approx(3 / 4)
    y, s = np.array([1, 0, 0, 1], bool), np.array([0.5, 0.5, 0.2, 0.1])  # a tie at the top
    assert stats.average_precision(y, s) == pytest.approx(0.5 * 0.5 + 0.5 * 0.5)
    assert stats.auroc(y, s) == pytest.approx((0.5 + 1 + 0 + 0) / 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(stats.average_precision(np.zeros(4, bool), s))
        assert stats.average_precision(np.ones(4, bool), s) == 1.0
        assert np.isnan(stats.auroc(np.zeros(4, bool), s)) and np.isnan(stats.auroc(np.ones(4, bool), s))
    with pytest.raises(DataError):
        stats.auroc(np.ones(3, bool), np.arange(4))


def test_precision_at_k_and_spearman():
    y = np.array([1, 0, 1, 0, 0, 1], dtype=bool)
    s = np.array([0.9, 0.8, 0.7, 0.1, 0.2, 0.3])
    assert stats.precision_at_k(y, s, 1) == 1.0
    assert stats.precision_at_k(y, s, 3) == pytest.approx(2 / 3)
    assert np.isnan(stats.precision_at_k(y, s, 7))
    assert stats.default_ks(20_000) == [50, 100, 200] and stats.default_ks(60) == [1, 50]
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50)
    b[3] = np.nan  # rows with a NaN are left out
    ok = np.isfinite(b)
    assert stats.spearman(a, b) == pytest.approx(spearmanr(a[ok], b[ok]).statistic)


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    y = rng.random(300) < 0.2
    s = rng.normal(size=300) + 1.5 * y
    row = stats.ranking_row(y, s, [10], n_boot=200, seed=5)
    assert row == stats.ranking_row(y, s, [10], n_boot=200, seed=5)
    assert row["ap"] == pytest.approx(average_precision_score(y, s))
    for key in ("ap", "auroc"):
        assert row[f"{key}_low"] <= row[key] <= row[f"{key}_high"]
    assert row["auroc_high"] - row["auroc_low"] < 0.3


# --------------------------------------------------------------------------- a run with votes


def votes_rows(n: int = 60, seed: int = 0) -> list[dict]:
    """NLI pairs with 5 votes each; every fourth row's gold label disagrees with the majority."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        gold = NLI[i % 3]
        majority = NLI[(i + 1) % 3] if i % 4 == 0 else gold
        others = [NLI[int(k)] for k in rng.integers(0, 3, size=2)]
        votes: dict[str, int] = {}
        for name in [majority, majority, majority, *others]:
            votes[name] = votes.get(name, 0) + 1
        rows.append(
            {
                "id": f"v{i:03d}",
                "premise": f"A person number {i} walks a dog in the park {'today' if i % 2 else 'now'}.",
                "hypothesis": f"Someone {['is outside', 'is asleep', 'has a pet'][i % 3]} {i}.",
                "label": gold,
                "votes": votes,
            }
        )
    return rows


def write_votes(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def synthetic_run(cache, data_path):
    """A finished run on ``data_path`` with synthetic dynamics (no training)."""
    from cartomap.config import DataConfig, RunConfig, TrainConfig
    from cartomap.data.loading import load_dataset
    from cartomap.io import atomic_write_parquet
    from cartomap.scores.metrics import compute_metrics

    data = load_dataset(DataConfig(path=data_path))
    run = RunStore(cache).create(
        RunConfig(data=DataConfig(path=data_path), dev=None, train=TrainConfig(epochs=3, record="train")),
        data,
    )
    rng = np.random.default_rng(0)
    logits = []
    for e in range(3):
        z = rng.normal(0, 1.0, size=(len(data), 3))
        z[np.arange(len(data)), data.labels] += 1.0 + e
        run.write_epoch("train", e, data.ids, z.astype(np.float32))
        logits.append(z)
    atomic_write_parquet(run.metrics_path(), compute_metrics(np.stack(logits), data.labels, data.ids))
    run.set_status(state="done", progress=1.0)
    return run


def test_report_of_a_run_with_votes(tmp_path):
    run = synthetic_run(tmp_path / "cache", write_votes(tmp_path / "v.jsonl", votes_rows()))
    assert truth.has_human_judgement(run)
    rng = np.random.default_rng(2)
    oof = rng.normal(size=(60, 3))
    ids = run.examples(columns=("id",))["id"].tolist()
    seeds = pd.DataFrame(
        {"id": ids[::-1], "confidence_mean": rng.random(60), "confidence_std": rng.random(60)}
    )
    folds = detectors.fold_table(
        [pd.DataFrame({"id": ids, "confidence": rng.random(60), "aum": rng.normal(size=60)})], ids[::-1]
    )
    from cartomap.training.embeddings import save_embeddings

    save_embeddings(run, ids[::-1], rng.normal(size=(60, 4)).astype(np.float32))  # any order: aligned by id
    report = truth.truth_report(run, seeds=seeds, oof_logits=oof, folds=folds, n_boot=50)
    assert report["targets"] == {"gold_disagrees": 15}
    metrics = [r["metric"] for r in report["spearman"]]
    scores = [m for m in truth.METRICS if not pd.api.types.is_bool_dtype(run.metrics()[m])]  # not flags
    assert metrics[: len(scores)] == scores
    assert "confidence_mean (seeds)" in metrics and "confidence_std (seeds)" in metrics
    assert "confidence (fold models)" in metrics and "aum (fold models)" in metrics
    # every detector but those of a token run's words grouped by sentence (cleanlab's token classification)
    of_examples = {n for n in detectors.NAMES if detectors.SENTENCES not in detectors.get(n).needs}
    assert {r["detector"] for r in report["detectors"]} == of_examples
    # every number is the plain statistic of the run's own columns
    examples = run.examples()
    m = run.metrics().set_index("id").loc[examples["id"]]
    conf = next(r for r in report["spearman"] if r["metric"] == "confidence")
    assert conf["spearman"] == pytest.approx(spearmanr(m["confidence"], examples["human_entropy"]).statistic)
    row = next(r for r in report["detectors"] if r["detector"] == "datamap_confidence")
    y = examples["gold_disagrees"].to_numpy()
    assert row["ap"] == pytest.approx(average_precision_score(y, 1 - m["confidence"]))
    assert row["auroc"] == pytest.approx(roc_auc_score(y, 1 - m["confidence"]))
    md = truth.truth_markdown(report)
    assert "| 1 − confidence |" in md and "Spearman" in md  # detectors by their titles (detectors.title)
    assert json.loads(truth.truth_json(report))["n"] == 60


def test_votes_on_some_examples_only_judge_those(tmp_path):
    """ChaosNLI relabelled a subset: rows without votes (null) load, and the human statistics use the
    voted rows only (an unvoted row is neither a hit nor a miss)."""
    rows = votes_rows()
    for row in rows[40:]:
        row["votes"] = None
    run = synthetic_run(tmp_path / "cache", write_votes(tmp_path / "v.jsonl", rows))
    examples = run.examples()
    assert examples["human_n"].tolist()[40:] == [0] * 20
    report = truth.truth_report(run, n_boot=20)
    assert report["targets"] == {"gold_disagrees": 10}  # rows 0, 4, ..., 36
    assert report["judged"] == {"gold_disagrees": 40}
    voted = examples["human_n"].to_numpy() > 0
    m = run.metrics().set_index("id").loc[examples["id"]]
    row = next(r for r in report["detectors"] if r["detector"] == "datamap_confidence")
    y = examples["gold_disagrees"].to_numpy()[voted]
    assert row["ap"] == pytest.approx(average_precision_score(y, 1 - m["confidence"].to_numpy()[voted]))
    conf = next(r for r in report["spearman"] if r["metric"] == "confidence")
    assert conf["n"] == 40
    assert conf["spearman"] == pytest.approx(
        spearmanr(m["confidence"].to_numpy()[voted], examples["human_entropy"].to_numpy()[voted]).statistic
    )
    assert "10 of 40 examples with votes, of 60" in truth.truth_markdown(report)


def test_report_refused_without_human_judgement(tmp_path):
    rows = votes_rows()
    for r in rows:
        r.pop("votes")
    run = synthetic_run(tmp_path / "cache", write_votes(tmp_path / "plain.jsonl", rows))
    assert not truth.has_human_judgement(run)
    with pytest.raises(RunError, match="no human judgement"):
        truth.truth_report(run)


def test_cli_truth_and_export_on_a_tiny_model(tiny_model, tmp_path, capsys):
    data = write_votes(tmp_path / "votes.jsonl", votes_rows())
    cache = tmp_path / "cache"
    train = ["--cache", str(cache), "train", "--data", data, "--dev", "none", "--model", tiny_model]
    train += ["--epochs", "2", "--batch-size", "16", "--max-length", "32", "--quiet", "--name", "votes"]
    assert main(train) == 0
    run = RunStore(cache).list()[0]
    assert "votes_neutral" in run.examples().columns
    capsys.readouterr()
    out_json = tmp_path / "truth.json"
    assert main(["--cache", str(cache), "truth", run.id, "--json", str(out_json), "--bootstrap", "30"]) == 0
    printed = capsys.readouterr().out
    assert "Data-map metrics vs human entropy" in printed and "| aum |" in printed
    report = json.loads(out_json.read_text())
    assert report["targets"]["gold_disagrees"] == 15 and report["n_boot"] == 30
    assert main(["--cache", str(cache), "truth", run.id, "--json", str(out_json)]) == 2  # no --force
    out = tmp_path / "export"
    assert main(["--cache", str(cache), "export", run.id, "--out", str(out)]) == 0
    table = pd.read_parquet(out / "detectors.parquet")
    assert list(table.columns) == ["id", "label", "datamap_confidence", "aum", "el2n", "forgetting"]
    assert len(table) == 60


def test_truth_source_on_a_run_that_recorded_both_names_its_view(tiny_model, tmp_path, capsys):
    """A `--record both` run: `truth` reads its main metrics (the training pass) unless `--source eval`,
    and the report says which recordings its numbers are about; a pass the run did not record is refused."""
    data = write_votes(tmp_path / "votes.jsonl", votes_rows())
    cache = tmp_path / "cache"
    train = ["--cache", str(cache), "train", "--data", data, "--dev", "none", "--model", tiny_model]
    train += ["--epochs", "2", "--batch-size", "16", "--max-length", "32", "--quiet", "--record", "both"]
    assert main(train) == 0
    run = RunStore(cache).list()[0]
    capsys.readouterr()
    reports = {}
    for source in ("train", "eval"):
        out_json = tmp_path / f"{source}.json"
        args = ["--cache", str(cache), "truth", run.id, "--bootstrap", "0", "--json", str(out_json)]
        assert main([*args, "--source", source]) == 0
        printed = capsys.readouterr().out
        reports[source] = json.loads(out_json.read_text())
        assert reports[source]["view"]["recording"] == source
    assert "training pass" in reports["train"]["view"]["label"]
    assert "eval-mode pass at the end of every epoch" in reports["eval"]["view"]["label"]
    assert "from the eval-mode pass" in printed
    rho = {s: {r["metric"]: r["spearman"] for r in reports[s]["spearman"]} for s in reports}
    assert rho["train"]["confidence"] != rho["eval"]["confidence"]  # two views, two sets of numbers
    assert {"mean_entropy", "variability"} <= set(rho["eval"])
    # the default is the run's main metrics, named
    assert main(["--cache", str(cache), "truth", run.id, "--bootstrap", "0"]) == 0
    assert "training pass" in capsys.readouterr().out
    # a run that recorded the eval-mode pass only has no training pass to report on
    other = ["--cache", str(tmp_path / "c2"), "train", "--data", data, "--dev", "none", "--model", tiny_model]
    other += ["--epochs", "2", "--batch-size", "16", "--max-length", "32", "--quiet"]
    assert main(other) == 0
    run2 = RunStore(tmp_path / "c2").list()[0]
    capsys.readouterr()
    assert main(["--cache", str(tmp_path / "c2"), "truth", run2.id, "--source", "train"]) == 2
    assert "recorded eval (record=eval), not the train pass" in capsys.readouterr().err
