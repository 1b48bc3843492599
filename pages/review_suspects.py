"""Review suspects: several annotators decide keep / relabel / remove / unsure on a review queue of
suspected label errors; progress, agreement and the corrected set.

Layout only: queues, decisions, aggregation and exports are ``cartomap.curation``. Every click is
written to the queue's SQLite store at once (in the button's callback, before the page reruns).
Dataset text is shown with ``st.text`` and in dataframes, never as markdown or HTML. The decision
buttons have keyboard shortcuts (Streamlit's ``shortcut``): K keep, X remove, U unsure, 1-9 relabel to
that class, Z undo the last decision (R and C are reserved by Streamlit); the key of the example's own
class records nothing and says so. An annotator can change or undo
any of their own decisions ("Your decisions"); an undo is recorded too, nothing is deleted. A token run's
queue holds words: each card is a tag to review, the word marked in its sentence (relabel = another tag);
a queue by sentence or by entity span shows the whole sentence and fixes several words' tags in one
decision (``pages/components/review_sentence.py``).

Team mode (a team file; people signed in): the annotator is the signed-in person, never a typed name;
they decide only on the queues their role allows, and the controls that write (a new queue, imports,
the corrected set, the retrain) are an owner's (``pages.common.write_button``).

Picking a queue takes the keyboard focus off the queue box (``pages.common.release_focus``), so the keys
work at once; the queue picked first is the newest this person may decide on.

Session state: ``rs_queue``, ``rs_queue_picked`` (a queue was just picked), ``rs_annotator`` (who is deciding, without a team), ``rs_redo`` (an item the annotator
asked to decide again), ``rs_note`` (the note being typed), ``rs_mine`` (the decision picked in "Your
decisions"), ``rs_same_label`` (the example whose own class's key was just pressed: its feedback),
``rs_new_guidelines`` (a new queue's guidelines being typed), ``rs_guidelines_<queue>`` (the guidelines being
edited). A queue's guidelines show with every card; whoever made the queue edits them.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.curation import queue
from cartomap.errors import CartomapError
from cartomap.runs.sqlite import database_problem
from cartomap.runs.store import Run
from cartomap.tasks import registry as task_kinds
from cartomap.team.roles import Action
from pages.common import (
    current_run,
    decider,
    escape_markdown,
    flash,
    flashed,
    kept,
    refused,
    release_focus,
    show_error,
    show_flashes,
    through_app,
    visitor,
)
from pages.components.jobs import demo_or_prompt
from pages.components.review_queues import QUEUE, new_queue_form
from pages.components.review_results import guidelines_editor, summary
from pages.components.review_sentence import sentence_card

through_app()  # a first visit straight to this page's address: run it through app.py

ANNOTATOR = "rs_annotator"
REDO = "rs_redo"
NOTE = "rs_note"
SHORTCUTS = {"keep": "K", "remove": "X", "unsure": "U"}
UNDO_SHORTCUT = "Z"
MINE = "rs_mine"
SAME_LABEL = "rs_same_label"
PICKED = "rs_queue_picked"


# --------------------------------------------------------------------------- callbacks (run before the rerun)
def _record(db_path: str, annotator: str, item_id: str, decision: str, label: str | None) -> None:
    ss = st.session_state
    annotator = decider(Path(db_path).parent.name, annotator)  # the queue's folder is its name
    if annotator is None:
        return
    note = str(ss.get(f"_kept_{NOTE}", ss.get(NOTE, "")) or "")
    try:
        queue.QueueDB(db_path).record(annotator, item_id, decision, label, note, origin="app")
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    except sqlite3.OperationalError as err:  # locked past every retry, disk full: not saved
        flash("error", escape_markdown(database_problem(err)))
        return
    ss[NOTE] = ""
    ss.pop(f"_kept_{NOTE}", None)
    ss.pop(REDO, None)


def _queue_picked() -> None:
    """A queue was picked: the page takes the focus off the queue box when it draws again."""
    st.session_state[PICKED] = True


def _same_label(item_id: str) -> None:
    """The key (or button) of the example's own class: nothing to record; the card says so."""
    st.session_state[SAME_LABEL] = item_id


def _redo(item_id: str) -> None:
    st.session_state[REDO] = item_id


def _cancel_redo() -> None:
    st.session_state.pop(REDO, None)


