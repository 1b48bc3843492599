"""Shared helpers of the dashboard's pages. Import with ``from pages.common import ...``.

Stable API (keep it small; all of it is Streamlit glue over the ``cartomap`` library):

``get_store() -> RunStore``
    The run store; its root is env ``CARTOMAP_CACHE`` (set by ``cartomap dashboard``), default "cache".
``sidebar_run_picker() -> Run | None``
    The run selectbox in the sidebar (name (id) · state · data · created): standalone runs first, then
    each experiment's runs under its name ("pruning 'x' › Model F2 · ..."; ``cartomap.experiments.picker``);
    by default the newest with a data map. ``app.py`` draws it
    once per script run, before the page; pages need not call it. The choice is kept in
    ``st.session_state["run_id"]``; ``?run=ID`` in the URL (an id, a unique id prefix or a run
    name) selects a run, and the URL follows the selection. A rerun that still carries the address this
    session just left (a browser request or a live panel's poll sent before the new address reached
    the browser) does not take the selection back to it (:data:`LATE_ADDRESS_S`).
``run_state(run) -> str``
    The run's state ("unknown" while its folder cannot be read).
``current_run() -> Run | None``
    The selected run: the one in ``st.session_state["run_id"]``, else the picker's default (the first
    listed run with a data map, else finished, else healthy), else None. Draws nothing.
``select_run(run_id)``
    Make ``run_id`` the selected run (call ``st.rerun()`` after it for the sidebar to show it).
``kept(key, default, *, options=None, on_change=None, max_selections=None) -> dict``
    Keyword arguments that make a widget's value survive reruns, page switches and being
    hidden: ``st.number_input("Epochs", 1, 100, **kept("train_epochs", 4))``. The value lives in
    ``st.session_state[key]``; ``options`` (for select widgets) resets a value no longer offered;
    a multiselect (a list ``default``) passes its ``max_selections`` too, which cuts a longer stored value.
``show_on_map(run_id, ids, focus=None)``
    Select ``run_id`` and the examples ``ids`` (``st.session_state["selected_ids"]``, the Data map
    page's selection, shared with the Neighbours page's 2-D view), focus ``focus``, go to the Data map.
``through_app()``
    Called by every page before it draws: a first visit straight to a page's address runs the
    page through ``app.py`` (the run picker, the navigation) instead of Streamlit's legacy ``pages/`` mode.
    ``cartomap dashboard`` (``dashboard.py``) turns that mode off before the server starts; this covers
    a plain ``streamlit run app.py``.
``count(n, noun, plural=None) -> str``
    "1 group", "2,000 groups": a number and the noun agreeing with it.
``for_display(table, keep=(), formats=None) -> DataFrame``
    A table with its missing cells shown as "–" (not "None"); ``keep`` names columns left as they are,
    ``formats`` (column -> printf format) how the numbers of a column made text are written.
``new_chart_event(chart_key, seen_key) -> event | None``
    A chart's selection event the first time it is seen (``seen_key`` keeps its signature), else None;
    an empty event is not taken (a redrawn chart empties its event: deselecting is a button's job).
``flash(kind, message)`` / ``show_flashes()`` / ``flashed(message)``
    Queue a message ("success", "info", "warning", "error") to show after an ``st.rerun()``; whether a
    message was just shown (a page does not repeat it).
``release_focus()``
    Take the keyboard focus off the widget that has it (a select box just used), so the page's
    shortcuts work at once.
``show_error(err)``
    ``st.error(str(err))`` for the library's errors (CartomapError), the one way to report bad input;
    markdown in the message is escaped (it may quote the data). ``escape_markdown(text)`` does that
    for any other text that goes into st.markdown / st.info / ...

Team mode (``cartomap.team``: the team file's roles, and who a request is):

``visitor() -> Visitor``
    Who this session is: ``.member`` (name, role) in team mode, None for one person without a team
    (annotators type their names); ``.refusal`` when the session may not use the dashboard at all.
``acting_as() -> str | None``
    The name every write of this session is kept under (None without a team).
``author_name() -> str``
    The name a tag is kept under: the signed-in person's, else the person at this machine.
``decider(queue, annotator) -> str | None``
    In a decision's callback: the name it is recorded under (the signed-in person in team mode, checked
    again), None when refused (the refusal is flashed).
``refused(action, queue=None) -> str | None`` / ``write_button(label, action, ...)`` / ``write_submit``
    The one check of every control that writes (``cartomap.team.roles.refusal``): a write button is
    drawn disabled with the refusal in one line under it, returns True only when clicked and allowed,
    and its ``on_click`` runs only when allowed.
``gate()``
    Drawn by ``app.py`` before any page: a server listening beyond 127.0.0.1 without a login stops
    here, a person not signed in gets the sign-in button, and the sidebar says who is signed in.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import runpy
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from cartomap.analysis import selection
from cartomap.errors import CartomapError
from cartomap.experiments.picker import PickerRun, default_run, picker_runs
from cartomap.experiments.store import ExperimentStore
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.tasks.support import Work
from cartomap.team.access import Access, Visitor, identify, listen_refusal, provider_problem, proxy_refusal
from cartomap.team.roles import Action, author, load_team, refusal

RUN_KEY = "run_id"  # st.session_state key of the selected run id
#: The address's parameter naming a saved view of the run (the Data map page restores it); a view belongs to
#: its run, so picking another run drops it.
VIEW_PARAM = "view"
_PICKER_KEY = "_run_picker"
_QP_SEEN = "_run_query_param"
_QP_LEFT = "_run_query_param_left"  # (the address this session's selection last moved away from, when)
#: How long after the selection moved away from an address a rerun carrying it is taken for a late copy
#: of the old address, not a request for that run (seconds).
LATE_ADDRESS_S = 30.0
_QP_ERROR = "_run_query_param_error"
_FLASH = "_flash_messages"
_SHOWN = "_flash_messages_shown"  # the messages show_flashes showed in this script run
APP_SCRIPT = Path(__file__).resolve().parents[1] / "app.py"  # the entry point the pages run under


# --------------------------------------------------------------------------- store and run choice
def get_store() -> RunStore:
    """The run store under env CARTOMAP_CACHE (default "cache"), read at every call."""
    return RunStore(os.environ.get("CARTOMAP_CACHE", "cache"))


def get_experiments() -> ExperimentStore:
    """The experiments beside the run store (:func:`get_store`), read at every call."""
    return ExperimentStore(get_store().root)


def _runs(store: RunStore) -> list[Run]:
    try:
        return store.list()
    except (OSError, ValueError):  # a run folder being written or deleted right now
        return []


def _entries(store: RunStore, runs: list[Run]) -> list[PickerRun]:
    """The picker's runs in order with their labels (experiment sub-runs grouped after standalone runs)."""
    try:
        experiments = ExperimentStore(store.root).list()
    except (OSError, ValueError):  # an experiment folder being written or deleted right now
        experiments = []
    return picker_runs(runs, experiments)


