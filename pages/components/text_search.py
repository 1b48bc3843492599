"""The Data map page's text search: the examples whose texts hold a piece of text (or match a regular
expression), case ignored, become the selection, the one the lasso sets (``selected_ids``): ringed on the
map, drawn in its histograms and listed in the selection table (``cartomap.analysis.search``).

The search looks in every example of the map, whatever the filters; the selection table then lists the
matches under the filters, as for any selection. ``_dm_search`` keeps the last search (query, mode, how many
matched, the matches' digest), so its caption stays while the selection is its matches.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from cartomap.analysis import search
from cartomap.errors import CartomapError
from pages.common import SELECTED, count, escape_markdown, show_error

FORM = "dm_search"
QUERY = "dm_search_query"
REGEX = "dm_search_regex"
_LAST = "_dm_search"


def _digest(ids) -> str:
    return hashlib.sha1("\n".join(map(str, ids)).encode("utf-8")).hexdigest()[:12]


def search_box(frame) -> None:
    """A search field, "Regular expression" and "Search" (Enter searches too), in one row; a search
    replaces the selection with its matches in ``frame`` (the map's examples) and drops the focus. A query
    that cannot be searched (a bad regular expression, ...) is one line under it; the selection stays."""
    with st.form(FORM, border=False, enter_to_submit=True):
        left, middle, right = st.columns([6, 2, 1], vertical_alignment="bottom")
        query = left.text_input(
            "Search the texts",
            key=QUERY,
            max_chars=search.MAX_QUERY,
            placeholder="words in the examples' texts (case ignored)",
            help="Selects every example of the map whose texts hold this text; then see them ringed on the "
            "map and listed under it. With Regular expression: RE2 syntax (Python's without look-arounds).",
        )
        regex = middle.checkbox("Regular expression", key=REGEX)
        submitted = right.form_submit_button("Search", key="dm_search_go")
    if submitted:
        mode = search.REGEX if regex else search.SUBSTRING
        try:
            ids = search.search_ids(frame, query, mode)
        except CartomapError as err:
            show_error(err)
            return
        st.session_state[SELECTED] = ids
        st.session_state.pop("dm_focus", None)
        st.session_state[_LAST] = (query, mode, len(ids), _digest(ids))
    last = st.session_state.get(_LAST)
    if last and last[3] == _digest(st.session_state.get(SELECTED) or []):
        query, mode, n, _ = last
        one = n == 1 or n == 0
        verb = ("matches" if one else "match") if mode == search.REGEX else ("holds" if one else "hold")
        what = f"{verb} the regular expression" if mode == search.REGEX else verb
        text = (
            f"{count(n, 'example')} of {len(frame):,} {what} “{query}”: {'it is' if n == 1 else 'they are'} the selection."
            if n
            else f"No example {what} “{query}”."
        )
        st.caption(escape_markdown(text))
