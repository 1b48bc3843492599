import json

import numpy as np
import pandas as pd
import pytest
from matplotlib.path import Path as MplPath

from cartomap.analysis import datamap as dm
from cartomap.analysis import figures, map_files, map_points, overlay_figures, selection, tables
from cartomap.scores.metrics import RegionRule, compute_metrics

LABELS = ("entailment", "neutral", "contradiction")


def _synthetic(n: int, epochs: int = 5, seed: int = 0, genre: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(epochs, n, 3)).astype(np.float32)
    logits[:, np.arange(n), labels] += rng.normal(1.0, 1.5, size=n) * np.linspace(0.5, 2, epochs)[:, None]
    ids = [f"ex{i}" for i in range(n)]
    metrics = compute_metrics(logits, labels, ids=ids)
    examples = pd.DataFrame(
        {
            "id": ids,
            "premise": [f"premise {i} <b>bold</b> & <script>x</script>" for i in range(n)],
            "hypothesis": [f"hypothesis {i}" for i in range(n)],
            "label": labels,
        }
    )
    if genre:
        examples["genre"] = rng.choice(["fiction", "telephone", "travel"], n)
    return dm.build_map_frame(metrics, examples.sample(frac=1.0, random_state=1), LABELS)


@pytest.fixture(scope="module")
def frame():
    return _synthetic(2_000)


@pytest.fixture(scope="module")
def big():
    return _synthetic(100_000, seed=3, genre=False)


# --------------------------------------------------------------------------- geometry

SQUARE = ([0, 1, 1, 0], [0, 0, 1, 1])
# a "U": the notch x in (1, 2), y in (1, 3) is outside
U_SHAPE = ([0, 3, 3, 2, 2, 1, 1, 0], [0, 0, 3, 3, 1, 1, 3, 3])


@pytest.mark.parametrize(
    ("poly", "inside", "outside"),
    [
        (SQUARE, [(0.5, 0.5), (0.01, 0.99), (0.999, 0.001)], [(1.5, 0.5), (-0.01, 0.5), (0.5, 1.01), (2, 2)]),
        (
            U_SHAPE,
            [(0.5, 2.5), (2.5, 2.5), (1.5, 0.5), (0.5, 0.5)],
            [(1.5, 2.0), (1.5, 1.01), (3.5, 1), (1.5, 4)],
        ),
        # triangle
        (([0, 4, 0], [0, 0, 4]), [(1, 1), (1.9, 1.9), (0.1, 3.8)], [(2.1, 2.1), (3, 3), (-1, 1)]),
    ],
)
def test_points_in_polygon_hand_made(poly, inside, outside):
    pts = np.array(inside + outside, dtype=float)
    mask = selection.points_in_polygon(pts[:, 0], pts[:, 1], *poly)
    assert mask.tolist() == [True] * len(inside) + [False] * len(outside)
    # closing the polygon explicitly changes nothing
    closed = (list(poly[0]) + [poly[0][0]], list(poly[1]) + [poly[1][0]])
    assert selection.points_in_polygon(pts[:, 0], pts[:, 1], *closed).tolist() == mask.tolist()
    # vertex order (clockwise or not) changes nothing
    assert (
        selection.points_in_polygon(pts[:, 0], pts[:, 1], poly[0][::-1], poly[1][::-1]).tolist()
        == mask.tolist()
    )


def test_points_in_polygon_degenerate_and_non_finite():
    x = np.array([0.5, np.nan, 0.5, np.inf])
    y = np.array([0.5, 0.5, np.nan, 0.5])
    assert selection.points_in_polygon(x, y, *SQUARE).tolist() == [True, False, False, False]
    assert not selection.points_in_polygon(x, y, [0, 1], [0, 1]).any()  # fewer than 3 vertices
    assert selection.points_in_polygon([], [], *SQUARE).shape == (0,)
    with pytest.raises(ValueError):
        selection.points_in_polygon([0.1, 0.2], [0.1], *SQUARE)


