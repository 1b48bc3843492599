"""The Train page's "Map an existing model's checkpoints": a background scoring job the page follows."""

from __future__ import annotations

from pathlib import Path

import patience
import pytest
from streamlit.testing.v1 import AppTest

from cartomap.cli import main
from cartomap.runs.store import RunStore

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def output_dir(tiny_model, tmp_path) -> Path:
    """A Trainer-style output_dir: checkpoint-10 and checkpoint-20 (the tiny model twice)."""
    import shutil

    out = tmp_path / "out"
    for step in (20, 10):
        shutil.copytree(tiny_model, out / f"checkpoint-{step}")
    return out


def page() -> AppTest:
    return AppTest.from_file(str(REPO / "pages" / "train.py"), default_timeout=patience.WAIT_S)


def test_score_checkpoints_from_the_train_page(root, spawned, output_dir):
    at = page().run()
    assert not at.exception
    at.radio(key="_kept_train_source").set_value("path").run()
    at.text_input(key="_kept_train_path").set_value("demo:dev").run()
    at.text_area(key="_kept_score_paths").set_value(f"{output_dir}\n").run()
    at.number_input(key="_kept_score_max_length").set_value(32).run()
    at.button(key="score_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (run,) = RunStore(root).list()
    assert spawned == [["score-checkpoints", "--run", run.id, "--quiet", "--job"]]
    assert run.state == "queued" and run.job_config_path.exists()
    assert [Path(c).name for c in run.config.origin.checkpoints] == ["checkpoint-10", "checkpoint-20"]
    assert at.session_state["run_id"] == run.id

    # the job the page started, run here; the page then shows the finished run
    assert main(["--cache", str(root), "score-checkpoints", "--run", run.id, "--quiet", "--job"]) == 0
    assert run.state == "done" and run.dynamics("eval")[1].shape == (2, 400, 3)
    at.run()
    assert not at.exception

    # a stopped scoring run resumes as scoring, not as training
    run.set_status(state="cancelled")
    at.run()
    at.button(key=f"resume_{run.id}").click().run()
    assert not at.exception
    assert spawned[-1] == ["score-checkpoints", "--run", run.id, "--quiet", "--job"]


def test_bad_checkpoints_are_an_error_on_the_page(root, spawned, tmp_path):
    at = page().run()
    at.text_area(key="_kept_score_paths").set_value(str(tmp_path)).run()
    at.button(key="score_start").click().run()
    assert any("neither config.json" in e.value for e in at.error)
    assert spawned == [] and RunStore(root).list() == []
