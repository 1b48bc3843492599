"""A multi-label run on the Data map page: which of its maps is shown ("Map of").

The page's part for a token run is ``pages.components.token_map``; a view's frame is read through
``pages.components.maps.label_view``.
"""

from __future__ import annotations

import streamlit as st

from cartomap.analysis import multilabel as label_views
from pages.common import kept


def view_key(run) -> str:
    """The session key of the run's view picker (a saved view keeps it: ``pages.components.saved_views``)."""
    return f"dm_label_view_{run.id}"


def view_picker(run) -> str:
    """A multi-label run's view picker (one label's map, every example at its worst label, every
    (example, label); ``dm_label_view_<run>``), with a caption that says what this page does not show
    for such a run."""
    names = run.label_names
    options = label_views.views(names)
    view = st.selectbox(
        "Map of",
        options,
        format_func=lambda v: label_views.view_title(v, names),
        help="A multi-label run records every label of every example: pick one label's map, or every "
        "example at its worst label (the lowest confidence over its labels).",
        **kept(view_key(run), label_views.COMBINED, options=options),
    )
    st.caption(
        "A multi-label run: not shown here yet are seeds and nearest neighbours. A point of the combined "
        "map shows its worst label's probability by epoch."
    )
    return str(view)
