"""The Data map page's "Human judgement": when the run's data has votes, the truth report (``cartomap
truth``): how the map and every label-error detector agree with the annotators.
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import truth
from cartomap.analysis.truth import has_human_judgement
from cartomap.errors import CartomapError
from pages.common import kept, show_error
from pages.components import cached


def human_section(run) -> None:
    """ "Human judgement": the truth report (metrics vs human entropy, detectors vs gold ≠ majority)."""
    if not has_human_judgement(run):
        return
    with st.expander("Human judgement", expanded=False):
        st.caption(
            "How the map and every label-error detector agree with the annotators: Spearman of each metric "
            "with the entropy of the votes, and how well each detector ranks the examples whose gold label "
            "is not the majority's (or the known errors) first. Same numbers as `cartomap truth RUN`."
        )
        n_boot = st.number_input("Bootstrap resamples", 0, 5000, step=100, **kept("dm_truth_boot", 200))
        if not st.toggle("Show the report", key="dm_truth_on"):
            return
        try:
            report = cached.truth_report(run, int(n_boot))
        except CartomapError as err:
            show_error(err)
            return
        view = report.get("view") or {}
        if view:
            st.caption(f"Map metrics and dynamics detectors from the {view.get('label')}.")
        if report["spearman"]:
            st.markdown("**Data-map metrics vs human entropy**")
            st.dataframe(truth.spearman_frame(report), hide_index=True, key="dm_truth_spearman")
        for target, n_err in report["targets"].items():
            st.markdown(f"**Detectors for “{truth.TARGETS[target]}”** ({n_err:,} of {report['n']:,})")
            st.dataframe(truth.detector_frame(report, target), hide_index=True, key=f"dm_truth_{target}")
        missing = truth.unavailable_frame(report)
        if len(missing):
            st.markdown("**Detectors this run cannot feed yet**")
            st.caption(
                "Each needs what the run lacks; run the command beside it, then show the report again. "
                f"`{truth.REFERENCE_DETECTOR}` is the reference detector: it needs out-of-fold "
                "probabilities, which a pruning experiment on the run's data makes."
            )
            st.dataframe(missing, hide_index=True, key="dm_truth_unavailable")
