"""Filter page: WaNLI Stage 3 on a generated batch (heuristic rules, tidying, estimated max variability).

Layout only: the filtering is ``cartomap.filtering``; it runs as a CLI job (``cartomap filter``,
task ``filter-<batch>``) and this page polls the task. Generated text is shown in tables only
(plain text, never HTML). Session state: ``flt_*`` keys with ``_kept_flt_*`` widget shadows.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.errors import CartomapError
from cartomap.filtering import (
    ALL_RULES,
    FILTERED_FILE,
    REPORT_FILE,
    RULE_DESCRIPTIONS,
    RULES,
    batch_path,
    list_batches,
    load_filtered,
    load_report,
    task_name,
    variability_figure,
)
from cartomap.jobs import start_task, tail, task_status
from cartomap.review import REVIEW_FILE
from cartomap.store import Run
from pages.common import current_run, demo_or_prompt, get_store, kept, show_error

POLL_S = 1.0
ACTIVE = ("queued", "running")
STUCK_S = 90  # a job still queued after this long probably failed to start: show its log
TABLE_COLUMNS = ["gen_id", "intended_label", "premise", "hypothesis", "max_variability", "group", "seed_id"]


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None


@st.cache_data(max_entries=4, show_spinner="Loading the filtered batch…")
def _filtered(run_path: str, batch: str, stamp: int | None) -> pd.DataFrame | None:
    return load_filtered(Run(Path(run_path)), batch)


# --------------------------------------------------------------------------- the job
@st.fragment(run_every=POLL_S)
def _live_task(run: Run, name: str) -> None:
    status = task_status(run, name) or {}
    state = status.get("state")
    if state not in ACTIVE:
        st.rerun()  # the whole page: it draws the result (or the error)
        return
    fraction = min(max(float(status.get("progress") or 0.0), 0.0), 1.0)
    phase = status.get("phase") or state
    st.progress(fraction, text=f"Filtering: {state} · {phase}")
    waited = time.time() - float(status.get("updated_at") or time.time())
    if state == "queued" and waited > STUCK_S:
        st.warning("The job has not started yet. The end of its log:")
        st.code(tail(run.path / "tasks" / f"{name}.log") or "(empty log)", language=None)


def filter_panel(run: Run, batch: str, filtered: bool) -> None:
    """Settings and the start button, or the progress of the running job."""
    name = task_name(batch)
    status = task_status(run, name) or {}
    state = status.get("state")
    if state in ACTIVE:
        _live_task(run, name)
        return
    if state == "failed":
        show_error(f"Filtering failed: {status.get('error') or 'see the log'}")
        st.code(tail(run.path / "tasks" / f"{name}.log") or "(empty log)", language=None)
    elif state == "interrupted":
        st.warning("Filtering stopped before finishing (killed or crashed): start it again.")
    checkpoints = run.checkpoint_dirs()
    if not checkpoints:
        st.warning(
            "This run kept no end-of-epoch checkpoints, which estimated max variability needs. "
            "Train the run again with checkpoints (the default; not --no-checkpoints)."
        )
        return
    if len(checkpoints) == 1:
        st.warning("This run has one checkpoint only: every max variability is 0, so the cut is arbitrary.")
    left, right = st.columns(2)
    fraction = left.number_input(
        "Keep fraction",
        min_value=0.0,
        max_value=1.0,
        step=0.05,
        help="Of the examples that pass the rules, keep the highest-scoring fraction (WaNLI: 0.5).",
        **kept("flt_keep_fraction", 0.5),
    )
    balance = right.checkbox(
        "Same number per intended label",
        help="WaNLI keeps floor(fraction × survivors / labels) per intended label.",
        **kept("flt_balance", True),
    )
    review_db = batch_path(run, batch) / REVIEW_FILE
    if filtered and review_db.exists():
        st.caption(
            "This batch is being reviewed: filtering again changes which examples are offered; "
            "the reviews made so far are kept."
        )
    label = "Filter again" if filtered else "Filter this batch"
    if st.button(label, key="flt_start", type="primary"):
        args = ["filter", run.id, "--batch", batch, "--keep-fraction", str(float(fraction))]
        if not balance:
            args.append("--no-balance")
        try:
            start_task(run, name, args, get_store())
        except (CartomapError, OSError) as err:
            show_error(err)
        else:
            st.rerun()


# --------------------------------------------------------------------------- results
def counts_table(report: dict) -> pd.DataFrame:
    counts = report.get("counts", {})
    return pd.DataFrame(
        {
            "rule": list(ALL_RULES),
            "removed": [int(counts.get(r, 0)) for r in ALL_RULES],
            "what it removes": [RULE_DESCRIPTIONS[r] for r in ALL_RULES],
        }
    )


def show_results(frame: pd.DataFrame, report: dict | None) -> None:
    report = report or {}
    n = len(frame)
    heuristics = int(frame["removed_by"].isin(RULES).sum())
    kept_n = int(frame["kept"].sum())
    cols = st.columns(4)
    cols[0].metric("Generated", f"{n:,}")
    cols[1].metric("Removed by rules", f"{heuristics:,}")
    cols[2].metric("Scored", f"{n - heuristics:,}")
    cols[3].metric("Kept", f"{kept_n:,}")
    cfg = report.get("config", {})
    if cfg:
        st.caption(
            f"Keep fraction {cfg.get('keep_fraction')}, "
            f"{'the same number per intended label' if cfg.get('balance') else 'overall'}; "
            f"{report.get('epochs', '?')} checkpoints. Rules run in order: a row is counted under the first "
            "rule that removes it."
        )
    st.dataframe(counts_table(report), hide_index=True, key="flt_counts")
    if frame["max_variability"].notna().any():
        fig = variability_figure(frame, report.get("cut_by_label"))
        st.plotly_chart(fig, key="flt_plot", width="stretch", config={"displaylogo": False})

    kept_rows = frame[frame["kept"]]
    removed_rows = frame[~frame["kept"]]
    tab_kept, tab_removed = st.tabs([f"Kept ({len(kept_rows):,})", f"Removed ({len(removed_rows):,})"])
    with tab_kept:
        columns = [c for c in TABLE_COLUMNS if c in frame.columns]
        st.dataframe(
            kept_rows[columns].sort_values("max_variability", ascending=False),
            hide_index=True,
            key="flt_kept_table",
            column_config={"max_variability": st.column_config.NumberColumn(format="%.4f")},
        )
    with tab_removed:
        present = [r for r in ALL_RULES if (removed_rows["removed_by"] == r).any()]
        rules = st.multiselect("Removed by", present, **kept("flt_rules", present, options=present))
        shown = removed_rows[removed_rows["removed_by"].isin(rules)]
        columns = ["removed_by"] + [c for c in TABLE_COLUMNS if c in frame.columns]
        columns += [c for c in ("premise_raw", "hypothesis_raw") if c in frame.columns]
        st.dataframe(
            shown[columns],
            hide_index=True,
            key="flt_removed_table",
            column_config={"max_variability": st.column_config.NumberColumn(format="%.4f")},
        )


# --------------------------------------------------------------------------- page
def main() -> None:
    st.title("Filter generated examples")
    st.caption(
        "WaNLI Stage 3. Rules, in order: premise or hypothesis missing or shorter than 5 characters; "
        "premise equals hypothesis (ignoring case and punctuation); a phrase of the instruction; a copy "
        "of an in-context example. Survivors are tidied (wrapping quotes or brackets), scored by "
        "estimated max variability over the run's epoch checkpoints, and the highest-scoring half is "
        "kept, the same number per intended label."
    )
    run = demo_or_prompt(current_run())  # app.py draws the run picker in the sidebar
    if run is None:
        st.stop()
    batches = list_batches(run)
    if not batches:
        st.info("This run has no generated batches yet: generate examples first (WaNLI Stage 2).")
        st.stop()
    batch = st.selectbox("Generated batch", batches, **kept("flt_batch", batches[0], options=batches))
    folder = batch_path(run, batch)
    frame = _filtered(str(run.path), batch, _mtime(folder / FILTERED_FILE))
    filter_panel(run, batch, frame is not None)
    if frame is None:
        st.info("This batch has not been filtered yet.")
        return
    st.divider()
    try:
        report = load_report(run, batch) if _mtime(folder / REPORT_FILE) else None
    except (OSError, ValueError):
        report = None
    show_results(frame, report)


main()
