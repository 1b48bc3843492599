"""The command line end to end: train, runs, show, map, export, import-dynamics, delete, bad input."""

from __future__ import annotations

import argparse
import gzip
import json

import numpy as np
import pandas as pd
import pytest

from cartomap.cli import build_parser, main
from cartomap.cli.options import config_from_args
from cartomap.config import DataConfig, RunConfig
from cartomap.data.loading import load_dataset
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


def reference_metrics(model_dir, burn_out=None):
    """The reference's own reading and metrics (allenai/cartography 6c43e86, selection_utils.
    read_training_dynamics and train_dy_filtering.compute_train_dy_metrics), restated: every file in
    model_dir/training_dynamics counts as an epoch, dynamics_epoch_{e}.jsonl is opened for e = 0 .. n-1."""
    import os

    td_dir = os.path.join(model_dir, "training_dynamics")
    num_epochs = len([f for f in os.listdir(td_dir) if os.path.isfile(os.path.join(td_dir, f))])
    if burn_out:
        num_epochs = burn_out
    dynamics = {}
    for epoch in range(num_epochs):
        path = os.path.join(td_dir, f"dynamics_epoch_{epoch}.jsonl")
        assert os.path.exists(path)
        with open(path) as handle:
            for line in handle:
                record = json.loads(line.strip())
                guid = record["guid"]
                if guid not in dynamics:
                    assert epoch == 0
                    dynamics[guid] = {"gold": record["gold"], "logits": []}
                dynamics[guid]["logits"].append(record[f"logits_epoch_{epoch}"])
    rows = {}
    for guid, record in dynamics.items():
        trend, probs = [], []
        for logits in record["logits"]:
            z = np.exp(np.asarray(logits) - max(logits))
            p = z / z.sum()
            probs.append(float(p[record["gold"]]))
            trend.append(bool(np.argmax(logits) == record["gold"]))
        forgotten, learnt = 0, False
        for ok in trend:
            if learnt and not ok:
                learnt, forgotten = False, forgotten + 1
            elif not learnt and ok:
                learnt = True
        rows[guid] = {
            "confidence": np.mean(probs),
            "variability": np.std(probs),
            "correctness": sum(trend),
            "forgetfulness": forgotten if any(trend) else 1000,
        }
    return num_epochs, rows


def test_export_is_a_reference_model_folder(trained, tmp_path, capsys):
    cache, _ = trained
    out = tmp_path / "model"
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(out)]) == 0
    names = ["detectors.parquet", "metrics.csv", "td_metrics.jsonl", "training_dynamics"]
    assert sorted(p.name for p in out.iterdir()) == names  # detectors.parquet: every detector's score
    assert sorted(p.name for p in (out / "training_dynamics").iterdir()) == [
        "dynamics_epoch_0.jsonl",
        "dynamics_epoch_1.jsonl",
        "dynamics_epoch_2.jsonl",
    ]
    first = json.loads((out / "training_dynamics" / "dynamics_epoch_0.jsonl").read_text().splitlines()[0])
    assert set(first) == {"guid", "logits_epoch_0", "gold"}
    # the reference's reader on it gives cartomap's metrics
    n, ref = reference_metrics(out)
    ours = RunStore(cache).get("tiny").metrics().set_index("id")
    assert n == 3 and len(ref) == len(ours)
    for guid, row in ref.items():
        mine = ours.loc[str(guid)]
        assert row["confidence"] == pytest.approx(mine["confidence"], abs=1e-6)
        assert row["variability"] == pytest.approx(mine["variability"], abs=1e-6)
        assert row["correctness"] == mine["correct_count"]
        assert row["forgetfulness"] == (1000 if mine["never_learned"] else mine["forgetfulness"])
    td = [json.loads(line) for line in (out / "td_metrics.jsonl").read_text().splitlines()]
    assert {r["guid"]: r["correctness"] for r in td} == {g: r["correctness"] for g, r in ref.items()}
    # burn-out: the first 2 epochs only, as the reference's --burn_out 2
    burnt = tmp_path / "burnt"
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(burnt), "--burn-out", "2"]) == 0
    n2, ref2 = reference_metrics(burnt)
    td2 = {
        json.loads(x)["guid"]: json.loads(x) for x in (burnt / "td_metrics.jsonl").read_text().splitlines()
    }
    assert n2 == 2 and reference_metrics(out, burn_out=2)[1] == ref2
    for guid, row in ref2.items():
        assert td2[guid]["confidence"] == pytest.approx(row["confidence"], abs=1e-6)
        assert td2[guid]["correctness"] == row["correctness"]


