"""Benchmark: the dashboard's data map at 10k, 100k and 400k examples.

Data: synthetic training dynamics (5 epochs, 3 classes) turned into a map frame with
``cartomap.scores.metrics.compute_metrics`` and ``cartomap.analysis.datamap.build_map_frame`` (premise and
hypothesis of 40-60 characters, as in SNLI).

Measured (best of ``--repeats`` wall-clock times):

* figure: ``cartomap.analysis.figures.data_map_figure(frame, "correctness")`` (at most 20,000 points drawn, plus a
  density heatmap of all points above that);
* JSON: ``fig.to_json()``, what ``st.plotly_chart`` serialises, and its size (the payload the
  browser receives);
* lasso: ``resolve_selection`` of a 200-vertex concave lasso over the map, resolved on the server
  against every point (the sampled-map path; below 20k points the page uses plotly's own selection,
  and the geometry path is timed anyway); the number of points selected is shown;
* box: the same for a box selection;
* page (unless ``--no-page``): the whole Data map page under ``streamlit.testing`` on a run store
  of that size: the first script run (reads the run, builds the frame, cached afterwards) and a
  rerun with the lasso's examples as the selection (what every interaction costs on the server:
  filters, figure with the selection ringed, table, serialisation; the browser's work not included).

    python bench/bench_datamap.py [--sizes 10000,100000,400000] [--repeats 3] [--no-page] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.analysis import datamap as dm
from cartomap.analysis import figures, selection
from cartomap.scores.metrics import compute_metrics


def make_frame(n: int, epochs: int = 5, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(epochs, n, 3)).astype(np.float32)
    logits[:, np.arange(n), labels] += rng.normal(1.0, 1.5, size=n) * np.linspace(0.5, 2, epochs)[:, None]
    ids = [f"ex-{i:07d}" for i in range(n)]
    metrics = compute_metrics(logits, labels, ids=ids)
    vocabulary = "a man woman dog plays runs in the park with red ball near water sits on bench"
    words = np.array(vocabulary.split(" "))
    texts = [" ".join(rng.choice(words, size=rng.integers(8, 12))) for _ in range(2 * n)]
    examples = pd.DataFrame({"id": ids, "premise": texts[:n], "hypothesis": texts[n:], "label": labels})
    return dm.build_map_frame(metrics, examples, ("entailment", "neutral", "contradiction"))


ROOT = Path(__file__).resolve().parents[1]


def make_run(cache: Path, n: int, epochs: int = 5, seed: int = 0):
    """A finished run of ``n`` synthetic pairs with synthetic logits (no training)."""
    from cartomap.config import DataConfig, RunConfig, TrainConfig
    from cartomap.data.loading import from_frame
    from cartomap.io import atomic_write_parquet
    from cartomap.runs.store import RunStore

    rng = np.random.default_rng(seed)
    names = ("entailment", "neutral", "contradiction")
    words = np.array(
        ["a", "man", "woman", "dog", "plays", "runs", "in", "the", "park", "with", "red", "ball"]
    )
    texts = [" ".join(rng.choice(words, size=10)) for _ in range(2 * n)]
    labels = rng.integers(0, 3, n)
    raw = pd.DataFrame(
        {
            "id": [f"ex{i}" for i in range(n)],
            "premise": texts[:n],
            "hypothesis": texts[n:],
            "label": np.array(names)[labels],
        }
    )
    config = DataConfig(path=f"synthetic-{n}")
    data = from_frame(raw, config, label_names=names)
    run = RunStore(cache).create(
        RunConfig(data=config, dev=None, train=TrainConfig(epochs=epochs)), data, None
    )
    skill = rng.normal(1.0, 1.5, n)
    logits = []
    for e in range(epochs):
        z = rng.normal(size=(n, 3)).astype(np.float32)
        z[np.arange(n), data.labels] += skill * (0.5 + 0.4 * e)
        run.write_epoch("train", e, data.ids, z)
        logits.append(z)
    atomic_write_parquet(
        run.path / "metrics.parquet", compute_metrics(np.stack(logits), data.labels, data.ids)
    )
    run.set_status(state="done")
    return run


def time_page(n: int, lasso: dict, repeats: int) -> tuple[float, float]:
    """(first script run, best rerun with a selection) of pages/data_map.py on an ``n``-example run."""
    from streamlit.testing.v1 import AppTest

    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp) / "cache", n)
        os.environ["CARTOMAP_CACHE"] = str(Path(tmp) / "cache")
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        selected = selection.resolve_selection(dm.map_frame(run), lasso, sampled=True)
        app = AppTest.from_file(str(ROOT / "pages" / "data_map.py"), default_timeout=300)
        t0 = time.perf_counter()
        app.run()
        first = time.perf_counter() - t0
        if app.exception:
            raise RuntimeError(app.exception[0].message)
        app.session_state["selected_ids"] = selected
        rerun = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            app.run()
            rerun = min(rerun, time.perf_counter() - t0)
        return first, rerun


def lasso_event(n_vertices: int = 200) -> dict:
    """A star-shaped (concave) lasso centred on the middle of the map, as plotly reports it."""
    t = np.linspace(0, 2 * np.pi, n_vertices, endpoint=False)
    r = 0.6 + 0.3 * np.sin(7 * t)
    x = 0.15 + 0.12 * r * np.cos(t)
    y = 0.5 + 0.4 * r * np.sin(t)
    return {
        "selection": {
            "points": [],
            "box": [],
            "lasso": [{"xref": "x", "yref": "y", "x": x.tolist(), "y": y.tolist()}],
        }
    }


BOX_EVENT = {
    "selection": {
        "points": [],
        "lasso": [],
        "box": [{"xref": "x", "yref": "y", "x": [0.05, 0.25], "y": [0.2, 0.8]}],
    }
}


def best_time(fn, repeats: int):
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,400000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-page", action="store_true", help="skip the whole-page timing")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()
    lasso = lasso_event()
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        frame = make_frame(n)
        t_fig, fig = best_time(lambda f=frame: figures.data_map_figure(f, "correctness"), args.repeats)
        t_json, payload = best_time(fig.to_json, args.repeats)
        t_lasso, ids = best_time(
            lambda f=frame: selection.resolve_selection(f, lasso, sampled=True), args.repeats
        )
        t_box, box_ids = best_time(
            lambda f=frame: selection.resolve_selection(f, BOX_EVENT, sampled=True), args.repeats
        )
        row = {
            "points": f"{n:,}",
            "drawn": f"{fig.layout.meta['n_shown']:,}",
            "figure (s)": f"{t_fig:.3f}",
            "to_json (s)": f"{t_json:.3f}",
            "payload (MB)": f"{len(payload.encode()) / 1e6:.2f}",
            "lasso (ms)": f"{t_lasso * 1e3:.1f}",
            "lasso selects": f"{len(ids):,}",
            "box (ms)": f"{t_box * 1e3:.1f}",
            "box selects": f"{len(box_ids):,}",
        }
        if not args.no_page:
            first, rerun = time_page(n, lasso, args.repeats)
            row["page: first run (s)"] = f"{first:.2f}"
            row["page: rerun with the lasso selected (s)"] = f"{rerun:.2f}"
        rows.append(row)
    table = pd.DataFrame(rows)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    if args.markdown:
        cols = list(table.columns)
        print("| " + " | ".join(cols) + " |")
        print("|" + "|".join("---:" for _ in cols) + "|")
        for row in table.itertuples(index=False):
            print("| " + " | ".join(str(v) for v in row) + " |")
        print(f"\n{machine}; best of {args.repeats}.")
    else:
        print(table.to_string(index=False))
        print(machine)


if __name__ == "__main__":
    main()
