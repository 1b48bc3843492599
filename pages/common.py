"""Shared helpers of the dashboard's pages. Import with ``from pages.common import ...``.

Stable API (keep it small; all of it is Streamlit glue over the ``cartomap`` library):

``get_store() -> RunStore``
    The run store; its root is env ``CARTOMAP_CACHE`` (set by ``cartomap dashboard``), default "cache".
``sidebar_run_picker() -> Run | None``
    The run selectbox in the sidebar (name (id) · state · data · created). ``app.py`` draws it
    once per script run, before the page; pages need not call it. The choice is kept in
    ``st.session_state["run_id"]``; ``?run=ID`` in the URL (an id, a unique id prefix or a run
    name) selects a run, and the URL follows the selection.
``current_run() -> Run | None``
    The selected run: the one in ``st.session_state["run_id"]``, else the newest finished run,
    else the newest run, else None. Draws nothing.
``select_run(run_id)``
    Make ``run_id`` the selected run (call ``st.rerun()`` after it for the sidebar to show it).
``demo_or_prompt(run) -> Run | None``
    For pages that need a finished run: returns ``run`` when it is done; otherwise draws what
    to do and returns None (so ``run = demo_or_prompt(current_run())``, then
    ``if run is None: st.stop()``). With no run at all it offers a one-click "Train the demo"
    (bundled demo data + default encoder, started with ``cartomap.jobs.start_training``); for
    a run still training it shows :func:`training_progress`, which reruns the whole app when
    the run is done, so the page then draws it.
``training_progress(run)``
    Epoch, step, loss, dev accuracy and time left of ``run``. While the run is queued or
    running it refreshes every second (``st.fragment(run_every=...)``) and reruns the app once
    the run ends (done, failed, cancelled, ...).
``run_actions(run)``
    Cancel (running) or Resume (cancelled, failed, interrupted) buttons for ``run``.
``kept(key, default, *, options=None, on_change=None) -> dict``
    Keyword arguments that make a widget's value survive reruns, page switches and being
    hidden: ``st.number_input("Epochs", 1, 100, **kept("train_epochs", 4))``. The value lives in
    ``st.session_state[key]``; ``options`` (for select widgets) resets a value no longer offered.
``flash(kind, message)`` / ``show_flashes()``
    Queue a message ("success", "info", "warning", "error") to show after an ``st.rerun()``.
``show_error(err)``
    ``st.error(str(err))`` for the library's errors (CartomapError), the one way to report bad input;
    markdown in the message is escaped (it may quote the data). ``escape_markdown(text)`` does that
    for any other text that goes into st.markdown / st.info / ...
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from cartomap.config import RunConfig
from cartomap.errors import CartomapError
from cartomap.forms import ACTIVE_STATES, RESUMABLE_STATES, describe_progress, effective_state, run_label
from cartomap.jobs import start_training, tail
from cartomap.store import Run, RunStore

RUN_KEY = "run_id"  # st.session_state key of the selected run id
POLL_S = 1.0  # how often a live progress widget rereads the run's status
_PICKER_KEY = "_run_picker"
_QP_SEEN = "_run_query_param"
_QP_ERROR = "_run_query_param_error"
_FLASH = "_flash_messages"


# --------------------------------------------------------------------------- store and run choice
def get_store() -> RunStore:
    """The run store under env CARTOMAP_CACHE (default "cache"), read at every call."""
    return RunStore(os.environ.get("CARTOMAP_CACHE", "cache"))


def _runs(store: RunStore) -> list[Run]:
    try:
        return store.list()
    except (OSError, ValueError):  # a run folder being written or deleted right now
        return []


def _resolve_run_id(store: RunStore, runs: list[Run]) -> str | None:
    """Apply a new ?run= query parameter, then return a selected id that exists (or a default)."""
    ss = st.session_state
    wanted = st.query_params.get("run")
    if wanted and wanted != ss.get(_QP_SEEN):
        ss[_QP_SEEN] = wanted
        try:
            ss[RUN_KEY] = store.get(wanted).id
            ss.pop(_QP_ERROR, None)
        except CartomapError as err:
            ss[_QP_ERROR] = str(err)
    ids = [r.id for r in runs]
    if ss.get(RUN_KEY) in ids:
        return ss[RUN_KEY]
    default = next((r.id for r in runs if _state(r) == "done"), ids[0] if ids else None)
    if default is None:
        ss.pop(RUN_KEY, None)
    else:
        ss[RUN_KEY] = default
    return default


def _state(run: Run) -> str:
    try:
        return effective_state(run.status())
    except (OSError, ValueError):
        return "unknown"


def _label(run: Run) -> str:
    try:
        return run_label(run.summary())
    except (OSError, ValueError, KeyError):
        return f"{run.id} · unreadable"


def current_run() -> Run | None:
    """The selected run (see the module docstring); draws nothing."""
    store = get_store()
    run_id = _resolve_run_id(store, _runs(store))
    return Run(store.path_for(run_id)) if run_id else None


def select_run(run_id: str | None) -> None:
    """Select ``run_id`` (None: clear); the sidebar shows it from the next script run on."""
    if run_id is None:
        st.session_state.pop(RUN_KEY, None)
        return
    st.session_state[RUN_KEY] = run_id
    st.session_state[_QP_SEEN] = run_id
    st.query_params["run"] = run_id


def _as_run_id(value: Any, ids: list[str]) -> str | None:
    """The run id a picker value stands for. A browser sends back the label it shows, and a label
    holds the run's state, so after a state change the value can be a stale label with the id in it."""
    if value in ids:
        return value
    return next((rid for rid in ids if rid in str(value or "")), None)


