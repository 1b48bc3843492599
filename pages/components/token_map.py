"""The Data map page's part for a token run: word or sentence level, the sentence-level map, the
sentence of a focused word or sentence with each word's gold and predicted tag, and the table of
recurring tag swaps (:func:`swaps_section`).

Layout only (the frames and tables come from :mod:`cartomap.analysis.tokens`). Session state:
``dm_token_level`` ("word" or "sentence"), ``dm_sentence_method`` (min, mean, softmin),
``dm_sentence_color``, ``dm_sentence_ids`` (the sentences selected on the sentence-level map),
``dm_sentence_focus`` (the sentence opened) and ``_dm_sentence_sig`` (the last map event taken).
Dataset text is never rendered as markdown or HTML: words go into ``st.text`` and tables; the tags are
coloured by a pandas Styler's cell background.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.analysis import (
    colourings,
    datamap,
    figures,
    map_points,
    overlay_figures,
    selection,
    tables,
    tokens,
)
from cartomap.config import Source
from cartomap.errors import CartomapError
from cartomap.runs.store import Run
from cartomap.scores.metrics import RegionRule
from pages.common import count, escape_markdown, kept, new_chart_event, show_error
from pages.components.map_chart import MAP_HEIGHT

LEVEL_LABELS = {"word": "Words", "sentence": "Sentences"}
METHOD_LABELS = {
    "min": "min: its worst word",
    "mean": "mean over its words",
    "softmin": "softmin: a mean weighted towards its worst words",
}
SENTENCE_CHART = "datamap_sentences"
SELECTED_SENTENCES = "dm_sentence_ids"
FOCUS = "dm_sentence_focus"


def is_token_run(run) -> bool:
    return run.task_kind.unit.sentences


#: The map settings of a token run a saved view keeps ({name: session key}; ``pages.components.saved_views``).
VIEW_KEYS = {
    "token_level": "dm_token_level",
    "sentence_method": "dm_sentence_method",
    "sentence_color": "dm_sentence_color",
}


def level_picker() -> tuple[str, str]:
    """A token run's map level (words or sentences) and, at sentence level, how a sentence is scored."""
    left, right = st.columns([2, 3])
    level = left.radio(
        "Map of",
        list(tokens.LEVELS),
        format_func=LEVEL_LABELS.get,
        horizontal=True,
        help="Words: a point per word (its first sub-word's dynamics). Sentences: a point per sentence, "
        "scored over its words' confidences.",
        **kept(VIEW_KEYS["token_level"], tokens.WORD_LEVEL, options=list(tokens.LEVELS)),
    )
    method = "min"
    if level == tokens.SENTENCE_LEVEL:
        method = right.selectbox(
            "Sentence score",
            list(tokens.METHODS),
            format_func=METHOD_LABELS.get,
            help="y = this score of the words' confidences (lower = harder); x, correctness and the tags "
            "shown are those of the sentence's worst word.",
            **kept(VIEW_KEYS["sentence_method"], "min", options=list(tokens.METHODS)),
        )
    return str(level), str(method)


@st.cache_resource(max_entries=6, show_spinner="Scoring the sentences…")
def _sentence_frame(
    run_path: str, stamp: tuple, method: str, rule_json: str, burn_out: int | None
) -> pd.DataFrame:
    from pages.components import maps

    run = Run(Path(run_path))
    dynamics = None if burn_out is None else maps.dynamics(run, run.recorded_source())
    rule = RegionRule(**json.loads(rule_json))
    shared = None if burn_out is None else maps.units_at(run, burn_out, rule)  # the word map's too
    return tokens.sentence_map_frame(
        run, method=method, regions=rule, burn_out=burn_out, dynamics=dynamics, word_metrics=shared
    )


def sentence_frame(run, method: str, rule: RegionRule, burn_out: int | None = None) -> pd.DataFrame:
    """:func:`cartomap.analysis.tokens.sentence_map_frame` (after ``burn_out`` recordings; None = all),
    cached until the run's metrics, examples or (after k recordings) dynamics change."""
    from pages.components import maps

    stamp = run.stamp(run.metrics_path(), run.examples_path)
    if burn_out is not None:
        stamp += maps.dynamics_stamp(run, run.recorded_source())
    rule_json = json.dumps(rule.to_dict(), sort_keys=True)
    return _sentence_frame(str(run.path), stamp, method, rule_json, burn_out)