def test_points_in_polygon_self_intersecting_uses_even_odd():
    # a pentagram: the central pentagon is covered twice, so it is outside by the even-odd rule
    angles = np.pi / 2 + np.arange(5) * 4 * np.pi / 5
    px, py = np.cos(angles), np.sin(angles)
    mask = selection.points_in_polygon([0.0, 0.0], [0.0, 0.7], px, py)
    assert mask.tolist() == [False, True]


def test_points_in_polygon_matches_matplotlib_on_random_concave_polygons():
    rng = np.random.default_rng(7)
    x, y = rng.random(50_000), rng.random(50_000)
    for _ in range(10):
        k = rng.integers(5, 60)
        angles = np.sort(rng.random(k)) * 2 * np.pi
        radius = rng.uniform(0.1, 0.45, k)  # star-shaped, concave
        px, py = 0.5 + radius * np.cos(angles), 0.5 + radius * np.sin(angles)
        ours = selection.points_in_polygon(x, y, px, py)
        oracle = MplPath(np.c_[px, py]).contains_points(np.c_[x, y])
        assert np.array_equal(ours, oracle)


def test_points_in_box():
    x = np.array([0.0, 0.5, 1.0, 1.5])
    y = np.array([0.5, 0.5, 0.5, 0.5])
    assert selection.points_in_box(x, y, (1.0, 0.0), (0, 1)).tolist() == [True, True, True, False]


def test_lasso_on_100k_points_selects_exactly_those_inside(big):
    assert len(big) == 100_000
    # a concave lasso as plotly reports it: data coordinates, not closed
    px = [0.02, 0.30, 0.30, 0.15, 0.15, 0.02]
    py = [0.05, 0.05, 0.90, 0.90, 0.40, 0.40]
    event = {
        "selection": {
            "points": [],
            "point_indices": [],
            "box": [],
            "lasso": [{"xref": "x", "yref": "y", "x": px, "y": py}],
        }
    }
    ids = selection.resolve_selection(big, event)
    x = big[dm.axis_of(big)]  # the geometry is in the map's coordinates: x on its axis
    oracle = MplPath(np.c_[px, py]).contains_points(np.c_[x, big["confidence"]])
    assert sorted(ids) == sorted(big.loc[oracle, "id"])
    assert 1_000 < len(ids) < 100_000
    # box: the count is known from the coordinates
    box = {
        "selection": {
            "points": [],
            "box": [{"xref": "x", "yref": "y", "x": [0.2, 0.05], "y": [0.3, 0.7]}],
            "lasso": [],
        }
    }
    v, c = big[dm.axis_of(big)], big["confidence"]
    expected = ((v >= 0.05) & (v <= 0.2) & (c >= 0.3) & (c <= 0.7)).sum()
    assert len(selection.resolve_selection(big, box)) == expected
    # on Cartography's map (x = variability) the same lasso selects by variability
    cartography = dm.with_x_axis(big, "variability")
    oracle = MplPath(np.c_[px, py]).contains_points(np.c_[big["variability"], big["confidence"]])
    assert sorted(selection.resolve_selection(cartography, event)) == sorted(big.loc[oracle, "id"])
    assert sorted(ids) != sorted(big.loc[oracle, "id"])


def test_sampled_map_resolves_every_point(big):
    fig = figures.data_map_figure(big, "correctness", max_points=20_000)
    drawn = overlay_figures.figure_ids(fig)
    assert len(drawn) == 20_000 and fig.layout.meta["sampled"] is True
    assert set(drawn) <= set(big["id"])
    assert any(t.type == "heatmap" for t in fig.data)  # density of all points
    # the browser only reports the drawn points; the geometry brings back all of them
    x_hi = 1.05 * float(big[dm.axis_of(big)].max())
    px, py = [0.0, x_hi, x_hi, 0.0], [0.0, 0.0, 1.1, 1.1]  # the whole map
    drawn_points = [{"customdata": i, "curve_number": 1} for i in drawn]
    event = {
        "selection": {
            "points": drawn_points,
            "box": [],
            "lasso": [{"xref": "x", "yref": "y", "x": px, "y": py}],
        }
    }
    assert len(selection.resolve_selection(big, event)) == 100_000
    # a click on a drawn point (no geometry) gives that point
    click = {"selection": {"points": [{"customdata": drawn[5]}], "box": [], "lasso": []}}
    assert selection.resolve_selection(big, click) == [drawn[5]]
    # geometry drawn on a marginal histogram is ignored
    hist = {
        "selection": {
            "points": [],
            "box": [{"xref": "x", "yref": "y2", "x": [0, 1], "y": [0, 1e9]}],
            "lasso": [],
        }
    }
    assert selection.resolve_selection(big, hist) == []


