"""The points of a data map figure: what they can be coloured by, their colour groups and scales,
their hover text, and their plotly traces (:func:`point_traces`), shared by the single map and the map split
into panels (:mod:`cartomap.analysis.figures`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps

from cartomap.analysis import colourings
from cartomap.analysis.datamap import axis_of, frame_memo, id_array, str_array
from cartomap.analysis.selection import MAIN_XREF, MAIN_YREF
from cartomap.analysis.style import (
    NO_VALUE_COLOR,
    REGION_COLORS,
    bucket_colors,
    correctness_legend_title,
    escape,
    escape_text,
    palette_color,
)
from cartomap.errors import DataError
from cartomap.scores import ambiguity
from cartomap.scores.metrics import AMBIGUOUS, EASY, HARD, bucket_order, bucket_value
from cartomap.tasks import registry as task_kinds

COLOR_BY = ("correctness", "label", "region", "genre")


#: Colours of a map whose data has votes: human entropy (bits, in 4 bins) and gold vs the majority.
HUMAN_ENTROPY = "human entropy"


GOLD_VS_MAJORITY = "gold vs majority"


HUMAN_COLOR_BY = (HUMAN_ENTROPY, GOLD_VS_MAJORITY)


#: Colour of a map over seeds (:func:`cartomap.analysis.seed_maps.seed_map_frame`): how many seeds agree
#: on an example's region ("3/3", "2/3", ...).
AGREEMENT = "region agreement"


HOVER_TEXT_CHARS = 70


def shorten(series: pd.Series, n: int = HOVER_TEXT_CHARS) -> pd.Series:
    text = series.astype(str).str.slice(0, 2 * n).str.replace(r"\s+", " ", regex=True)
    long = text.str.len() > n
    return text.where(~long, text.str.slice(0, n - 1) + "…")


def hover_text(shown: pd.DataFrame) -> np.ndarray:
    """One escaped hover string per row: id, gold / predicted label, correctness and the start of
    the texts. Confidence and the map's axis are added by :func:`hover_template` from the coordinates
    (formatted in the browser: a smaller payload)."""
    idx = shown.index
    text = "id: " + escape(shown["id"]).set_axis(idx)
    text = text + "<br>gold " + escape(shown["gold"]).set_axis(idx) + " · predicted "
    text = text + escape(shown["predicted"]).set_axis(idx)
    text = text + " · correctness " + shown["correctness"].map("{:.2f}".format)
    if "bucket" in shown.columns:
        buckets = shown["bucket"].astype(str)
        text = text + np.where(buckets.str.contains("/"), " (" + buckets + " epochs)", "")
    for col in task_kinds.text_fields_in(shown.columns):  # each text by its initial: P, H; T
        text = text + f"<br>{col[0].upper()}: " + escape(shorten(shown[col])).set_axis(idx)
    return text.to_numpy(dtype=object)


def axis_title(axis: str) -> str:
    """What a map's x axis is called: the ambiguity score's label ("variability", "mean entropy", ...)."""
    return ambiguity.get(axis).label


def hover_template(axis: str) -> str:
    """Hover of a map point: the escaped :func:`hover_text`, then confidence and the axis's value."""
    return f"%{{hovertext}}<br>confidence %{{y:.3f}} · {axis_title(axis)} %{{x:.3f}}<extra></extra>"


def check_map_columns(metrics: pd.DataFrame) -> None:
    missing = [c for c in ("confidence", axis_of(metrics), "correctness") if c not in metrics.columns]
    if missing:
        raise DataError(
            f"metrics frame lacks columns {missing}; build it with cartomap.scores.metrics.compute_metrics",
            field=missing[0],
        )


