"""2-D views of a run's [CLS] embeddings: PCA (instant) and UMAP (slow, so cached and run as a job).

UMAP settings: n_neighbors = 15, min_dist = 0.1, cosine metric (the umap-learn defaults
apart from the metric). ``umap`` is imported only inside :func:`project`: importing it costs
seconds, and its first fit tens of seconds more for numba compilation. UMAP's nearest-neighbour
graph is computed exactly (the blocked cosine product of :mod:`cartomap.analysis.neighbours`) and
handed to it (``precomputed_knn``): umap-learn's own NN-descent took over 6 minutes on 20,000 rows
of 384 dims on the shared 2-core CPU, the exact product 20 s. Above :data:`UMAP_FIT_SAMPLE` rows
UMAP is fitted on a random sample of that many rows and every other row is placed at the
similarity-weighted mean of its nearest fitted rows, as umap-learn's ``transform`` starts new
points; that search runs on the rows' first :data:`PLACE_DIMS` uncentred principal axes of the
sample (dot products kept in the least-squares sense), a block of rows at a time: a full fit of
550k rows takes over an hour on a 2-core CPU, the sampled one minutes.

Cache: ``projection_<method>.npy`` (float32 [N, 2], rows in examples order) in the run folder,
used while it is newer than ``embeddings.npy`` and has as many rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.analysis import colourings
from cartomap.analysis.datamap import AXIS_COLUMNS, SENTENCE, agreement_of
from cartomap.analysis.neighbours import embedded_rows, with_default_regions
from cartomap.analysis.selection import clicked_ids, event_selection, shapes_mask
from cartomap.analysis.style import NO_VALUE_COLOR, REGION_COLORS, escape, escape_text, palette_color
from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_save
from cartomap.runs.progress import Phase
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.scores import ambiguity
from cartomap.tasks import registry as task_kinds

METHODS = ("pca", "umap")
UMAP_N_NEIGHBORS = 15
UMAP_MIN_DIST = 0.1
UMAP_METRIC = "cosine"
UMAP_FIT_SAMPLE = 20_000  # rows UMAP is fitted on; the rest are placed by their nearest fitted rows
PLACE_DIMS = 64  # dimensions of the search that places the other rows (the sample's top uncentred axes)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise CartomapError(f"unknown projection {method!r}: expected one of {', '.join(METHODS)}")
    return method


def project(
    emb: np.ndarray, method: str = "umap", seed: int = 0, fit_sample: int = UMAP_FIT_SAMPLE
) -> np.ndarray:
    """Coordinates [N, 2] (float32) of the rows of ``emb`` by PCA or UMAP, reproducible for a given seed.

    UMAP on more than ``fit_sample`` rows: fitted on a random sample of ``fit_sample`` rows, the
    others placed by :func:`place_by_neighbours`.
    """
    _check_method(method)
    emb = np.asarray(emb, dtype=np.float32)
    if emb.ndim != 2:
        raise ValueError(f"expected embeddings [N, H], got shape {emb.shape}")
    n = emb.shape[0]
    out = np.zeros((n, 2), dtype=np.float32)
    if n < 3 or emb.shape[1] < 2:  # nothing to project; 2 points would be a line anyway
        out[:, : min(2, emb.shape[1])] = emb[:, :2]
        return out
    if method == "pca":
        coords = pca_2d(emb)
        # fix the sign of each axis (largest absolute loading positive) so reruns look alike
        signs = np.sign(coords[np.abs(coords).argmax(axis=0), [0, 1]])
        return (coords * np.where(signs == 0, 1, signs)).astype(np.float32)
    if n <= fit_sample:
        return _umap(emb, seed)
    fitted = np.sort(np.random.default_rng(seed).choice(n, size=fit_sample, replace=False))
    sample = emb[fitted]
    out[fitted] = _umap(sample, seed)
    rest = np.setdiff1d(np.arange(n), fitted)
    reduced = reduce_dims(emb, top_axes(sample, PLACE_DIMS)) if emb.shape[1] > PLACE_DIMS else emb
    out[rest] = place_by_neighbours(reduced, fitted, out[fitted], rest)
    return out


def top_axes(sample: np.ndarray, dims: int) -> np.ndarray:
    """The ``dims`` leading eigenvectors [H, dims] of the uncentred second moment S = X^T X of the
    L2-normalised rows of ``sample``: x A . y A approximates x . y (cosine) best in least squares."""
    x = np.asarray(sample, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    values, vectors = np.linalg.eigh(x.T @ x)
    return vectors[:, np.argsort(values)[::-1][:dims]].astype(np.float32)


def reduce_dims(emb: np.ndarray, axes: np.ndarray, block: int = 65_536) -> np.ndarray:
    """The L2-normalised rows of ``emb`` times ``axes``, float32 [N, dims], a block at a time (a memory
    map is read once, never copied whole)."""
    out = np.empty((emb.shape[0], axes.shape[1]), dtype=np.float32)
    for start in range(0, emb.shape[0], block):
        rows = np.asarray(emb[start : start + block], dtype=np.float32)
        rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        out[start : start + len(rows)] = rows @ axes
    return out


PCA_BLOCK = 16_384  # rows per block of :func:`pca_2d`


def pca_2d(emb: np.ndarray) -> np.ndarray:
    """The rows of ``emb`` on its first two principal axes, float64 [N, 2]: eigenvectors of the
    covariance C = (sum x x^T - n mu mu^T) / (n - 1), accumulated a block of rows at a time (float32
    products, float64 sums), so a 550k x 384 memory map is read twice and never copied whole. The
    result is sklearn's PCA(n_components=2).fit_transform up to each axis' sign."""
    import torch  # its sgemm is ~2x numpy's for this tall-and-thin product on the CPU measured

    n, d = emb.shape
    total = np.zeros(d, dtype=np.float64)
    outer = np.zeros((d, d), dtype=np.float64)
    for start in range(0, n, PCA_BLOCK):
        block = np.array(emb[start : start + PCA_BLOCK], dtype=np.float32)  # a writable copy of the block
        total += block.sum(axis=0, dtype=np.float64)
        tensor = torch.from_numpy(block)
        outer += (tensor.T @ tensor).numpy()
    mean = total / n
    cov = (outer - n * np.outer(mean, mean)) / max(n - 1, 1)
    values, vectors = np.linalg.eigh(cov)
    axes = vectors[:, np.argsort(values)[::-1][:2]]
    shift = mean @ axes  # (x - mu) A = x A - mu A
    axes32 = axes.astype(np.float32)
    out = np.empty((n, 2), dtype=np.float64)
    for start in range(0, n, PCA_BLOCK):
        block = np.asarray(emb[start : start + PCA_BLOCK], dtype=np.float32)
        out[start : start + len(block)] = block @ axes32 - shift
    return out


def exact_knn(emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """UMAP's ``precomputed_knn``: indices [N, k] int32 (each row itself first) and cosine distances
    d = 1 - cos [N, k] float32 of every row's k nearest rows, from the exact blocked product."""
    from cartomap.analysis.neighbours import same_label_neighbors

    n = emb.shape[0]
    idx, sims = same_label_neighbors(emb, np.zeros(n, dtype=np.int64), k=k - 1)
    indices = np.concatenate([np.arange(n)[:, None], idx], axis=1).astype(np.int32)
    dists = np.concatenate([np.zeros((n, 1)), np.clip(1.0 - sims, 0.0, 2.0)], axis=1).astype(np.float32)
    return indices, dists


