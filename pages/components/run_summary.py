"""The Data map page's run summary and training curves.

"Run summary" shows accuracy, recording settings and the dev confusion matrix
(``cartomap.analysis.summary``); "Training curves" the run's loss and accuracy by epoch
(``cartomap.analysis.curves``).
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import curves, summary
from cartomap.errors import CartomapError
from pages.common import escape_markdown, show_error
from pages.components import cached


def summary_section(run, rule_text: str, n_seeds: int) -> None:
    """ "Run summary": dev/test accuracy (last and best epoch), epochs, seeds, recording, regions, and the
    dev set's confusion matrix at the final epoch."""
    try:
        facts = summary.run_summary(run, n_seeds=n_seeds, region_rule=rule_text)
        dev_epochs = run.dynamics_epochs("dev")
        confusion = cached.dev_confusion(run, dev_epochs)
    except CartomapError as err:
        show_error(err)
        return
    st.caption(escape_markdown(f"Run: {summary.summary_line(facts)}."))
    with st.expander("Run summary and dev confusion matrix", expanded=False):
        left, right = st.columns([3, 2])
        left.dataframe(summary.summary_rows(facts), hide_index=True, key="dm_summary", width="stretch")
        with right:
            if confusion is None:
                st.caption("No dev set: no confusion matrix.")
            else:
                st.caption(f"Dev set at the final epoch ({dev_epochs[-1] + 1}): gold label by prediction.")
                st.dataframe(confusion, key="dm_confusion")


def curves_section(run) -> None:
    """ "Training curves": the run's loss and dev / test accuracy by epoch and its loss every k steps
    (``cartomap.analysis.curves``, the job panel's live curves, here of the finished run) in a collapsed
    expander at the end of the page; nothing for a run without them.

    On a session's first map it is sent right after the map's picture (the page's ``main``): the browser, showing
    the picture, fetches and compiles plotly.js (a few MB, loaded with the page's first chart) while the
    server builds the map's figure. Sent before the picture, plotly.js's compilation held the picture
    back; sent after the map, the chart waited for it (docs/benchmarks.md, "A picture first")."""
    try:
        frame = curves.training_curves(run.history(), run.status(), run.test_names)
        steps = curves.step_curve(run.step_losses())
    except (CartomapError, OSError, ValueError):
        return
    if frame.empty and steps.empty:
        return
    with st.expander("Training curves", expanded=False):
        st.plotly_chart(
            curves.training_curves_figure(frame, height=260, steps=steps),
            key="dm_curves",
            config={"displaylogo": False},
        )