def sentence_view(run, word_frame, sentence_id: str | None, focus_word: int | None = None) -> None:
    """The opened sentence: its words as text, then one row per word with its gold and predicted tags
    (coloured by tag), p(predicted) at the recording the map's predictions are of (the last, or k for the
    map after k recordings), and the word's confidence on the map."""
    if not sentence_id:
        return
    try:
        words = tokens.sentence_words(word_frame, sentence_id)
        unit_ids = [f"{sentence_id}#{k}" for k in words["word"]]
        k = tokens.map_recording(word_frame)
        probs = tokens.predicted_probabilities(
            run, unit_ids, run.status().get("metrics_source") or Source.TRAIN, k
        )
        words = tokens.sentence_words(word_frame, sentence_id, probs)
    except CartomapError as err:
        show_error(err)
        return
    st.markdown("**The sentence**")
    if words.empty:
        st.caption("None of this sentence's words is on the map (another run's, or filtered out).")
        return
    st.text(f"sentence {sentence_id} ({count(len(words), 'word')}):\n" + " ".join(words["token"]))
    wrong = int((words["gold"] != words["predicted"]).sum())
    st.caption(
        f"Gold and predicted tags coloured by entity type; {count(wrong, 'word')} predicted wrong"
        + (f"; word {focus_word} is the one picked" if focus_word is not None else "")
        + ". p(predicted): the model's probability of its tag at "
        + ("the last recording" if k is None else f"recording {k}")
        + "; confidence: mean p(gold) over the recordings (the map's y)."
    )
    st.dataframe(
        tokens.styled_words(words),
        hide_index=True,
        key="dm_sentence_words",
        column_config={
            "word": st.column_config.NumberColumn("#"),
            "p_predicted": st.column_config.NumberColumn("p(predicted)"),
        },
    )


def word_level_sentence(run, word_frame, table) -> None:
    """At word level: the sentence of the focused word (a clicked point or table row) below the table."""
    focus = st.session_state.get("dm_focus")
    if len(table) == 1:
        focus = str(table["id"].iloc[0])
    if not focus or focus not in set(table["id"].astype(str)):
        return
    sentence = tokens.sentence_of(focus, "word")
    sentence_view(run, word_frame, sentence, focus_word=tokens.split_unit_id(focus)[1] if sentence else None)


def _take_event(frame, max_points: int) -> None:
    event = new_chart_event(SENTENCE_CHART, "_dm_sentence_sig")
    if event is None:
        return
    st.session_state[SELECTED_SENTENCES] = selection.resolve_selection(frame, event, max_points=max_points)
    st.session_state.pop(FOCUS, None)


def _clear() -> None:
    st.session_state[SELECTED_SENTENCES] = []
    st.session_state.pop(FOCUS, None)


def sentence_level(
    run,
    rule: RegionRule,
    method: str,
    max_points: int = datamap.DEFAULT_MAX_POINTS,
    *,
    burn_out: int | None = None,
    paths=None,
    current_k: int | None = None,
    chart=None,
) -> None:
    """The sentence-level map of a token run: a point per sentence, its selection as a table, and the
    sentence picked (a clicked point, or a row of the table) word by word. ``burn_out``: the map after
    that many recordings (None: all); ``paths``: called with the selection table, the selected sentences'
    paths to draw over the map (None: none), the point after ``current_k`` recordings ringed; ``chart``: the
    container the map goes in (the page's, right under its title), else where this is called."""
    try:
        frame = sentence_frame(run, method, rule, burn_out)
    except CartomapError as err:
        show_error(err)
        return
    _take_event(frame, max_points)
    selected = [str(i) for i in st.session_state.get(SELECTED_SENTENCES) or []]
    offered = list(colourings.available(frame))
    color_by = st.selectbox(
        "Colour sentences by", offered, **kept(VIEW_KEYS["sentence_color"], "correctness", options=offered)
    )
    skipped = frame.attrs.get("n_unscored", 0)
    after = (
        f" Words' metrics over the first {frame.attrs['n_epochs']} of {frame.attrs['epochs_recorded']} "
        "recordings."
        if burn_out is not None
        else ""
    )
    st.caption(
        f"{count(len(frame), 'sentence')} · y = {METHOD_LABELS[method]} (of the words' confidences), "
        f"x = the {map_points.axis_title(datamap.axis_of(frame))} of its worst word. Click a point or drag a "
        "lasso to pick sentences."
        + (f" {count(skipped, 'sentence')} without a scored word are not drawn." if skipped else "")
        + after
    )
    table = tables.selection_table(frame, selected)
    drawn = paths(table) if paths is not None else None
    fig = figures.data_map_figure(
        frame, color_by=color_by, max_points=max_points, highlight_ids=selected or None, height=MAP_HEIGHT
    )
    if drawn is not None:
        overlay_figures.add_trajectories(fig, drawn, current_k, axis=datamap.axis_of(frame))
    with chart if chart is not None else contextlib.nullcontext():
        st.plotly_chart(
            fig,
            key=SENTENCE_CHART,
            on_select="rerun",
            selection_mode=("points", "box", "lasso"),
            width="stretch",
            config={"displaylogo": False},
        )
    head, clear = st.columns([4, 1])
    head.markdown(f"**{len(table):,} sentences selected**")
    clear.button("Clear selection", on_click=_clear, key="dm_sentence_clear", disabled=not selected)
    if table.empty:
        st.info("Nothing selected: click a sentence's point or drag a lasso over the map.")
        return
    extra = frame.set_index("id").loc[table["id"], ["n_words", "worst_word", "worst_token"]]
    table = table.assign(**{c: extra[c].to_numpy() for c in extra.columns})
    axis = datamap.axis_of(frame)
    columns = ["id", "confidence", "worst_token", "gold", "predicted", axis, "variability", "n_words"]
    columns = list(dict.fromkeys(columns))
    columns += [c for c in table.columns if c not in columns and c not in ("worst_word",)]
    event = st.dataframe(
        table[columns],
        key="dm_sentence_table",
        on_select="rerun",
        selection_mode="single-row",
        hide_index=True,
        column_config={
            "worst_token": st.column_config.TextColumn("worst word"),
            "gold": st.column_config.TextColumn("worst word's tag"),
            "predicted": st.column_config.TextColumn("its prediction"),
            "confidence": st.column_config.NumberColumn("score", format="%.3f"),
            **{c: st.column_config.NumberColumn(format="%.3f") for c in datamap.number_columns(frame)},
        },
    )
    rows = list(event.selection.rows) if event is not None else []
    if rows and rows[0] < len(table):
        st.session_state[FOCUS] = str(table["id"].iloc[rows[0]])
    focus = str(table["id"].iloc[0]) if len(table) == 1 else st.session_state.get(FOCUS)
    if not focus or focus not in set(table["id"]):
        st.caption("Click a row to open its sentence word by word.")
        return
    word_frame = _word_frame(run, rule, burn_out)
    if word_frame is None:
        return
    worst = int(frame.loc[frame["id"] == focus, "worst_word"].iloc[0])
    sentence_view(run, word_frame, focus, focus_word=worst)
    st.caption(escape_markdown(f"Word {worst} is this sentence's worst word (lowest confidence)."))