def _picked(widget_key: str) -> None:
    store = get_store()
    run_id = _as_run_id(st.session_state.get(widget_key), [r.id for r in _runs(store)])
    if run_id is not None:
        select_run(run_id)


def sidebar_run_picker() -> Run | None:
    """Draw the run selectbox in the sidebar and return the selected run (None when there are none)."""
    store = get_store()
    runs = _runs(store)
    run_id = _resolve_run_id(store, runs)
    with st.sidebar:
        if st.session_state.get(_QP_ERROR):
            st.warning(escape_markdown(f"?run= in the address: {st.session_state.pop(_QP_ERROR)}"))
        if not runs:
            st.caption("No runs yet: train the demo or start a run on the Train page.")
            return None
        labels = {r.id: _label(r) for r in runs}
        ids = list(labels)
        # The browser keeps showing the label it has, so a changed label (a run's state moved on)
        # or a selection made elsewhere gets a fresh widget: the key follows both.
        digest = hashlib.sha1("\n".join([run_id, *labels.values()]).encode()).hexdigest()[:10]
        widget_key = f"{_PICKER_KEY}_{digest}"
        st.selectbox(
            "Run",
            ids,
            index=ids.index(run_id),
            format_func=lambda rid: labels.get(rid, rid),
            key=widget_key,
            on_change=_picked,
            args=(widget_key,),
            help="name (id) · state · data · created. Share a run with ?run=ID in the address.",
        )
    if st.query_params.get("run") != run_id:  # keep the address shareable
        st.session_state[_QP_SEEN] = run_id
        st.query_params["run"] = run_id
    return Run(store.path_for(run_id))


# --------------------------------------------------------------------------- messages and widget state
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]<>$~|])")


def escape_markdown(text: str) -> str:
    """``text`` shown as written: no links, images, emphasis or LaTeX made from data in it."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", str(text))


def show_error(err: BaseException | str) -> None:
    """Report bad input: the library's message (markdown escaped: it may quote the data), never a traceback."""
    st.error(escape_markdown(str(err)))


def flash(kind: str, message: str) -> None:
    """Queue a message ('success', 'info', 'warning', 'error') shown by :func:`show_flashes` after a rerun."""
    st.session_state.setdefault(_FLASH, []).append((kind, message))


def show_flashes() -> None:
    for kind, message in st.session_state.pop(_FLASH, []):
        getattr(st, kind, st.info)(message)


def _copy_to(key: str, widget_key: str, then: Callable[[], Any] | None) -> None:
    st.session_state[key] = st.session_state[widget_key]
    if then is not None:
        then()


