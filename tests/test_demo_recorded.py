"""The NLI demo's recorded run shipped with cartomap (cartomap.runs.shipped): installed into a fresh store,
`cartomap demo` writes its map without training, the dashboard opens on it with "Train the demo
yourself", and where the weights are needed it says so. Bit-identity with a fresh training:
tests/test_slow_demo_recording.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import patience
import pytest
from streamlit.testing.v1 import AppTest

from cartomap.cli import main
from cartomap.config import DEMO_TASKS, demo_run_config, demo_time
from cartomap.errors import RunError
from cartomap.runs import shipped
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore

REPO = Path(__file__).resolve().parents[1]
SHIPPED = shipped.recorded_folder("pair")


def no_training(monkeypatch) -> None:
    """Any training fails the test: the recorded run must be used as it is."""
    import cartomap.cli.train as train_cli
    import cartomap.training.loop as loop

    def refuse(*_, **__):
        raise AssertionError("trained: the recorded demo run was not used")

    monkeypatch.setattr(train_cli, "train_with_progress", refuse)
    monkeypatch.setattr(loop, "continue_run", refuse)


def test_the_recording_is_the_demo_run_of_this_version(tmp_path):
    """Its folder is named by the id the demo's config and data give now (the run `cartomap demo` looks
    for), holds no weights, is marked, and its dynamics cover every example of every epoch."""
    from cartomap.training.prepare import prepare_run

    assert SHIPPED is not None, "no recorded demo run: python scripts/record_demo.py"
    assert prepare_run(demo_run_config(), RunStore(tmp_path)).id == SHIPPED.name
    recording = Run(SHIPPED)
    assert shipped.is_recording(recording) and recording.state == State.DONE
    assert not recording.model_dir.exists() and not recording.checkpoint_dirs()
    ids, logits = recording.dynamics(recording.recorded_source())
    assert logits.dtype == np.float32 and logits.shape == (3, 3198, 3) and len(ids) == 3198
    assert "cwd" not in recording.provenance  # not the recording machine's folders
    status = recording.status()
    assert status["dev_accuracy"] > 0.7 and status["metrics_source"] == recording.recorded_source()
    assert not set(shipped.MACHINE_STATUS) & set(status)  # nor its process
    size = sum(f.stat().st_size for f in SHIPPED.rglob("*") if f.is_file())
    assert size < 6e6, f"the recording takes {size / 1e6:.1f} MB"


def test_cartomap_demo_writes_the_recorded_map_without_training(tmp_path, monkeypatch, capsys):
    no_training(monkeypatch)
    cache = tmp_path / "cache"
    assert main(["--cache", str(cache), "demo", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "recorded demo run" in out and "cartomap demo --train" in out
    assert (tmp_path / "demo_map.png").stat().st_size > 0 and (tmp_path / "demo_map.html").stat().st_size > 0
    (run,) = RunStore(cache).list()
    assert run.id == SHIPPED.name and shipped.is_recording(run) and run.has_metrics()
    source = run.recorded_source()
    assert np.array_equal(run.dynamics(source)[1], Run(SHIPPED).dynamics(source)[1])
    ids, vectors = shipped_embeddings(run)
    assert vectors.dtype == np.float32 and vectors.shape[0] == len(ids) == 3198
    # where the weights are needed it says so, in one line
    from cartomap.training.embeddings import embedding_model

    with pytest.raises(RunError, match="recorded demo run: its model weights are not shipped"):
        embedding_model(run)


def shipped_embeddings(run):
    from cartomap.training.embeddings import load_embeddings

    loaded = load_embeddings(run)
    assert loaded is not None, "the neighbours need the run's embeddings"
    return loaded


def test_install_never_replaces_a_folder_of_that_id(tmp_path):
    store = RunStore(tmp_path)
    mine = store.dir / SHIPPED.name
    mine.mkdir(parents=True)
    (mine / "examples.parquet").write_bytes(b"mine")  # a user's (damaged) run of the same id
    shipped.install(store)
    assert sorted(p.name for p in mine.iterdir()) == ["examples.parquet"]
    assert (mine / "examples.parquet").read_bytes() == b"mine"


def test_a_fresh_store_only(tmp_path, monkeypatch):
    """The dashboard installs the recording into a store without runs, never beside a user's runs, and
    not at all with CARTOMAP_RECORDED_DEMO=0."""
    monkeypatch.setenv(shipped.FRESH_ENV, "0")
    assert shipped.install_if_fresh(RunStore(tmp_path / "off")) is None
    monkeypatch.setenv(shipped.FRESH_ENV, "1")
    busy = RunStore(tmp_path / "busy")
    (busy.dir / "abc").mkdir(parents=True)
    assert shipped.install_if_fresh(busy) is None and busy.find_id(SHIPPED.name) is None
    run = shipped.install_if_fresh(RunStore(tmp_path / "fresh"))
    assert run is not None and shipped.is_recording(run)


def test_prepare_demo_to_train_removes_the_recording_once(tmp_path):
    """The one remove-then-prepare the command line and the dashboard share: the recording goes, the run
    prepared in its place has its id and is not a recording; asked again, the run prepared here stays."""
    from cartomap.training.launch import prepare_demo_to_train

    store = RunStore(tmp_path / "cache")
    recording = shipped.install(store)
    run, removed = prepare_demo_to_train(store, "pair")
    assert removed is not None and removed.id == recording.id == run.id == SHIPPED.name
    assert not shipped.is_recording(run) and [r.id for r in store.list()] == [run.id]
    again, removed = prepare_demo_to_train(store, "pair")
    assert removed is None and again.id == run.id and not shipped.is_recording(again)
    fresh, removed = prepare_demo_to_train(RunStore(tmp_path / "empty"), "pair")  # nothing installed
    assert removed is None and fresh.id == run.id


def test_demo_train_replaces_the_recording_with_a_live_training(tmp_path, monkeypatch):
    import cartomap.cli.train as train_cli

    cache = tmp_path / "cache"
    store = RunStore(cache)
    assert shipped.is_recording(shipped.install(store))
    trained = []
    monkeypatch.setattr(train_cli, "train_with_progress", lambda run, **_: trained.append(run) or 3)
    assert main(["--cache", str(cache), "demo", "--train", "--out-dir", str(tmp_path)]) == 3
    (run,) = store.list()
    assert trained == [run] and run.id == SHIPPED.name  # the same run, trained here
    assert not shipped.is_recording(run) and not run.dynamics_epochs(run.recorded_source())
    assert shipped.remove_recording(store, run) is False  # a run trained here is never removed


def test_fresh_dashboard_opens_on_the_recorded_map(tmp_path, monkeypatch, spawned):
    """A fresh install: the Data map shows the recorded demo's map at once, says it is the recorded run and
    offers "Train the demo yourself", which trains the same run live."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.setenv(shipped.FRESH_ENV, "1")
    monkeypatch.syspath_prepend(str(REPO))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=patience.WAIT_S).run()
    assert not at.exception, at.exception
    assert any("recorded demo run" in i.value for i in at.info)
    assert at.get("plotly_chart") or at.get("imgs"), "the recorded run's map is drawn"
    assert at.button(key="train_ner_demo").label == "Train the NER demo"  # the other demo still offered
    button = at.button(key="train_demo_yourself")
    assert button.label == "Train the demo yourself"
    button.click().run()
    assert not at.exception, at.exception
    (run,) = RunStore(cache).list()
    assert run.id == SHIPPED.name and not shipped.is_recording(run)
    assert spawned and spawned[0][:3] == ["train", "--run", run.id]


@pytest.mark.parametrize("task", DEMO_TASKS)
def test_readme_quotes_the_demo_times_of_the_one_source(task):
    """README and pages quote cartomap.config.demo_time (measured: docs/benchmarks.md)."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert demo_time(task) in readme
    assert not re.search(r"about \d+ minutes on a 2-core CPU for the NLI demo", readme)  # the old wording
