"""The live job panel asks less and draws only what changed: the poll's interval grows while nothing
changes and is short again after a change, the training curves are built and sent only when they gained
something, not at all in a closed expander, and a state change still reruns the app."""

from __future__ import annotations

import textwrap

import patience
import pytest
from streamlit.testing.v1 import AppTest
from test_app_train import make_run

from cartomap.analysis import curves
from cartomap.io import atomic_write_json
from cartomap.runs import polling

RUNNING = dict(
    epoch=1, epochs=2, step=3, steps_per_epoch=40, global_step=3, total_steps=80, loss=1.1, phase="train"
)

PANEL = """
import streamlit as st
from streamlit.runtime.scriptrunner_utils import script_run_context
from pages.common import *
from pages.components.jobs import run_panel

sent = st.session_state.setdefault("auto_reruns", [])
enqueue = script_run_context.ScriptRunContext.enqueue

def recording(self, msg):  # the messages that set the browser's poll timer, as the browser gets them
    if msg.WhichOneof("type") == "auto_rerun":
        sent.append(msg.auto_rerun.interval)
    return enqueue(self, msg)

script_run_context.ScriptRunContext.enqueue = recording
try:
    st.session_state["apps"] = st.session_state.get("apps", 0) + 1
    run_panel(sidebar_run_picker())
finally:
    script_run_context.ScriptRunContext.enqueue = enqueue
"""


def panel() -> AppTest:
    return AppTest.from_string(textwrap.dedent(PANEL), default_timeout=patience.WAIT_S)


@pytest.fixture()
def running(root):
    run = make_run(root, "running", **RUNNING)
    atomic_write_json(run.history_path, [])
    lock = run.acquire_lock()  # as the training process would: the run is running, not interrupted
    yield run
    lock.close()


@pytest.fixture()
def builds(monkeypatch) -> list:
    """Every figure of the training curves built, by the page's call."""
    made, build = [], curves.training_curves_figure

    def counting(*args, **kwargs):
        made.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(curves, "training_curves_figure", counting)
    return made


def test_the_interval_grows_while_nothing_changes_and_is_short_again_after_a_change(running):
    at = panel().run()
    assert not at.exception, at.exception
    key = f"_poll_{running.id}"
    assert at.session_state[key][1] == polling.POLL_MIN_S
    for expected in (3.0, 4.5, 6.75, 10.0, 10.0):
        running.set_status(step=running.status()["step"] + 1, loss=1.0)  # steps are no change
        at.run()
        assert at.session_state[key][1] == expected
        assert at.session_state["auto_reruns"][-1] == expected  # the browser's timer: after the app's own
    running.set_status(phase="eval-pass")  # the recording pass begins: a change
    at.run()
    assert at.session_state[key][1] == polling.POLL_MIN_S
    assert at.session_state["auto_reruns"][-1] == polling.POLL_MIN_S


def test_the_curves_are_built_again_only_when_they_gained_something(running, builds):
    atomic_write_json(running.history_path, [{"epoch": 1, "train_loss": 1.0, "dev_accuracy": 0.5}])
    at = panel().run()
    assert not at.exception, at.exception
    assert len(builds) == 1 and len(at.get("plotly_chart")) == 1
    running.set_status(step=4, global_step=4, loss=1.05)  # within the same quarter of an epoch
    at.run()
    at.run()
    assert len(builds) == 1 and len(at.get("plotly_chart")) == 1  # kept, drawn from the session
    running.set_status(step=10, global_step=10)  # a quarter epoch (40 steps / 4) further
    at.run()
    assert len(builds) == 2
    atomic_write_json(
        running.history_path, [{"epoch": 1, "train_loss": 1.0}, {"epoch": 2, "train_loss": 0.5}]
    )
    at.run()
    assert len(builds) == 3  # an epoch more in the history


def test_closed_curves_are_not_built(running, builds):
    atomic_write_json(running.history_path, [{"epoch": 1, "train_loss": 1.0, "dev_accuracy": 0.5}])
    at = panel().run()
    (box,) = [e for e in at.expander if e.label == "Training curves (live)"]
    assert len(builds) == 1
    at.session_state[f"live_curves_{running.id}"] = False  # the person closed it
    running.set_status(step=20, global_step=20)
    at.run()
    assert not at.exception, at.exception
    assert len(builds) == 1 and not at.get("plotly_chart")


POLL = """
import time
import streamlit as st
from pathlib import Path
from pages.components.jobs import TRAINING, LIVE_CURVES, _live, _training_details
from cartomap.runs.store import Run
n = st.session_state["n"] = st.session_state.get("n", 0) + 1
drawn = ({drawn!r}, time.time() - {age}) if n == 1 else None  # the app draws them no more: at most 2 runs
_live(Run(Path({path!r})), TRAINING, _training_details, "running", LIVE_CURVES, drawn)
"""


def _poll(running, drawn, age: float) -> AppTest:
    """A poll of a page that drew the curves ``age`` seconds ago with key ``drawn``."""
    code = POLL.format(drawn=drawn, age=age, path=str(running.path))
    return AppTest.from_string(code, default_timeout=patience.WAIT_S).run()


@pytest.mark.parametrize(
    ("step", "epoch_more", "age", "reruns"),
    [
        (13, False, 0.0, False),  # a quarter epoch more, drawn just now: not yet
        (13, False, polling.CURVES_MIN_S, True),  # ... and a minute ago: drawn again
        (4, False, 600.0, False),  # the same quarter, however old: nothing new to see
        (4, True, 0.0, True),  # an epoch more in the history: at once
    ],
)
def test_the_poll_reruns_the_app_when_the_curves_are_due(running, builds, step, epoch_more, age, reruns):
    """The poll, not the app, sees what the curves gained: it reruns the whole app, which draws them
    again (the poll itself never builds them)."""
    from pages.components import jobs

    atomic_write_json(running.history_path, [{"epoch": 1, "train_loss": 1.0}])
    drawn = jobs._curves_key(running, running.status())
    running.set_status(step=step, global_step=step)
    if epoch_more:
        atomic_write_json(
            running.history_path, [{"epoch": 1, "train_loss": 1.0}, {"epoch": 2, "train_loss": 0.5}]
        )
    at = _poll(running, drawn, age)
    assert not at.exception, at.exception
    assert at.session_state["n"] == (2 if reruns else 1) and not builds
    assert [m.label for m in at.metric][:2] == ["Epoch", "Step"]


def test_the_end_of_the_job_still_reruns_the_app_at_the_first_poll(running, builds):
    """The page drew the run running; the poll finds it done: the whole app runs again (its results)."""
    running.set_status(state="done", epochs_done=2)
    script = f"""
    import streamlit as st
    from pages.components.jobs import TRAINING, LIVE_CURVES, _live, _training_details
    from pathlib import Path
    from cartomap.runs.store import Run
    n = st.session_state["n"] = st.session_state.get("n", 0) + 1
    if n == 1:
        _live(Run(Path({str(running.path)!r})), TRAINING, _training_details, "running", LIVE_CURVES, None)
    """
    at = AppTest.from_string(textwrap.dedent(script), default_timeout=patience.WAIT_S).run()
    assert not at.exception, at.exception
    assert at.session_state["n"] == 2 and not builds
