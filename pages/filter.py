"""Filter page: WaNLI Stage 3 on a generated batch (heuristic rules, tidying, estimated max variability).

Layout only: the filtering is ``cartomap.wanli.filtering``; it runs as a CLI job (``cartomap filter``,
task ``filter-<batch>``) and this page polls the task. Generated text is shown in tables only
(plain text, never HTML). Session state: ``flt_*`` keys with ``_kept_flt_*`` widget shadows.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from cartomap.runs import layout, shipped
from cartomap.runs.store import Run
from cartomap.tasks import support
from cartomap.wanli import batches
from cartomap.wanli.batches import load_filtered
from cartomap.wanli.filtering import ALL_RULES, RULE_DESCRIPTIONS, RULES, task_name, variability_figure
from pages.common import applies, current_run, kept, through_app
from pages.components.jobs import demo_or_prompt, start_task_button, task_panel

through_app()  # a first visit straight to this page's address: run it through app.py

TABLE_COLUMNS = ["gen_id", "intended_label", "premise", "hypothesis", "max_variability", "group", "seed_id"]


@st.cache_data(max_entries=4, show_spinner="Loading the filtered batch…")
def _filtered(run_path: str, batch: str, stamp: int | None) -> pd.DataFrame | None:
    return load_filtered(Run(Path(run_path)), batch)


def filter_panel(run: Run, batch: str, filtered: bool) -> None:
    """Settings and the start button, or the progress of the running job."""
    name = task_name(batch)
    if task_panel(run, name, "Filtering"):
        return
    checkpoints = run.checkpoint_dirs()
    if not checkpoints and shipped.is_recording(run):
        st.warning(f"Run {run.id}: {shipped.NO_WEIGHTS}.")
        return
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
    review_db = batches.review_path(run, batch)
    if filtered and review_db.exists():
        st.caption(
            "This batch is being reviewed: filtering again changes which examples are offered; "
            "the reviews made so far are kept."
        )
    args = ["filter", run.id, "--batch", batch, "--keep-fraction", str(float(fraction))]
    if not balance:
        args.append("--no-balance")
    start_task_button(run, name, args, "Filter again" if filtered else "Filter this batch", key="flt_start")


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
    if not applies(run, support.WANLI):
        st.stop()
    names = batches.list_batches(run, having=layout.GENERATED)
    if not names:
        st.info("This run has no generated batches yet: generate examples first (WaNLI Stage 2).")
        st.stop()
    batch = st.selectbox("Generated batch", names, **kept("flt_batch", names[0], options=names))
    frame = _filtered(str(run.path), batch, run.stamp(batches.filtered_path(run, batch))[0])
    filter_panel(run, batch, frame is not None)
    if frame is None:
        st.info("This batch has not been filtered yet.")
        return
    st.divider()
    try:
        report = batches.load_report(run, batch) if run.stamp(batches.report_path(run, batch))[0] else None
    except (OSError, ValueError):
        report = None
    show_results(frame, report)


main()