def test_export_refuses_to_replace_files_without_force(trained, tmp_path, capsys):
    cache, _ = trained
    out = tmp_path / "model"
    (out / "training_dynamics").mkdir(parents=True)
    (out / "training_dynamics" / "dynamics_epoch_0.jsonl").write_text("mine\n")
    capsys.readouterr()
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dynamics_epoch_0.jsonl exists; pass --force to replace" in err
    assert (out / "training_dynamics" / "dynamics_epoch_0.jsonl").read_text() == "mine\n"  # untouched
    assert not (out / "td_metrics.jsonl").exists()  # nothing half-written
    # a stray file in training_dynamics/ would be read as an epoch by the reference: refused too
    (out / "training_dynamics" / "dynamics_epoch_0.jsonl").unlink()
    (out / "training_dynamics" / "notes.txt").write_text("x")
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(out)]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(out), "--force"]) == 0
    assert sorted(p.name for p in (out / "training_dynamics").iterdir())[-1] == "dynamics_epoch_2.jsonl"
    assert reference_metrics(out)[0] == 3


def test_other_commands_refuse_to_replace_files(trained, tmp_path, capsys):
    cache, _ = trained
    target = tmp_path / "map.png"
    target.write_bytes(b"mine")
    assert main(["--cache", str(cache), "map", "tiny", "--out", str(target)]) == 2
    assert target.read_bytes() == b"mine" and "--force" in capsys.readouterr().err
    assert main(["--cache", str(cache), "map", "tiny", "--out", str(target), "--force"]) == 0
    assert target.read_bytes()[:4] == b"\x89PNG"
    sample = tmp_path / "sample.jsonl"
    sample.write_text("mine\n")
    args = ["--cache", str(cache), "subset", "--data", "demo:dev", "--n", "30", "--out", str(sample)]
    assert main(args) == 2 and sample.read_text() == "mine\n"
    assert main([*args, "--force"]) == 0 and len(sample.read_text().splitlines()) == 30
    folder = tmp_path / "artifacts"
    folder.mkdir()
    (folder / "baselines.csv").write_text("mine")
    args = ["--cache", str(cache), "artifacts", "demo:dev", "--out", str(folder), "--no-similarity"]
    assert main(args) == 2 and (folder / "baselines.csv").read_text() == "mine"
    assert not (folder / "lexical_correlations.csv").exists()
    demo_dir = tmp_path / "demo"
    demo_dir.mkdir()
    (demo_dir / "demo_map.html").write_text("mine")
    assert main(["--cache", str(cache), "demo", "--out-dir", str(demo_dir)]) == 2  # refused before training
    assert (demo_dir / "demo_map.html").read_text() == "mine"


def test_export_then_import_gives_the_same_metrics(trained, tmp_path, capsys):
    cache, _ = trained
    out = tmp_path / "exported"
    assert main(["--cache", str(cache), "export", "tiny", "--out", str(out)]) == 0

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
    # imported from the model folder: its training_dynamics/ was found inside
    assert imported.status()["imported_from"] == str(out.resolve())
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