def _resolve_run_id(store: RunStore, entries: list[PickerRun]) -> str | None:
    """Apply a new ?run= query parameter, then return a selected id that exists (or a default)."""
    ss = st.session_state
    wanted = st.query_params.get("run")
    if wanted and wanted != ss.get(_QP_SEEN) and not _late_address(wanted):
        ss[_QP_SEEN] = wanted
        try:
            ss[RUN_KEY] = store.get(wanted).id
            ss.pop(_QP_ERROR, None)
        except CartomapError as err:
            ss[_QP_ERROR] = str(err)
    ids = [e.run.id for e in entries]
    if ss.get(RUN_KEY) in ids:
        return ss[RUN_KEY]
    default = default_run(entries)  # the newest with a data map; never a damaged run while others exist
    if default is None:
        ss.pop(RUN_KEY, None)
    else:
        ss[RUN_KEY] = default
    return default


def _late_address(wanted: str) -> bool:
    """Whether ``?run=wanted`` is the address this session's selection just moved away from: a rerun sent
    with the old address (the browser's, or a live panel's poll fired before the new one arrived) would
    otherwise select the old run again (after starting a new run, the page showed the one before it)."""
    left = st.session_state.get(_QP_LEFT)
    return bool(left) and left[0] == wanted and time.time() - float(left[1]) < LATE_ADDRESS_S


def run_state(run: Run) -> State:
    """The run's state, "unknown" while its folder cannot be read (being written or deleted)."""
    try:
        return run.status()["state"]
    except (OSError, ValueError):
        return State.UNKNOWN


def current_run() -> Run | None:
    """The selected run (see the module docstring); draws nothing."""
    store = get_store()
    run_id = _resolve_run_id(store, _entries(store, _runs(store)))
    return Run(store.path_for(run_id)) if run_id else None


