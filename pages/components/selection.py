"""The Data map page's selection: how many examples are selected, the selection table, the focused
example's panel and the downloads.

Wherever the selection was made (lasso, box, a table row, a group, the Neighbours page's 2-D view) it is
``selected_ids`` (``pages.common.SELECTED``) and listed here; "Clear selection" empties it. A click on a
row of the table focuses that example (``dm_focus``): its texts, probability by epoch (one line per seed
over the mean of seeds), votes and, when the run has embeddings, its nearest same-label neighbours.
"""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from cartomap.analysis import datamap, figures, map_files, map_points, seed_maps, tables
from cartomap.analysis import multilabel as label_views
from cartomap.config import Source
from cartomap.errors import CartomapError
from cartomap.runs import tags as run_tags
from cartomap.scores import ambiguity
from cartomap.tasks import registry as task_kinds
from pages.common import SELECTED, escape_markdown, show_error
from pages.components import cached, tags, token_map
from pages.components.embeddings import WHAT_FOR, offer_embeddings

TABLE_HEIGHT = 360
TABLE_MAX_ROWS = 5_000  # rows sent to the browser; groups and downloads hold the whole selection
TAGS = run_tags.TAGS_COLUMN
#: Why the focused example's panel offers the run's embeddings.
NEIGHBOURS_NEED = (
    "The focused example's nearest neighbours (listed here and drawn on the map: ★ it, ◆/◇ its neighbours) "
    "need the run's embeddings. " + WHAT_FOR
)


def clear_selection() -> None:
    """Empty the selection and drop the focus ("Clear selection")."""
    st.session_state[SELECTED] = []
    st.session_state.pop("dm_focus", None)


def _digest(ids) -> str:
    return hashlib.sha1("\n".join(ids).encode("utf-8")).hexdigest()[:10]


def table_key(table) -> str:
    """The selection table's widget key: one per selection, so a new selection starts without a row clicked."""
    return f"dm_table_{_digest(table['id'].tolist())}"


def focused_id(table) -> str | None:
    """The example the panel under the table focuses (:func:`show_trajectory`), known before the map is
    drawn: the row just clicked in the selection table (its event is in session state before the table is
    drawn again), else the kept focus, or the only row of a one-row table; None when none is shown."""
    shown = table.head(TABLE_MAX_ROWS)
    if shown.empty:
        return None
    event = st.session_state.get(table_key(table))
    selection = (event.get("selection") if hasattr(event, "get") else getattr(event, "selection", None)) or {}
    rows = list(selection.get("rows") or []) if hasattr(selection, "get") else []
    focus = (
        str(shown["id"].iloc[rows[0]]) if rows and rows[0] < len(shown) else st.session_state.get("dm_focus")
    )
    if len(shown) == 1:
        focus = str(shown["id"].iloc[0])
    return focus if focus and focus in set(shown["id"]) else None


def selection_dataframe(shown, key: str):
    """The selection as a table, one row clickable (it focuses that example below): label, prediction,
    confidence, variability and region first, then the examples' tags (when the run has some), the texts
    (shown in full in the example's panel) and the rest."""
    columns = tables.display_columns(shown)
    if TAGS in columns:  # beside where the example sits, before the long texts
        columns.remove(TAGS)
        columns.insert(len([c for c in tables.LEADING_COLUMNS if c in columns]), TAGS)
    return st.dataframe(
        shown[columns],
        key=key,
        on_select="rerun",
        selection_mode="single-row",
        hide_index=True,
        height=min(TABLE_HEIGHT, 38 + 35 * len(shown)),
        column_config={
            "id": st.column_config.TextColumn("id", pinned=True),  # stays in sight beside long texts
            "gold": st.column_config.TextColumn("label"),
            "predicted": st.column_config.TextColumn("prediction"),
            "confidence": st.column_config.NumberColumn(format="%.3f"),
            **{c: st.column_config.NumberColumn(format="%.3f") for c in datamap.number_columns(shown)},
            "correctness": st.column_config.NumberColumn(format="%.2f"),
            TAGS: st.column_config.TextColumn("tags"),
        },
    )