def test_unsampled_map_uses_customdata(frame):
    fig = figures.data_map_figure(frame, "label")
    assert sorted(overlay_figures.figure_ids(fig)) == sorted(frame["id"])
    assert fig.layout.meta["sampled"] is False and fig.layout.dragmode == "lasso"
    picked = frame["id"].iloc[[3, 1, 7]].tolist()
    event = {
        "selection": {
            "points": [{"customdata": [i]} for i in picked] + [{"x": 1}],
            "lasso": [{"xref": "x", "yref": "y", "x": [0, 0.0001, 0], "y": [0, 0, 0.0001]}],
        }
    }
    # plotly's own choice wins when every point is drawn; frame order
    assert selection.resolve_selection(frame, event) == frame["id"].iloc[[1, 3, 7]].tolist()
    assert selection.resolve_selection(frame, {"selection": {"points": [], "box": [], "lasso": []}}) == []
    assert selection.resolve_selection(frame, None) == []


def test_event_signature_and_empty():
    a = {"selection": {"points": [{"customdata": "b"}, {"customdata": "a"}], "box": [], "lasso": []}}
    b = {"selection": {"points": [{"customdata": "a"}, {"customdata": "b"}], "box": [], "lasso": []}}
    assert selection.event_signature(a) == selection.event_signature(b)
    assert selection.is_empty_event({"selection": {"points": [], "box": [], "lasso": []}})
    assert not selection.is_empty_event(a)


# --------------------------------------------------------------------------- figure


@pytest.mark.parametrize("color_by", map_points.COLOR_BY)
def test_figure_colours_and_marginals(frame, color_by):
    fig = figures.data_map_figure(frame, color_by)
    scatter = [t for t in fig.data if t.type == "scattergl"]
    assert sum(len(t.customdata) for t in scatter) == len(frame)
    bars = [t for t in fig.data if t.type == "bar"]
    assert {(b.xaxis, b.yaxis) for b in bars} == {("x", "y2"), ("x2", "y")}
    assert sum(bars[0].y) == len(frame)
    # customdata stays aligned with coordinates
    t = scatter[0]
    row = frame.set_index("id").loc[t.customdata[0]]
    axis = dm.axis_of(frame)
    assert axis == RegionRule().axis  # the map's x is the default axis
    assert t.x[0] == pytest.approx(row[axis]) and t.y[0] == pytest.approx(row["confidence"])
    json.loads(fig.to_json())
    with pytest.raises(ValueError):
        figures.data_map_figure(frame, "nope")


def test_a_filter_that_keeps_every_row_returns_the_frame_itself_and_lookups_follow_new_frames(frame):
    assert dm.filter_frame(frame) is frame
    assert dm.filter_frame(frame, ranges={"confidence": (0.0, 1.0)}) is frame
    some = dm.filter_frame(frame, labels=["neutral"])
    assert some is not frame and len(some) < len(frame)
    ids = frame["id"].iloc[[5, 3, 1]].tolist()
    assert dm.positions_of(frame, ids).tolist() == [5, 3, 1]
    assert dm.positions_of(frame, ids).tolist() == [5, 3, 1]  # asked again: the same answer
    shuffled = frame.iloc[::-1].reset_index(drop=True)  # another frame of the same ids
    n = len(frame)
    assert dm.positions_of(shuffled, ids).tolist() == [n - 6, n - 4, n - 2]