def _undo(db_path: str, annotator: str, item_id: str) -> None:
    """Undo ``annotator``'s decision on ``item_id`` (recorded; their decision before it counts again)."""
    ss = st.session_state
    annotator = decider(Path(db_path).parent.name, annotator)  # team mode: only one's own
    if annotator is None:
        return
    try:
        queue.QueueDB(db_path).undo(annotator, item_id)
    except CartomapError as err:
        flash("error", escape_markdown(str(err)))
        return
    except sqlite3.OperationalError as err:
        flash("error", escape_markdown(database_problem(err)))
        return
    if ss.get(REDO) == item_id:
        ss.pop(REDO, None)
    flash("success", escape_markdown(f"Undid your decision on {item_id}."))


# --------------------------------------------------------------------------- the item card
def _item_to_decide(items: pd.DataFrame, db: queue.QueueDB, annotator: str) -> str | None:
    """The item the annotator decides now: the one being decided again (a redo still in ``items``), else
    the queue's next for them; None (and a thank-you with their decisions) when none is left."""
    redo = st.session_state.get(REDO)
    if redo is not None and redo not in set(items["id"].astype(str)):
        st.session_state.pop(REDO, None)
        redo = None
    if redo is None:
        upcoming = db.next_items(annotator, 1)
        if not upcoming:
            st.success("Nothing left for you in this queue: every example has its annotators. Thank you!")
            own_decisions(db, annotator)
            return None
        return upcoming[0]
    st.info(escape_markdown(f"Deciding {redo} again: your new decision replaces the earlier one."))
    st.button("Back to the next example", key="rs_cancel_redo", on_click=_cancel_redo)
    return redo


def _example_texts(card: dict, word: bool) -> None:
    """The example's texts in a bordered box (a word's card: its sentence, the word under review marked)."""
    with st.container(border=True):
        if word:
            marks = "".join(queue.WORD_MARKS)
            st.caption(
                escape_markdown(
                    f"Sentence {card['sentence_id']}: the tag of word {int(card['word_index'])} ({marks}) is "
                    "under review"
                )
            )
        if isinstance(card.get("label_name"), str):  # a multi-label run's unit: one label of the example
            st.caption(
                escape_markdown(
                    f"Is the label {card['label_name']!r} right for this text? Its labels: {card.get('label_set')}; "
                    "relabel to present or absent toggles it"
                )
            )
        for column in task_kinds.text_fields():
            if column in card and isinstance(card[column], str):
                if not word:
                    st.caption(column.capitalize())
                st.text(card[column])


def _model_view(card: dict, word: bool) -> None:
    """Gold label (tag: ``word``), the model's prediction and p(gold) at the last epoch (its change since epoch 1), and
    p(gold)'s curve over the recorded epochs."""
    cols = st.columns(3)
    cols[0].metric("Gold tag" if word else "Gold label", str(card["gold"]))
    predicted = card.get("predicted")
    if isinstance(predicted, str):
        # a probability is a level, not a change: no delta (an arrow) for it; p(gold)'s change over the
        # recorded epochs is one, and says from when
        cols[1].metric("Model predicts", predicted, help="the class of highest probability at the last epoch")
        cols[1].caption(f"p = {card['p_predicted']:.2f}")
        change = queue.gold_change(card)
        cols[2].metric(
            "p(gold), last epoch",
            f"{card['p_gold']:.2f}",
            None if change is None else f"{change:+.2f} since epoch 1",
        )
    epochs = card.get("p_gold_epochs")
    if epochs is not None and len(epochs):
        chart = queue.gold_curves(card)
        st.line_chart(chart, height=160, x_label="epoch", y_label="p(gold)")


def _votes_and_neighbours(card: dict, labels: list[str]) -> None:
    """The human votes per label (when the card has one per label) and the nearest neighbours."""
    votes = card.get("votes")
    left, right = st.columns([1, 2])
    if votes is not None and len(votes) == len(labels):
        left.caption("Human votes")
        left.dataframe(pd.DataFrame({"label": labels, "votes": list(votes)}), hide_index=True, key="rs_votes")
    if len(card["neighbours"]):
        right.caption("Nearest neighbours ([CLS] cosine)")
        right.dataframe(card["neighbours"], hide_index=True, key="rs_neighbours")


