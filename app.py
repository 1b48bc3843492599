"""The cartomap dashboard: ``cartomap dashboard`` (``python dashboard.py [streamlit options]`` is the same
server; env CARTOMAP_CACHE names the run store, default ./cache). A plain ``streamlit run app.py`` works
too, but a server's first visit to a page's address then briefly shows Streamlit's listing of pages/
(see dashboard.py).

Twelve pages, Data map first: training and the map, the WaNLI pipeline (neighbours to review),
then the experiments (label pruning and the review of suspects, artifacts, curricula and combinations, comparing runs). The sidebar's run picker (pages/common.py) is drawn here, once,
for every page; pages read the choice with ``pages.common.current_run()``.
"""

import streamlit as st

from pages.common import gate, sidebar_run_picker

st.set_page_config(page_title="cartomap", page_icon="🗺️", layout="wide")  # an emoji: no font fetched offline
gate()  # team mode: who is signed in (or the sign-in button); a server open beyond 127.0.0.1 stops here
DATA_MAP = st.Page("pages/data_map.py", title="Data map", icon=":material/scatter_plot:")


def landing() -> None:
    """The app's root address opens the Data map at its own address, the query (?run=) kept.

    Streamlit gives the default page the root address only, so a default Data map would have no
    /data_map: a link to it would show "Page not found". The default is this hidden page instead."""
    st.switch_page(DATA_MAP, query_params=st.query_params.to_dict())


page = st.navigation(
    [
        st.Page(landing, title="cartomap", default=True, visibility="hidden"),
        st.Page("pages/train.py", title="Train", icon=":material/model_training:"),
        DATA_MAP,
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