def _umap(emb: np.ndarray, seed: int) -> np.ndarray:
    import warnings

    import umap  # lazy: slow to import

    k = min(UMAP_N_NEIGHBORS, emb.shape[0] - 1)
    indices, dists = exact_knn(emb, k)
    reducer = umap.UMAP(
        n_components=2,
        n_neighbors=k,
        min_dist=UMAP_MIN_DIST,
        metric=UMAP_METRIC,
        random_state=seed,
        n_jobs=1,  # a fixed random_state runs single-threaded anyway
        precomputed_knn=(indices, dists, None),  # no search index: new points are placed here, not by UMAP
    )
    with warnings.catch_warnings():  # "no search index: transform() unavailable", the point
        warnings.simplefilter("ignore", UserWarning)
        return np.asarray(reducer.fit_transform(emb), dtype=np.float32)


def place_by_neighbours(
    emb: np.ndarray,
    fitted: np.ndarray,
    fitted_coords: np.ndarray,
    rows: np.ndarray,
    k: int = UMAP_N_NEIGHBORS,
) -> np.ndarray:
    """2-D positions [len(rows), 2] of ``rows``: the weighted mean of the coordinates of their ``k``
    most cosine-similar rows among ``fitted``, weight w = exp(-(d - d_min) / (mean d - d_min)) with
    d = 1 - cosine similarity (the nearest weighs 1; a per-point bandwidth, as UMAP's smooth kNN
    distances). Exact search: :func:`cartomap.analysis.neighbours.same_label_neighbors` with one label."""
    from cartomap.analysis.neighbours import same_label_neighbors

    candidates = np.zeros(emb.shape[0], dtype=bool)
    candidates[fitted] = True
    where = np.full(emb.shape[0], -1, dtype=np.int64)
    where[fitted] = np.arange(fitted.size)
    idx, sims = same_label_neighbors(
        emb,
        np.zeros(emb.shape[0], dtype=np.int64),
        k=min(k, fitted.size),
        query_idx=rows,
        candidate_mask=candidates,
    )
    d = 1.0 - sims.astype(np.float64)
    d_min = d[:, :1]
    scale = np.maximum(d.mean(axis=1, keepdims=True) - d_min, 1e-12)
    w = np.exp(-(d - d_min) / scale)
    w /= w.sum(axis=1, keepdims=True)
    return np.einsum("qk,qkc->qc", w, fitted_coords[where[idx]].astype(np.float64)).astype(np.float32)


