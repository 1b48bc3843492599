"""The command line end to end: train, runs, show, map, export, import-dynamics, delete, bad input."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from cartomap.cli import build_parser, main
from cartomap.cli.options import config_from_args
from cartomap.config import RunConfig
from cartomap.runs.store import RunStore


def test_cli_defaults_are_the_default_config():
    args = build_parser().parse_args(["train"])
    assert config_from_args(args).identity() == RunConfig().identity()


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cli-cache")
    args = [
        "--cache",
        str(cache),
        "train",
        "--data",
        "demo:dev",
        "--dev",
        "none",
        "--model",
        tiny_model,
        "--epochs",
        "3",
        "--batch-size",
        "16",
        "--lr",
        "1e-3",
        "--max-length",
        "64",
        "--quiet",
        "--name",
        "tiny",
    ]
    assert main(args) == 0
    return cache, args


def test_train_twice_loads_the_existing_run(trained, capsys):
    cache, args = trained
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "exists (done)" in out and "regions:" in out
    assert len(RunStore(cache).list()) == 1


def test_runs_show_map(trained, tmp_path, capsys):
    cache, _ = trained
    assert main(["--cache", str(cache), "runs"]) == 0
    assert "done" in capsys.readouterr().out
    assert main(["--cache", str(cache), "show", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "confidence" in out and "epoch 3" in out
    for suffix, magic in (("png", b"\x89PNG"), ("html", b"<html")):
        out_file = tmp_path / f"map.{suffix}"
        assert main(["--cache", str(cache), "map", "tiny", "--out", str(out_file)]) == 0
        assert magic in out_file.read_bytes()[:200]
    assert main(["--cache", str(cache), "map", "tiny", "--out", str(tmp_path / "map.svgz")]) != 0


def test_export_then_import_gives_the_same_metrics(trained, tmp_path, capsys):
    cache, _ = trained
    out = tmp_path / "exported"
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "dynamics_epoch_0.jsonl",
        "dynamics_epoch_1.jsonl",
        "dynamics_epoch_2.jsonl",
        "metrics.csv",
        "td_metrics.jsonl",
    ]
    first = json.loads((out / "dynamics_epoch_0.jsonl").read_text().splitlines()[0])
    assert set(first) == {"guid", "logits_epoch_0", "gold"}

    other = tmp_path / "cache2"
    assert (
        main(
            [
                "--cache",
                str(other),
                "import-dynamics",
                str(out),
                "--data",
                "demo:dev",
                "--label-names",
                "entailment,neutral,contradiction",
            ]
        )
        == 0
    )
    imported = RunStore(other).list()[0]
    original = RunStore(cache).get("tiny")
    a, b = original.metrics(), imported.metrics()
    assert a["id"].tolist() == b["id"].tolist()
    for col in ("confidence", "variability", "correctness", "forgetfulness", "aum"):
        np.testing.assert_allclose(a[col], b[col], rtol=1e-5, atol=1e-6)
    assert "premise" in imported.examples().columns  # texts attached from --data
    # Importing the same folder again returns the same run.
    assert (
        main(
            [
                "--cache",
                str(other),
                "import-dynamics",
                str(out),
                "--data",
                "demo:dev",
                "--label-names",
                "entailment,neutral,contradiction",
            ]
        )
        == 0
    )
    assert len(RunStore(other).list()) == 1


def test_delete_needs_yes(trained, tiny_model, tmp_path):
    cache = tmp_path / "c"
    args = [
        "--cache",
        str(cache),
        "train",
        "--data",
        "demo:dev",
        "--dev",
        "none",
        "--model",
        tiny_model,
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--max-length",
        "32",
        "--quiet",
    ]
    assert main(args) == 0
    run_id = RunStore(cache).list()[0].id
    assert main(["--cache", str(cache), "delete", run_id]) == 2
    assert main(["--cache", str(cache), "delete", run_id, "--yes"]) == 0
    assert RunStore(cache).list() == []


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


BAD_INPUTS = {
    "missing column": (['{"id": "a", "premise": "p", "label": "neutral"}'], "hypothesis", "columns"),
    "empty text": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "  ", "hypothesis": "h", "label": "entailment"}',
        ],
        "premise",
        "line 2",
    ),
    "unknown label": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "p", "hypothesis": "h", "label": "entailed"}',
        ],
        "label",
        "line 2",
    ),
    "missing label": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "p", "hypothesis": "h"}',
        ],
        "label",
        "line 2",
    ),
    "malformed line": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "p", ',
        ],
        "",
        "line 2",
    ),
    "duplicate ids": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "a", "premise": "q", "hypothesis": "h", "label": "entailment"}',
        ],
        "id",
        "line 2",
    ),
}


def test_a_single_class_is_refused(tmp_path, capsys):
    data = _write(
        tmp_path / "one.jsonl",
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "q", "hypothesis": "h", "label": "neutral"}',
        ],
    )
    assert main(["--cache", str(tmp_path / "cache"), "train", "--data", str(data), "--dev", "none"]) == 2
    err = capsys.readouterr().err
    assert "one.jsonl" in err and "label" in err and "two" in err.lower()
    assert not (tmp_path / "cache" / "runs").exists() or not any((tmp_path / "cache" / "runs").iterdir())


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_one_clear_message_and_no_run(case, tmp_path, capsys):
    lines, field, where = BAD_INPUTS[case]
    data = _write(tmp_path / "bad.jsonl", lines)
    cache = tmp_path / "cache"
    code = main(
        [
            "--cache",
            str(cache),
            "train",
            "--data",
            str(data),
            "--dev",
            "none",
            "--quiet",
            "--label-names",
            "entailment,neutral,contradiction",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    message = err.strip().splitlines()
    assert len(message) == 1 and "Traceback" not in err
    assert "bad.jsonl" in message[0] and field in message[0] and where in message[0]
    assert not (cache / "runs").exists() or not any((cache / "runs").iterdir())


def test_non_utf8_bytes_are_named(tmp_path, capsys):
    data = tmp_path / "bad.jsonl.gz"
    with gzip.open(data, "wb") as f:
        f.write(b'{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}\n')
        f.write(b'{"id": "b", "premise": "caf\xe9", "hypothesis": "h", "label": "entailment"}\n')
    code = main(["--cache", str(tmp_path / "cache"), "train", "--data", str(data), "--dev", "none"])
    err = capsys.readouterr().err
    assert code == 2 and "bad.jsonl.gz" in err and "line 2" in err and "UTF-8" in err
    assert not (tmp_path / "cache" / "runs").exists() or not any((tmp_path / "cache" / "runs").iterdir())


def test_unknown_run_is_a_clear_error(tmp_path, capsys):
    assert main(["--cache", str(tmp_path), "show", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