def show_trajectory(run, table, table_event, seeds=None, per_label: bool = False) -> None:
    """The focused example's texts and metrics, and its probability by epoch (one line per seed of
    ``seeds``, {seed: run}, when the map is the mean over seeds; with ``per_label``, a multi-label run's
    point, the probability of its label: a combined point's worst label)."""
    rows = list(table_event.selection.rows) if table_event is not None else []
    if rows and rows[0] < len(table):
        st.session_state["dm_focus"] = str(table["id"].iloc[rows[0]])
    focus = st.session_state.get("dm_focus")
    if len(table) == 1:
        focus = str(table["id"].iloc[0])
    if not focus or focus not in set(table["id"]):
        st.caption("Click a row to see how the model's belief in that example moved over the epochs.")
        return
    row = table.loc[table["id"] == focus].iloc[0]
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**The focused example**")
        st.text(f"id: {focus}\ngold: {row['gold']} · predicted: {row['predicted']}")
        for col in task_kinds.text_fields():
            if col in table.columns:
                st.text(f"{col}: {row[col]}")
        axis = datamap.axis_of(table)
        on_axis = (
            ""
            if axis == ambiguity.VARIABILITY or axis not in row
            else f"{map_points.axis_title(axis)} {row[axis]:.3f} · "
        )
        st.text(
            f"confidence {row['confidence']:.3f} · {on_axis}variability {row['variability']:.3f} · "
            f"correctness {row['correctness']:.2f} · region {row['region']}"
        )
    votes = [c for c in table.columns if str(c).startswith("votes_")]
    if votes:
        with left:
            st.markdown("**Annotators' votes**")
            st.caption(
                f"{int(row['human_n'])} votes · majority share {row['human_majority_share']:.2f} · "
                f"entropy {row['human_entropy']:.3f} bits · {row['agreement']}"
                if "agreement" in table.columns
                else ""
            )
            st.dataframe(
                {"label": [c.removeprefix("votes_") for c in votes], "votes": [int(row[c]) for c in votes]},
                hide_index=True,
                key="dm_votes",
            )
    if seeds:
        left.text(
            f"region in each seed: {row.get('region_votes', '')} agree on {row.get('region_majority', '')}"
        )
    with right:
        source = run.status().get("metrics_source") or Source.TRAIN
        try:
            if seeds:
                st.markdown(f"**Probability of the gold label by epoch, in each of {len(seeds)} seeds**")
                fig = figures.seed_trajectory_figure(
                    seed_maps.seed_trajectories(seeds, focus, source), gold=str(row["gold"])
                )
            elif per_label:
                # a combined point: its worst label where the map shown has it (after k recordings, maybe another)
                worst = row["worst_label"] if "worst_label" in table.columns else None
                frame = label_views.unit_trajectory(run, focus, source, worst_label=worst)
                state = "present" if frame.attrs["present"] else "absent"
                st.markdown(f"**Probability of label {escape_markdown(frame.attrs['label'])} by epoch**")
                fig = figures.trajectory_figure(frame, gold=state)
            else:
                st.markdown("**Probability by epoch**")
                fig = figures.trajectory_figure(
                    datamap.gold_trajectory(run, focus, source), gold=str(row["gold"])
                )
        except CartomapError as err:
            st.warning(escape_markdown(str(err)))
            return
        st.plotly_chart(fig, key="dm_trajectory", config={"displaylogo": False})


def shown_focus(table) -> str | None:
    """The example the panel under the table shows: the kept focus, or the only row of a one-row table;
    None when it is not in ``table``."""
    focus = st.session_state.get("dm_focus")
    if len(table) == 1:
        focus = str(table["id"].iloc[0])
    return focus if focus and focus in set(table["id"]) else None


