"""The experiment commands: subset, curriculum, combine, report, experiment (tiny random BERT)."""

from __future__ import annotations

import json

import pytest

from cartomap.cli import main
from cartomap.config import DataConfig
from cartomap.data.loading import load_dataset
from cartomap.experiments.store import ExperimentStore

LABELS = "entailment,neutral,contradiction"


@pytest.fixture()
def files(tmp_path, cache):
    """train (96), dev (40), test (60) JSONL files cut from demo:dev with `cartomap subset`."""
    d = tmp_path / "d"
    d.mkdir()
    args = ["--cache", str(cache), "subset", "--data", "demo:dev", "--label-names", LABELS]
    assert main([*args, "--n", "96", "--out", str(d / "train.jsonl"), "--rest", str(d / "rest.jsonl")]) == 0
    rest = ["--cache", str(cache), "subset", "--data", str(d / "rest.jsonl"), "--label-names", LABELS]
    assert main([*rest, "--n", "40", "--out", str(d / "dev.jsonl"), "--rest", str(d / "more.jsonl")]) == 0
    more = ["--cache", str(cache), "subset", "--data", str(d / "more.jsonl"), "--label-names", LABELS]
    assert main([*more, "--n", "60", "--out", str(d / "test.jsonl")]) == 0
    return d


def test_subset_is_stratified_and_never_overwrites(files, cache, capsys):
    train = load_dataset(DataConfig(path=str(files / "train.jsonl"), label_names=tuple(LABELS.split(","))))
    demo = load_dataset(DataConfig(path="demo:dev"))
    assert len(train) == 96
    assert sorted(train.labels.tolist()) == sorted(train.labels.tolist())
    share = [(train.labels == c).mean() for c in range(3)]
    full = [(demo.labels == c).mean() for c in range(3)]
    assert max(abs(a - b) for a, b in zip(share, full, strict=True)) < 0.02
    before = (files / "train.jsonl").read_bytes()
    code = main(
        [
            "--cache",
            str(cache),
            "subset",
            "--data",
            "demo:dev",
            "--n",
            "10",
            "--out",
            str(files / "train.jsonl"),
        ]
    )
    assert code == 2 and "exists" in capsys.readouterr().err
    assert (files / "train.jsonl").read_bytes() == before


def common(files, tiny_model):
    return [
        "--data", str(files / "train.jsonl"), "--dev", str(files / "dev.jsonl"),
        "--test", str(files / "test.jsonl"), "--label-names", LABELS, "--model", tiny_model,
        "--max-length", "48", "--epochs", "1", "--batch-size", "16", "--lr", "1e-3",
    ]  # fmt: skip


def test_curriculum_command_runs_and_reports(files, cache, tiny_model, capsys):
    args = [
        "--cache",
        str(cache),
        "curriculum",
        *common(files, tiny_model),
        "--seeds",
        "0",
        "1",
        "--name",
        "cli",
        "--datamap-epochs",
        "2",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Best run on validation per method" in out and "Cochran's Q" in out and "Mann-Whitney" in out
    exp = ExperimentStore(cache).get("cli")
    assert exp.state == "done" and len(exp.run_ids()) == 5
    assert main(["--cache", str(cache), "report", "cli"]) == 0
    assert "| oversampled |" in capsys.readouterr().out
    assert main(["--cache", str(cache), "experiment", "show", "cli", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"]["state"] == "done"
    assert [row["state"] for row in shown["progress"]] == ["done"] * 5
    assert main(["--cache", str(cache), "experiment", "list"]) == 0
    assert "curriculum" in capsys.readouterr().out


def test_combine_command_makes_table3(files, cache, tiny_model, capsys):
    args = ["--cache", str(cache), "combine", *common(files, tiny_model)]
    args += [
        "--a",
        str(files / "train.jsonl"),
        "--b",
        str(files / "dev.jsonl"),
        "--a-name",
        "T",
        "--b-name",
        "D",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| T + D |" in out and "| T ◇ D |" in out


def test_experiment_commands_need_a_test_set(files, cache, tiny_model, capsys):
    args = ["--cache", str(cache), "curriculum", *common(files, tiny_model)]
    i = args.index("--test")
    del args[i : i + 2]
    assert main(args) == 2
    assert "--test" in capsys.readouterr().err
    assert not (cache / "experiments").exists()