def colour_groups(frame: pd.DataFrame, color_by: str) -> tuple[np.ndarray, list[str], dict[str, str], str]:
    """(group of every row, ordered levels, colour per level, legend title)."""
    if color_by == "correctness":
        groups = str_array(frame["bucket"])
        levels = bucket_order(pd.unique(groups))  # distinct values only: 550k rows, a handful of buckets
        palette = {
            k: "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(c[:3])))
            for k, c in bucket_colors(levels).items()
        }
        return groups, levels, palette, correctness_legend_title(levels)
    if color_by == "region":
        groups = str_array(frame["region"])
        present = set(groups)
        levels = [r for r in (EASY, AMBIGUOUS, HARD) if r in present] + sorted(
            present - {EASY, AMBIGUOUS, HARD}
        )
        palette = dict(REGION_COLORS)
        for i, lvl in enumerate(levels):
            palette.setdefault(lvl, palette_color(i))
        return groups, levels, palette, "region"
    if color_by == "label":
        groups = str_array(frame["gold"])
        order = frame[["label", "gold"]].drop_duplicates("gold").sort_values("label")
        levels = [str(v) for v in order["gold"]]
    elif color_by == AGREEMENT:
        if "region_votes" not in frame.columns:
            raise ValueError("only a map over seeds can be coloured by region agreement")
        groups = str_array(frame["region_votes"])
        levels = sorted(set(groups), key=lambda v: bucket_value(v), reverse=True)  # all seeds agree first
        cmap = colormaps["RdYlGn"]
        values = [bucket_value(v) for v in levels]
        palette = {
            lvl: "rgb({:.0f},{:.0f},{:.0f})".format(*(255 * np.asarray(cmap(0.1 + 0.8 * v)[:3])))
            for lvl, v in zip(levels, values, strict=True)
        }
        return groups, levels, palette, "seeds agreeing on the region"
    elif color_by == GOLD_VS_MAJORITY:
        if "agreement" not in frame.columns:
            raise ValueError("only a map of data with votes can be coloured by gold vs majority")
        groups = str_array(frame["agreement"])
        levels = [v for v in ("gold = majority", "gold ≠ majority", "no majority (tie)") if v in set(groups)]
        palette = {"gold = majority": "#1a9850", "gold ≠ majority": "#d73027", "no majority (tie)": "#fdae61"}
        return groups, levels, palette, "gold label vs the annotators' majority"
    elif color_by == "genre":
        if "genre" not in frame.columns:
            raise ValueError("this dataset has no genre column to colour by")
        groups = str_array(frame["genre"])
        levels = sorted(set(groups))
    else:
        raise ValueError(f"color_by must be one of {COLOR_BY}, got {color_by!r}")
    palette = {lvl: palette_color(i) for i, lvl in enumerate(levels)}
    return groups, levels, palette, color_by


def check_color_by(color_by: str) -> None:
    if not colourings.known(color_by):
        raise ValueError(
            f"color_by must be one of {(*colourings.BUILT_IN, colourings.AMBIGUITY_PREFIX + '<label>', colourings.DETECTOR_PREFIX + '<title>')}, "
            f"got {color_by!r}"
        )


def colouring_of(frame: pd.DataFrame, color_by: str) -> colourings.Colouring:
    """The colouring ``color_by`` of ``frame``: a categorical one as it is (its levels say what is
    missing), a continuous one only when the frame holds it (ValueError otherwise)."""
    check_color_by(color_by)
    built_in = colourings.BUILT_IN.get(color_by)
    if built_in is not None and not built_in.continuous:
        return built_in
    return colourings.get(frame, color_by)


def finite_range(values: np.ndarray) -> tuple[float, float]:
    """The colour range of a continuous score: its 1st to 99th percentile (one far outlier, such as the
    forgetting detector's 1000 for a never-learned example, does not flatten every other colour)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0, 1.0
    lo, hi = (float(v) for v in np.percentile(finite, [1, 99]))
    if hi <= lo:
        lo, hi = float(finite.min()), float(finite.max())
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _colour_bar(title: str, x: float, y: float) -> dict:
    """A horizontal colour bar centred at ``x``, its top at ``y`` (paper units), titled on top."""
    return dict(
        title=dict(text=title, side="top"),
        orientation="h",
        x=x,
        xanchor="center",
        y=y,
        yanchor="top",
        len=0.6,
        thickness=12,
    )


def _scored_hover(hover: np.ndarray, title: str, values: np.ndarray) -> np.ndarray:
    """Each point's hover text with "<br><title>: <value to 3 decimals>" appended."""
    return hover + f"<br>{title}: " + pd.Series(values).map("{:.3f}".format).to_numpy()


