"""The dashboard's pages, in the sidebar's order, and their addresses: each page's address follows its
title ("Prune labels" is at ``/prune_labels``), and an address a page had before (its file's name,
``/pruning``) still opens it. ``app.py`` builds the navigation from :data:`PAGES`."""

from __future__ import annotations

import re

#: (script, title, icon) of every page the sidebar lists, in its order.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("pages/train.py", "Train", ":material/model_training:"),
    ("pages/data_map.py", "Data map", ":material/scatter_plot:"),
    ("pages/neighbours.py", "Neighbours", ":material/hub:"),
    ("pages/prompts.py", "Prompts", ":material/edit_note:"),
    ("pages/generate.py", "Generate", ":material/auto_awesome:"),
    ("pages/filter.py", "Filter", ":material/filter_alt:"),
    ("pages/review.py", "Review", ":material/rate_review:"),
    ("pages/pruning.py", "Prune labels", ":material/content_cut:"),
    ("pages/review_suspects.py", "Review suspects", ":material/fact_check:"),
    ("pages/artifacts.py", "Artifacts", ":material/query_stats:"),
    ("pages/compare.py", "Compare", ":material/compare_arrows:"),
    ("pages/experiments.py", "Curricula & combinations", ":material/science:"),
)


def address(title: str) -> str:
    """A page's address from its title: its words in lower case joined by ``_`` ("Prune labels" ->
    ``prune_labels``, "Curricula & combinations" -> ``curricula_combinations``)."""
    return "_".join(re.findall(r"[a-z0-9]+", title.lower()))


def script_address(script: str) -> str:
    """The address Streamlit gives a page script by its file name (``pages/pruning.py`` -> ``pruning``)."""
    return script.rsplit("/", 1)[-1].removesuffix(".py")


def moved_addresses() -> dict[str, str]:
    """Old address -> the page's address, for every page whose script's name is not its title's address
    (the addresses those pages had before they followed their titles)."""
    return {
        script_address(script): address(title)
        for script, title, _ in PAGES
        if script_address(script) != address(title)
    }
