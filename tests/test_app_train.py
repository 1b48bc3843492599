"""The Train page (pages/train.py) under streamlit's AppTest, and the pure helpers behind it."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import patience
import pytest
from streamlit.testing.v1 import AppTest

import cartomap.runs.jobs
from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.data.uploads import save_upload
from cartomap.errors import CartomapError, DataError
from cartomap.runs.progress import MIN_ETA_STEPS, StepClock, describe_progress, format_duration, run_label
from cartomap.runs.state import derive_state
from cartomap.runs.store import RunStore
from cartomap.training.forms import build_run_config

REPO = Path(__file__).resolve().parent.parent
PAIRS_CSV = (
    b"premise,hypothesis,label\n"
    b"A man plays a guitar.,A person makes music.,entailment\n"
    b"A dog runs in a park.,A cat sleeps.,contradiction\n"
    b"Two kids eat lunch.,The kids are brothers.,neutral\n"
    b"A woman reads a book.,Someone is reading.,entailment\n"
)


@functools.lru_cache(maxsize=1)
def demo_dev():
    return load_dataset(DataConfig(path="demo:dev"))


def make_run(root: Path, state: str = "queued", *, seed: int = 1, name: str = "", **status):
    """A run on demo:dev made without training; ``seed`` makes distinct runs."""
    config = RunConfig(
        data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=2, seed=seed), name=name
    )
    run = RunStore(root).create(config, demo_dev())
    run.set_status(state=state, **status)
    return run


@pytest.fixture()
def spawned(monkeypatch) -> list:
    """Replace the job launcher: record the calls, start nothing (the pid is this live process)."""
    calls = []

    def fake_spawn(cli_args, log_path, cache=None):
        calls.append({"args": cli_args, "log": log_path, "cache": cache})
        return os.getpid()

    monkeypatch.setattr(cartomap.runs.jobs, "spawn", fake_spawn)
    return calls


def page() -> AppTest:
    return AppTest.from_file(str(REPO / "pages" / "train.py"), default_timeout=patience.WAIT_S)


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def runs(root: Path):
    return RunStore(root).list()


def use_path(at: AppTest, path: str) -> AppTest:
    at.radio(key="_kept_train_source").set_value("path").run()
    at.text_input(key="_kept_train_path").set_value(path).run()
    return at


# --------------------------------------------------------------------------- rendering
def test_renders_without_runs(root):
    at = page().run()
    assert not at.exception
    assert not errors(at)
    assert at.button(key="train_start").label == "Start training"
    assert at.multiselect(key="_kept_train_text_columns").value == ["premise", "hypothesis"]
    assert at.selectbox(key="_kept_train_label_column").value == "label"
    assert at.radio(key="_kept_train_dev").value == "demo"
    assert len(at.dataframe) == 1  # the preview of the demo


def test_shows_runs_and_live_progress_and_cancel_writes_flag(root):
    make_run(root, "failed", seed=2, error="RuntimeError: boom")
    run = make_run(
        root,
        "running",
        seed=1,
        name="mine",
        epoch=1,
        epochs=2,
        step=3,
        steps_per_epoch=13,
        global_step=3,
        total_steps=26,
        loss=1.0986,
        eta_s=65,
        phase="train",
    )
    lock = run.acquire_lock()  # as the training process would
    try:
        at = page()
        at.session_state["run_id"] = run.id
        at.run()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Epoch"] == "1/2"
        assert metrics["Loss"] == "1.0986"
        assert metrics["Time left"] == "1 min 5 s"
        assert at.dataframe[-1].value["id"].tolist() == [run.id, runs(root)[1].id]
        assert not run.cancel_requested()
        at.button(key=f"cancel_{run.id}").click().run()
        assert run.cancel_requested()
        assert run.status()["state"] == "running"  # nothing was killed
    finally:
        lock.close()


# --------------------------------------------------------------------------- starting
def test_bad_path_shows_clear_error_and_creates_no_run(root, spawned, tmp_path):
    missing = tmp_path / "nope" / "train.jsonl"
    at = use_path(page().run(), str(missing))
    assert any("file not found" in e and "train.jsonl" in e for e in errors(at))
    at.button(key="train_start").click().run()
    assert not at.exception
    assert any("file not found" in e for e in errors(at))
    assert runs(root) == [] and spawned == []


def test_integer_labels_without_names_error_names_the_file(root, spawned, tmp_path):
    data = tmp_path / "ints.csv"
    data.write_text("premise,hypothesis,label\na,b,0\nc,d,1\n")
    at = use_path(page().run(), str(data))
    at.radio(key="_kept_train_dev").set_value("none").run()
    at.button(key="train_start").click().run()
    assert any("ints.csv" in e and "label" in e for e in errors(at)), errors(at)
    assert runs(root) == [] and spawned == []
    at.text_input(key="_kept_train_label_names").set_value("entailment, neutral, contradiction").run()
    at.button(key="train_start").click().run()
    assert not errors(at)
    assert len(runs(root)) == 1 and len(spawned) == 1


def test_errors_quoting_the_data_are_not_rendered_as_markdown(root, spawned, tmp_path):
    data = tmp_path / "odd.csv"
    data.write_text("text,label\nhello,a\nworld,![x](http://example.invalid/i.png)\n")
    at = use_path(page().run(), str(data))
    at.radio(key="_kept_train_dev").set_value("none").run()
    at.text_input(key="_kept_train_label_names").set_value("a, b").run()
    at.button(key="train_start").click().run()
    (message,) = errors(at)
    assert "unknown label" in message and "!\\[x\\](http://example.invalid/i.png)" in message
    assert runs(root) == []


def test_start_calls_start_training_and_selects_the_run(root, spawned):
    at = use_path(page().run(), "demo:dev")
    at.radio(key="_kept_train_dev").set_value("none").run()
    at.number_input(key="_kept_train_epochs").set_value(1).run()
    at.selectbox(key="_kept_train_device").set_value("cpu").run()
    at.button(key="train_start").click().run()
    assert not at.exception and not errors(at)
    (run,) = runs(root)
    assert spawned[0]["args"][:3] == ["train", "--run", run.id]  # the job opens the prepared run
    assert Path(spawned[0]["cache"]) == root
    assert run.config.train.epochs == 1 and run.config.dev is None and run.config.train.device == "cpu"
    assert at.session_state["run_id"] == run.id
    assert any(run.id in s.value for s in at.success)
    assert run.status()["state"] == "queued"
    # the same configuration again: no second job
    at.button(key="train_start").click().run()
    assert len(runs(root)) == 1


def test_starting_a_cancelled_runs_configuration_again_says_it_is_that_run(root, spawned):
    """Train or load: the same data and options (another name) are the cancelled run, which continues; the
    page says so and follows it, instead of "Started run" for what looks like a new run."""
    at = use_path(page().run(), "demo:dev")
    at.radio(key="_kept_train_dev").set_value("none").run()
    at.number_input(key="_kept_train_epochs").set_value(1).run()
    at.button(key="train_start").click().run()
    (run,) = runs(root)
    run.set_status(state="cancelled")
    at.text_input(key="_kept_train_name").set_value("a new name").run()
    at.button(key="train_start").click().run()
    assert not at.exception and not errors(at)
    assert [r.id for r in runs(root)] == [run.id] and at.session_state["run_id"] == run.id
    assert any(f"it is run {run.id}, which continues from the beginning" in i.value for i in at.info)
    assert not any("Started run" in s.value for s in at.success)


def test_upload_is_saved_by_hash_and_trained_from(root, spawned):
    at = page().run()
    at.radio(key="_kept_train_source").set_value("upload").run()
    at.file_uploader(key="train_upload").set_value(("mini.csv", PAIRS_CSV, "text/csv")).run()
    assert not at.exception and not errors(at)
    (saved,) = (root / "uploads").iterdir()
    assert saved.name.endswith(".csv") and len(saved.name) == 64 + 4 and saved.read_bytes() == PAIRS_CSV
    assert at.radio(key="_kept_train_dev").value == "none"  # own data: no demo dev set by default
    at.button(key="train_start").click().run()
    assert not errors(at)
    (run,) = runs(root)
    assert Path(run.config.data.path) == saved.resolve()
    assert run.config.name == "mini.csv"


def test_form_values_survive_reruns_and_hidden_widgets(root):
    at = use_path(page().run(), "/data/somewhere.jsonl")
    at.number_input(key="_kept_train_epochs").set_value(7).run()
    at.radio(key="_kept_train_source").set_value("demo").run()  # the path field disappears
    assert "_kept_train_path" not in [w.key for w in at.text_input]
    at.radio(key="_kept_train_source").set_value("path").run()
    assert at.text_input(key="_kept_train_path").value == "/data/somewhere.jsonl"
    assert at.number_input(key="_kept_train_epochs").value == 7
    assert at.session_state["train_epochs"] == 7


# --------------------------------------------------------------------------- resume and delete
def test_resume_restarts_a_cancelled_run(root, spawned):
    run = make_run(root, "cancelled", epoch=1, epochs=2)
    at = page()
    at.session_state["run_id"] = run.id
    at.run()
    at.button(key=f"resume_{run.id}").click().run()
    assert not at.exception and not errors(at)
    assert len(spawned) == 1 and spawned[0]["log"] == run.path / "job.log"
    assert run.status()["state"] == "queued"
    assert any("Resumed" in s.value for s in at.success)


def test_resume_does_not_read_the_original_files_again(root, spawned, tmp_path):
    # a run made from a file that is gone since: Resume trains from the run's own copy
    data = tmp_path / "train.csv"
    data.write_bytes(PAIRS_CSV)
    config = RunConfig(data=DataConfig(path=str(data)), dev=None, train=TrainConfig(epochs=2))
    run = RunStore(root).create(config, load_dataset(config.data))
    run.set_status(state="cancelled", epoch=1, epochs=2)
    data.unlink()
    at = page()
    at.session_state["run_id"] = run.id
    at.run()
    at.button(key=f"resume_{run.id}").click().run()
    assert not at.exception and not errors(at)
    assert len(spawned) == 1 and spawned[0]["args"][:3] == ["train", "--run", run.id]
    assert run.status()["state"] == "queued"


def test_the_selected_runs_data_warnings_are_shown(root):
    from cartomap.training.prepare import prepare_run

    rows = PAIRS_CSV + b"".join(
        f"Pair {i}.,Hypothesis {i}.,{label}\n".encode()
        for i in range(120)
        for label in ("entailment", "neutral", "contradiction")
    )
    rows += b"A cat sits.,A cat rests.,maybe\n"  # 1 against 122: a stray label
    data = root.parent / "stray.csv"
    data.write_bytes(rows)
    run = prepare_run(RunConfig(data=DataConfig(path=str(data)), dev=None), RunStore(root))
    assert len(run.warnings) == 1
    at = page()
    at.session_state["run_id"] = run.id
    at.run()
    assert not at.exception
    shown = [w.value for w in at.warning if "Data warning" in w.value]
    assert len(shown) == 1 and "maybe" in shown[0] and "1 example" in shown[0]


def test_delete_asks_for_confirmation_and_refuses_a_training_run(root):
    keep = make_run(root, "done", seed=1)
    victim = make_run(root, "failed", seed=2)
    at = page()
    at.session_state["run_id"] = victim.id
    at.run()
    assert at.selectbox(key="_kept_train_delete_choice").value == victim.id
    at.button(key="train_delete").click().run()
    assert victim.path.exists()  # not yet: asked first
    at.button(key="train_delete_no").click().run()
    at.button(key="train_delete").click().run()
    at.button(key="train_delete_yes").click().run()
    assert not at.exception and not victim.path.exists() and keep.path.exists()
    assert at.session_state["run_id"] == keep.id

    lock = keep.acquire_lock()
    try:
        at.button(key="train_delete").click().run()
        at.button(key="train_delete_yes").click().run()
        assert any("cancel it first" in e for e in errors(at))
        assert keep.path.exists()
    finally:
        lock.close()


# --------------------------------------------------------------------------- a real job
def test_real_training_job_runs_to_done(root, tiny_model):
    at = use_path(page().run(), "demo:dev")
    at.radio(key="_kept_train_dev").set_value("none").run()
    at.text_input(key="_kept_train_model").set_value(tiny_model).run()
    at.number_input(key="_kept_train_epochs").set_value(1).run()
    at.number_input(key="_kept_train_batch_size").set_value(100).run()  # 4 steps
    at.selectbox(key="_kept_train_device").set_value("cpu").run()
    at.button(key="train_start").click().run()
    assert not errors(at)
    (run,) = runs(root)
    # the job's own process: waited for while its run folder shows progress (tests/patience.py)
    patience.wait_progressing(
        [], [run.path], until=lambda: run.state not in ("queued", "running"), what="the job"
    )
    log = cartomap.runs.jobs.tail(run.path / "job.log", 40)
    assert run.state == "done", log
    assert len(run.metrics()) == len(demo_dev())
    at.run()
    assert {m.label: m.value for m in at.metric}["Epoch"] == "1/1"
    assert f"Run {run.id}: done" in at.get("progress")[0].proto.text


# --------------------------------------------------------------------------- pure helpers
def test_save_upload_is_content_addressed_and_checked(tmp_path):
    first = save_upload(PAIRS_CSV, "a.CSV", tmp_path)
    again = save_upload(PAIRS_CSV, "other-name.csv", tmp_path)
    assert first == again and first.parent == tmp_path / "uploads" and first.suffix == ".csv"
    assert save_upload(b"x", "t.jsonl.gz", tmp_path).name.endswith(".jsonl.gz")
    with pytest.raises(DataError, match=r"upload '\.\./evil\.exe'.*unsupported file type"):
        save_upload(b"x", "../evil.exe", tmp_path)
    with pytest.raises(DataError, match="empty"):
        save_upload(b"", "e.csv", tmp_path)
    with pytest.raises(DataError, match="limit is 1 MB"):
        save_upload(b"x" * (2 * 2**20), "big.csv", tmp_path, max_mb=1)


def test_build_run_config_validates_the_form():
    base = dict(data_path="d.csv", text_columns=["premise", "hypothesis"], label_column="label")
    config = build_run_config(**base, label_names="a, b", id_column="", dev="none", epochs=2)
    assert config.data.label_names == ("a", "b") and config.data.id_column == "" and config.dev is None
    assert build_run_config(**base, dev="demo").dev == DataConfig(path="demo:dev")
    for bad, match in [
        (dict(data_path=" "), "no training data"),
        (dict(text_columns=["a", "a"]), "two different"),
        (dict(text_columns=[]), "one text column"),
        (dict(label_column="premise"), "also a text column"),
        (dict(label_names="a, a"), "repeat"),
        (dict(dev="path"), "no dev set path"),
        (dict(epochs=0), "epochs"),
        (dict(learning_rate=0.0), "learning rate"),
        (dict(model="./no/such/model"), "not found"),
        (dict(device="tpu"), "unknown device"),
    ]:
        with pytest.raises(CartomapError, match=match):
            build_run_config(**{**base, **bad})


def test_progress_description():
    status = {
        "state": "running",
        "epoch": 2,
        "epochs": 3,
        "step": 5,
        "steps_per_epoch": 10,
        "global_step": 15,
        "total_steps": 30,
        "loss": 0.51234,
        "dev_accuracy": 0.8,
        "eta_s": 7300,
    }
    view = describe_progress(status)
    assert (view["fraction"], view["epoch"], view["step"], view["loss"]) == (0.5, "2/3", "5/10", "0.5123")
    assert view["dev_accuracy"] == "80.0%" and view["time_left"] == "2 h 1 min"
    assert format_duration(None) == "–" and format_duration(59.6) == "1 min 0 s"
    assert describe_progress({**status, "eta_s": None})["time_left"] == "estimating…"
    assert describe_progress({"state": "queued"})["time_left"] == "estimating…"
    assert describe_progress({"state": "failed"})["time_left"] == "–"
    assert derive_state({"state": "queued", "pid": os.getpid()}) == "queued"
    assert derive_state({"state": "queued", "pid": 2**22 + 12345}) == "exited"
    label = run_label(
        {"id": "abc", "name": "demo", "state": "done", "data": "demo:train", "created": "2025-01-01"}
    )
    assert label == "demo (abc) · done · demo:train · 2025-01-01"
    assert "upload 0123abcd….csv" in run_label({"id": "x", "data": "/c/uploads/" + "0123abcd" * 8 + ".csv"})


def test_time_left_is_estimated_from_measured_steps_only():
    """Start-up and the first step (warm-up) are not counted; no estimate before MIN_ETA_STEPS steps."""
    now = [0.0]
    clock = StepClock(total_steps=100, now=lambda: now[0])
    now[0] = 60.0  # libraries, data, model and a slow first step: 60 s
    assert clock.eta_s(1) is None
    for step in range(2, 2 + MIN_ETA_STEPS - 1):
        now[0] += 2.0
        assert clock.eta_s(step) is None, step
    now[0] += 2.0
    step = 1 + MIN_ETA_STEPS
    assert clock.eta_s(step) == 2.0 * (100 - step)  # 2 s a step, the 60 s not counted
    now[0] += 30.0  # an eval pass inside the work: counted, spread over the steps measured
    assert clock.eta_s(step + 1) == round(
        (2.0 * MIN_ETA_STEPS + 30.0) / (MIN_ETA_STEPS + 1) * (100 - step - 1), 1
    )


def test_the_runs_table_shows_missing_values_as_a_dash(root):
    make_run(root, "running", seed=1, epoch=0, epochs=2)  # no epoch done: no dev accuracy yet
    at = page().run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "dev_accuracy" in d.value.columns)
    assert table["dev_accuracy"].tolist() == ["–"]
    assert not table.isna().any().any()


def test_a_state_and_its_phase_are_said_once():
    from cartomap.runs.progress import state_text

    assert state_text("done", "done") == "done" and state_text("running", "dev") == "running · dev"
    assert state_text("queued", None) == "queued" and state_text("running", "") == "running"