def _relabel_controls(
    card: dict, labels: list[str], db_path: str, annotator: str, item_id: str, columns
) -> None:
    """A relabel button per other class, in ``columns`` (keys 1-9 by class), the keys' legend, the card's own class
    (its key records nothing and says so), and that warning after it was pressed."""
    others = [(k, lab) for k, lab in enumerate(labels) if lab != card["gold"]]
    for col, (k, label) in zip(columns, others, strict=False):
        col.button(
            f"Relabel: {escape_markdown(label)}",
            key=f"rs_relabel_{k}",
            shortcut=str(k + 1) if k < 9 else None,
            width="stretch",
            on_click=_record,
            args=(db_path, annotator, item_id, "relabel", label),
        )
    own = next((k for k, lab in enumerate(labels) if lab == card["gold"]), None)
    left, right = st.columns([4, 1])
    keys = [f"{k + 1} {escape_markdown(lab)}" for k, lab in others if k < 9]
    left.caption("Keys: K keep · X remove · U unsure · Z undo · " + " · ".join(keys))
    if own is not None:  # its own class: the key does nothing but say so (a relabel to it is a keep)
        right.button(
            f"{escape_markdown(card['gold'])} (its label)",
            key="rs_same_label_button",
            type="tertiary",
            shortcut=str(own + 1) if own < 9 else None,
            help=f"{own + 1}: this example's label already; nothing to record (K keeps it)",
            on_click=_same_label,
            args=(item_id,),
        )
    if st.session_state.pop(SAME_LABEL, None) == item_id:
        st.warning(
            escape_markdown(
                f"{card['gold']} is already the label of {item_id}: nothing was recorded. Keep it with K, "
                "or relabel it to another class."
            )
        )


def item_card(run: Run, name: str, items: pd.DataFrame, db: queue.QueueDB, annotator: str) -> None:
    """The card of the item ``annotator`` decides now in queue ``name`` of ``run`` (texts, the model's
    view, votes, neighbours) and its decision buttons; a token run's tag lists on their own card."""
    item_id = _item_to_decide(items, db, annotator)
    if item_id is None:
        return
    card = queue.item_card(run, name, item_id, items)
    if db.guidelines:  # the queue's guidelines with every card (text, never markdown)
        with st.expander("Guidelines", expanded=True):
            st.text(db.guidelines)
    score = card.get("score")
    score_text = "" if score is None or math.isnan(score) else f" · score {score:.3f}"
    if db.tag_lists:  # a token run's sentence or span: its tags fixed on one card
        st.caption(
            escape_markdown(
                f"{db.level.capitalize()} {item_id} · #{int(card['position']) + 1} of {len(items)}{score_text}"
            )
        )
        tags_card(run, card, db, annotator, item_id)
        return
    word = isinstance(card.get("word"), str)  # a token run's queue: a tag to review, the word in its sentence
    st.caption(
        escape_markdown(
            f"{'Word' if word else 'Example'} {item_id} · #{int(card['position']) + 1} of {len(items)}{score_text}"
        )
    )
    _example_texts(card, word)
    _model_view(card, word)
    labels = list(db.label_names or run.label_names)
    _votes_and_neighbours(card, labels)
    st.text_input("Note (optional)", max_chars=2000, **kept(NOTE, ""))
    db_path = str(db.path)
    buttons = st.columns(3 + len(labels) - 1)
    decision_buttons(db_path, annotator, item_id, buttons)
    _relabel_controls(card, labels, db_path, annotator, item_id, buttons[3:])
    own_decisions(db, annotator)


def decision_buttons(db_path: str, annotator: str, item_id: str, columns) -> None:
    """Keep (K), remove (X) and unsure (U), one in each of ``columns``."""
    for col, decision in zip(columns, ("keep", "remove", "unsure"), strict=False):
        col.button(
            decision.capitalize(),
            key=f"rs_{decision}",
            type="primary" if decision == "keep" else "secondary",
            shortcut=SHORTCUTS[decision],
            width="stretch",
            on_click=_record,
            args=(db_path, annotator, item_id, decision, None),
        )


def tags_card(run: Run, card: dict, db: queue.QueueDB, annotator: str, item_id: str) -> None:
    """A sentence or span item: the sentence's tags edited on one card (several words in one decision),
    or kept, removed (its sentence dropped) or left unsure."""
    db_path = str(db.path)
    labels = list(db.label_names or run.label_names)

    def save(label: str) -> None:
        _record(db_path, annotator, item_id, "relabel", label)

    sentence_card(card, db, item_id, save, labels)
    epochs = card.get("p_gold_epochs")
    if epochs is not None and len(epochs):
        st.caption(escape_markdown(f"p(gold) of its worst word ({int(card['worst_word'])}) by recording"))
        st.line_chart(queue.gold_curves(card), height=140, x_label="epoch", y_label="p(gold)")
    st.text_input("Note (optional)", max_chars=2000, **kept(NOTE, ""))
    decision_buttons(db_path, annotator, item_id, st.columns(3))
    st.caption("Keys: K keep · X remove (drops the sentence) · U unsure · Z undo")
    own_decisions(db, annotator)