#: The Data map page: the one other pages send a selection to (:func:`show_on_map`).
DATA_MAP_PAGE = "pages/data_map.py"
#: The session-state key of the selection (example ids) the Data map page and the 2-D view share.
SELECTED = "selected_ids"


def show_on_map(run_id: str, ids: list[str], focus: str | None = None) -> None:
    """Select ``run_id`` and these examples on the Data map page (focus ``focus``), then go there."""
    select_run(run_id)
    st.session_state[SELECTED] = [str(i) for i in ids]
    if focus is None:
        st.session_state.pop("dm_focus", None)
    else:
        st.session_state["dm_focus"] = str(focus)
    st.switch_page(DATA_MAP_PAGE)


def select_run(run_id: str | None) -> None:
    """Select ``run_id`` (None: clear); the sidebar shows it from the next script run on."""
    if run_id is None:
        st.session_state.pop(RUN_KEY, None)
        return
    before = st.session_state.get(_QP_SEEN)
    if before and before != run_id:
        st.session_state[_QP_LEFT] = (before, time.time())
    st.session_state[RUN_KEY] = run_id
    st.session_state[_QP_SEEN] = run_id
    if st.query_params.get("run") != run_id:
        st.query_params.pop(VIEW_PARAM, None)
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
    entries = _entries(store, runs)
    run_id = _resolve_run_id(store, entries)
    with st.sidebar:
        if st.session_state.get(_QP_ERROR):
            st.warning(escape_markdown(f"?run= in the address: {st.session_state.pop(_QP_ERROR)}"))
        if not runs:
            st.caption("No runs yet: train the demo or start a run on the Train page.")
            return None
        labels = {e.run.id: e.label for e in entries}
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


def through_app() -> None:
    """Run the page through ``app.py``. Every page calls it first, before it draws.

    Streamlit takes a ``pages/`` folder next to the entry point for a legacy multipage app until
    ``st.navigation`` has run once in the process: a server's first visit straight to a page's
    address (``/data_map?run=ID``) would run the page alone, with every file of ``pages/`` (``common``
    too) listed as a page and no run picker. This turns that legacy mode off and runs ``app.py`` in
    its place (its navigation, the run picker, then this page again, with the same widget events
    and query parameters); the page's own run stops there."""
    try:  # an internal of Streamlit (1.67): without it there is nothing to turn off
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return
    if not getattr(PagesManager, "uses_pages_directory", False):
        return
    PagesManager.uses_pages_directory = False
    runpy.run_path(str(APP_SCRIPT), run_name="__main__")
    st.stop()


def applies(run: Run | None, work: Work) -> bool:
    """Whether ``work`` (``cartomap.tasks.support``: what a page or a part of it does) serves ``run``'s task
    kind; where it does not, the page says so in the work's own refusal and returns False."""
    if run is None:
        return True
    reason = work.refusal(run.task_kind)
    if reason:
        st.info(f"{reason}. Run {run.id} is a {run.task_kind.name} run: this does not apply to it.")
    return not reason


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun agreeing with it: ``count(1, "group")`` = "1 group", ``count(2_000, "group")``
    = "2,000 groups" (``plural`` for nouns that do not take an s)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


MISSING = "–"  # how a missing value is shown in a table


def for_display(table: Any, keep: Sequence[str] = (), formats: dict[str, str] | None = None) -> Any:
    """``table`` (a DataFrame) with every missing cell shown as "–" rather than "None" or "NaN":
    a column with missing cells becomes text (numbers written with its printf format in ``formats``,
    else as ``{:g}``), except the columns in ``keep``. Columns without missing cells stay as they are."""
    out = table.copy()
    formats = formats or {}
    for column in out.columns:
        if column in keep:
            continue
        missing = out[column].isna()
        if not missing.any():
            continue
        values = out[column].astype(object)
        fmt = formats.get(column)
        out[column] = [
            MISSING
            if gone
            else ((fmt % v if fmt else f"{v:g}") if isinstance(v, (float, np.floating)) else v)
            for v, gone in zip(values, missing, strict=True)
        ]
    return out


# --------------------------------------------------------------------------- messages and widget state
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]<>$~|])")


def escape_markdown(text: str) -> str:
    """``text`` shown as written: no links, images, emphasis or LaTeX made from data in it."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", str(text))


def show_error(err: BaseException | str) -> None:
    """Report bad input: the library's message (markdown escaped: it may quote the data), never a traceback."""
    st.error(escape_markdown(str(err)))


