"""Review suspects: several annotators decide keep / relabel / remove / unsure on a review queue of
suspected label errors; progress, agreement and the corrected set.

Layout only: queues, decisions, aggregation and exports are ``cartomap.curation``. Every click is
written to the queue's SQLite store at once (in the button's callback, before the page reruns).
Dataset text is shown with ``st.text`` and in dataframes, never as markdown or HTML. The decision
buttons have keyboard shortcuts (Streamlit's ``shortcut``): K keep, X remove, U unsure, 1-9 relabel to
that class, Z undo the last decision (R and C are reserved by Streamlit); the key of the example's own
class records nothing and says so. An annotator can change or undo
any of their own decisions ("Your decisions"); an undo is recorded too, nothing is deleted. A token run's
queue holds words: each card is a tag to review, the word marked in its sentence (relabel = another tag).

Team mode (a team file; people signed in): the annotator is the signed-in person, never a typed name;
they decide only on the queues their role allows, and the controls that write (a new queue, imports,
the corrected set, the retrain) are an owner's (``pages.common.write_button``).

Session state: ``rs_queue``, ``rs_annotator`` (who is deciding, without a team), ``rs_redo`` (an item the annotator
asked to decide again), ``rs_note`` (the note being typed), ``rs_mine`` (the decision picked in "Your
decisions"), ``rs_same_label`` (the example whose own class's key was just pressed: its feedback),
``rs_new_guidelines`` (a new queue's guidelines being typed), ``rs_guidelines_<queue>`` (the guidelines being
edited). A queue's guidelines show with every card; whoever made the queue edits them.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.curation import aggregate, corrected, exchange, queue, sources
from cartomap.curation.store import MAX_GUIDELINES
from cartomap.data.label_studio import label_studio_tasks
from cartomap.errors import CartomapError
from cartomap.experiments import launch
from cartomap.experiments import registry as experiment_kinds
from cartomap.experiments.correction import corrections_of, create_correction
from cartomap.experiments.pruning import pruning_of_run, suspects_of
from cartomap.experiments.seeds import seed_siblings
from cartomap.experiments.store import ExperimentStore
from cartomap.experiments.truth import detector_extras
from cartomap.runs.groups import list_groups
from cartomap.runs.progress import state_text
from cartomap.runs.sqlite import database_problem
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.scores import detectors
from cartomap.scores.metrics import DEFAULT_AXIS, REGIONS
from cartomap.tasks import registry as task_kinds
from cartomap.team.roles import Action
from pages.common import (
    acting_as,
    applies_per_example,
    current_run,
    decider,
    escape_markdown,
    flash,
    for_display,
    get_store,
    kept,
    refused,
    show_error,
    show_flashes,
    through_app,
    visitor,
    write_button,
)
from pages.components import cached, map_filters
from pages.components.jobs import demo_or_prompt, experiment_panel

through_app()  # a first visit straight to this page's address: run it through app.py

QUEUE = "rs_queue"
ANNOTATOR = "rs_annotator"
REDO = "rs_redo"
NOTE = "rs_note"
SOURCES = ("Detector top k", "Saved group", "Pruning suspects")
SHORTCUTS = {"keep": "K", "remove": "X", "unsure": "U"}
UNDO_SHORTCUT = "Z"
MINE = "rs_mine"
SAME_LABEL = "rs_same_label"


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


# --------------------------------------------------------------------------- making a queue
ANY_REGION = "any region"


def region_filter(run: Run):
    """(region or None, RegionRule): "Only the examples in a region" of the run's map, ranked on the
    ambiguity axis picked beside it (e.g. the most suspect of the ambiguous examples)."""
    options = [ANY_REGION, *REGIONS]
    left, right = st.columns(2)
    region = left.selectbox(
        "Only the examples in a region",
        options,
        help="Of the examples the source gives, keep those in this region of the run's data map.",
        **kept("rs_region", ANY_REGION, options=options),
    )
    if region == ANY_REGION:
        return None, None
    axes = list(cached.axes(run))
    axis = right.selectbox(
        "Regions drawn on",
        axes,
        format_func=map_filters.axis_label,
        **kept("rs_region_axis", DEFAULT_AXIS if DEFAULT_AXIS in axes else axes[0], options=axes),
    )
    return region, run.region_rule(axis=axis)  # the run's kind's method (a token run's by threshold)


def new_queue_form(run: Run, first: bool) -> None:
    """The form of a new queue, behind a toggle (on while the run has no queue): the experiments and
    detectors it offers are looked up only while it is open."""
    if not st.toggle("Make a new review queue", **kept("rs_new", first)):
        return
    with st.container(border=True):
        source = st.radio("Examples to review", SOURCES, horizontal=True, **kept("rs_source", SOURCES[0]))
        left, right = st.columns(2)
        oof = seeds = folds = None
        prunings = []
        if source == SOURCES[0]:
            oof, seeds, folds, _ = detector_extras(run, get_store().root)
            names = sources.available_detectors(run, oof, seeds, folds)
            if not names:
                st.info("This run has nothing a detector can score (no dynamics or metrics).")
                return
            detector = left.selectbox(
                "Detector",
                names,
                format_func=detectors.title,
                **kept("rs_detector", names[0], options=names),
            )
            top = right.number_input("Top k", min_value=1, max_value=100_000, step=10, **kept("rs_top", 50))
            default = f"{detector}-top{int(top)}"
        elif source == SOURCES[1]:
            groups = [g["name"] for g in list_groups(run, include_table=False)]
            if not groups:
                st.info("This run has no saved groups: save a lasso selection on the Data map page.")
                return
            group = left.selectbox("Group", groups, **kept("rs_group", groups[0], options=groups))
            default = f"group-{group}"
        else:
            prunings = pruning_of_run(run, ExperimentStore(get_store().root), get_store())
            ids = [e.id for e in prunings]
            if not ids:
                st.info(
                    "No finished pruning experiment was trained on this run's examples (Prune labels page)."
                )
                return
            exp_id = left.selectbox("Pruning experiment", ids, **kept("rs_pruning", ids[0], options=ids))
            default = f"pruning-{exp_id}"
        region, rule = region_filter(run)
        name = st.text_input("Queue name", value=default, max_chars=80, key=f"rs_new_name_{default}")
        per_item = st.number_input(
            "Annotators per example (k)", min_value=1, max_value=20, **kept("rs_per_item", 2)
        )
        guidelines = st.text_area(
            "Guidelines for the annotators (optional)",
            max_chars=MAX_GUIDELINES,
            placeholder="e.g. Relabel only when the right class is clear; remove pairs that make no sense.",
            help="Shown with every example of the queue; whoever makes the queue can edit them later.",
            **kept("rs_new_guidelines", ""),
        )
        if write_button("Create the queue", Action.QUEUE, key="rs_create", type="primary"):
            try:
                if source == SOURCES[0]:
                    cand = sources.from_detector(
                        run,
                        detector,
                        int(top),
                        oof_logits=oof,
                        seeds=seeds,
                        folds=folds,
                        region=region,
                        rule=rule,
                    )
                else:
                    if source == SOURCES[1]:
                        cand = sources.from_group(run, group)
                    else:
                        exp = next(e for e in prunings if e.id == exp_id)
                        cand = sources.from_suspects(run, suspects_of(exp, run, get_store()), exp.id)
                    if region is not None:
                        cand = sources.in_region(run, cand, region, rule)
                others = {s: r for s, r in seed_siblings(run, get_store()).items() if r.id != run.id}
                items = queue.create_queue(
                    run,
                    name,
                    cand,
                    per_item=int(per_item),
                    seed_runs=others,
                    by=acting_as(),
                    guidelines=guidelines,
                )
            except (CartomapError, OSError) as err:
                show_error(err)
                return
            st.session_state[QUEUE] = queue.check_name(name)
            st.session_state["rs_new"] = False
            st.session_state["rs_new_guidelines"] = ""
            flash("success", escape_markdown(f"Queue {name}: {len(items):,} examples to review."))
            st.rerun()


# --------------------------------------------------------------------------- the item card
def item_card(run: Run, name: str, items: pd.DataFrame, db: queue.QueueDB, annotator: str) -> None:
    redo = st.session_state.get(REDO)
    if redo is not None and redo not in set(items["id"].astype(str)):
        st.session_state.pop(REDO, None)
        redo = None
    if redo is None:
        upcoming = db.next_items(annotator, 1)
        if not upcoming:
            st.success("Nothing left for you in this queue: every example has its annotators. Thank you!")
            own_decisions(db, annotator)
            return
        item_id = upcoming[0]
    else:
        item_id = redo
        st.info(escape_markdown(f"Deciding {item_id} again: your new decision replaces the earlier one."))
        st.button("Back to the next example", key="rs_cancel_redo", on_click=_cancel_redo)
    card = queue.item_card(run, name, item_id, items)
    if db.guidelines:  # the queue's guidelines with every card (text, never markdown)
        with st.expander("Guidelines", expanded=True):
            st.text(db.guidelines)
    score = card.get("score")
    score_text = "" if score is None or math.isnan(score) else f" · score {score:.3f}"
    word = isinstance(card.get("word"), str)  # a token run's queue: a tag to review, the word in its sentence
    st.caption(
        escape_markdown(
            f"{'Word' if word else 'Example'} {item_id} · #{int(card['position']) + 1} of {len(items)}{score_text}"
        )
    )
    with st.container(border=True):
        if word:
            marks = "".join(queue.WORD_MARKS)
            st.caption(
                escape_markdown(
                    f"Sentence {card['sentence_id']}: the tag of word {int(card['word_index'])} ({marks}) is "
                    "under review"
                )
            )
        for column in task_kinds.text_fields():
            if column in card and isinstance(card[column], str):
                if not word:
                    st.caption(column.capitalize())
                st.text(card[column])
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
    labels = list(db.label_names or run.label_names)
    votes = card.get("votes")
    left, right = st.columns([1, 2])
    if votes is not None and len(votes) == len(labels):
        left.caption("Human votes")
        left.dataframe(pd.DataFrame({"label": labels, "votes": list(votes)}), hide_index=True, key="rs_votes")
    if len(card["neighbours"]):
        right.caption("Nearest neighbours ([CLS] cosine)")
        right.dataframe(card["neighbours"], hide_index=True, key="rs_neighbours")
    st.text_input("Note (optional)", max_chars=2000, **kept(NOTE, ""))
    db_path = str(db.path)
    buttons = st.columns(3 + len(labels) - 1)
    for col, decision in zip(buttons, ("keep", "remove", "unsure"), strict=False):
        col.button(
            decision.capitalize(),
            key=f"rs_{decision}",
            type="primary" if decision == "keep" else "secondary",
            shortcut=SHORTCUTS[decision],
            width="stretch",
            on_click=_record,
            args=(db_path, annotator, item_id, decision, None),
        )
    others = [(k, lab) for k, lab in enumerate(labels) if lab != card["gold"]]
    for col, (k, label) in zip(buttons[3:], others, strict=False):
        col.button(
            f"Relabel: {label}",
            key=f"rs_relabel_{k}",
            shortcut=str(k + 1) if k < 9 else None,
            width="stretch",
            on_click=_record,
            args=(db_path, annotator, item_id, "relabel", label),
        )
    own = next((k for k, lab in enumerate(labels) if lab == card["gold"]), None)
    left, right = st.columns([4, 1])
    keys = [f"{k + 1} {lab}" for k, lab in others if k < 9]
    left.caption("Keys: K keep · X remove · U unsure · Z undo · " + " · ".join(keys))
    if own is not None:  # its own class: the key does nothing but say so (a relabel to it is a keep)
        right.button(
            f"{card['gold']} (its label)",
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


# --------------------------------------------------------------------------- progress, agreement, export
def summary(run: Run, name: str, db: queue.QueueDB) -> None:
    st.subheader("Progress, agreement and export")
    progress = db.progress()
    cols = st.columns(4)
    cols[0].metric("Examples", f"{progress['items']:,}")
    cols[1].metric(f"With {progress['per_item']} decisions", f"{progress['complete']:,}")
    cols[2].metric("Partly decided", f"{progress['partial']:,}")
    cols[3].metric("Undecided", f"{progress['undecided']:,}")
    import_form(run, name)
    long = db.long_table()
    if not len(long):
        st.caption("No decisions yet.")
        return
    stats = aggregate.agreement(long)
    s = stats["summary"]
    agreement_table = pd.DataFrame(
        {
            "statistic": ["Fleiss' κ", "Krippendorff's α", "observed agreement"],
            "value": [s["fleiss_kappa"], s["krippendorff_alpha"], s["observed_agreement"]],
            "note": [
                s.get("fleiss_kappa_reason") or s.get("fleiss_kappa_note") or "",
                s.get("krippendorff_alpha_reason") or "",
                "",
            ],
        }
    )
    st.dataframe(for_display(agreement_table), hide_index=True, key="rs_agreement")
    st.dataframe(for_display(stats["annotators"]), hide_index=True, key="rs_annotators")
    table = corrected.decisions(run, name)
    found = aggregate.counts(table)
    st.dataframe(
        pd.DataFrame({"final decision": list(found), "examples": list(found.values())}),
        hide_index=True,
        key="rs_final_counts",
    )
    st.caption(
        "Final decision: the most frequent of the annotators' non-unsure decisions (relabels to different "
        "classes differ); a tie, or only unsure, is unsure; no decision is unreviewed."
    )
    st.dataframe(for_display(table), hide_index=True, key="rs_decisions")
    if write_button(
        "Write the corrected set", Action.CORRECT, key="rs_write", help="relabels applied, removals dropped"
    ):
        try:
            result = corrected.write_corrected(run, name, by=acting_as())
        except (CartomapError, OSError) as err:
            show_error(err)
        else:
            st.session_state["rs_written"] = result["ref"]
    ref = st.session_state.get("rs_written")
    if ref and ref.endswith(f"/{name}") and run.corrected_path(name).exists():
        st.caption(f"Train on it with --data {escape_markdown(ref)}")
        fixed = corrected.named(run, pd.read_parquet(run.corrected_path(name)), table)
        left, right = st.columns(2)
        left.download_button(
            f"Corrected set, {len(fixed):,} examples (JSONL)",
            corrected.table_bytes(fixed, "jsonl"),
            file_name=f"{name}_corrected.jsonl",
            mime="application/jsonl",
            key="rs_download_corrected",
        )
        right.download_button(
            "Decisions file (CSV)",
            corrected.table_bytes(table, "csv"),
            file_name=f"{name}_decisions.csv",
            mime="text/csv",
            key="rs_download_decisions",
        )
    if run.task_kind.unit == "word":  # the retrain experiment works on examples with one label each
        st.caption(
            "A relabel changes that word's tag in its sentence; a removed word drops its sentence. Train on "
            "the corrected sentences with `cartomap train --data` and the reference above."
        )
        return
    retrain_form(run, name)


def retrain_form(run: Run, name: str) -> None:
    """The loop's last step: retrain the run on its data as it was, pruned of the queue and corrected by
    the decisions (the retrain-after-review experiment, a background job)."""
    st.markdown("**Retrain with these decisions**")
    st.caption(
        "Trains the run's config on its training set as it was, pruned of every queued example, and "
        "corrected by the final decisions, with the same seeds; evaluated on the run's dev and test sets. "
        "Results: Compare, and the 'Retrain after review' tab of Curricula & combinations."
    )
    left, right = st.columns([1, 2])
    seeds = left.number_input("Seeds", min_value=1, max_value=10, step=1, **kept("rs_retrain_seeds", 3))
    started = retrain_of(run, name)
    if write_button(
        "Retrain original, pruned and corrected", Action.EXPERIMENT, where=right, key="rs_retrain"
    ):
        try:
            written = corrected.write_corrected(run, name, by=acting_as())
            xstore = ExperimentStore(get_store().root)
            exp = create_correction(
                xstore, run, written["decisions_path"], n_seeds=int(seeds), name=f"review {name}"
            )
            launch.start_experiment(exp, xstore, by=acting_as())
        except (CartomapError, OSError) as err:
            show_error(err)
            return
        flash("success", f"Retrain experiment {exp.id} started ({exp.state}); its results appear on Compare.")
        st.rerun()
    if started is not None:  # where it starts: its progress, Cancel while it runs, Resume once stopped
        experiment_panel(started, _retrain_progress, key="rs_retrain_")


def retrain_of(run: Run, name: str):
    """The newest retrain-after-review experiment started from queue ``name`` of ``run`` (by its name), or
    None."""
    for exp in corrections_of(run, ExperimentStore(get_store().root)):
        try:
            if exp.name == f"review {name}":
                return exp
        except (CartomapError, OSError, ValueError):
            continue
    return None


def _retrain_progress(exp, status: dict) -> None:
    done, total = int(status.get("runs_done") or 0), int(status.get("runs_planned") or 0)
    st.progress(
        min(1.0, done / total) if total else (1.0 if status["state"] == State.DONE else 0.0),
        text=f"Retrain {exp.id}: {state_text(status['state'], status.get('phase'))}"
        + (f" · {done}/{total} runs done" if total else ""),
    )
    if status["state"] == State.RUNNING and status.get("role"):
        role = experiment_kinds.role_label(exp, status["role"])
        st.caption(escape_markdown(f"Training {role} (run {status.get('run_id')})."))


def _label_studio_bytes(run: Run, name: str) -> bytes:
    tasks = exchange.tool_queue(queue.load_queue(run, name))
    return json.dumps(label_studio_tasks(tasks, label_names=list(run.label_names)), indent=1).encode("utf-8")


def import_form(run: Run, name: str) -> None:
    """The queue out to Label Studio or Argilla (files made when the button is clicked), and their
    decisions back."""
    with st.expander("Label Studio or Argilla: the queue out, their decisions back"):
        left, right = st.columns(2)
        left.download_button(
            "Label Studio tasks (JSON)",
            lambda: _label_studio_bytes(run, name),
            file_name=f"{name}_labelstudio.json",
            mime="application/json",
            key="rs_download_labelstudio",
            on_click="ignore",
            help="Import into a Label Studio project (`cartomap review-queue export --to labelstudio` also "
            "writes its labeling config)",
        )
        right.download_button(
            "Argilla dataset (ZIP)",
            lambda: exchange.argilla_download(run, name),
            file_name=f"{name}_argilla.zip",
            mime="application/zip",
            key="rs_download_argilla",
            on_click="ignore",
            help="Unzipped, it loads with rg.Dataset.from_disk(folder) (Argilla 2.x); after the review, "
            "to_disk again and import its records.json below",
        )
        tool = st.radio("Tool", exchange.TOOLS, horizontal=True, key="rs_import_tool")
        upload = st.file_uploader(
            "Label Studio JSON export, or Argilla records.json", type=["json"], key="rs_import_file"
        )
        if upload is not None and write_button("Import", Action.QUEUE, key="rs_import"):
            try:
                n = exchange.import_upload(run, name, upload.getvalue(), tool, upload.name, by=acting_as())
            except (CartomapError, OSError) as err:
                show_error(err)
            else:
                st.success(f"Imported {n:,} decisions.")


def guidelines_editor(db: queue.QueueDB, name: str) -> None:
    """The queue's guidelines, editable by whoever made the queue (anyone, for a queue made without a
    team); the others read them on every card."""
    by = acting_as()
    if not db.may_edit_guidelines(by):
        st.caption(escape_markdown(f"Guidelines: written by {db.creator()}, who made this queue."))
        return
    with st.expander("Guidelines of this queue" + ("" if db.guidelines else " (none yet)")):
        key = f"rs_guidelines_{name}"
        text = st.text_area(
            "Guidelines for the annotators",
            value=db.guidelines,
            max_chars=MAX_GUIDELINES,
            key=key,
            help="Shown with every example of this queue.",
        )
        if write_button("Save the guidelines", Action.QUEUE, key="rs_save_guidelines"):
            try:
                db.set_guidelines(text, by)
            except CartomapError as err:
                show_error(err)
                return
            except sqlite3.OperationalError as err:
                show_error(database_problem(err))
                return
            st.session_state.pop(key, None)
            flash("success", escape_markdown(f"Saved the guidelines of {name}."))
            st.rerun()


def deciding_as(name: str) -> str | None:
    """Who decides on queue ``name`` in this session: the signed-in person in team mode (None, with the
    one-line reason, when their role does not let them decide on it), else the name typed here."""
    who = visitor()
    if who.team:
        why = refused(Action.DECIDE, name)
        if why is not None:
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
    # a token run's queue holds words: suspects of mislabelled tags
    if run is None or (
        run.task_kind.unit != "word" and not applies_per_example(run, "Reviewing suspected label errors")
    ):
        st.stop()
    names = queue.list_queues(run)
    new_queue_form(run, first=not names)
    if not names:
        st.info("No review queue yet: make one above (or `cartomap review-queue create`).")
        st.stop()
    name = st.selectbox("Queue", names, **kept(QUEUE, names[-1], options=names))
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
