"""Saved groups on the Data map page: the selection saved as a named group of the run, the run's groups
listed, and a group shown on the map as the selection (``cartomap.runs.groups``).
"""

from __future__ import annotations

import streamlit as st

from cartomap.errors import CartomapError
from cartomap.runs.groups import count_table_groups, list_groups, save_group
from cartomap.team.roles import Action
from pages.common import (
    SELECTED,
    acting_as,
    count,
    escape_markdown,
    write_submit,
)


def group_tools(run, table) -> None:
    ids = table["id"].astype(str).tolist()
    left, right = st.columns(2)
    with left, st.form("dm_group_form", clear_on_submit=False):
        st.markdown("**Save the selection as a group**")
        name = st.text_input("Group name", key="dm_group_name", max_chars=80)
        replace = st.checkbox("Replace a group of that name", key="dm_group_replace")
        submitted = write_submit(f"Save {count(len(ids), 'example')}", Action.GROUP, disabled=not ids)
    if submitted:
        try:
            save_group(run, name, ids, source="data map", overwrite=replace, by=acting_as())
        except CartomapError as err:
            left.error(escape_markdown(str(err)))
        else:
            left.success(escape_markdown(f"Saved group '{name}' ({count(len(ids), 'example')})."))
    with right:
        groups = list_groups(run, include_table=False)  # automatic ones: 100k+ on a full-size run
        st.markdown("**Saved groups**")
        n_auto = count_table_groups(run)
        if n_auto:
            st.caption(
                f"{count(n_auto, 'automatic group')} (WaNLI seeds and neighbours) {'is' if n_auto == 1 else 'are'} on the Prompts page."
            )
        if not groups:
            st.caption("No groups yet.")
            return
        st.dataframe(
            [
                {"name": g.get("name"), "examples": len(g.get("ids", [])), "source": g.get("source", "")}
                for g in groups
            ],
            hide_index=True,
            height=min(200, 38 + 35 * len(groups)),
        )
        names = [g.get("name") for g in groups]
        pick = st.selectbox("Group", names, key="dm_group_pick")
        if st.button("Show this group on the map", key="dm_group_show"):
            group = next(g for g in groups if g.get("name") == pick)
            st.session_state[SELECTED] = [str(i) for i in group.get("ids", [])]
            st.session_state.pop("dm_focus", None)
            st.rerun()