def focus_neighbours(run, table) -> None:
    """The focused example's nearest same-label neighbours (a token run's focused word: the nearest words of
    its gold tag), when the run's embeddings are computed; else
    what they are for and "Compute embeddings" (``cartomap embed RUN`` as a background job, its panel
    following it; ``pages.components.embeddings``). A table (the texts are data)."""
    focus = shown_focus(table)
    kind = run.task_kind
    words = kind.unit.sentences and datamap.SENTENCE in table.columns  # a token run's map of words
    if focus is None or not (kind.unit.per_example or words):  # words are embedded, sentences are not
        return
    if not run.embeddings_path.exists():
        st.markdown("**Nearest neighbours with the same label**")
        offer_embeddings(run, key="dm_embed", why=NEIGHBOURS_NEED)
        return
    from cartomap.analysis.neighbours import labelled_by_name, neighbour_group

    try:
        embeddings = cached.embeddings(run)
        group = neighbour_group(run, focus, embeddings=embeddings)
    except CartomapError as err:
        show_error(err)
        return
    st.markdown("**Nearest neighbours with the same label**")
    st.dataframe(labelled_by_name(group), hide_index=True, key="dm_neighbours")


def selection_section(run, frame, filtered, table, selected, seeds=None, per_label: bool = False) -> None:
    """How many examples are selected (and how many of them are not this run's), "Clear selection", the
    selection table (the first :data:`TABLE_MAX_ROWS` of ``table``, the selection under the filters) and
    under it the focused example (:func:`show_trajectory`), a token run's focused word's sentence and the
    focused example's nearest neighbours (:func:`focus_neighbours`)."""
    # how many selected ids are examples of this run: the table's count when no filter is on (no second table)
    if not selected:
        known = 0
    elif len(filtered) == len(frame):
        known = len(table)
    else:
        known = len(datamap.positions_of(frame, pd.unique(pd.Series(selected, dtype=object))))
    head, clear = st.columns([4, 1])
    head.markdown(f"**{len(selected):,} selected** · {len(table):,} shown under the current filters")
    if known < len(selected):
        head.caption(f"{len(selected) - known:,} selected ids are not examples of this run.")
    clear.button("Clear selection", on_click=clear_selection, key="dm_clear", disabled=not selected)
    if table.empty:
        st.info("Nothing selected (or nothing of the selection matches the filters).")
        return
    shown = tags.with_tags(run, tables.selection_table(filtered, table["id"].head(TABLE_MAX_ROWS).tolist()))
    if len(shown) < len(table):
        st.caption(
            f"The table lists the first {len(shown):,} of {len(table):,}; saving and downloading take all of them."
        )
    table_event = selection_dataframe(shown, key=table_key(table))
    show_trajectory(run, shown, table_event, seeds, per_label=per_label)
    tags.example_tags(run, shown_focus(shown))
    if token_map.is_token_run(run):  # the focused word's sentence, tag by tag
        token_map.word_level_sentence(run, frame, shown)
    if not per_label:
        focus_neighbours(run, shown)


def download_table(run, filtered, selected):
    """The selection as downloaded: every selected row under the filters, with its texts and its tags."""
    return tags.with_tags(run, tables.selection_table(filtered, selected))


def downloads(run, filtered, selected, fig) -> None:
    """The selection (every row under the filters, with its texts and tags: made when a button is clicked)
    and the map as files."""
    stem = f"cartomap-{run.id}"

    def table():
        return download_table(run, filtered, selected)

    empty = not selected or filtered.empty
    cols = st.columns(4)
    cols[0].download_button(
        "Selection as CSV",
        lambda: tables.to_csv_bytes(table()),
        f"{stem}-selection.csv",
        "text/csv",
        key="dm_dl_csv",
        disabled=empty,
        on_click="ignore",
    )
    cols[1].download_button(
        "Selection as JSONL",
        lambda: tables.to_jsonl_bytes(table()),
        f"{stem}-selection.jsonl",
        "application/jsonl",
        key="dm_dl_jsonl",
        disabled=empty,
        on_click="ignore",
    )
    cols[2].download_button(
        "Map as HTML",
        lambda: map_files.map_html_bytes(fig),
        f"{stem}-map.html",
        "text/html",
        key="dm_dl_html",
        on_click="ignore",
    )
    cols[3].download_button(
        "Map as PNG",
        lambda: map_files.map_png_bytes(filtered, title=run.id),
        f"{stem}-map.png",
        "image/png",
        key="dm_dl_png",
        on_click="ignore",
        disabled=filtered.empty,
    )