def point_traces(
    frame: pd.DataFrame,
    shown: pd.DataFrame,
    color_by: str,
    marker_size: int,
    *,
    xaxis: str = MAIN_XREF,
    yaxis: str = MAIN_YREF,
    showlegend: bool = True,
    colour_range: tuple[float, float] | None = None,
    counts: pd.Series | None = None,
    colorbar_x: float = 0.415,
    colorbar_y: float = -0.13,
) -> tuple[list, str]:
    """The Scattergl traces of the points of ``shown`` (a sample of ``frame``) coloured by ``color_by``,
    and the legend title. Categorical: one trace per level, named "<level> (<count in frame>)".
    Continuous: one trace with a colour scale over ``colour_range`` (default: the score's 1st to 99th
    percentile over ``frame``) and its colour bar (shown with ``showlegend``), plus a grey trace of the
    rows without a value. Each point's ``customdata`` is its example id, its hover text escaped."""
    import plotly.graph_objects as go

    colouring = colouring_of(frame, color_by)
    axis = axis_of(frame)
    x = shown[axis].to_numpy(dtype=np.float64)
    y = shown["confidence"].to_numpy(dtype=np.float64)
    ids = id_array(shown["id"])
    hover = frame_memo(shown, "hover", lambda: hover_text(shown))  # the same sample on every rerun
    common = dict(mode="markers", xaxis=xaxis, yaxis=yaxis, hovertemplate=hover_template(axis))
    traces = []
    if colouring.continuous:
        values = colourings.values(shown, colouring)
        lo, hi = colour_range or finite_range(colourings.values(frame, colouring))
        ok = np.isfinite(values)
        title = escape_text(colouring.title)
        if ok.any():
            traces.append(
                go.Scattergl(
                    x=x[ok],
                    y=y[ok],
                    name=escape_text(colouring.name),
                    legendgroup="scored",
                    showlegend=False,
                    customdata=ids[ok],
                    hovertext=_scored_hover(hover[ok], title, values[ok]),
                    marker=dict(
                        size=marker_size,
                        color=values[ok],
                        colorscale=colouring.scale,
                        cmin=lo,
                        cmax=hi,
                        opacity=0.85,
                        showscale=showlegend,
                        colorbar=_colour_bar(title, colorbar_x, colorbar_y),
                    ),
                    **common,
                )
            )
        if (~ok).any():
            traces.append(
                go.Scattergl(
                    x=x[~ok],
                    y=y[~ok],
                    name=f"no value ({int((~ok).sum()):,})",
                    legendgroup="no value",
                    showlegend=showlegend,
                    customdata=ids[~ok],
                    hovertext=hover[~ok],
                    marker=dict(size=marker_size, color=NO_VALUE_COLOR, opacity=0.6),
                    **common,
                )
            )
        return traces, colouring.title
    groups, levels, palette, legend_title = colour_groups(shown, color_by)
    if counts is None:
        counts = pd.Series(
            colour_groups(frame, color_by)[0] if len(shown) < len(frame) else groups
        ).value_counts()
    for level in levels:
        sel = groups == level
        if not np.any(sel):
            continue
        traces.append(
            go.Scattergl(
                x=x[sel],
                y=y[sel],
                name=escape_text(f"{level} ({int(counts.get(level, 0)):,})"),
                legendgroup=escape_text(str(level)),
                showlegend=showlegend,
                customdata=ids[sel],
                hovertext=hover[sel],
                marker=dict(size=marker_size, color=palette.get(level), opacity=0.8),
                **common,
            )
        )
    return traces, legend_title


def go_scatter_rings(high: pd.DataFrame, marker_size: int, showlegend: bool = True, *, axis: str):
    """Black rings around the selected points ``high`` (hover off: the points under them have it), at
    (``axis``, confidence)."""
    import plotly.graph_objects as go

    return go.Scattergl(
        x=high[axis].to_numpy(dtype=np.float64),
        y=high["confidence"].to_numpy(dtype=np.float64),
        mode="markers",
        name="selected",
        legendgroup="selected",
        showlegend=showlegend,
        customdata=id_array(high["id"]),
        hoverinfo="skip",
        marker=dict(size=marker_size + 4, color="rgba(0,0,0,0)", line=dict(color="black", width=1.5)),
    )
