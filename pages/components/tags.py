"""Tags on the Data map page (``cartomap.runs.tags``): tag the selection (one or many examples) or the focused
example, keep only the examples with some tags (the sidebar's "Tags" filter, ``dm_tags``, one of the run's
example filters), and every table and download of the selection carries the examples' tags.

Tagging writes (team mode: ``Action.TAG``, through ``pages.common.write_submit``) and is kept with who tagged
and when. The run's tags are read through the page's cache (``cached.tags``), again whenever they change.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from cartomap.analysis import datamap
from cartomap.errors import CartomapError
from cartomap.runs import tags as run_tags
from cartomap.team.roles import Action
from pages.common import author_name, count, escape_markdown, flash, kept, show_error, write_submit
from pages.components import cached

#: The sidebar's tag filter (a filter of the run's examples: ``map_filters.RUN_FILTER_KEYS``).
TAG_FILTER = "dm_tags"


def _names(table) -> list[str]:
    """The tags of a :func:`cartomap.runs.tags.tags_of` frame, most recently used first."""
    if table.empty:
        return []
    last = table.groupby("tag")["tagged_at"].max().sort_values(ascending=False, kind="stable")
    return [str(t) for t in last.index]


def tag_filter(run, filtered):
    """ "Tags" (drawn where the caller says: the sidebar's filters), offered when the run has tags: only the
    examples with any of those chosen (none chosen: no filter). Returns ``filtered`` with the filter applied
    (its order and index kept)."""
    table = cached.tags(run)
    names = _names(table)
    if not names:
        return filtered
    chosen = st.multiselect(
        "Tags",
        names,
        help="Only the examples with any of these tags (none chosen: every example).",
        **kept(TAG_FILTER, [], options=names),
    )
    if not chosen:
        return filtered
    positions = np.sort(datamap.positions_of(filtered, run_tags.ids_with(table, chosen)))
    return filtered.iloc[positions]


def with_tags(run, table):
    """``table`` (rows with an ``id``) with a column of each row's tags (:data:`cartomap.runs.tags.TAGS_COLUMN`),
    when the run has tags."""
    return run_tags.with_tags(table, cached.tags(run))


def _write(run, add: bool, tag: str, ids: list[str]) -> None:
    """Tag (``add``) or untag ``ids`` with ``tag``; the outcome is flashed and the page drawn again."""
    try:
        if add:
            n = run_tags.add_tag(run, tag, ids, by=author_name(), known=ids)
            had = len(set(ids)) - n
            message = f"Tagged {count(n, 'example')} '{run_tags.clean_tag(tag)}'" + (
                f" ({had:,} had it already)." if had else "."
            )
        else:
            n = run_tags.remove_tag(run, tag, ids, by=author_name())
            message = f"Took the tag '{run_tags.clean_tag(tag)}' off {count(n, 'example')}."
    except CartomapError as err:
        show_error(err)
        return
    flash("success", escape_markdown(message))
    st.rerun()


def _form(run, ids: list[str], key: str, title: str) -> None:
    """A tag name and the two buttons that set it on ``ids`` or take it off them."""
    noun = count(len(ids), "example")
    with st.form(key, clear_on_submit=False, border=False):
        if title:
            st.markdown(title)
        tag = st.text_input(
            "Tag",
            key=f"{key}_name",  # no max_chars: the browser would cut a longer tag without a word
            placeholder="a tag: typo, duplicate, check again …",
            help=f"A word or a few, at most {run_tags.MAX_TAG} characters (no commas); the same tag on many "
            "examples makes them easy to find again.",
        )
        left, right = st.columns(2)
        with left:
            add = write_submit(f"Tag {noun}", Action.TAG, disabled=not ids, key=f"{key}_add")
        with right:
            remove = write_submit(f"Untag {noun}", Action.TAG, disabled=not ids, key=f"{key}_remove")
    if add or remove:
        _write(run, bool(add), tag, ids)


def tag_tools(run, table) -> None:
    """Tag the selection under the filters (``table``'s ids), with the run's tags listed beside."""
    ids = table["id"].astype(str).tolist()
    left, right = st.columns(2)
    with left:
        _form(run, ids, "dm_tag_selection", "**Tag the selection**")
    with right:
        counts = cached.tags(run)
        st.markdown("**This run's tags**")
        if counts.empty:
            st.caption("No tags yet. Tagged examples can be picked with the sidebar's Tags filter.")
            return
        per_tag = counts.groupby("tag").agg(examples=("id", "size"), last=("tagged_at", "max"))
        per_tag = per_tag.sort_values("last", ascending=False).drop(columns="last").reset_index()
        st.dataframe(per_tag, hide_index=True, key="dm_tag_counts", height=min(200, 38 + 35 * len(per_tag)))


def example_tags(run, focus: str | None) -> None:
    """The focused example's tags, and a tag to set on it or take off it."""
    if focus is None:
        return
    mine = cached.tags(run)
    mine = mine[mine["id"].astype(str) == str(focus)] if not mine.empty else mine
    names = ", ".join(sorted(mine["tag"].astype(str))) if not mine.empty else ""
    st.text(f"tags: {names}" if names else "tags: none")
    with st.expander("Tag this example"):
        _form(run, [str(focus)], "dm_tag_focus", "")
