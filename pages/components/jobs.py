"""The one job panel of the dashboard: progress of long work, what happened when it stopped, and
Cancel / Resume / Start buttons.

A job is a run being trained, an experiment, or a task of a run (embeddings, similarity, filtering,
...): all three keep their state in the run store (:mod:`cartomap.runs.state`), so one panel
reads them. While a job is queued or running, the panel polls its status in a fragment and reruns the
whole app once the state changes (queued -> running, or the job ends), so the sidebar shows the same
state and the page then draws its results. It polls less often while nothing changes (every 2 s, then
up to every 10 s; back to 2 s at a change: :mod:`cartomap.runs.polling` owns the policy), and a running
run's training curves are drawn by the whole app, outside the poll, so an unchanged chart is neither
built nor sent again; the poll reruns the app when they gained something to see (a new epoch at once; a
quarter of an epoch's steps, at most every minute), and not at all while their expander is closed.
Buttons only write flags and start processes; no widget ever kills a process.

* :func:`job_panel`: status, messages and Cancel / Resume of any job; :func:`run_panel` and
  :func:`experiment_panel` for training runs and experiments;
* :func:`task_panel`: a task's status (live while active); :func:`start_task_button` starts it;
* :func:`demo_or_prompt`: the run a results page shows, or what to do until there is one; with the demo's
  recorded run (shipped with cartomap, installed on a fresh store: :func:`install_recorded_demo`) it says
  so and offers **Train the demo yourself** (:func:`recorded_demo_note`);
* :func:`training_curves`: a running run's loss and accuracy by epoch, its loss every k steps (smoothed)
  and its current loss, in its panel (:data:`LIVE_CURVES`: drawn outside the poll).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from cartomap.analysis import curves
from cartomap.config import DEMO_TASKS, demo_time
from cartomap.errors import CartomapError
from cartomap.experiments import launch
from cartomap.experiments.store import Experiment
from cartomap.integrations.checkpoints import restart_scoring
from cartomap.runs import polling, shipped
from cartomap.runs.jobs import start_task, tail
from cartomap.runs.progress import describe_progress, state_text
from cartomap.runs.state import State, StatusFolder, is_active, is_resumable
from cartomap.runs.store import Run
from cartomap.tasks.token import TOKEN
from cartomap.team.roles import Action
from cartomap.training.launch import prepare_demo_to_train, start_run_job
from pages.common import (
    acting_as,
    flash,
    get_experiments,
    get_store,
    refused,
    run_state,
    select_run,
    show_error,
    write_button,
)

STUCK_S = 90  # a job still queued after this long probably failed to start: its log is shown


@dataclass(frozen=True)
class Wording:
    """What the panel says about one kind of job, in each state that needs words."""

    queued: str
    exited: str
    failed: str
    cancelled: str
    interrupted: str


TRAINING = Wording(
    queued="Waiting for the training job to start (loading libraries and data)…",
    exited="The training job exited before training started. The end of its log:",
    failed="Training failed:",
    cancelled="Cancelled. Resume continues from the last completed epoch.",
    interrupted="The training job stopped without finishing (killed or crashed). Resume continues it.",
)
SCORING = Wording(
    queued="Waiting for the scoring job to start (loading libraries and data)…",
    exited="The scoring job exited before it started. The end of its log:",
    failed="Scoring the checkpoints failed:",
    cancelled="Cancelled. Resume goes on with the next checkpoint not scored yet.",
    interrupted="The scoring job stopped without finishing (killed or crashed). Resume goes on with it.",
)
RECORDED = Wording(
    queued="Waiting for the training script to start…",
    exited="The training script exited before it started.",
    failed="Recording failed:",
    cancelled="Cancelled.",
    interrupted="The training script stopped before it finished (killed or crashed). Resume your Trainer from "
    "an end-of-epoch checkpoint (resume_from_checkpoint) with the same DataMapCallback: it continues this run.",
)
EXPERIMENT = Wording(
    queued="Waiting for the experiment job to start (loading libraries and data)…",
    exited="The experiment job exited before it started. The end of its log:",
    failed="The experiment failed:",
    cancelled="Cancelled. Resume continues where it stopped (finished runs are kept).",
    interrupted="The experiment job stopped without finishing (killed or crashed). Resume continues it.",
)


def task_wording(label: str) -> Wording:
    return Wording(
        queued=f"{label}: waiting for the job to start…",
        exited=f"The {label.lower()} job exited before it started. The end of its log:",
        failed=f"{label} failed:",
        cancelled=f"{label} was stopped: start it again.",
        interrupted=f"{label} stopped before finishing (killed or crashed): start it again.",
    )


def _read(job: StatusFolder) -> dict[str, Any] | None:
    try:
        return job.status() if job.status_path.exists() else None
    except (OSError, ValueError):  # deleted, or being replaced right now
        return None


def _log(job: StatusFolder) -> None:
    st.code(tail(job.job_log_path) or "(empty log)", language=None)


def _messages(job: StatusFolder, status: dict[str, Any], words: Wording) -> None:
    state = status["state"]
    if state == State.QUEUED:
        st.caption(words.queued)
        if time.time() - float(status.get("updated_at") or time.time()) > STUCK_S:
            st.warning("The job has not started yet. The end of its log:")
            _log(job)
    elif state == State.EXITED:
        st.warning(words.exited)
        _log(job)
    elif state == State.FAILED:
        st.error(words.failed)
        st.code(str(status.get("error") or "no error message; see the log"), language=None)
        _log(job)
    elif state == State.CANCELLED:
        st.info(words.cancelled)
    elif state == State.INTERRUPTED:
        st.warning(words.interrupted)
    elif state == State.DAMAGED:
        ident = getattr(job, "id", "")
        show_error(f"{status.get('error')}" + (f": see `cartomap repair {ident}`" if ident else ""))


Details = Callable[[StatusFolder, dict[str, Any]], None]


@dataclass(frozen=True)
class Slow:
    """A part of a live panel too costly for every poll (a chart): drawn by the whole app, below the
    poll, and drawn again (the whole app rerun by the poll) only when it is due.

    ``draw(job, status)`` draws it and returns its key (a cheap :class:`~collections.abc.Hashable` of what
    it shows), or None when nothing of it is on screen (then no change of it is followed);
    ``key(job, status)`` is that key as a poll sees it (no file read: a ``stat`` at most);
    ``due(drawn, key, age_s)`` whether what was drawn with key ``drawn`` ``age_s`` seconds ago is to be
    drawn again for ``key``."""

    draw: Callable[[StatusFolder, dict[str, Any]], Hashable | None]
    key: Callable[[StatusFolder, dict[str, Any]], Hashable]
    due: Callable[[Any, Any, float], bool]


def _job_ident(job: StatusFolder) -> str:
    return str(getattr(job, "id", None) or getattr(job, "name", ""))


def _poll_again_in(seconds: float) -> None:
    """Ask the browser to run the fragment now running again every ``seconds`` (it replaces the timer
    ``st.fragment(run_every=...)`` set; Streamlit has no public call for it, so this sends the same
    message the decorator sends, and does nothing where that is not possible: the panel then keeps
    polling every :data:`~cartomap.runs.polling.POLL_MIN_S`)."""
    try:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx

        ctx, fragment_id = get_script_run_ctx(), ThreadState.get().fragment_id
        if ctx is None or not fragment_id:
            return
        msg = ForwardMsg()
        msg.auto_rerun.interval = float(seconds)
        msg.auto_rerun.fragment_id = fragment_id
        ctx.enqueue(msg)
    except (ImportError, AttributeError, RuntimeError):  # another Streamlit: the fixed interval stays
        return


def _drawn(job: StatusFolder, key: Hashable | None) -> tuple[Hashable, float] | None:
    """(``key``, when the slow part was first drawn with it): kept in the session across app runs."""
    if key is None:
        return None
    name = f"_slow_drawn_{_job_ident(job)}"
    kept = st.session_state.get(name)
    if kept is None or kept[0] != key:
        kept = st.session_state[name] = (key, time.time())
    return kept


def _pace(job: StatusFolder, status: dict[str, Any]) -> float:
    """Set the next poll of ``job``'s panel by :func:`cartomap.runs.polling.next_interval`: shorter after a
    change of its marks (state, phase, epoch) since the last poll, longer while none. Returns the seconds."""
    key = f"_poll_{_job_ident(job)}"
    marks = polling.marks(status)
    seen, previous = st.session_state.get(key, (None, None))
    interval = polling.next_interval(previous, marks != seen)
    st.session_state[key] = (marks, interval)
    _poll_again_in(interval)  # also when unchanged: an app run's st.fragment set its own (the browser
    return interval  # ignores an interval equal to the timer's)


@st.fragment(run_every=polling.POLL_MIN_S)
def _live(
    job: StatusFolder,
    words: Wording,
    details: Details,
    drawn: str,
    slow: Slow | None = None,
    slow_drawn: tuple[Hashable, float] | None = None,
) -> None:
    """Poll the job; rerun the whole app once its state is no longer ``drawn`` (the state the page
    was drawn with): a finished job's page draws its results, and on queued -> running the sidebar's
    run picker and the buttons (Cancel) follow the same state as the panel. With ``slow`` (drawn by the
    app: ``slow_drawn`` its key and when; None: not on screen) the app also reruns when it is due."""
    status = _read(job)
    if status is None or status["state"] != drawn or not is_active(status["state"]):
        st.rerun()  # the whole app
        return
    if slow is not None and slow_drawn is not None:
        key, when = slow_drawn
        if slow.due(key, slow.key(job, status), time.time() - when):
            st.rerun()  # the whole app: it draws the slow part again
            return
    _pace(job, status)
    details(job, status)
    _messages(job, status, words)


def job_panel(
    job: StatusFolder,
    words: Wording,
    details: Details,
    *,
    key: str = "",
    resume: Callable[[], Any] | None = None,
    cancel: Callable[[], Any] | None = None,
    cancel_label: str = "Cancel",
    resumes: Action = Action.TRAIN,
    slow: Slow | None = None,
) -> State | None:
    """Progress of ``job`` (live while it is queued or running), the messages of a stopped job,
    and Cancel (running) / Resume (stopped) buttons; returns the job's state (None before it
    ever ran). ``details(job, status)`` draws the progress itself (at each poll); ``slow`` what is drawn
    below it while the job is active and only when it changed (:class:`Slow`). Button keys are
    ``{key}cancel_{job id}`` and ``{key}resume_{job id}``. In team mode Cancel is for who may cancel,
    Resume for who may do ``resumes`` (``pages.common.write_button``)."""
    status = _read(job)
    if status is None:
        return None
    state = status["state"]
    if is_active(state):
        live = st.container()  # above the slow part, drawn after it: the poll needs the key it drew
        slow_drawn = _drawn(job, slow.draw(job, status)) if slow is not None else None
        with live:
            _live(job, words, details, state, slow, slow_drawn)
    else:
        details(job, status)
        _messages(job, status, words)
    ident = _job_ident(job)
    if state == State.RUNNING and cancel is not None:
        if write_button(
            cancel_label, Action.CANCEL, key=f"{key}cancel_{ident}", help="Stops after the current step"
        ):
            cancel()
            st.info("Cancel requested: the job stops after its current step.")
    elif (
        is_resumable(state)
        and resume is not None
        and write_button("Resume", resumes, key=f"{key}resume_{ident}", type="primary")
    ):
        resume()
    return state


def progress_bar(label: str, unit: str = "examples") -> Details:
    """Details of a task: a bar of its progress with "done / total <unit>" and its phase."""

    def draw(job: StatusFolder, status: dict[str, Any]) -> None:
        fraction = min(max(float(status.get("progress") or 0.0), 0.0), 1.0)
        done, total = status.get("done"), status.get("total")
        count = f" · {done:,} / {total:,} {status.get('unit', unit)}" if done is not None and total else ""
        phase = status.get("phase")
        text = f"{label}: {state_text(status['state'], phase)}{count}"
        st.progress(1.0 if status["state"] == State.DONE else fraction, text=text)

    return draw


def task_panel(run: Run, name: str, label: str, details: Details | None = None) -> bool:
    """The state of task ``name`` of ``run``: live progress while it is active (then True: the page
    offers nothing else), else what went wrong last time, if anything (then False)."""
    task = run.task(name)
    status = _read(task)
    if status is None or status["state"] == State.DONE:
        return False
    job_panel(task, task_wording(label), details or progress_bar(label))
    return is_active(status["state"])


def start_task_button(run: Run, name: str, cli_args: list[str], button: str, key: str, **kwargs) -> None:
    """A button that starts task ``name`` as ``cartomap <cli_args>`` in the background."""
    if write_button(button, Action.TASK, key=key, type="primary", **kwargs):
        try:
            start_task(run, name, cli_args, get_store(), by=acting_as())
        except (CartomapError, OSError) as err:
            show_error(err)
        else:
            st.rerun()


# --------------------------------------------------------------------------- training runs
def _training_details(run: StatusFolder, status: dict[str, Any]) -> None:
    view = describe_progress(status)
    state = view["state"]
    text = state_text(state, view["phase"]) if state == State.RUNNING else state
    st.progress(view["fraction"], text=f"Run {run.id}: {text}")
    cols = st.columns(5)
    cols[0].metric("Epoch", view["epoch"])
    cols[1].metric("Step", view["step"])
    cols[2].metric("Loss", view["loss"])
    cols[3].metric("Dev accuracy", view["dev_accuracy"])
    cols[4].metric("Time left", view["time_left"] if state in (State.RUNNING, State.DONE) else "–")


def _curves_key(run: Run, status: dict[str, Any]) -> Hashable:
    """What the live training curves show, as a poll sees it (:func:`cartomap.runs.polling.curves_key`)."""
    return polling.curves_key(polling.file_signature(run.history_path), status)


def _live_curves(run: Run, status: dict[str, Any]) -> Hashable | None:
    """A running run's :func:`training_curves` in an expander (open at first); returns the key they were
    drawn with, None when they are not on screen (the run is not running, or the expander is closed: then
    no figure is built and no poll reruns the app for them)."""
    if status["state"] != State.RUNNING:
        return None
    box = st.expander("Training curves (live)", expanded=True, key=f"live_curves_{run.id}", on_change="rerun")
    if box.open is False:
        return None
    key = _curves_key(run, status)
    with box:
        training_curves(run, status, key=key)
    return key


#: The live panel's training curves: drawn by the app, again only when due (``polling.curves_due``).
LIVE_CURVES = Slow(draw=_live_curves, key=_curves_key, due=polling.curves_due)


def training_curves(run: Run, status: dict[str, Any], key: Hashable | None = None) -> None:
    """Loss and dev/test accuracy of every completed epoch, the loss every k steps with its moving
    average, and the current epoch's loss so far (``history.json`` is one small record an epoch; the step
    log at most 500 lines an epoch). With ``key`` the figure is kept in the session under it: drawn again
    with the same key (a rerun of the app for another reason), it is not built again."""
    name = f"_curves_figure_{run.id}"
    kept = st.session_state.get(name) if key is not None else None
    figure = kept[1] if kept is not None and kept[0] == key else None
    if figure is None:
        try:
            frame = curves.training_curves(run.history(), status, run.test_names)
            steps = curves.step_curve(run.step_losses())
        except (CartomapError, OSError, ValueError):  # being replaced now, or damaged: the panel says so
            return
        if frame.empty and steps.empty:
            st.caption("The curves appear after the first steps.")
            return
        figure = curves.training_curves_figure(frame, steps=steps)
        if key is not None:
            st.session_state[name] = (key, figure)
    st.plotly_chart(figure, key=f"curves_{run.id}", config={"displaylogo": False})


def resume_training(run: Run) -> Run | None:
    """Start training ``run`` again from its own copy of the data (the original files are not read;
    scoring again, for a run of saved checkpoints); reports errors and returns the run started."""
    try:
        if run.config.origin.kind.scored_checkpoints:
            started = restart_scoring(run, get_store(), by=acting_as())
        else:
            started = start_run_job(run, get_store(), by=acting_as())
    except CartomapError as err:
        show_error(err)
        return None
    flash("success", f"Resumed run {run.id}.")
    select_run(started.id)
    return started


def run_panel(run: Run) -> State | None:
    """Epoch, step, loss, dev accuracy and time left of ``run`` (live while it trains), what went
    wrong when it stopped, and Cancel training / Resume; returns its state."""

    def resume() -> None:
        if resume_training(run) is not None:
            st.rerun()

    if not run.status_path.exists():
        st.warning(f"Run {run.id} cannot be read (deleted?).")
        return State.UNKNOWN
    origin = run.config.origin.kind
    if origin in ("trainer", "recorder"):  # recorded by the user's own script: nothing here to resume
        return job_panel(run, RECORDED, _training_details, slow=LIVE_CURVES)
    return job_panel(
        run,
        SCORING if origin == "checkpoints" else TRAINING,
        _training_details,
        slow=LIVE_CURVES,
        resume=resume,
        cancel=run.request_cancel,
        cancel_label="Cancel scoring" if origin == "checkpoints" else "Cancel training",
    )


def start_demo(task: str = DEMO_TASKS[0]) -> Run | None:
    """Start (or find) the demo run of ``task`` (pair: the NLI demo; token: the NER demo) and select it;
    reports errors. An installed recording of it is removed first: the demo is trained live."""
    try:
        store = get_store()
        run = start_run_job(prepare_demo_to_train(store, task)[0], store, by=acting_as())
    except CartomapError as err:
        show_error(err)
        return None
    select_run(run.id)
    return run


def install_recorded_demo() -> None:
    """On a fresh install (a store without runs) put the NLI demo's recorded run into the store, once per
    session (:func:`cartomap.runs.shipped.install_if_fresh`): the Data map opens on its map at once."""
    if not st.session_state.get("_demo_installed"):
        st.session_state["_demo_installed"] = True
        if refused(Action.TRAIN) is None:  # it writes a run: in team mode, for those who may train
            shipped.install_if_fresh(get_store())


def recorded_demo_note(run: Run) -> None:
    """What a page says over the demo's recorded run: that it is the recording, and **Train the demo
    yourself** (the same run trained live: :func:`start_demo`); beside it **Train the NER demo**."""
    task = run.task_kind.name
    note, button, other = st.columns([4, 1, 1])
    note.info(f"{shipped.NOTE} Training it yourself takes {demo_time(task)}.")
    if write_button("Train the demo yourself", Action.TRAIN, where=button, key="train_demo_yourself") and (
        start_demo(task) is not None
    ):
        st.rerun()
    if write_button("Train the NER demo", Action.TRAIN, where=other, key="train_ner_demo") and (
        start_demo(TOKEN.name) is not None  # or opens it, when it is trained already
    ):
        st.rerun()


def demo_or_prompt(run: Run | None) -> Run | None:
    """For pages that need a finished run: ``run`` when it is done; else draw what to do and return
    None (so ``run = demo_or_prompt(current_run())``, then ``if run is None: st.stop()``). With no
    run at all it offers a one-click "Train the demo" and "Train the NER demo"; for a run still training it shows its
    :func:`run_panel`, which reruns the whole app when the run is done, so the page then draws it."""
    if run is not None:
        problems = run.problems()
        if problems:
            show_error(
                f"Run {run.id} is damaged: {'; '.join(problems)}. The other runs are not affected. Repair it "
                f"with `cartomap repair {run.id}`, or delete it on the Train page."
            )
            return None
        if run_state(run) == State.DONE:
            if shipped.is_recording(run):
                recorded_demo_note(run)
            return run
        st.info(f"Run {run.id} has no results yet: they appear here when its training is done.")
        run_panel(run)
        return None
    st.info(
        "No trained run yet. Train a bundled demo with the default encoder: **the demo**, natural language "
        f"inference (3,198 SNLI training pairs, 400 dev pairs; {demo_time('pair')}), or **the NER "
        "demo**, named entities (1,454 WikiGold sentences tagged PER, LOC, ORG and MISC, 242 dev sentences; "
        f"a map of words and of sentences, {demo_time('token')}). Or set up your own data on the Train page."
    )
    nli, ner, _ = st.columns([1, 1, 2])
    if write_button("Train the demo", Action.TRAIN, where=nli, type="primary", key="train_demo") and (
        start_demo() is not None
    ):
        st.rerun()
    if write_button("Train the NER demo", Action.TRAIN, where=ner, key="train_ner_demo") and (
        start_demo(TOKEN.name) is not None
    ):
        st.rerun()
    return None


# --------------------------------------------------------------------------- experiments
def experiment_panel(exp: Experiment, details: Details, *, key: str = "") -> State | None:
    """Progress of experiment ``exp`` (live while it runs; ``details`` draws it), what went wrong
    when it stopped, and Cancel experiment / Resume; returns its state."""

    def resume() -> None:
        try:
            launch.start_experiment(exp, get_experiments(), by=acting_as())
        except CartomapError as err:
            show_error(err)
        else:
            flash("success", f"Resumed experiment {exp.id}.")
            st.rerun()

    if not exp.status_path.exists():
        st.warning(f"Experiment {exp.id} cannot be read (deleted?).")
        return State.UNKNOWN
    return job_panel(
        exp,
        EXPERIMENT,
        details,
        key=key,
        resume=resume,
        cancel=exp.request_cancel,
        cancel_label="Cancel experiment",
        resumes=Action.EXPERIMENT,
    )
