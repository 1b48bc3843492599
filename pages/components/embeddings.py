"""Where a page needs nearest neighbours and the run has no embeddings yet: what they are for, and a button
that computes them (the run's task ``embeddings``, ``cartomap embed RUN`` in the background; its panel
follows it while it runs), or why this run cannot have them (a run without its model's weights).

Used by the Data map's example panel and the Neighbours page.
"""

from __future__ import annotations

import streamlit as st

from cartomap.runs.store import Run
from cartomap.training.embeddings import TASK, embedding_problem, has_embeddings
from pages.common import escape_markdown
from pages.components.jobs import start_task_button, task_panel

#: What the embeddings are, said where they are offered.
WHAT_FOR = (
    "Nearest neighbours are found in the task model's [CLS] space: the final-layer [CLS] vector of every "
    "training example under this run's model, computed once (a background job; on a CPU about a minute per "
    "few thousand pairs with the default encoder)."
)


def embed_command(run: Run, force: bool = False) -> list[str]:
    """The ``cartomap`` arguments of the job that computes ``run``'s embeddings (``--force``: again)."""
    return ["embed", run.id, "--quiet", *(["--force"] if force else [])]


def offer_embeddings(run: Run, key: str, why: str = WHAT_FOR, *, force: bool = False) -> bool:
    """Offer the run's embeddings where something needs them: ``why`` (what they are for) and a "Compute
    embeddings" button (the task's live panel instead while it runs), or why they cannot be computed. Button
    key ``key``. Returns True when the run has them (nothing drawn), False otherwise."""
    if has_embeddings(run) and not force:
        return True
    if task_panel(run, TASK, "Embeddings"):  # running: its progress, nothing else
        return False
    problem = embedding_problem(run)
    if problem:
        st.warning(escape_markdown(f"No embeddings can be computed here: {problem}."), icon="⚠️")
        return False
    st.caption(escape_markdown(why))
    start_task_button(run, TASK, embed_command(run, force), "Compute embeddings", key=key)
    return False