def test_import_dynamics_of_a_hand_made_reference_model_folder(tmp_path, capsys):
    """A model folder as the reference's run_glue.py leaves it: its own files beside training_dynamics/
    (4 epochs, integer guids); import-dynamics finds the dynamics inside and computes their metrics."""
    from cartomap.scores.metrics import compute_metrics

    model = tmp_path / "snli_roberta"
    (model / "training_dynamics").mkdir(parents=True)
    for name in ("config.json", "eval_metrics_train.json", "training_args.bin"):
        (model / name).write_text("{}")  # the reference's other outputs are not epochs
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(4, 5, 3)).round(3)
    gold = [0, 2, 1, 1, 0]
    for e in range(4):
        lines = [
            json.dumps({"guid": 100 + i, f"logits_epoch_{e}": logits[e, i].tolist(), "gold": gold[i]})
            for i in range(5)
        ]
        (model / "training_dynamics" / f"dynamics_epoch_{e}.jsonl").write_text("\n".join(lines) + "\n")
    cache = tmp_path / "cache"
    args = [
        "--cache",
        str(cache),
        "import-dynamics",
        str(model),
        "--label-names",
        "entailment,neutral,contradiction",
    ]
    assert main(args) == 0
    (run,) = RunStore(cache).list()
    assert run.state == "done" and run.label_names == ("entailment", "neutral", "contradiction")
    ours = run.metrics()
    expected = compute_metrics(logits, np.array(gold), [str(100 + i) for i in range(5)])
    assert ours["id"].tolist() == ["100", "101", "102", "103", "104"]
    for col in ("confidence", "variability", "correct_count", "forgetfulness"):
        np.testing.assert_allclose(ours[col], expected[col], rtol=1e-5, atol=1e-6)
    assert main(args) == 0 and [r.id for r in RunStore(cache).list()] == [run.id]  # again: the same run
    # the dynamics folder itself imports too (its path is the run's data path: a run of its own)
    assert main([*args[:3], str(model / "training_dynamics"), *args[4:]]) == 0
    other = next(r for r in RunStore(cache).list() if r.id != run.id)
    pd.testing.assert_frame_equal(other.metrics(), ours)


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
    "nested 5,000 levels deep": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "p", "hypothesis": "h", "label": "neutral", "x": '
            + "[" * 5000
            + "]" * 5000
            + "}",
        ],
        "nested 5,001 levels deep",
        "line 2",
    ),
    "a label outside --label-names": (
        [
            '{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}',
            '{"id": "b", "premise": "p", "hypothesis": "h", "label": "maybe"}',
        ],
        "'maybe'",
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


def test_a_gz_file_that_is_not_gzip_is_refused(tmp_path, capsys):
    data = _write(
        tmp_path / "plain.jsonl.gz", ['{"id": "a", "premise": "p", "hypothesis": "h", "label": "neutral"}']
    )
    code = main(["--cache", str(tmp_path / "cache"), "train", "--data", str(data), "--dev", "none"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "plain.jsonl.gz" in err and "not gzip-compressed" in err and "rename it without .gz" in err
    assert not (tmp_path / "cache" / "runs").exists() or not any((tmp_path / "cache" / "runs").iterdir())


def test_a_stray_label_and_a_dev_set_without_a_class_warn_and_train(tiny_model, tmp_path, capsys):
    demo = load_dataset(DataConfig(path="demo:dev"))
    names = demo.label_names
    rows = [
        {"id": i, "premise": p, "hypothesis": h, "label": names[y]}
        for i, p, h, y in zip(
            demo.ids, demo.frame["premise"], demo.frame["hypothesis"], demo.labels, strict=True
        )
    ]
    train = rows[:330] + [
        {"id": "odd", "premise": "A dog runs.", "hypothesis": "An animal moves.", "label": "maybe"}
    ]
    dev = [r for r in rows[330:] if r["label"] != "contradiction"]
    _write(tmp_path / "train.jsonl", [json.dumps(r) for r in train])
    _write(tmp_path / "dev.jsonl", [json.dumps(r) for r in dev])
    cache = tmp_path / "cache"
    code = main(
        [
            "--cache",
            str(cache),
            "train",
            "--data",
            str(tmp_path / "train.jsonl"),
            "--dev",
            str(tmp_path / "dev.jsonl"),
            "--model",
            tiny_model,
            "--epochs",
            "1",
            "--max-length",
            "32",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0  # trained
    warnings = [line for line in err.splitlines() if line.startswith("cartomap: warning:")]
    assert len(warnings) == 2
    assert "class 'maybe' has 1 example" in warnings[0] and "train.jsonl" in warnings[0]
    assert "dev.jsonl" in warnings[1] and "'contradiction'" in warnings[1]
    run = RunStore(cache).list()[0]
    assert run.state == "done" and len(run.warnings) == 2 and "maybe" in run.label_names  # a 4th class, kept


def test_unknown_run_is_a_clear_error(tmp_path, capsys):
    assert main(["--cache", str(tmp_path), "show", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_cli_demo_and_the_dashboard_button_train_one_run(tmp_path, monkeypatch):
    """`cartomap demo` prepares the run that "Train the demo" starts: its own training settings, one id."""
    from cartomap.cli import train as train_cli
    from cartomap.config import DEMO_TRAIN_CONFIG, TrainConfig, demo_run_config
    from cartomap.training.prepare import prepare_run

    monkeypatch.setattr(train_cli, "train_with_progress", lambda run: 3)  # stop after the run is prepared
    cache = tmp_path / "cache"
    assert main(["--cache", str(cache), "demo", "--train", "--out-dir", str(tmp_path)]) == 3
    (run,) = RunStore(cache).list()
    assert run.config.train == DEMO_TRAIN_CONFIG != TrainConfig()
    assert (run.config.train.epochs, run.config.train.learning_rate) == (3, 1e-4)
    assert prepare_run(demo_run_config(), RunStore(cache)).id == run.id  # the dashboard's start_demo config


def test_cli_demo_task_token_trains_the_bundled_ner_demo(tmp_path, monkeypatch, capsys):
    """`cartomap demo --task token` prepares the NER demo's run (the bundled WikiGold files, the run "Train
    the NER demo" starts) and refuses to overwrite its map files before any training."""
    from cartomap.cli import train as train_cli
    from cartomap.config import DEMO_NER_TRAIN_CONFIG, demo_run_config
    from cartomap.training.prepare import prepare_run

    monkeypatch.setattr(
        train_cli, "train_with_progress", lambda run, **_: 3
    )  # stop after the run is prepared
    cache = tmp_path / "cache"
    assert main(["--cache", str(cache), "demo", "--task", "token", "--out-dir", str(tmp_path)]) == 3
    (run,) = RunStore(cache).list()
    assert run.task_kind.name == "token" and run.config.train == DEMO_NER_TRAIN_CONFIG
    assert run.info["n_train"] == 1454 and run.config.model.max_length == 192
    assert prepare_run(demo_run_config("token"), RunStore(cache)).id == run.id
    (tmp_path / "ner_demo_map.png").write_bytes(b"mine")
    assert main(["--cache", str(cache), "demo", "--task", "token", "--out-dir", str(tmp_path)]) == 2
    assert "ner_demo_map.png" in capsys.readouterr().err
    assert (tmp_path / "ner_demo_map.png").read_bytes() == b"mine"
    # the same files by hand: --data demo:ner_train is token data with its own dev set by default
    assert (
        main(
            ["--cache", str(cache), "train", "--data", "demo:ner_train", "--epochs", "4", "--lr", "1e-4"]
            + ["--max-length", "192"]
        )
        == 3
    )
    assert len(RunStore(cache).list()) == 1  # the same run


def test_map_on_another_axis_and_regions_ranked_by_it(trained, tmp_path, capsys):
    """`cartomap map --ambiguity` ranks the regions by that score and draws it on x; `--x` draws another
    score on x with the regions kept; the table names both."""
    import pandas as pd

    cache, _ = trained
    table = tmp_path / "entropy.parquet"
    args = ["--cache", str(cache), "map", "tiny", "--out", str(tmp_path / "m.html"), "--table", str(table)]
    assert main([*args, "--ambiguity", "mean_entropy"]) == 0
    out = capsys.readouterr().out
    assert "x axis: mean entropy" in out and "highest mean entropy" in out
    frame = pd.read_parquet(table)
    top = frame.nlargest(round(len(frame) / 3), "mean_entropy", keep="first")["id"]
    assert set(frame.loc[frame["region"] == "ambiguous", "id"]) == set(top)
    assert "mean entropy" in (tmp_path / "m.html").read_text()
    from cartomap.scores.metrics import RegionRule

    assert main([*args[:-2], "--x", "gold_bernoulli", "--force"]) == 0
    out = capsys.readouterr().out
    assert "x axis: mean p(gold)" in out and f"highest {RegionRule().axis_label}" in out  # the default rule's
    assert main([*args[:-2], "--x", "gold_bernoulli", "--ambiguity", "variability", "--force"]) == 0
    out = capsys.readouterr().out
    assert "x axis: mean p(gold)" in out and "highest variability" in out  # Cartography's regions
    with pytest.raises((SystemExit, argparse.ArgumentError)):  # argparse: not one of the scores
        main([*args[:-2], "--ambiguity", "spread", "--force"])
