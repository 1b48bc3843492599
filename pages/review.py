"""Review page: WaNLI Stage 4, two annotators per example label, revise or discard it.

Layout only: the review database, aggregation, κ and export are ``cartomap.wanli.review``. Every
click is written to the batch's SQLite database at once (in the button's callback, before the
page reruns), so nothing is lost when the tab closes. Generated text is shown with ``st.text``
and edited in ``st.text_input``: never rendered as HTML or markdown.

Team mode (a team file; people signed in): the annotator is the signed-in person (no name picker),
who reviews only the batches their role allows (``pages.common.refused``).

An annotator can change or undo any of their own reviews ("Your reviews"; Z undoes the last): an undo is
recorded too, nothing is deleted, and their review before it, if any, counts again.

Session state: ``rv_annotator`` (who is reviewing, without a team), ``rv_batch``, ``rv_redo`` (a gen_id the
annotator asked to review again), ``rv_mine`` (the review picked in "Your reviews"), ``rv_revise_<gen_id>``, ``rv_premise_<gen_id>`` and
``rv_hypothesis_<gen_id>`` (a revision being typed; kept across reruns until it is saved).
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.errors import CartomapError
from cartomap.runs import layout
from cartomap.runs.sqlite import database_problem
from cartomap.runs.store import Run
from cartomap.tasks import support
from cartomap.team.roles import Action
from cartomap.wanli.batches import list_batches
from cartomap.wanli.review import ReviewDB, export_bytes, export_frame, name_to_add, open_review
from pages.common import (
    applies,
    current_run,
    decider,
    escape_markdown,
    flash,
    kept,
    refused,
    show_error,
    show_flashes,
    through_app,
    visitor,
)
from pages.components.jobs import demo_or_prompt

through_app()  # a first visit straight to this page's address: run it through app.py

ANNOTATOR = "rv_annotator"
_PICK = "_kept_rv_annotator"  # the picker widget's key
REDO = "rv_redo"
MINE = "rv_mine"
UNDO_SHORTCUT = "Z"
SEED = 0  # seed of the aggregation's random picks (the CLI's --seed)


def _filtered_batches(run: Run) -> list[str]:
    return list_batches(run, having=layout.FILTERED)


def _open(run: Run, batch: str) -> ReviewDB | None:
    try:
        return open_review(run, batch)  # loads the kept items; writes only when they changed
    except (CartomapError, OSError) as err:
        show_error(err)
        return None


def _text_keys(gen_id: str) -> tuple[str, str, str]:
    return f"rv_revise_{gen_id}", f"rv_premise_{gen_id}", f"rv_hypothesis_{gen_id}"


def _typed(key: str) -> str:
    """The value typed in a ``kept`` text input: the widget's own value first (it is newer)."""
    ss = st.session_state
    return str(ss.get(f"_kept_{key}", ss.get(key, "")))


# --------------------------------------------------------------------------- callbacks (run before the rerun)
def _record(db_path: str, annotator: str, gen_id: str, action: str, label: str | None, revise: bool) -> None:
    ss = st.session_state
    annotator = decider(Path(db_path).parent.name, annotator)  # the batch's folder is its name
    if annotator is None:
        return
    mode_key, premise_key, hypothesis_key = _text_keys(gen_id)
    premise = _typed(premise_key) if revise else None
    hypothesis = _typed(hypothesis_key) if revise else None
    try:
        ReviewDB(db_path).record(annotator, gen_id, action, label, premise, hypothesis)
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    except sqlite3.OperationalError as err:  # locked past the timeout, disk full: the action is not saved
        flash("error", escape_markdown(database_problem(err)))
        return
    for key in (mode_key, premise_key, hypothesis_key):
        ss.pop(key, None)
        ss.pop(f"_kept_{key}", None)
    ss.pop(REDO, None)


def _add_annotator(db_path: str) -> None:
    ss = st.session_state
    try:  # Enter in the field and the button do the same, once: a second press with the field cleared is a no-op
        name = name_to_add(ss.get("rv_new_name", ""), ss.get(ANNOTATOR))
        if name is None:
            return
        name = ReviewDB(db_path).add_annotator(name)
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    except sqlite3.OperationalError as err:
        flash("error", escape_markdown(database_problem(err)))
        return
    ss[ANNOTATOR] = name
    ss["rv_new_name"] = ""


def _picked() -> None:
    st.session_state[ANNOTATOR] = st.session_state.get(_PICK)


def _redo(gen_id: str) -> None:
    st.session_state[REDO] = gen_id


def _cancel_redo() -> None:
    st.session_state.pop(REDO, None)


