"""A run is self-contained: trained from one folder with relative paths, then used from another folder
after the original files were deleted, by the command line and by the pages that reuse a run's data
(Prune labels, Artifacts, Filter, Neighbours). And the ids of runs made before stay what they were."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import patience
import pytest

import cartomap.runs.jobs
from cartomap.cli import main
from cartomap.config import DataConfig, OrderConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.experiments.pruning import KIND, PruningParams
from cartomap.experiments.store import ExperimentStore
from cartomap.io import atomic_write_parquet
from cartomap.runs.store import RunStore, run_id_for

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- ids


# Fingerprints of the demo files bundled until the demo became SNLI-only (3,198 pairs): pinned ids below
# were computed with them and with the training defaults of that time (batch 32, learning rate 1e-4).
OLD_DEMO_TRAIN = "5f06afc63feb9bfa9111ca2e35bcd05abced4b84017e964bd201fd9c03ffa36d"
OLD_DEMO_DEV = "86abc6a4bef62a142bd79e38c8aa99f086312927ecee5928e32d352490a319aa"
OLD_TRAIN_DEFAULTS = {"batch_size": 32, "learning_rate": 1e-4, "eval_batch_size": 128, "record": "train"}


def test_run_ids_of_existing_runs_do_not_change():
    """Ids computed by the code before runs became self-contained (commit 0c5e234), pinned: the identity
    keeps every path as the user gave it (a relative path stays relative), and the absolute path is
    provenance only, so the same command in the same folder still finds the same run."""
    old = TrainConfig(**OLD_TRAIN_DEFAULTS)
    config = RunConfig(data=DataConfig(path="train.jsonl"), dev=None, train=old)
    assert run_id_for(config, OLD_DEMO_DEV, None) == "fb293158cc61"
    curriculum = RunConfig(
        data=DataConfig(path="train.jsonl"),
        dev=None,
        order=OrderConfig(name="cart++", scores="m.parquet"),
        train=TrainConfig(**{**OLD_TRAIN_DEFAULTS, "record": "eval"}),
    )
    assert run_id_for(curriculum, OLD_DEMO_DEV, None) == "5b31c54f4b0f"
    assert run_id_for(RunConfig(train=old), OLD_DEMO_TRAIN, OLD_DEMO_DEV) == "39e18be0cda2"


# --------------------------------------------------------------------------- a run whose files are gone


def _rows(frame: pd.DataFrame, names) -> list[str]:
    return [
        json.dumps({"id": i, "premise": p, "hypothesis": h, "label": names[y]})
        for i, p, h, y in zip(frame["id"], frame["premise"], frame["hypothesis"], frame["label"], strict=True)
    ]


@pytest.fixture(scope="module")
def moved(tiny_model, tmp_path_factory):
    """A run trained in folder A from train.jsonl / dev.jsonl / test.jsonl (relative paths); then A is
    deleted and the working folder is B. Yields (cache, run id, A)."""
    demo = load_dataset(DataConfig(path="demo:dev"))
    names = demo.label_names
    a = tmp_path_factory.mktemp("project-a")
    b = tmp_path_factory.mktemp("elsewhere-b")
    cache = tmp_path_factory.mktemp("store") / "cache"
    for name, part in (
        ("train", demo.frame.iloc[:240]),
        ("dev", demo.frame.iloc[240:320]),
        ("test", demo.frame.iloc[320:]),
    ):
        (a / f"{name}.jsonl").write_text("\n".join(_rows(part, names)) + "\n", encoding="utf-8")
    args = [
        "--cache", str(cache), "train", "--data", "train.jsonl", "--dev", "dev.jsonl", "--test", "test.jsonl",
        "--model", tiny_model, "--epochs", "2", "--batch-size", "32", "--max-length", "32", "--lr", "1e-3",
        "--quiet", "--name", "moved",
    ]  # fmt: skip
    start = os.getcwd()
    try:
        os.chdir(a)
        assert main(args) == 0
        assert main(args) == 0  # the same command in the same folder: the same run (train or load)
        (run,) = RunStore(cache).list()
        shutil.rmtree(a)
        os.chdir(b)
        yield cache, run.id, a
    finally:
        os.chdir(start)


def test_config_keeps_paths_as_given_and_provenance_absolute(moved):
    cache, run_id, a = moved
    run = RunStore(cache).get(run_id)
    assert run.config.data.path == "train.jsonl" and run.config.tests[0].path == "test.jsonl"
    assert run.provenance["data"] == str((a / "train.jsonl").resolve())
    assert run.provenance["dev"] == str((a / "dev.jsonl").resolve())
    assert run.provenance["tests"] == [str((a / "test.jsonl").resolve())]
    assert run.provenance["cwd"] == str(a.resolve())
    fingerprints = (
        run.info["train_fingerprint"],
        run.info["dev_fingerprint"],
        (run.info["tests"][0]["fingerprint"],),
    )
    assert run_id_for(run.config, *fingerprints) == run.id
    assert not (a / "train.jsonl").exists() and Path.cwd() != a
    # the run's own copies load alone, with the same content (fingerprint) as the files had
    own = run.own_config()
    assert load_dataset(own.data).fingerprint() == run.info["train_fingerprint"]
    assert load_dataset(own.dev, label_names=run.label_names).fingerprint() == run.info["dev_fingerprint"]
    assert load_dataset(own.tests[0], label_names=run.label_names).fingerprint() == fingerprints[2][0]
    assert own.tests[0].name == run.test_names[0]


def test_the_command_line_works_from_another_folder(moved, tmp_path, capsys):
    cache, run_id, a = moved
    cli = ["--cache", str(cache)]
    assert main([*cli, "show", run_id]) == 0
    out = capsys.readouterr().out
    assert f"from   {(a / 'train.jsonl').resolve()} (the run holds its own copy)" in out
    assert main([*cli, "train", "--run", run_id, "--quiet"]) == 0
    assert "exists (done)" in capsys.readouterr().out
    assert main([*cli, "map", run_id, "--out", str(tmp_path / "map.png")]) == 0
    assert main([*cli, "export", run_id, "--out", str(tmp_path / "model")]) == 0
    assert main([*cli, "embed", run_id, "--quiet"]) == 0
    assert main([*cli, "groups", run_id, "--save", "--k", "2", "--exclude-genres", ""]) == 0
    assert "automatic groups" in capsys.readouterr().out
    # the artifact analysis of the run's own training and test sets
    out_dir = tmp_path / "artifacts"
    assert main([*cli, "artifacts", f"run:{run_id}", "--test", f"run:{run_id}:test_0", "--out", str(out_dir),
                 "--no-similarity", "--min-count", "5"]) == 0  # fmt: skip
    assert (out_dir / "baselines.csv").exists()
    err = capsys.readouterr().err
    assert "file not found" not in err and "Traceback" not in err


def test_filtering_works_from_another_folder(moved, capsys):
    from tests.test_filtering import generated_rows

    cache, run_id, _ = moved
    run = RunStore(cache).get(run_id)
    atomic_write_parquet(run.wanli_dir / "b1" / "generated.parquet", generated_rows(run, 3))
    assert main(["--cache", str(cache), "filter", run_id, "--batch", "b1"]) == 0
    assert "kept" in capsys.readouterr().out


def test_an_experiment_from_the_runs_data_on_the_command_line(moved, tiny_model, capsys):
    cache, run_id, _ = moved
    args = [
        "--cache", str(cache), "prune", "--data", f"run:{run_id}", "--test", f"run:{run_id}:test_0",
        "--folds", "2", "--epochs", "1", "--model", tiny_model, "--max-length", "32", "--batch-size", "32",
        "--categories", "P:neutral G:entailment",
    ]  # fmt: skip
    assert main(args) == 0
    (exp,) = ExperimentStore(cache).list(KIND)
    base = PruningParams.from_dict(exp.params).base
    run = RunStore(cache).get(run_id)
    assert base.data.path == str(run.examples_path.resolve())
    assert base.tests[0].path == str(run.test_examples_path(0).resolve())


# --------------------------------------------------------------------------- the pages


@pytest.fixture()
def app(moved, monkeypatch):
    cache, run_id, _ = moved
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    calls = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None, env=None: calls.append(args) or os.getpid()
    )
    return RunStore(cache).get(run_id), calls


def page(name: str, run_id: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / f"{name}.py"), default_timeout=patience.WAIT_S)
    at.session_state["run_id"] = run_id
    return at


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


def test_prune_labels_page_proposes_the_runs_own_sets(app):
    run, calls = app
    at = page("pruning", run.id).run()
    assert not at.exception and not _errors(at), _errors(at)
    assert at.radio(key="_kept_prune_source").value == "run"
    assert at.text_input(key=f"_kept_prune_test_{run.id}").value == f"run:{run.id}:test_0"
    assert at.text_input(key=f"_kept_prune_dev_{run.id}").value == f"run:{run.id}:dev"
    at.number_input(key="_kept_prune_folds").set_value(2).run()
    at.button(key="prune_start").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    exp = next(e for e in ExperimentStore(run.path.parents[1]).list(KIND) if e.id in calls[-1])
    base = PruningParams.from_dict(exp.params).base
    assert base.data.path == str(run.examples_path.resolve())
    assert base.dev.path == str(run.dev_examples_path.resolve())
    assert base.tests[0].path == str(run.test_examples_path(0).resolve())


def test_artifacts_page_uses_the_runs_own_dev_and_test_sets(app):
    run, calls = app
    at = page("artifacts", run.id).run()
    assert not at.exception and not _errors(at), _errors(at)
    at.button(key="af_baselines").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    at.button(key="af_train_partial").click().run()  # the hypothesis-only baseline reads dev and test
    assert not at.exception and not _errors(at), _errors(at)
    assert calls and calls[-1][:2] == ["train", "--run"]


def test_neighbours_page_from_another_folder(app):
    run, _ = app
    assert run.embeddings_path.exists()  # computed by `cartomap embed` above (module order)
    at = page("neighbours", run.id).run()
    assert not at.exception and not _errors(at), _errors(at)
    assert any("premise" in d.value.columns for d in at.dataframe)


def test_filter_page_from_another_folder(app):
    run, _ = app
    at = page("filter", run.id).run()
    assert not at.exception and not _errors(at), _errors(at)
    assert any(m.label == "Kept" for m in at.metric)


def test_data_map_page_from_another_folder(app):
    run, _ = app
    at = page("data_map", run.id).run()
    assert not at.exception and not _errors(at), _errors(at)
    assert len(at.get("plotly_chart")) >= 1


def test_curricula_page_proposes_the_runs_own_sets(app):
    from cartomap.experiments.curriculum import CurriculumParams

    run, calls = app
    at = page("experiments", run.id).run()
    assert not at.exception and not _errors(at), _errors(at)
    assert at.radio(key="_kept_xp_train_source").value == "run"
    assert at.radio(key="_kept_xp_dev_source").value == "run"
    tests = at.text_area(key=f"_kept_xp_tests_{run.id}").value
    assert tests == f"{run.test_names[0]} = run:{run.id}:test_0"
    at.text_input(key="_kept_xp_seeds").set_value("0").run()
    at.button(key="xp_start").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    exp = next(e for e in ExperimentStore(run.path.parents[1]).list("curriculum") if e.id in calls[-1])
    base = CurriculumParams.from_params(exp.params).base
    assert base.data.path == str(run.examples_path.resolve())
    assert base.dev.path == str(run.dev_examples_path.resolve())
    assert [t.path for t in base.tests] == [str(run.test_examples_path(0).resolve())]
    assert base.tests[0].name == run.test_names[0]