def _what(row: dict) -> str:
    label = row.get("label")
    return str(row.get("decision", "")) + (f" → {label}" if isinstance(label, str) and label else "")


def own_decisions(db: queue.QueueDB, annotator: str) -> None:
    """The annotator's last decision with Change it / Undo (Z), and every one of their decisions to change
    or undo (an undo is recorded; their decision before it, if any, counts again)."""
    mine = db.decisions_of(annotator)
    if mine.empty:
        return
    db_path = str(db.path)
    last = mine.iloc[0].to_dict()
    left, mid, right = st.columns([4, 1, 1])
    left.caption(escape_markdown(f"Your last decision: {last['item_id']} · {_what(last)}"))
    mid.button("Change it", key="rs_redo_button", on_click=_redo, args=(str(last["item_id"]),))
    right.button(
        "Undo",
        key="rs_undo_last",
        shortcut=UNDO_SHORTCUT,
        help="Undo your last decision (Z): the example comes back to you",
        on_click=_undo,
        args=(db_path, annotator, str(last["item_id"])),
    )
    with st.expander(f"Your decisions ({len(mine):,}): change or undo any of them"):
        rows = {str(r["item_id"]): r for r in mine.to_dict("records")}
        ids = list(rows)
        picked = st.selectbox(
            "Decision",
            ids,
            format_func=lambda i: f"{i} · {_what(rows[i])}",
            **kept(MINE, ids[0], options=ids),
        )
        left, right = st.columns(2)
        left.button("Change it", key="rs_redo_mine", on_click=_redo, args=(picked,), width="stretch")
        right.button(
            "Undo it",
            key="rs_undo_mine",
            on_click=_undo,
            args=(db_path, annotator, picked),
            width="stretch",
        )


def deciding_as(name: str) -> str | None:
    """Who decides on queue ``name`` in this session: the signed-in person in team mode (None, with the
    one-line reason, when their role does not let them decide on it), else the name typed here."""
    who = visitor()
    if who.team:
        why = refused(Action.DECIDE, name)
        if why is not None:
            if not flashed(escape_markdown(why)):  # a refused click said it already
                st.info(escape_markdown(why))
            return None
        st.caption(
            escape_markdown(f"Deciding as {who.member.name}: every decision is recorded under your name.")
        )
        return who.member.name
    annotator = st.text_input(
        "Your name", max_chars=80, placeholder="every decision is recorded under it", **kept(ANNOTATOR, "")
    )
    annotator = " ".join(str(annotator or "").split())
    if not annotator:
        st.info("Type your name to start reviewing.")
    return annotator or None


# --------------------------------------------------------------------------- page
def main() -> None:
    try:
        page()
    except sqlite3.OperationalError as err:
        show_error(database_problem(err))


def page() -> None:
    st.title("Review suspects")
    show_flashes()
    run = demo_or_prompt(current_run())
    # every kind's queue: examples, a token run's words, sentences or spans, a multi-label run's
    # (example, label) units (relabel toggles the label: absent or present)
    if run is None:
        st.stop()
    names = queue.list_queues(run)
    new_queue_form(run, first=not names)
    if not names:
        st.info("No review queue yet: make one above (or `cartomap review-queue create`).")
        st.stop()
    # the newest queue this person may decide on (team mode), else the newest
    mine = [n for n in names if refused(Action.DECIDE, n) is None] or names
    name = st.selectbox("Queue", names, **kept(QUEUE, mine[-1], options=names, on_change=_queue_picked))
    if st.session_state.pop(PICKED, False):
        release_focus()  # K, X, U and the digits reach the card at once, not the queue box
    try:
        items = queue.load_queue(run, name)
        db = queue.open_queue(run, name)
    except (CartomapError, OSError) as err:
        show_error(err)
        st.stop()
    guidelines_editor(db, name)
    annotator = deciding_as(name)
    if annotator:
        progress = db.progress()
        mine = progress["by_annotator"].get(annotator, 0)
        st.progress(
            progress["fraction"],
            text=escape_markdown(
                f"{progress['complete']:,} of {progress['items']:,} examples have {progress['per_item']} "
                f"decisions · {annotator}: {mine:,} decided"
            ),
        )
        item_card(run, name, items, db, annotator)
    st.divider()
    summary(run, name, db)


main()
