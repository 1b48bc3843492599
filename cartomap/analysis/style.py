"""How every figure looks, and the one way dataset text goes into a figure.

* :func:`escape` / :func:`escape_text`: dataset text is untrusted; plotly renders a subset of HTML in
  hover text, trace names and titles, so every string from the data goes through these.
* :data:`PALETTE`, :data:`REGION_COLORS`, :func:`bucket_colors`: the colours of every figure.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
from matplotlib import colormaps

from cartomap.scores.metrics import AMBIGUOUS, EASY, HARD, bucket_value

#: The qualitative colours of every figure (labels, genres, runs), in order.
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880")


def palette_color(i: int) -> str:
    """The ``i``-th qualitative colour (cycling)."""
    return PALETTE[i % len(PALETTE)]


REGION_COLORS = {EASY: "#d62728", AMBIGUOUS: "#2c2c2c", HARD: "#1f77b4"}


NO_VALUE_COLOR = "rgb(170,170,170)"


#: The legend title of the correctness colours.
CORRECTNESS_TITLE = "correct in k of E epochs"


def correctness_legend_title(levels: Sequence[str]) -> str:
    return CORRECTNESS_TITLE if any("/" in str(v) for v in levels) else "correctness"


def bucket_colors(levels: Sequence[str]) -> dict[str, tuple]:
    """Discrete blue (never correct) -> red (always correct) palette over the correctness buckets."""
    cmap = colormaps["coolwarm"]
    values = [bucket_value(v) for v in levels]
    return {lvl: cmap(v) for lvl, v in zip(levels, values, strict=True)}


def escape_text(text) -> str:
    """One string HTML-escaped (``& < >``) for a plotly name, title or label."""
    return html.escape(str(text), quote=False)


def escape(values) -> pd.Series:
    """HTML-escape ``& < >`` of every string: plotly renders tags in hover text and names (it decodes
    &amp; &lt; &gt; back to text, but not &quot;, and quotes are harmless once no tag can open)."""
    series = pd.Series(values, dtype=object).astype(str)
    return (
        series.str.replace("&", "&amp;", regex=False)
        .str.replace("<", "&lt;", regex=False)
        .str.replace(">", "&gt;", regex=False)
    )