def new_chart_event(chart_key: str, seen_key: str):
    """The selection event of chart ``chart_key`` when it is new (see the module docstring), else None."""

    event = st.session_state.get(chart_key)
    if event is None or selection.is_empty_event(event):
        st.session_state.pop(seen_key, None)
        return None
    sig = selection.event_signature(event)
    if sig == st.session_state.get(seen_key):
        return None
    st.session_state[seen_key] = sig
    return event


def flash(kind: str, message: str) -> None:
    """Queue a message ('success', 'info', 'warning', 'error') shown by :func:`show_flashes` after a rerun."""
    st.session_state.setdefault(_FLASH, []).append((kind, message))


def show_flashes() -> None:
    """Show the queued messages (once), and remember them for this script run (:func:`flashed`)."""
    shown = st.session_state.pop(_FLASH, [])
    st.session_state[_SHOWN] = [message for _, message in shown]
    for kind, message in shown:
        getattr(st, kind, st.info)(message)


def flashed(message: str) -> bool:
    """Whether ``message`` was just shown by :func:`show_flashes` (a page need not say it twice)."""
    return message in st.session_state.get(_SHOWN, [])


def _copy_to(key: str, widget_key: str, then: Callable[[], Any] | None) -> None:
    st.session_state[key] = st.session_state[widget_key]
    if then is not None:
        then()


def _as_selection(value: Any, default: list, options: Sequence[Any] | None, most: int | None) -> list:
    """A multiselect's stored value as a list of distinct offered items, at most ``most`` of them."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        value = [value]  # a single value (a string is not a list of its characters)
    value = list(dict.fromkeys(value))
    if options is not None:
        opts = list(options)
        value = [v for v in value if v in opts] or [v for v in default if v in opts]
    return value if most is None else value[:most]


def kept(
    key: str,
    default: Any,
    *,
    options: Sequence[Any] | None = None,
    on_change: Callable[[], Any] | None = None,
    max_selections: int | None = None,
) -> dict[str, Any]:
    """Widget kwargs (key, on_change, args) whose value outlives the widget; see the module docstring.

    A multiselect's value (``default`` is a list) is made a list (a single stored value becomes a
    one-item list, repeats are dropped), filtered to ``options`` (``default`` when nothing is left) and
    cut to its first ``max_selections`` items: Streamlit raises on a stored value longer than the
    widget's ``max_selections``. Any other value not in ``options`` is reset to ``default`` (or the
    first option when ``default`` is not one either).
    """
    ss = st.session_state
    value = ss.get(key, default)
    if isinstance(default, list):
        value = _as_selection(value, default, options, max_selections)
    elif options is not None and value not in list(options):
        opts = list(options)
        value = default if default in opts else (opts[0] if opts else None)
    ss[key] = value
    widget_key = f"_kept_{key}"
    ss[widget_key] = value
    return {"key": widget_key, "on_change": _copy_to, "args": (key, widget_key, on_change)}


# --------------------------------------------------------------------------- team mode
def visitor() -> Visitor:
    """Who this session is (``cartomap.team.access.identify`` over this request's headers, address and
    login); a team file that cannot be used refuses the session (its one line), never "no team"."""
    access = Access.from_env()
    try:
        team = load_team(get_store().root)
    except CartomapError as err:
        return Visitor(None, str(err))
    facts: dict[str, Any] = {}
    if access.mode == "header":
        # every value of every header (Streamlit's ``get_all``): a header sent twice is refused, never
        # read as its first value
        facts = {"headers": st.context.headers or {}, "ip": st.context.ip_address}
    elif access.mode == "login":
        logged_in = bool(st.user.get("is_logged_in", False))  # absent while nobody ever signed in
        facts = {"logged_in": logged_in, "claims": st.user.to_dict() if logged_in else None}
    return identify(access, team, **facts)


def acting_as() -> str | None:
    """The name this session's writes are kept under: the signed-in person's, None without a team."""
    member = visitor().member
    return None if member is None else member.name


def author_name() -> str:
    """The name a write that keeps its writer (a tag) is kept under: the signed-in person's in team mode,
    else the person at this machine (``cartomap.team.roles.author``)."""
    return author(visitor().member)


def refused(action: Action, queue: str | None = None) -> str | None:
    """Why this session may not do ``action`` (on review queue or batch ``queue``), one line; None if it may."""
    who = visitor()
    return who.refusal or refusal(who.member, action, queue)


def decider(queue: str, annotator: str) -> str | None:
    """The name a decision on ``queue`` (a review queue or WaNLI batch, by name) is recorded under, asked
    in the decision's callback: in team mode the signed-in person (their role checked again: None, with
    the refusal flashed, when it does not allow it), whatever name the button was drawn with; else
    ``annotator`` (the name typed on the page)."""
    why = refused(Action.DECIDE, queue)
    if why is not None:
        flash("error", escape_markdown(why))
        return None
    member = visitor().member
    return annotator if member is None else member.name


def _guarded(action: Action, queue: str | None, callback: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        why = refused(action, queue)
        if why is not None:  # a click that reached the server anyway: refused again here
            flash("error", escape_markdown(why))
            return None
        return callback(*args, **kwargs)

    return run


def _write_control(
    draw: Callable[..., bool], label: str, action: Action, queue: str | None, where, kwargs
) -> bool:
    why = refused(action, queue)
    if kwargs.get("on_click") is not None:
        kwargs["on_click"] = _guarded(action, queue, kwargs["on_click"])
    disabled = bool(kwargs.pop("disabled", False)) or why is not None
    clicked = draw(label, disabled=disabled, **kwargs)
    if why is not None:
        (where or st).caption(f":material/lock: {escape_markdown(why)}")
    return bool(clicked) and why is None


def write_button(label: str, action: Action, *, queue: str | None = None, where=None, **kwargs: Any) -> bool:
    """``st.button`` (on ``where``, a column or container) for a control that writes (see the module
    docstring): True only when clicked and this session's role allows ``action``."""
    return _write_control((where or st).button, label, action, queue, where, kwargs)


