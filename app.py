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
from pages.components import navigation
from pages.components.jobs import install_recorded_demo

st.set_page_config(page_title="cartomap", page_icon="🗺️", layout="wide")  # an emoji: no font fetched offline
gate()  # team mode: who is signed in (or the sign-in button); a server open beyond 127.0.0.1 stops here
PAGES = {
    script: st.Page(script, title=title, icon=icon, url_path=navigation.address(title))
    for script, title, icon in navigation.PAGES
}
DATA_MAP = PAGES["pages/data_map.py"]


def landing() -> None:
    """The app's root address opens the Data map at its own address, the query (?run=) kept.

    Streamlit gives the default page the root address only, so a default Data map would have no
    /data_map: a link to it would show "Page not found". The default is this hidden page instead."""
    st.switch_page(DATA_MAP, query_params=st.query_params.to_dict())


def moved(page: st.Page):
    """A hidden page at an address ``page`` had before: it opens ``page`` at its address, the query kept."""

    def go() -> None:
        st.switch_page(page, query_params=st.query_params.to_dict())

    return go


by_address = {page.url_path: page for page in PAGES.values()}
page = st.navigation(
    [
        st.Page(landing, title="cartomap", default=True, visibility="hidden"),
        *PAGES.values(),
        *(
            st.Page(moved(by_address[new]), title=by_address[new].title, url_path=old, visibility="hidden")
            for old, new in navigation.moved_addresses().items()
        ),
    ]
)
install_recorded_demo()  # a fresh install's store gets the demo's recorded run: its map opens at once
sidebar_run_picker()
page.run()