@st.cache_data(show_spinner=False, max_entries=8)
def _swaps(run_path: str, stamp: tuple, source: str, min_count: int) -> tuple[pd.DataFrame, str, str | None]:
    """:func:`cartomap.experiments.token_folds.swaps_of_run`, cached by the run's files: (table, what
    predicted, the id of the k-fold experiment it used or None)."""
    from cartomap.experiments.store import ExperimentStore
    from cartomap.experiments.token_folds import swaps_of_run

    run = Run(Path(run_path))
    table, what, exp = swaps_of_run(run, ExperimentStore(run.path.parents[1]), source, min_count=min_count)
    return table, what, exp.id if exp is not None else None


def swaps_section(run, estore) -> None:
    """The recurring gold → predicted tag swaps of the run's words (word, gold, predicted, count, example
    sentences): out-of-fold when a finished token k-fold experiment has the run's words, else from the
    run's last recording. A table of text, never HTML."""
    from cartomap.experiments.token_folds import command_for, folds_of_run

    with st.expander("Recurring tag swaps (gold → predicted)"):
        done = folds_of_run(run, estore)
        sources = (["out-of-fold"] if done else []) + ["last recording"]
        source = st.radio("Predictions", sources, horizontal=True, key="dm_swaps_source")
        min_count = int(st.number_input("At least this many times", 1, 1000, 2, key="dm_swaps_min"))
        try:
            stamp = (run.stamp(run.metrics_path(), run.examples_path), tuple(e.id for e in done))
            table, what, experiment = _swaps(
                str(run.path), stamp, "auto" if source == "out-of-fold" else "last", min_count
            )
        except CartomapError as err:
            show_error(err)
            return
        st.caption(
            f"{count(len(table), 'swap')} seen {min_count}+ times; predictions: {what}"
            + (f" of experiment {experiment}" if experiment else "")
            + ". One row per (word, gold tag, predicted tag): a pattern that recurs is one decision."
            + (
                ""
                if done
                else f" Out-of-fold predictions (k models that never saw the sentence): `{command_for(run)}`."
            )
        )
        st.dataframe(
            table,
            hide_index=True,
            key="dm_swaps_table",
            column_config={
                "word": st.column_config.TextColumn("word"),
                "example_ids": st.column_config.TextColumn("example sentences"),
            },
        )


def _word_frame(run, rule, burn_out=None):
    from pages.components import maps

    try:
        return maps.map_frame(run, rule, burn_out)
    except CartomapError as err:
        show_error(err)
        return None
