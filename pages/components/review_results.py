"""The Review suspects page's lower half: a queue's progress and agreement, its final decisions and exports,
the retraining on the corrected set, decisions imported from Label Studio or Argilla, and the guidelines
its reviewers read."""

from __future__ import annotations

import sqlite3

import pandas as pd
import streamlit as st

from cartomap.curation import aggregate, corrected, exchange, queue
from cartomap.curation.store import MAX_GUIDELINES
from cartomap.errors import CartomapError
from cartomap.experiments import correction, launch
from cartomap.experiments import registry as experiment_kinds
from cartomap.runs.progress import state_text
from cartomap.runs.sqlite import database_problem
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.team.roles import Action
from pages.common import (
    acting_as,
    escape_markdown,
    flash,
    for_display,
    get_experiments,
    kept,
    show_error,
    write_button,
)
from pages.components.jobs import experiment_panel


def summary(run: Run, name: str, db: queue.QueueDB) -> None:
    st.subheader("Progress, agreement and export")
    progress = db.progress()
    cols = st.columns(4)
    cols[0].metric("Examples", f"{progress['items']:,}")
    cols[1].metric(f"With {progress['per_item']} decisions", f"{progress['complete']:,}")
    cols[2].metric("Partly decided", f"{progress['partial']:,}")
    cols[3].metric("Undecided", f"{progress['undecided']:,}")
    import_form(run, name, db)
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
    fixed = corrected.written_named(run, name, table) if ref == corrected.corrected_ref(run, name) else None
    if fixed is not None:
        st.caption(f"Train on it with --data {escape_markdown(ref)}")
        left, right = st.columns(2)
        shape = corrected.file_shape(run)  # a token run's: its file's own (CoNLL columns or JSONL)
        left.download_button(
            f"Corrected set, {len(fixed):,} examples ({shape.upper()})",
            lambda: corrected.corrected_bytes(run, fixed),
            file_name=f"{name}_corrected.{shape}",
            mime="text/plain" if shape == corrected.CONLL else "application/jsonl",
            key="rs_download_corrected",
            on_click="ignore",
        )
        right.download_button(
            "Decisions file (CSV)",
            lambda: corrected.table_bytes(table, "csv"),
            file_name=f"{name}_decisions.csv",
            mime="text/csv",
            key="rs_download_decisions",
            on_click="ignore",
        )
    if run.task_kind.unit.sentences:  # the retrain experiment works on examples with one label each
        st.caption(
            (
                "A relabel sets its sentence's tags; a removed item drops its sentence."
                if db.tag_lists
                else "A relabel changes that word's tag in its sentence; a removed word drops its sentence."
            )
            + " Train on the corrected sentences with `cartomap train --data` and the reference above."
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
            xstore = get_experiments()
            exp = correction.create_correction(
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
    for exp in correction.corrections_of(run, get_experiments()):
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


def import_form(run: Run, name: str, db: queue.QueueDB) -> None:
    """The queue out to Label Studio or Argilla (files made when the button is clicked), and their
    decisions back; for a queue of sentences or spans, why not."""
    with st.expander("Label Studio or Argilla: the queue out, their decisions back"):
        why = exchange.tool_refusal(db.level)
        if why is not None:
            st.caption(escape_markdown(why[0].upper() + why[1:] + "."))
            return
        left, right = st.columns(2)
        left.download_button(
            "Label Studio tasks (JSON)",
            lambda: exchange.label_studio_download(run, name),
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