def test_marginal_histograms_show_the_selection_over_the_whole():
    """Six examples, variability 0..0.5 in 40 bins: the whole in the first, middle and last bins; the
    selection (two of them, and an id not on the map) drawn over it as shares of its own examples.
    Cartography's map: x = variability."""
    six = dm.as_map_frame(
        pd.DataFrame(
            {
                "id": list("abcdef"),
                "label": [0, 1, 0, 1, 0, 1],
                "confidence": [0.1, 0.1, 0.1, 0.5, 0.9, 0.9],
                "variability": [0.0, 0.0, 0.0, 0.25, 0.5, 0.5],
                "correctness": [0.0, 0.5, 1.0, 0.5, 1.0, 1.0],
                "forgetfulness": 0,
                "region": "ambiguous",
            }
        ),
        ["x", "y"],
    )
    six = dm.with_x_axis(six, "variability")

    def bars(fig):
        return {t.name: t for t in fig.data if t.type == "bar"}

    plain = bars(figures.data_map_figure(six))
    assert set(plain) == {"variability: all examples", "confidence: all examples"}
    whole = plain["variability: all examples"]
    assert (whole.xaxis, whole.yaxis) == ("x", "y2") and sum(whole.y) == 6
    assert whole.y[0] == 3 and whole.y[20] == 1 and whole.y[39] == 2  # counts without a selection

    fig = figures.data_map_figure(six, highlight_ids=["c", "e", "not-here"])
    got = bars(fig)
    assert set(got) == {
        "variability: all examples",
        "variability: selected (2)",
        "confidence: all examples",
        "confidence: selected (2)",
    }
    assert fig.layout.barmode == "overlay"
    whole, picked = got["variability: all examples"], got["variability: selected (2)"]
    assert whole.y[0] == pytest.approx(50.0) and whole.y[39] == pytest.approx(100 / 3)  # % of all 6
    assert whole.hovertext[0] == "3 examples, 50.0 % of all examples"
    assert list(np.flatnonzero(picked.y)) == [0, 39]
    assert picked.y[0] == pytest.approx(50.0) and picked.y[39] == pytest.approx(50.0)  # % of the 2
    assert picked.hovertext[39] == "1 example, 50.0 % of selected"
    assert list(picked.x) == list(whole.x)  # the same bins
    conf = got["confidence: selected (2)"]
    assert (conf.xaxis, conf.yaxis, conf.orientation) == ("x2", "y", "h")
    assert conf.x[0] == pytest.approx(50.0) and conf.x[-1] == pytest.approx(50.0)
    assert all(t.customdata is None for t in got.values())  # a click on a bar selects nothing
    # an empty selection, or none of it on the map: no selection histogram
    assert set(bars(figures.data_map_figure(six, highlight_ids=["zz"]))) == set(plain)
    assert set(bars(figures.data_map_figure(six, highlight_ids=[]))) == set(plain)


def test_hover_text_is_escaped(frame):
    fig = figures.data_map_figure(frame, "correctness")
    text = next(t for t in fig.data if t.type == "scattergl").hovertext[0]
    assert "<b>" not in text and "<script>" not in text
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;" in text
    assert text.count("<br>") >= 3  # our own line breaks stay
    evil = frame.head(3).assign(gold="<img src=x onerror=alert(1)>")
    fig = figures.data_map_figure(evil, "label")
    names = [t.name for t in fig.data if t.type == "scattergl"]
    assert all("<img" not in n for n in names)


def test_highlight_trace(frame):
    ids = frame["id"].iloc[:10].tolist()
    fig = figures.data_map_figure(frame, "correctness", highlight_ids=ids + ["nope"])
    high = [t for t in fig.data if t.name and t.name.startswith("selected")]
    assert len(high) == 1 and sorted(high[0].customdata) == sorted(ids)


# --------------------------------------------------------------------------- frame, filters, tables


