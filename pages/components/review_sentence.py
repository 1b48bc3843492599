"""The Review suspects page's card of a sentence or an entity span (a token run's queue by sentence or by
span): the whole sentence word by word with its gold and predicted tags (a pandas Styler, coloured by
entity type; the text stays text), and the editor that fixes several words' tags in one decision.

Each word has a tag picker (``rs_tag_<k>``, the gold tag to start with); "Keep the tags valid"
(``rs_repair``) repairs what the edit would break in the file's scheme (an entity's type changed on one
word changes all its words; a word set to ``O`` makes the next ``I-`` a ``B-``), else the edit is refused
in one line naming the word. The new tags show beside the old before they are saved ("Save the new
tags", a relabel of the whole sentence: :func:`cartomap.curation.queue.edited_tags`).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from cartomap.analysis.tokens import tag_style
from cartomap.curation import levels, queue
from cartomap.curation.tags import decode_tags
from cartomap.errors import CartomapError
from cartomap.tasks import registry as task_kinds
from pages.common import escape_markdown

REPAIR = "rs_repair"
#: The item whose tags the pickers hold (a new item starts from its gold tags).
EDITING = "rs_tags_of"
PICKERS_PER_ROW = 6


def _picker_key(k: int) -> str:
    return f"rs_tag_{k}"


def _start(item_id: str) -> None:
    """Forget the pickers of another item: a new card starts from its gold tags."""
    ss = st.session_state
    if ss.get(EDITING) != item_id:
        for key in [k for k in ss if str(k).startswith("rs_tag_")]:
            del ss[key]
        ss[EDITING] = item_id


def word_table(card: dict, new_tags: list[str] | None) -> None:
    """The sentence word by word: gold, predicted and new tags coloured by entity type."""
    table = levels.card_words(card, new_tags)
    styler = table.style.map(tag_style, subset=["gold", "predicted", "new"]).format(
        {"p_predicted": "{:.3f}"}, na_rep=""
    )
    st.dataframe(
        styler,
        hide_index=True,
        key="rs_sentence_words",
        column_config={
            "word": st.column_config.NumberColumn("#"),
            "in_span": st.column_config.CheckboxColumn("under review"),
            "p_predicted": st.column_config.NumberColumn("p(predicted)"),
            "new": st.column_config.TextColumn("new tag"),
        },
    )


def sentence_card(
    card: dict, db: queue.QueueDB, item_id: str, save: Callable[[str], None], names: list[str]
) -> None:
    """The card of a sentence or span item: its sentence, its words' tags, the tag editor and its save
    button (``save(label)`` records the relabel: the new tag list as one value)."""
    words = [str(w) for w in card["words"]]
    gold = decode_tags(card["gold"])
    _start(item_id)
    first, last = int(card.get("span_first", -1)), int(card.get("span_last", -1))
    what = "the whole sentence" if first < 0 else f"the span of words {first}-{last} (⟦ ⟧)"
    st.caption(
        escape_markdown(f"Sentence {card['sentence_id']}: {what} is under review; fix any word's tag.")
    )
    with st.container(border=True):  # the sentence, a span's words marked (text, never markdown)
        st.text(
            next((card[c] for c in task_kinds.text_fields() if isinstance(card.get(c), str)), " ".join(words))
        )
    changes = {}
    rows = [range(i, min(i + PICKERS_PER_ROW, len(words))) for i in range(0, len(words), PICKERS_PER_ROW)]
    for row in rows:
        cols = st.columns(PICKERS_PER_ROW)
        for col, k in zip(cols, row, strict=False):
            picked = col.selectbox(
                f"{k} {words[k]}",
                names,
                index=names.index(gold[k]) if gold[k] in names else 0,
                key=_picker_key(k),
            )
            if picked != gold[k]:
                changes[k] = picked
    repair = st.checkbox(
        "Keep the tags valid",
        value=True,
        key=REPAIR,
        help="Repair what the change would break in the file's scheme (a retyped word takes its entity "
        "along; a word set to O makes the next I- a B-); off: refuse such a change and say why",
    )
    new, problem = None, None
    if changes:
        try:
            new = queue.edited_tags(db, item_id, changes, repair=repair)
        except CartomapError as err:
            problem = str(err)
    word_table(card, decode_tags(new) if new else None)
    if problem:
        st.warning(escape_markdown(f"Cannot save these tags: {problem}"))
    elif new is not None:
        repaired = [k for k, (a, b) in enumerate(zip(gold, decode_tags(new), strict=True)) if a != b]
        extra = sorted(set(repaired) - set(changes))
        if extra:
            st.caption(
                escape_markdown(f"Repaired to keep the tags valid: words {', '.join(map(str, extra))}.")
            )
    st.button(
        "Save the new tags",
        key="rs_save_tags",
        type="primary",
        disabled=new is None,
        help="Record the sentence's tags as shown in 'new tag' (one decision: a relabel of the sentence)",
        on_click=save,
        args=(new or "",),
    )
