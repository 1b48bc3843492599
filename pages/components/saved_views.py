"""Saved views on the Data map page (``cartomap.runs.views``): how the map is set (filters, colour, axis and
region rule, points drawn, the epoch slider, split by gold label, the layers drawn over it, a token or
multi-label run's "Map of"), the selection and the focused example, under a name; listed, restored and
deleted in the sidebar's "Saved views", and in the page's address: ``?view=NAME`` (with ``?run=ID``)
restores it, so a view is shared as a link.

Which settings a view keeps is asked of the components that draw them (their session keys:
``map_filters.FILTER_KEYS``, ``map_layers.view_keys``, ``token_map.VIEW_KEYS``, ``label_map.view_key``,
``seeds.mean_key``): a setting added there is kept by views too. A view is restored before any widget is
drawn (a button's callback, or the address read first thing on the page): every setting the view does not
hold goes back to its default, and a value a run no longer offers is reset by the widget that draws it.
``_dm_view_seen`` is the (run, view) of the address already applied, so the address restores a view once
per session, not on every rerun.
"""

from __future__ import annotations

import streamlit as st

from cartomap.errors import CartomapError
from cartomap.runs import views as run_views
from cartomap.team.roles import Action
from pages.common import (
    SELECTED,
    VIEW_PARAM,
    acting_as,
    count,
    escape_markdown,
    flash,
    show_error,
    write_button,
    write_submit,
)
from pages.components import label_map, map_filters, map_layers, seeds, token_map

#: The query parameter that names a view of the run in the page's address.
PARAM = VIEW_PARAM
_SEEN = "_dm_view_seen"
FOCUS = "dm_focus"


def view_keys(run) -> dict[str, str]:
    """{the name a view keeps a setting under: its session key}, asked of the components that draw them."""
    keys = {key.removeprefix("dm_"): key for key in map_filters.FILTER_KEYS}
    keys.update(map_layers.view_keys(run))
    keys.update(token_map.VIEW_KEYS)
    keys["label_view"] = label_map.view_key(run)
    keys["seeds_mean"] = seeds.mean_key(run)
    return keys


def current_settings(run) -> dict:
    """The page's settings as they are now (those set in this session; the rest are at their defaults)."""
    ss = st.session_state
    out = {}
    for name, key in view_keys(run).items():
        value = ss.get(key)
        if value is None:
            continue
        out[name] = list(value) if isinstance(value, tuple) else value
    return run_views.check_settings(out)


def _as_widget_value(value):
    """A stored value as its widget takes it: a range slider's (lo, hi) is a tuple (JSON keeps a list)."""
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        return tuple(value)
    return value


def apply_view(run, view: dict) -> None:
    """Set the page to ``view``: its settings (every other one back to its default), selection and focus.
    Call before the page draws its widgets (a callback, or first thing in the script)."""
    ss = st.session_state
    map_filters.filters_follow_run(run.id)  # the filters set here are this run's
    keys = view_keys(run)
    for key in keys.values():  # back to the default (``kept`` sets each widget from its key when drawn)
        ss.pop(key, None)
    for name, value in (view.get("settings") or {}).items():
        if name in keys:
            ss[keys[name]] = _as_widget_value(value)
    ss[SELECTED] = [str(i) for i in view.get("selection") or []]
    if view.get("focus"):
        ss[FOCUS] = str(view["focus"])
    else:
        ss.pop(FOCUS, None)


def _link(run, name: str) -> str:
    return run_views.address(run.id, name, PARAM)


def _restore(run, name: str) -> None:
    """The "Restore" button's callback."""
    try:
        view = run_views.load_view(run, name)
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    apply_view(run, view)
    st.query_params[PARAM] = view["name"]
    st.session_state[_SEEN] = (run.id, view["name"])
    flash("success", escape_markdown(f"Restored the view '{view['name']}'."))


def _delete(run, name: str) -> None:
    """The "Delete" button's callback (team mode: checked by ``write_button``)."""
    try:
        run_views.delete_view(run, name)
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    if st.query_params.get(PARAM) == name:
        del st.query_params[PARAM]
    flash("success", escape_markdown(f"Deleted the view '{name}'."))


def restore_from_address(run) -> None:
    """``?view=NAME`` in the address, new to this session for this run: restore that view of ``run`` (one line
    and the parameter dropped when it has none). Call first thing on the page, before any widget."""
    wanted = st.query_params.get(PARAM)
    if not wanted or st.session_state.get(_SEEN) == (run.id, wanted):
        return
    st.session_state[_SEEN] = (run.id, wanted)
    try:
        view = run_views.load_view(run, wanted)
    except CartomapError as err:
        show_error(f"?{PARAM}= in the address: {err}")
        del st.query_params[PARAM]
        return
    apply_view(run, view)
    st.caption(escape_markdown(f"The view '{view['name']}' of run {run.id}, as saved."))


def views_panel(run) -> None:
    """Sidebar, "Saved views": the run's views (restore, delete, its link) and the current view saved under a
    name (team mode: ``Action.VIEW``)."""
    try:
        saved = run_views.list_views(run)
    except OSError as err:
        show_error(f"{run.views_dir}: {err}")
        return
    usable = [v for v in saved if "problem" not in v]
    with st.sidebar.expander(f"Saved views ({len(usable)})" if usable else "Saved views"):
        for broken in (v for v in saved if "problem" in v):  # named, and deletable: never in the way
            st.caption(escape_markdown(broken["problem"]))
            write_button(
                f"Delete the damaged view '{broken['name']}'",
                Action.VIEW,
                key=f"dm_view_delete_damaged_{broken['name']}",
                on_click=_delete,
                args=(run, broken["name"]),
            )
        if usable:
            names = [v["name"] for v in usable]
            current = st.query_params.get(PARAM)
            pick = st.selectbox(
                "View",
                names,
                index=names.index(current) if current in names else 0,
                key="dm_view_pick",
                help="Restore: the map's settings, selection and focused example as they were saved.",
            )
            left, right = st.columns(2)
            left.button("Restore", key="dm_view_restore", on_click=_restore, args=(run, pick), type="primary")
            write_button(
                "Delete", Action.VIEW, where=right, key="dm_view_delete", on_click=_delete, args=(run, pick)
            )
            view = next(v for v in usable if v["name"] == pick)
            st.caption(escape_markdown(run_views.describe(view)) + f" · link: `{_link(run, pick)}`")
        selected = len(st.session_state.get(SELECTED) or [])
        with st.form("dm_view_form", clear_on_submit=False, border=False):
            name = st.text_input("View name", key="dm_view_name", max_chars=run_views.MAX_NAME)
            replace = st.checkbox("Replace a view of that name", key="dm_view_replace")
            submitted = write_submit(
                f"Save this view ({count(selected, 'example')} selected)" if selected else "Save this view",
                Action.VIEW,
            )
    if submitted:
        try:
            view = run_views.save_view(
                run,
                name,
                current_settings(run),
                st.session_state.get(SELECTED) or [],
                focus=st.session_state.get(FOCUS),
                overwrite=replace,
                by=acting_as(),
            )
        except CartomapError as err:
            show_error(err)
            return
        st.query_params[PARAM] = view["name"]
        st.session_state[_SEEN] = (run.id, view["name"])
        flash(
            "success",
            escape_markdown(f"Saved the view '{view['name']}': its link is {_link(run, view['name'])}."),
        )
        st.rerun()