def write_submit(label: str, action: Action, *, queue: str | None = None, **kwargs: Any) -> bool:
    """``st.form_submit_button`` for a form that writes, checked as :func:`write_button` is."""
    return _write_control(st.form_submit_button, label, action, queue, None, kwargs)


def gate() -> None:
    """Team mode's door, drawn by ``app.py`` before any page (see the module docstring)."""
    access = Access.from_env()
    address = st.get_option("server.address")
    why = (listen_refusal(str(address), access) if address else None) or proxy_refusal(access)
    if why is not None:
        st.error(escape_markdown(f"This dashboard is not served: {why}."))
        st.stop()
    who = visitor()
    if who.needs_login:
        st.title("cartomap")
        st.info("Sign in to use this dashboard: your decisions are recorded under your name.")
        if st.button("Sign in", type="primary", key="team_sign_in"):
            sign_in()
        st.stop()
    if who.refusal is not None:
        st.error(escape_markdown(who.refusal))
        st.stop()
    if who.member is None:
        return
    with st.sidebar:
        how = {"login": "Signed in as", "proxy": "Signed in as"}.get(who.member.source, "You are")
        st.caption(escape_markdown(f"{how} {who.member.describe()}"))
        if access.mode == "login" and st.button("Sign out", key="team_sign_out"):
            st.logout()


def sign_in() -> None:
    """``st.login()``, once the provider answers (:func:`cartomap.team.access.provider_problem`): an
    unreachable provider is one line on the page and one in the server's log, not Streamlit's
    "Authentication error" page and a traceback."""
    try:
        auth = st.secrets.get("auth", {})
    except Exception:  # noqa: BLE001 - no secrets file: Streamlit's st.login says what is missing
        auth = {}
    why = provider_problem(auth if isinstance(auth, Mapping) else {})
    if why is not None:
        logging.getLogger("cartomap.dashboard").warning("sign-in refused: %s", why)
        st.error(escape_markdown(f"Signing in is not possible now: {why}."))
        return
    st.login()


#: Takes the keyboard focus off whatever holds it (a select box keeps it after a pick, and typing there
#: would not reach the page's shortcuts). No dataset text: only this fixed script.
_BLUR = (
    "<script>(function(){{var e=document.activeElement;"
    "if(e&&e!==document.body&&e.blur){{e.blur();}}}})();</script><!-- {n} -->"
)
_BLURS = "_focus_releases"


def release_focus() -> None:
    """Take the keyboard focus off the widget that has it (see :data:`_BLUR`), in this script run: each
    call draws a new element, so the browser runs it again."""
    n = st.session_state.get(_BLURS, 0) + 1
    st.session_state[_BLURS] = n
    st.html(_BLUR.format(n=n), unsafe_allow_javascript=True)