def test_map_frame_columns(frame):
    for col in (
        "id",
        "premise",
        "hypothesis",
        "gold",
        "predicted",
        "genre",
        "confidence",
        "variability",
        "correctness",
        "forgetfulness",
        "aum",
        "region",
        "bucket",
    ):
        assert col in frame.columns
    assert set(frame["gold"]) <= set(LABELS) and set(frame["predicted"]) <= set(LABELS)
    assert set(frame["bucket"]) <= {f"{k}/5" for k in range(6)}  # correct in k of 5 epochs
    assert frame["premise"].iloc[0].startswith("premise ")  # joined by id, not by position
    i = int(frame["id"].iloc[0][2:])
    assert frame["premise"].iloc[0].startswith(f"premise {i} ")


def test_filters(frame):
    assert len(dm.filter_frame(frame)) == len(frame)
    only = dm.filter_frame(frame, labels=["neutral"])
    assert len(only) and set(only["gold"]) == {"neutral"}
    both = dm.filter_frame(
        frame, labels=["neutral"], regions=["ambiguous", "hard-to-learn"], genres=["travel"]
    )
    assert set(both["region"]) <= {"ambiguous", "hard-to-learn"} and set(both["genre"]) == {"travel"}
    assert (
        len(both)
        == (
            (frame["gold"] == "neutral")
            & frame["region"].isin(["ambiguous", "hard-to-learn"])
            & (frame["genre"] == "travel")
        ).sum()
    )
    ranged = dm.filter_frame(frame, ranges={"confidence": (0.2, 0.6), "variability": (None, 0.1)})
    assert ranged["confidence"].between(0.2, 0.6).all() and (ranged["variability"] <= 0.1).all()
    assert len(dm.filter_frame(frame, labels=[])) == 0
    with pytest.raises(KeyError):
        dm.filter_frame(frame, ranges={"nope": (0, 1)})
    no_genre = frame.drop(columns="genre")
    assert len(dm.filter_frame(no_genre, genres=["travel"])) == len(frame)


def test_selection_table_and_files(frame):
    ids = [frame["id"].iloc[5], "missing", frame["id"].iloc[2], frame["id"].iloc[5]]
    table = tables.selection_table(frame, ids)
    assert table["id"].tolist() == [frame["id"].iloc[5], frame["id"].iloc[2]]
    assert list(table.columns[:5]) == ["id", "premise", "hypothesis", "gold", "predicted"]
    csv = tables.to_csv_bytes(table).decode("utf-8")
    assert csv.splitlines()[0].startswith("id,premise,hypothesis,gold,predicted")
    assert len(pd.read_csv(__import__("io").StringIO(csv))) == 2
    lines = tables.to_jsonl_bytes(table).decode("utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == table["id"].tolist()
    assert tables.to_jsonl_bytes(table.head(0)) == b""
    assert tables.selection_table(frame, []).empty


def test_display_columns_put_label_prediction_and_place_first(frame):
    table = tables.selection_table(frame, frame["id"].iloc[:3])
    # Cartography's map (x = variability): its axis is already among the leading columns
    assert tables.display_columns(dm.with_x_axis(table, "variability"))[:8] == [
        "gold",
        "predicted",
        "confidence",
        "variability",
        "region",
        "premise",
        "hypothesis",
        "id",
    ]
    # the default map: its axis comes before variability when it is another score
    shown = tables.display_columns(table)
    axis = RegionRule().axis
    assert dm.axis_of(table) == axis
    expected = [
        "gold",
        "predicted",
        "confidence",
        *([axis] if axis != "variability" else []),
        "variability",
        "region",
        "premise",
        "hypothesis",
        "id",
    ]
    assert shown[: len(expected)] == expected
    assert sorted(shown) == sorted(table.columns)
    assert (
        tables.display_columns(table[["id", "text"]] if "text" in table else table[["id", "region"]])[0]
        == "region"
    )


def test_map_files(frame):
    png = map_files.map_png_bytes(frame, title="t")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    html_bytes = map_files.map_html_bytes(figures.data_map_figure(frame.head(50)))
    assert b"<html>" in html_bytes and len(html_bytes) > 1_000_000  # plotly.js embedded