def projection_path(run: Run, method: str) -> Path:
    return run.projection_path(_check_method(method))


def load_projection(run: Run, method: str) -> np.ndarray | None:
    """The cached projection, or None when absent or older than the embeddings."""
    from cartomap.training.embeddings import embeddings_path

    path = projection_path(run, method)
    source = embeddings_path(run)
    if not path.exists() or not source.exists() or path.stat().st_mtime < source.stat().st_mtime:
        return None
    coords = np.load(path)
    n_rows = np.load(source, mmap_mode="r").shape[0]
    if coords.shape != (n_rows, 2):
        return None
    return coords


def project_run(run: Run, method: str = "umap", seed: int = 0, force: bool = False) -> np.ndarray:
    """The run's embeddings in 2-D, from the cache or computed as task ``projection_<method>`` and cached."""
    from cartomap.runs.tasks import task, task_status, task_update
    from cartomap.training.embeddings import load_embeddings

    _check_method(method)
    name = f"projection_{method}"
    if not force:
        cached = load_projection(run, method)
        if cached is not None:
            if (task_status(run, name) or {}).get("state") == State.QUEUED:  # a job started for nothing
                task_update(run, name, state=State.DONE, progress=1.0)
            return cached
    with task(run, name) as update:  # a failure is recorded there
        loaded = load_embeddings(run)
        if loaded is None:
            raise RunError(f"run {run.id} has no embeddings yet: run `cartomap embed {run.id}` first")
        _, emb = loaded
        update(total=int(emb.shape[0]))
        update(progress=0.05, phase=Phase.FITTING)
        coords = project(emb, method=method, seed=seed)

        def write(path: Path) -> None:
            with open(path, "wb") as handle:
                np.save(handle, coords)

        atomic_save(projection_path(run, method), write)
    return coords


# --------------------------------------------------------------------------- the 2-D figure
HOVER_CHARS = 90
#: Name of the trace of the rings around the Data map's selection on :func:`projection_figure`.
SELECTED_TRACE = "selected on the data map"
MAX_POINTS = 20_000  # more points than this are sampled (the group always shown), as on the data map


