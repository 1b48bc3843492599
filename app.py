"""The cartomap dashboard: ``cartomap dashboard`` (or ``streamlit run app.py``; env CARTOMAP_CACHE
names the run store, default ./cache).

Twelve pages, Data map first: training and the map, the WaNLI pipeline (neighbours to review),
then the experiments (label pruning and the review of suspects, artifacts, curricula and combinations, comparing runs). The sidebar's run picker (pages/common.py) is drawn here, once,
for every page; pages read the choice with ``pages.common.current_run()``.
"""

import streamlit as st

from pages.common import sidebar_run_picker

st.set_page_config(page_title="cartomap", page_icon="🗺️", layout="wide")  # an emoji: no font fetched offline
page = st.navigation(
    [
        st.Page("pages/train.py", title="Train", icon=":material/model_training:"),
        st.Page("pages/data_map.py", title="Data map", icon=":material/scatter_plot:", default=True),
        st.Page("pages/neighbours.py", title="Neighbours", icon=":material/hub:"),
        st.Page("pages/prompts.py", title="Prompts", icon=":material/edit_note:"),
        st.Page("pages/generate.py", title="Generate", icon=":material/auto_awesome:"),
        st.Page("pages/filter.py", title="Filter", icon=":material/filter_alt:"),
        st.Page("pages/review.py", title="Review", icon=":material/rate_review:"),
        st.Page("pages/pruning.py", title="Prune labels", icon=":material/content_cut:"),
        st.Page("pages/review_suspects.py", title="Review suspects", icon=":material/fact_check:"),
        st.Page("pages/artifacts.py", title="Artifacts", icon=":material/query_stats:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
        st.Page("pages/experiments.py", title="Curricula & combinations", icon=":material/science:"),
    ]
)
sidebar_run_picker()
page.run()