def _undo(db_path: str, annotator: str, gen_id: str) -> None:
    """Undo ``annotator``'s review of ``gen_id`` (recorded; their review before it counts again)."""
    annotator = decider(Path(db_path).parent.name, annotator)  # team mode: only one's own
    if annotator is None:
        return
    try:
        ReviewDB(db_path).undo(annotator, gen_id)
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    except sqlite3.OperationalError as err:
        flash("error", escape_markdown(database_problem(err)))
        return
    if st.session_state.get(REDO) == gen_id:
        st.session_state.pop(REDO, None)
    flash("success", escape_markdown(f"Undid your review of {gen_id}."))


# --------------------------------------------------------------------------- widgets
def annotator_picker(db: ReviewDB, batch: str) -> str | None:
    """Who reviews: in team mode the signed-in person (None, with the one-line reason, when their role
    does not let them review ``batch``), else a name picked or added here."""
    who = visitor()
    if who.team:
        why = refused(Action.DECIDE, batch)
        if why is not None:
            st.info(escape_markdown(why))
            return None
        st.caption(
            escape_markdown(f"Reviewing as {who.member.name}: every review is recorded under your name.")
        )
        return who.member.name
    names = db.annotators()
    current = st.session_state.get(ANNOTATOR)
    if current and current not in names:  # e.g. another batch: register the name here too
        try:
            db.add_annotator(current)
            names = db.annotators()
        except CartomapError:
            current = None
    left, right = st.columns([2, 3])
    if names:
        # no default: a new visitor picks a name (or adds one) before anything is recorded under it
        st.session_state[_PICK] = current if current in names else None
        left.selectbox(
            "Annotator",
            names,
            index=None,
            placeholder="Pick your name",
            key=_PICK,
            on_change=_picked,
            help="Your name: every review is recorded under it.",
        )
    with right.form("rv_add_form", clear_on_submit=False, border=False):
        st.text_input("New annotator", key="rv_new_name", max_chars=80, placeholder="your name")
        st.form_submit_button("Add annotator", on_click=_add_annotator, args=(str(db.path),))
    chosen = st.session_state.get(ANNOTATOR)
    return chosen if chosen in names else None


def review_item(db: ReviewDB, annotator: str, labels: tuple[str, ...]) -> None:
    """The next example for ``annotator`` (or the one asked to redo), with its action buttons."""
    redo = st.session_state.get(REDO)
    item = None
    if redo:
        try:
            item = db.item(redo)
        except CartomapError:
            st.session_state.pop(REDO, None)
    if item is None:
        upcoming = db.next_items(annotator, 1)
        if not upcoming:
            st.success("You have reviewed every example of this batch. Thank you!")
            own_reviews(db, annotator)
            return
        item = upcoming[0]
    gen_id = str(item["gen_id"])
    mode_key, premise_key, hypothesis_key = _text_keys(gen_id)
    if redo:
        st.info(f"Reviewing {escape_markdown(gen_id)} again: your new review replaces the earlier one.")
        st.button("Back to the next example", key="rv_cancel_redo", on_click=_cancel_redo)
    others = item.get("others")
    st.caption(
        escape_markdown(
            f"Example {gen_id}"
            + (f" · reviewed by {others} other annotator(s)" if others is not None else "")
            + ". Pick the label that fits, revise the text (minimal edits) and then pick a label, or discard it."
        )
    )
    with st.container(border=True):
        st.markdown("**Premise**")
        st.text(str(item["premise"]))
        st.markdown("**Hypothesis**")
        st.text(str(item["hypothesis"]))
    revise = st.toggle("Revise the text", **kept(mode_key, False))
    db_path = str(db.path)
    if revise:
        st.text_input("Revised premise", max_chars=2000, **kept(premise_key, str(item["premise"])))
        st.text_input("Revised hypothesis", max_chars=2000, **kept(hypothesis_key, str(item["hypothesis"])))
    cols = st.columns(len(labels) + 1)
    for col, label in zip(cols, labels, strict=False):
        col.button(
            escape_markdown(f"Save revision as {label}" if revise else label),
            key=f"rv_{'revise' if revise else 'label'}_{label}",
            type="primary",
            width="stretch",
            on_click=_record,
            args=(db_path, annotator, gen_id, "revise" if revise else "label", label, revise),
        )
    cols[-1].button(
        "Discard",
        key="rv_discard",
        width="stretch",
        on_click=_record,
        args=(db_path, annotator, gen_id, "discard", None, False),
        help="Not a usable example (nonsense, offensive, not a premise and a hypothesis, …)",
    )
    own_reviews(db, annotator)


def _what(row: dict) -> str:
    return str(row["action"]) + (f" as {row['label']}" if isinstance(row.get("label"), str) else "")