def points_frame(run: Run) -> pd.DataFrame:
    """One row per embedded point, in the embeddings' order (:func:`cartomap.analysis.neighbours.embedded_rows`:
    an example, or a token run's word with its sentence): id, label (name), texts, genre; with data-map metrics
    region (the run's default rule, its kind's: :func:`cartomap.analysis.neighbours.with_default_regions`),
    confidence and every ambiguity axis the metrics have (:data:`cartomap.analysis.datamap.AXIS_COLUMNS`);
    with votes in the data human_entropy and agreement (gold vs the annotators' majority,
    :func:`cartomap.analysis.datamap.agreement_of`)."""
    human = ("human_entropy", "human_majority", "gold_disagrees")
    kind = run.task_kind
    columns = (*kind.gold_columns, *task_kinds.text_fields(), "genre", *human)
    examples = run.examples(columns=tuple(dict.fromkeys(columns)))
    examples = embedded_rows(run, examples, labelled=False)  # a token run's words
    frame = pd.DataFrame({"id": examples["id"].astype(str).to_numpy()})
    if "label" in examples.columns:
        names = np.asarray([*run.label_names, ""], dtype=object)
        codes = examples["label"].to_numpy(dtype=np.int64)
        frame["label"] = names[np.where((codes >= 0) & (codes < len(names) - 1), codes, len(names) - 1)]
    else:  # a set of labels per example (multi-label): its names
        gold = [kind.gold_names(v, run.label_names) for v in examples[kind.label_field]]
        frame["label"] = [", ".join(map(str, g)) if isinstance(g, list | tuple) else str(g) for g in gold]
    try:
        metrics = with_default_regions(
            run.metrics(columns=("id", "confidence", *AXIS_COLUMNS, "region")), run.region_rule()
        )
        if len(metrics) == len(frame) and np.array_equal(
            metrics["id"].astype(str).to_numpy(dtype=object), frame["id"].to_numpy(dtype=object)
        ):
            aligned = metrics.reset_index(drop=True)  # examples order already: no join
        else:
            aligned = metrics.set_index(metrics["id"].astype(str)).reindex(frame["id"]).reset_index(drop=True)
        frame["region"] = aligned["region"].astype(object).fillna("").to_numpy()
        for col in ("confidence", *AXIS_COLUMNS):
            if col in aligned.columns:
                frame[col] = aligned[col].to_numpy(dtype=np.float64)
    except (RunError, KeyError):
        pass
    for col in (*task_kinds.text_fields_in(examples.columns), "genre", SENTENCE):
        if col in examples.columns:
            frame[col] = examples[col].astype(str).to_numpy()
    if "human_entropy" in examples.columns:
        frame["human_entropy"] = examples["human_entropy"].to_numpy(dtype=np.float64)
        if "human_majority" in examples.columns and "gold_disagrees" in examples.columns:
            frame["agreement"] = agreement_of(
                examples["human_majority"].to_numpy(), examples["gold_disagrees"].to_numpy(dtype=bool)
            )
    return frame


def _hover(frame: pd.DataFrame) -> list[str]:
    parts = ["id: " + escape(frame["id"]).set_axis(frame.index)]
    parts.append("label: " + escape(frame["label"]).set_axis(frame.index))
    if "region" in frame.columns:
        parts.append("region: " + escape(frame["region"]).set_axis(frame.index))
    for col in ("confidence", *AXIS_COLUMNS):
        if col in frame.columns:
            name = col if col == "confidence" else ambiguity.get(col).label
            parts.append(f"{name}: " + frame[col].map("{:.3f}".format).set_axis(frame.index))
    for col in task_kinds.text_fields_in(frame.columns):
        if col in frame.columns:
            short = frame[col].map(lambda s: s if len(s) <= HOVER_CHARS else s[: HOVER_CHARS - 1] + "…")
            parts.append(f"{col}: " + escape(short).set_axis(frame.index))
    text = parts[0]
    for p in parts[1:]:
        text = text + "<br>" + p
    return text.tolist()


