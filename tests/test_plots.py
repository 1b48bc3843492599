import sys

import numpy as np
import pytest
from matplotlib.figure import Figure

from cartomap.analysis.datamap import as_map_frame, with_x_axis
from cartomap.analysis.figures import data_map_figure
from cartomap.analysis.map_files import data_map_matplotlib, save_data_map
from cartomap.errors import DataError
from cartomap.scores.metrics import RegionRule, compute_metrics


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    n, e = 500, 5
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(e, n, 3))
    logits[:, np.arange(n), labels] += rng.normal(1.0, 1.5, size=n) * np.linspace(0.5, 2, e)[:, None]
    return compute_metrics(logits, labels, ids=[f"ex{i}" for i in range(n)])


def _scatter_ids(fig):
    return [x for t in fig.data if t.type == "scattergl" for x in t.customdata]


def _scatter_x(ax):
    return np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])


def test_matplotlib_figure(frame):
    fig = data_map_matplotlib(frame, title="Test")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 4
    main = fig.axes[0]
    texts = {t.get_text() for t in main.texts}
    assert {"easy-to-learn", "ambiguous", "hard-to-learn"} <= texts
    assert sum(len(c.get_offsets()) for c in main.collections) == 500
    assert main.get_legend() is not None
    # x: the default axis
    assert main.get_xlabel() == RegionRule().axis_label and main.get_ylabel() == "confidence"
    np.testing.assert_allclose(np.sort(_scatter_x(main)), np.sort(frame[RegionRule().axis]))
    # Cartography's map: x = variability
    cartography = data_map_matplotlib(with_x_axis(frame, "variability")).axes[0]
    assert cartography.get_xlabel() == "variability"
    np.testing.assert_allclose(np.sort(_scatter_x(cartography)), np.sort(frame["variability"]))
    if "matplotlib.pyplot" in sys.modules:  # no figure registered with pyplot
        assert sys.modules["matplotlib.pyplot"].get_fignums() == []


def test_matplotlib_samples_points(frame):
    from matplotlib.collections import PathCollection

    fig = data_map_matplotlib(frame, max_points=100)  # over the shading of every point
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections if isinstance(c, PathCollection)) == 100


@pytest.mark.parametrize("color", ["correctness", "label", "region"])
def test_plotly_figure(frame, color):
    """The one interactive map (dashboard and CLI HTML) drawn from a plain metrics frame."""
    fig = data_map_figure(as_map_frame(frame, ["entailment", "neutral", "contradiction"]), color_by=color)
    ids = _scatter_ids(fig)
    assert sorted(ids) == sorted(frame["id"])
    assert len(ids) == 500
    assert sum(t.type == "bar" for t in fig.data) == 2
    texts = {a.text for a in fig.layout.annotations}
    assert {"easy-to-learn", "ambiguous", "hard-to-learn"} <= texts
    trace = next(t for t in fig.data if t.type == "scattergl")
    assert "confidence" in trace.hovertemplate and trace.hovertext[0].startswith("id: ")
    # customdata and coordinates stay aligned
    row = frame.set_index("id").loc[trace.customdata[0]]
    assert trace.x[0] == pytest.approx(row[RegionRule().axis])  # x: the default axis
    assert trace.y[0] == pytest.approx(row["confidence"])
    if color == "label":  # traces are named "<label> (<count>)"
        assert {t.name.split(" (")[0] for t in fig.data if t.type == "scattergl"} <= {
            "entailment",
            "neutral",
            "contradiction",
        }


def test_plotly_samples_and_rejects_bad_color(frame):
    assert len(_scatter_ids(data_map_figure(frame, max_points=50))) == 50
    with pytest.raises(ValueError):
        data_map_figure(frame, color_by="nope")
    with pytest.raises(DataError):
        data_map_figure(frame.drop(columns="confidence"))


def test_save_png_and_html(frame, tmp_path):
    png = save_data_map(frame, tmp_path / "map.png", title="Test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = save_data_map(frame, tmp_path / "map.HTML", label_names=["e", "n", "c"])
    text = html.read_text(encoding="utf-8")
    assert "plotly" in text and "ex0" in text
    assert len(text) > 1_000_000  # plotly.js embedded: works offline
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.HTML", "map.png"]  # no temp files left
    with pytest.raises(ValueError, match=r"\.png"):
        save_data_map(frame, tmp_path / "map.svg")


def test_plotly_hover_escapes_ids():
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(
        {
            "id": ["<img src=x onerror=alert(1)>", "a&b"],
            "confidence": [0.2, 0.9],
            "variability": [0.1, 0.3],
            "correctness": [0.0, 1.0],
            "correct_count": [0, 3],
            "label": [0, 1],
            "forgetfulness": [0, 0],
            "aum": [0.1, 0.2],
            "region": ["hard-to-learn", "ambiguous"],
        }
    )
    frame.attrs["n_epochs"] = 3
    fig = data_map_figure(with_x_axis(frame, "variability"))  # Cartography's map: the one axis it has
    hover = " ".join(
        str(t)
        for trace in fig.data
        if getattr(trace, "hovertext", None) is not None
        for t in np.atleast_1d(trace.hovertext)
    )
    assert "<img" not in hover and "&lt;img" in hover and "a&amp;b" in hover


def test_correctness_legend_shows_exact_fractions():
    # 4 epochs: the reference's one-decimal labels would be 0.0 / 0.2 / 0.5 / 0.8 / 1.0
    rng = np.random.default_rng(3)
    n = 400
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(4, n, 3))
    logits[:, np.arange(n), labels] += rng.normal(0.5, 1.5, size=n)
    metrics = compute_metrics(logits, labels, ids=[f"ex{i}" for i in range(n)])
    fig = data_map_figure(as_map_frame(metrics, ["e", "n", "c"]))
    names = [t.name.split(" (")[0] for t in fig.data if t.type == "scattergl"]
    assert names == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert fig.layout.legend.title.text == "correct in k of E epochs"
    trace = next(t for t in fig.data if t.type == "scattergl" and t.name.startswith("3/4"))
    assert "(3/4 epochs)" in trace.hovertext[0]
    mpl = data_map_matplotlib(metrics)
    legend = mpl.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert legend.get_title().get_text() == "correct in k of E epochs"
    bars = [t.get_text() for t in mpl.axes[3].get_xticklabels()]
    assert bars == ["0/4", "1/4", "2/4", "3/4", "4/4"]


def test_region_labels_sit_near_their_regions_on_no_point(frame):
    """Each label at the free place nearest its region's median (figures.region_label_points; the
    word maps' crowded corners are tests/test_token_seams.py's)."""
    from cartomap.analysis.figures import region_label_points

    fig = data_map_figure(as_map_frame(frame, ["e", "n", "c"]))
    at = {a.text: (a.x, a.y, a.xref) for a in fig.layout.annotations}
    assert {k: v[:2] for k, v in at.items()} == pytest.approx(region_label_points(frame))
    for region in ("easy-to-learn", "ambiguous", "hard-to-learn"):
        assert at[region][2] == "x"  # data coordinates: on the default axis
    assert at["easy-to-learn"][1] > at["hard-to-learn"][1]