def kept(
    key: str,
    default: Any,
    *,
    options: Sequence[Any] | None = None,
    on_change: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Widget kwargs (key, on_change, args) whose value outlives the widget; see the module docstring.

    A multiselect's value (a list) is filtered to ``options`` (``default`` when nothing is left); any other value not in
    ``options`` is reset to ``default`` (or the first option when ``default`` is not one either).
    """
    ss = st.session_state
    value = ss.get(key, default)
    if options is not None:
        opts = list(options)
        if isinstance(value, list):
            value = [v for v in value if v in opts] or [v for v in default if v in opts]
        elif value not in opts:
            value = default if default in opts else (opts[0] if opts else None)
    ss[key] = value
    widget_key = f"_kept_{key}"
    ss[widget_key] = value
    return {"key": widget_key, "on_change": _copy_to, "args": (key, widget_key, on_change)}


# --------------------------------------------------------------------------- progress and actions
def _show_progress(run: Run, status: dict[str, Any]) -> None:
    view = describe_progress(status)
    state = view["state"]
    text = f"{state} · {view['phase']}" if state == "running" and view["phase"] != state else state
    st.progress(view["fraction"], text=f"Run {run.id}: {text}")
    cols = st.columns(5)
    cols[0].metric("Epoch", view["epoch"])
    cols[1].metric("Step", view["step"])
    cols[2].metric("Loss", view["loss"])
    cols[3].metric("Dev accuracy", view["dev_accuracy"])
    cols[4].metric("Time left", view["time_left"] if state in ("running", "done") else "–")
    if state == "queued":
        st.caption("Waiting for the training job to start (loading libraries and data)…")
    elif state == "exited":
        st.warning("The training job exited before training started. The end of its log:")
        st.code(tail(run.path / "job.log") or "(empty log)", language=None)
    elif state == "failed":
        st.error("Training failed:")
        st.code(str(view["error"] or "no error message; see log.txt in the run folder"), language=None)
    elif state == "cancelled":
        st.info("Cancelled. Resume continues from the last completed epoch.")
    elif state == "interrupted":
        st.warning("The training job stopped without finishing (killed or crashed). Resume continues it.")


@st.fragment(run_every=POLL_S)
def _live_progress(run: Run, first_state: str) -> None:
    try:
        status = run.status()
    except (OSError, ValueError):  # deleted, or being replaced
        st.rerun()
        return
    if effective_state(status) not in ACTIVE_STATES and first_state in ACTIVE_STATES:
        st.rerun()  # the whole app: a finished run's page draws its results
    _show_progress(run, status)


def training_progress(run: Run) -> None:
    """Progress of ``run``; live (refreshed every POLL_S seconds) while it is queued or running."""
    try:
        status = run.status()
    except (OSError, ValueError):
        st.warning(f"Run {run.id} cannot be read (deleted?).")
        return
    state = effective_state(status)
    if state in ACTIVE_STATES:
        _live_progress(run, state)
    else:
        _show_progress(run, status)


def resume(run: Run) -> Run | None:
    """Start training ``run`` again from its saved config; reports errors and returns the run started."""
    try:
        started = start_training(RunConfig.from_dict(run.info["config"]), get_store())
    except CartomapError as err:
        show_error(err)
        return None
    if started.id != run.id:
        flash("warning", f"The data changed since run {run.id} was made: started a new run {started.id}.")
    else:
        flash("success", f"Resumed run {run.id}.")
    select_run(started.id)
    return started


def run_actions(run: Run) -> None:
    """Cancel (while running) or Resume (after a stop) buttons; a button never kills a process."""
    state = _state(run)
    if state == "running":
        if st.button("Cancel training", key=f"cancel_{run.id}", help="Stops after the current step"):
            run.request_cancel()
            st.info("Cancel requested: the job stops after its current step.")
    elif (
        state in RESUMABLE_STATES
        and st.button("Resume", key=f"resume_{run.id}", type="primary")
        and resume(run) is not None
    ):
        st.rerun()


def start_demo() -> Run | None:
    """Start (or find) the demo run and select it; reports errors."""
    try:
        run = start_training(RunConfig(name="demo"), get_store())
    except CartomapError as err:
        show_error(err)
        return None
    select_run(run.id)
    return run


def demo_or_prompt(run: Run | None) -> Run | None:
    """``run`` when it is done; else draw the demo button or the run's progress and return None."""
    if run is not None:
        state = _state(run)
        if state == "done":
            return run
        st.info(f"Run {run.id} has no results yet: they appear here when its training is done.")
        training_progress(run)
        run_actions(run)
        return None
    st.info(
        "No trained run yet. Train the bundled demo (2,000 SNLI and MultiNLI pairs with the default "
        "encoder; a few minutes on a CPU), or set up your own data on the Train page."
    )
    if st.button("Train the demo", type="primary", key="train_demo") and start_demo() is not None:
        st.rerun()
    return None