def shown_rows(n: int, keep: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Bool mask of the rows :func:`projection_figure` draws: all of ``n`` up to ``max_points``, else a
    fixed random sample of ``max_points`` plus the rows of ``keep`` (the group, the selection)."""
    if n <= max_points:
        return np.ones(n, dtype=bool)
    rng = np.random.default_rng(0)
    shown = np.zeros(n, dtype=bool)
    shown[rng.choice(n, size=max_points, replace=False)] = True
    return shown | np.asarray(keep, dtype=bool)


def _scored_traces(shown: pd.DataFrame, colouring, common: dict) -> list:
    """The points of ``shown`` on a colour scale of ``colouring`` (its colour bar on the right), and a
    grey trace of those without a value."""
    import plotly.graph_objects as go

    traces = []
    values = shown[colouring.column].to_numpy(dtype=np.float64)
    ok = np.isfinite(values)
    title_text = escape_text(colouring.title)
    if ok.any():
        traces.append(
            go.Scattergl(
                x=shown["x"][ok],
                y=shown["y"][ok],
                name=escape_text(colouring.name),
                showlegend=False,
                marker=dict(
                    size=4,
                    opacity=0.6,
                    color=values[ok],
                    colorscale=colouring.scale,
                    showscale=True,
                    colorbar=dict(title=dict(text=title_text), thickness=12, len=0.6),
                ),
                customdata=shown["id"][ok].to_numpy(dtype=object),
                hovertext=_hover(shown[ok]),
                **common,
            )
        )
    if (~ok).any():
        traces.append(
            go.Scattergl(
                x=shown["x"][~ok],
                y=shown["y"][~ok],
                name=f"no value ({int((~ok).sum()):,})",
                marker=dict(size=4, opacity=0.45, color=NO_VALUE_COLOR),
                customdata=shown["id"][~ok].to_numpy(dtype=object),
                hovertext=_hover(shown[~ok]),
                **common,
            )
        )
    return traces


def _category_traces(shown: pd.DataFrame, colouring, common: dict) -> list:
    """One trace per level of ``colouring`` in ``shown`` ("<level> (<count>)"): regions in
    :data:`REGION_COLORS` order and colours, other levels sorted, in the palette's colours."""
    import plotly.graph_objects as go

    traces = []
    column = colouring.column
    present = {str(v) for v in shown[column].astype(object)}
    levels = [lv for lv in REGION_COLORS if lv in present] if column == "region" else []
    levels += sorted(present - set(levels))
    values = shown[column].astype(object).astype(str).to_numpy()
    for n, level in enumerate(levels):
        part = shown[values == level]
        color = REGION_COLORS.get(level) if column == "region" else None
        traces.append(
            go.Scattergl(
                x=part["x"],
                y=part["y"],
                name=escape_text(f"{level or 'none'} ({len(part):,})"),
                marker=dict(size=4, opacity=0.45, color=color or palette_color(n)),
                customdata=part["id"].to_numpy(dtype=object),
                hovertext=_hover(part),
                **common,
            )
        )
    return traces


def _group_traces(frame: pd.DataFrame, in_group: np.ndarray, seed_id: str | None) -> list:
    """The group's points (``in_group``) drawn large in gold with a dark outline: the neighbours as
    circles, the seed (``seed_id``) as a star."""
    import plotly.graph_objects as go

    traces = []
    group = frame[in_group]
    if len(group):
        is_seed = (
            (group["id"] == str(seed_id)).to_numpy() if seed_id is not None else np.zeros(len(group), bool)
        )
        for part, name, symbol, size in (
            (group[~is_seed], "neighbours", "circle", 11),
            (group[is_seed], "seed", "star", 18),
        ):
            if part.empty:
                continue
            traces.append(
                go.Scattergl(
                    x=part["x"],
                    y=part["y"],
                    mode="markers",
                    name=name,
                    marker=dict(
                        size=size,
                        symbol=symbol,
                        color="rgba(255,215,0,0.9)",
                        line=dict(width=2, color="#111111"),
                    ),
                    customdata=part["id"].to_numpy(dtype=object),
                    hovertext=_hover(part),
                    hoverinfo="text",
                )
            )
    return traces


def projection_figure(
    coords: np.ndarray,
    points: pd.DataFrame,
    color_by: str = "label",
    group_ids: Sequence[str] = (),
    seed_id: str | None = None,
    title: str = "",
    max_points: int = MAX_POINTS,
    *,
    highlight_ids: Sequence[str] = (),
):
    """Plotly figure of the 2-D projection, selectable by box and lasso (``dragmode`` lasso).

    ``points`` from :func:`points_frame` (same row order as ``coords``); ``color_by`` one of
    :func:`cartomap.analysis.colourings.for_projection` (label, region, confidence, the ambiguity
    axes, human entropy, gold vs majority; label when ``points`` cannot be coloured so): one Scattergl trace per
    category, or one with a colour scale (grey: no value). ``highlight_ids`` (the Data map's selection)
    are ringed in black; the group's points are drawn larger with a dark outline, the seed as a star.
    Above ``max_points`` rows a sample is drawn (:func:`shown_rows`; the selection and group always).
    Every point's ``customdata`` is its example id; dataset text is HTML-escaped.
    """
    import plotly.graph_objects as go

    if len(coords) != len(points):
        raise ValueError(f"{len(coords)} coordinates for {len(points)} examples")
    offered = colourings.for_projection(points)
    colouring = offered.get(color_by) or offered["label"]
    frame = points.copy()
    frame["x"], frame["y"] = coords[:, 0], coords[:, 1]
    group_ids = [str(i) for i in group_ids]
    in_group = frame["id"].isin(group_ids).to_numpy()
    highlighted = frame["id"].isin([str(i) for i in highlight_ids]).to_numpy()
    shown = frame[shown_rows(len(frame), in_group | highlighted, max_points)]
    fig = go.Figure()
    common = dict(mode="markers", hoverinfo="text")
    traces = (
        _scored_traces(shown, colouring, common)
        if colouring.continuous
        else _category_traces(shown, colouring, common)
    )
    for trace in traces:
        fig.add_trace(trace)
    high = frame[highlighted]
    if len(high):
        fig.add_trace(
            go.Scattergl(
                x=high["x"],
                y=high["y"],
                mode="markers",
                name=f"{SELECTED_TRACE} ({len(high):,})",
                marker=dict(size=9, color="rgba(0,0,0,0)", line=dict(width=1.5, color="black")),
                customdata=high["id"].to_numpy(dtype=object),
                hoverinfo="skip",
            )
        )
    for trace in _group_traces(frame, in_group, seed_id):
        fig.add_trace(trace)
    note = f" · {len(shown):,} of {len(frame):,} points shown" if len(shown) < len(frame) else ""
    fig.update_layout(
        title=dict(text=escape_text(title + note), font=dict(size=15)),
        xaxis=dict(showticklabels=False, title=None, zeroline=False),
        yaxis=dict(showticklabels=False, title=None, zeroline=False),
        legend=dict(itemsizing="constant"),
        height=560,
        margin=dict(l=10, r=10, t=50, b=10),
        hovermode="closest",
        dragmode="lasso",
        meta={"n_total": len(frame), "n_shown": len(shown), "color_by": colouring.name},
    )
    return fig


def selection_ids(coords: np.ndarray, ids: Sequence[str], event, *, sampled: bool) -> list[str]:
    """Example ids a Streamlit plotly selection event on :func:`projection_figure` selects, in ``ids``
    order (the rows of ``coords``). A box or lasso is tested on the server against every row (exact when
    the figure draws a sample: ``sampled``); without one, or on a figure of every point, the clicked
    points are taken by their ``customdata`` ids. Ids not in ``ids`` are dropped; [] for an empty event."""
    sel = event_selection(event)
    ids = np.asarray([str(i) for i in ids], dtype=object)
    coords = np.asarray(coords, dtype=np.float64)
    if len(coords) != len(ids):
        raise ValueError(f"{len(coords)} coordinates for {len(ids)} examples")
    clicked = clicked_ids(sel)
    mask = None
    if sampled or not clicked:  # the 2-D view has no marginal axes: every shape counts
        mask = shapes_mask(coords[:, 0], coords[:, 1], sel, keep=lambda shape: True)
    if mask is None:
        mask = pd.Index(ids).isin(list(clicked))
    return ids[mask].tolist()