def own_reviews(db: ReviewDB, annotator: str) -> None:
    """The annotator's last review with Change it / Undo (Z), and every one of their reviews to change or
    undo."""
    mine = db.latest(annotator, None)
    if mine.empty:
        return
    db_path = str(db.path)
    last = mine.iloc[0].to_dict()
    left, mid, right = st.columns([4, 1, 1])
    left.caption(escape_markdown(f"Your last review: {last['gen_id']} · {_what(last)}"))
    mid.button("Change it", key="rv_redo_button", on_click=_redo, args=(str(last["gen_id"]),))
    right.button(
        "Undo",
        key="rv_undo_last",
        shortcut=UNDO_SHORTCUT,
        help="Undo your last review (Z): the example comes back to you",
        on_click=_undo,
        args=(db_path, annotator, str(last["gen_id"])),
    )
    with st.expander(f"Your reviews ({len(mine):,}): change or undo any of them"):
        rows = {str(r["gen_id"]): r for r in mine.to_dict("records")}
        ids = list(rows)
        picked = st.selectbox(
            "Review", ids, format_func=lambda i: f"{i} · {_what(rows[i])}", **kept(MINE, ids[0], options=ids)
        )
        left, right = st.columns(2)
        left.button("Change it", key="rv_redo_mine", on_click=_redo, args=(picked,), width="stretch")
        right.button(
            "Undo it", key="rv_undo_mine", on_click=_undo, args=(db_path, annotator, picked), width="stretch"
        )


def summary(db: ReviewDB, batch: str) -> None:
    st.subheader("Progress, agreement and export")
    progress = db.progress()
    cols = st.columns(4)
    cols[0].metric("Examples", f"{progress['items']:,}")
    cols[1].metric("Two reviews", f"{progress['complete']:,}")
    cols[2].metric("One review", f"{progress['one_review']:,}")
    cols[3].metric("Not reviewed", f"{progress['unreviewed']:,}")
    if progress["by_annotator"]:
        st.dataframe(
            pd.DataFrame(
                {
                    "annotator": list(progress["by_annotator"]),
                    "reviews": list(progress["by_annotator"].values()),
                }
            ),
            hide_index=True,
            key="rv_by_annotator",
        )
    aggregated = db.aggregate(seed=SEED)
    kappa, pairs = db.kappa()
    left, right = st.columns(2)
    left.metric(
        "Cohen's κ",
        "–" if math.isnan(kappa) else f"{kappa:.3f}",
        help="On the examples both annotators labelled without revision (WaNLI: 0.60).",
    )
    right.metric("Pairs for κ", f"{pairs:,}")
    outcome = aggregated.groupby(["status", "rule"]).size().rename("examples").reset_index()
    st.dataframe(outcome, hide_index=True, key="rv_outcome")
    st.caption(
        "Aggregation: discarded if either discards; both revised → one revision at random; one revised → "
        "the revision only if it changes punctuation or case, else the original text with the other "
        "annotator's label; two different labels → one at random (seeded)."
    )
    frame = export_frame(aggregated)
    if frame.empty:
        st.caption("Nothing to export yet: an example is exported once two annotators reviewed it.")
        return
    left, right = st.columns(2)
    left.download_button(
        f"Download {len(frame):,} examples (JSONL)",
        export_bytes(frame, "jsonl"),
        file_name=f"{batch}_reviewed.jsonl",
        mime="application/jsonl",
        key="rv_download_jsonl",
    )
    right.download_button(
        f"Download {len(frame):,} examples (CSV)",
        export_bytes(frame, "csv"),
        file_name=f"{batch}_reviewed.csv",
        mime="text/csv",
        key="rv_download_csv",
    )
    st.caption("The JSONL trains directly: `cartomap train --data <file>.jsonl`.")


# --------------------------------------------------------------------------- page
def main() -> None:
    """The page; a review database that cannot be used right now (locked past the timeout, a full disk)
    is one clear message, never a traceback."""
    try:
        page()
    except sqlite3.OperationalError as err:
        show_error(database_problem(err))


def page() -> None:
    st.title("Review generated examples")
    show_flashes()
    run = demo_or_prompt(current_run())
    if run is None:
        st.stop()
    if not applies(run, support.WANLI):
        st.stop()
    batches = _filtered_batches(run)
    if not batches:
        st.info("No filtered batch to review yet: filter a generated batch first (WaNLI Stage 3).")
        st.stop()
    batch = st.selectbox("Batch", batches, **kept("rv_batch", batches[0], options=batches))
    db = _open(run, batch)
    if db is None:
        st.stop()
    annotator = annotator_picker(db, batch)
    if annotator is None:
        if not visitor().team:
            st.info("Pick your name, or add it as a new annotator, to start reviewing.")
    else:
        mine = db.progress()["by_annotator"].get(annotator, 0)
        total = max(len(db.items()), 1)
        st.progress(
            min(mine / total, 1.0), text=escape_markdown(f"{annotator}: {mine:,} of {total:,} reviewed")
        )
        review_item(db, annotator, db.label_names or run.label_names)
    st.divider()
    summary(db, batch)


main()
