"""Every training option is checked in one place (the config dataclasses) before any run folder exists:
one line naming the option, the value and the valid range, rc 2, no run left behind."""

from __future__ import annotations

import json
import math

import pytest

from cartomap.cli import main
from cartomap.config import ModelConfig, RunConfig, TrainConfig
from cartomap.errors import DataError
from cartomap.runs.store import RunStore

BAD_OPTIONS = [
    ("--epochs", "-1", "--epochs: expected a whole number between 1 and 10000, got -1"),
    ("--epochs", "0", "--epochs: expected a whole number between 1"),
    ("--batch-size", "0", "--batch-size: expected a whole number of at least 1, got 0"),
    ("--eval-batch-size", "0", "--eval-batch-size: expected a whole number of at least 1"),
    ("--lr", "nan", "--lr: expected a finite number >= 0, got nan"),
    ("--lr", "inf", "--lr: expected a finite number >= 0, got inf"),
    ("--lr", "-1", "--lr: expected a finite number >= 0, got -1.0"),
    ("--seed", "-1", "--seed: expected a whole number between 0 and 4294967295, got -1"),
    ("--max-length", "0", "--max-length: expected a whole number of at least 8, got 0"),
    (
        "--max-length",
        "1000",
        "--max-length: expected at most 512 (the model's position embeddings), got 1000",
    ),
    ("--warmup-ratio", "5", "--warmup-ratio: expected a finite number >= 0 and <= 1, got 5.0"),
    ("--early-stopping", "-1", "--early-stopping: expected a whole number of at least 0, got -1"),
    ("--weight-decay", "-5", "--weight-decay: expected a finite number >= 0, got -5.0"),
    ("--max-grad-norm", "-1", "--max-grad-norm: expected a finite number >= 0"),
    ("--record-points", "0", "--record-points: expected a whole number between 1 and 100, got 0"),
    ("--skip-epochs", "4", "--skip-epochs: expected a whole number between 0 and 3, got 4"),
    ("--precision", "fp8", "--precision: expected one of auto, fp32, bf16, fp16, got 'fp8'"),
]


@pytest.fixture()
def tiny_data(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [
        {"premise": f"a {i}", "hypothesis": f"b {i}", "label": ("entailment", "neutral")[i % 2]}
        for i in range(6)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("option,value,message", BAD_OPTIONS, ids=[f"{o} {v}" for o, v, _ in BAD_OPTIONS])
def test_a_bad_training_option_is_one_line_rc_2_and_no_run(
    option, value, message, tiny_data, tmp_path, capsys
):
    cache = tmp_path / "cache"
    rc = main(["--cache", str(cache), "train", "--data", str(tiny_data), "--dev", "none", option, value])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().splitlines() == [f"cartomap: error: {message}"] or message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert RunStore(cache).list() == []


def test_a_missing_or_broken_config_file_is_named(tiny_data, tmp_path, capsys):
    cache = str(tmp_path / "cache")
    missing = tmp_path / "garbage.json"
    assert main(["--cache", cache, "train", "--data", str(tiny_data), "--config", str(missing)]) == 2
    assert f"{missing}: no such file (expected a run config" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text('{"train": {"epochs": 2,}}')
    assert main(["--cache", cache, "train", "--data", str(tiny_data), "--config", str(broken)]) == 2
    assert f"{broken}: line 1: not valid JSON" in capsys.readouterr().err
    bad_value = tmp_path / "bad.json"
    bad_value.write_text(json.dumps({"train": {"epochs": -2}}))
    assert main(["--cache", cache, "train", "--data", str(tiny_data), "--config", str(bad_value)]) == 2
    assert f"{bad_value}: field 'epochs': expected a whole number" in capsys.readouterr().err
    assert RunStore(cache).list() == []


@pytest.mark.parametrize(
    "field,value",
    [
        ("epochs", 2.5),
        ("epochs", True),
        ("batch_size", -3),
        ("learning_rate", math.nan),
        ("learning_rate", "0.1"),
        ("adam_epsilon", 0.0),
        ("warmup_ratio", -0.1),
        ("record", "all"),
        ("group_by_length", "yes"),
        ("seed", 2**32),
    ],
)
def test_the_config_refuses_what_no_run_could_use(field, value):
    with pytest.raises(DataError, match=f"field '{field}'"):
        TrainConfig(**{field: value})


def test_edge_values_that_make_sense_are_accepted():
    TrainConfig(learning_rate=0.0)  # the tests' oracle: lr 0 means the weights never move
    TrainConfig(warmup_ratio=1.0, epochs=1, seed=0, early_stopping_patience=0, skip_epochs=0)
    ModelConfig(max_length=8)
    assert RunConfig.from_dict(RunConfig().to_dict()) == RunConfig()


def test_a_run_folders_config_json_is_read_as_its_config(tmp_path):
    from cartomap.cli.options import read_config_file

    config = RunConfig(train=TrainConfig(epochs=2, seed=7))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"config": config.to_dict(), "versions": {}, "label_names": []}))
    assert read_config_file(str(path)) == config
    path.write_text(json.dumps({"epochs": 2}))
    with pytest.raises(DataError, match="unknown keys \\['epochs'\\]"):
        read_config_file(str(path))


@pytest.mark.parametrize("option,value", [("--bootstrap", "-1"), ("--seed", "-1")])
def test_truth_report_options_are_checked_before_any_work(option, value, tmp_path, capsys):
    assert main(["--cache", str(tmp_path), "truth", "no-such-run", option, value]) == 2
    err = capsys.readouterr().err
    assert f"{option}: expected a whole number >= 0" in err and "Traceback" not in err
