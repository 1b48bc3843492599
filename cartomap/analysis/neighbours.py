"""Same-label nearest neighbours in [CLS] space, and WaNLI seed selection.

WaNLI (Liu et al., 2022), Stage 1: seeds are, per gold label, the examples above that
label's 0.75 quantile of variability (the most ambiguous 25%); each seed's group is the seed
plus its k = 4 nearest examples by cosine similarity of L2-normalised [CLS] vectors, among
examples with the seed's gold label.

The search is exact: for each label, a block of queries times all candidates of that label
(one matrix product), top-k per block, on the GPU when present. When the queries are all the
candidates (every example's neighbours), each pair of blocks is multiplied once and serves both
blocks (about half the arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import AXIS_COLUMNS, SENTENCE, unit_rows, with_regions
from cartomap.errors import CartomapError, RunError
from cartomap.runs.store import Run
from cartomap.scores.metrics import RegionRule
from cartomap.tasks import registry as task_kinds

DEFAULT_K = 4  # WaNLI: the seed plus its 4 nearest same-label neighbours
SEED_QUANTILE = 0.75  # WaNLI: above the per-label 0.75 quantile of variability
MAX_BLOCK_ELEMENTS = 1 << 27  # similarities held at once (512 MiB of float32)


def _device(device: str):
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def same_label_neighbors(
    emb: np.ndarray,
    labels: np.ndarray,
    k: int = DEFAULT_K,
    query_idx: Sequence[int] | np.ndarray | None = None,
    block: int = 4096,
    candidate_mask: np.ndarray | None = None,
    device: str = "auto",
    normalize: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The k most cosine-similar examples with the query's own label, excluding the query itself.

    ``emb`` [N, H]; ``labels`` [N] ints; ``query_idx`` row indices (default: all rows);
    ``candidate_mask`` [N] bool restricts who may be a neighbour (e.g. genres left out).
    Returns ``(indices [Q, k] int64, sims [Q, k] float32)``, most similar first; where a label
    has fewer than k other candidates the missing slots hold index -1 and similarity NaN.
    Rows are L2-normalised first unless ``normalize=False`` (already unit vectors; rows that are
    unit vectors already are not copied either way).
    """
    import torch

    emb = np.asarray(emb)
    labels = np.asarray(labels)
    if emb.ndim != 2:
        raise ValueError(f"expected embeddings [N, H], got shape {emb.shape}")
    n = emb.shape[0]
    if labels.shape != (n,):
        raise ValueError(f"expected {n} labels, got shape {labels.shape}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    queries = np.arange(n) if query_idx is None else np.asarray(query_idx, dtype=np.int64).reshape(-1)
    if queries.size and (queries.min() < 0 or queries.max() >= n):
        raise IndexError(f"query indices must lie in [0, {n})")
    allowed = np.ones(n, dtype=bool) if candidate_mask is None else np.asarray(candidate_mask, dtype=bool)

    out_idx = np.full((queries.size, k), -1, dtype=np.int64)
    out_sim = np.full((queries.size, k), np.nan, dtype=np.float32)
    dev = _device(device)
    vectors = _as_tensor(emb, dev)
    if normalize and not _unit_rows(vectors):
        vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
    query_labels = labels[queries]
    if queries.size <= FEW_QUERIES:  # a seed or a few: one product against every row, others masked
        sims = _product(vectors.index_select(0, torch.from_numpy(queries).to(dev)), vectors)
        mask = torch.from_numpy(~((labels[None, :] == query_labels[:, None]) & allowed[None, :])).to(dev)
        sims.masked_fill_(mask, -torch.inf)
        sims[torch.arange(queries.size, device=dev), torch.from_numpy(queries).to(dev)] = -torch.inf
        top_sim, top_pos = torch.topk(sims, min(k, n), dim=1)
        top_idx, top_sim = _finish(top_pos, top_sim)
        out_idx[:, : top_idx.shape[1]], out_sim[:, : top_idx.shape[1]] = top_idx, top_sim
        return out_idx, out_sim
    for label in np.unique(query_labels):
        rows = np.flatnonzero(query_labels == label)  # positions in the output
        cand = np.flatnonzero((labels == label) & allowed)  # sorted row indices
        if cand.size == 0:
            continue
        cand_t = torch.from_numpy(cand).to(dev)
        cand_vectors = vectors if cand.size == n else vectors.index_select(0, cand_t)
        q_rows = queries[rows]
        # where each query sits among the candidates (-1 if it is not one): excluded from its own top-k
        pos = np.searchsorted(cand, q_rows)
        pos_clipped = np.minimum(pos, cand.size - 1)
        self_pos = np.where(cand[pos_clipped] == q_rows, pos_clipped, -1)
        if q_rows.size == cand.size and np.array_equal(np.sort(q_rows), cand):
            # every candidate is a query: compute each pair of blocks once (about half the products)
            top_idx, top_sim = _symmetric_topk(cand_vectors, cand_t, k, block)
            order = rows[np.argsort(q_rows)]  # output positions in candidate order
            out_idx[order] = top_idx
            out_sim[order] = top_sim
            continue
        take = min(k, cand.size)
        step = max(1, min(block, MAX_BLOCK_ELEMENTS // cand.size))
        buffers = _Buffers()
        for start in range(0, rows.size, step):
            stop = min(start + step, rows.size)
            q = vectors.index_select(0, torch.from_numpy(q_rows[start:stop]).to(dev))
            sims = _product(q, cand_vectors, buffers)  # [b, |cand|]
            own = torch.from_numpy(self_pos[start:stop]).to(dev)
            has_self = torch.nonzero(own >= 0).squeeze(1)
            sims[has_self, own[has_self]] = -torch.inf
            top_sim, top_pos = torch.topk(sims, take, dim=1)
            top_idx, top_sim = _finish(cand_t[top_pos], top_sim)
            out_idx[rows[start:stop], :take] = top_idx
            out_sim[rows[start:stop], :take] = top_sim
    return out_idx, out_sim


FEW_QUERIES = 64  # up to this many queries are matched against every row at once (no copies)


def _as_tensor(emb: np.ndarray, dev):
    """``emb`` as a float32 tensor on ``dev``, sharing memory where it can (a read-only memory map too)."""
    import warnings

    import torch

    array = np.ascontiguousarray(emb, dtype=np.float32)
    with warnings.catch_warnings():  # a read-only map: nothing here writes to it
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(array).to(dev)


def _unit_rows(vectors, tol: float = 1e-5) -> bool:
    """Whether every row already has L2 norm 1 (within ``tol``), checked a block at a time."""
    import torch

    for start in range(0, vectors.shape[0], 65536):
        norms = torch.linalg.vector_norm(vectors[start : start + 65536], dim=1)
        if norms.numel() and float((norms - 1).abs().max()) > tol:
            return False
    return True


class _Buffers(dict):
    """Output arrays of the block products, one per shape, reused from block to block."""

    def get_array(self, key, shape) -> np.ndarray:
        if (key, shape) not in self:
            self[(key, shape)] = np.empty(shape, dtype=np.float32)
        return self[(key, shape)]


def _product(a, b, buffers: _Buffers | None = None):
    """``a @ b.T`` as a float32 tensor. On the CPU through numpy's BLAS (OpenBLAS: about 1.3x
    torch's MKL sgemm on the AMD CPU this was measured on), written into a reused buffer."""
    import torch

    if a.device.type != "cpu":
        return a @ b.T
    shape = (a.shape[0], b.shape[0])
    out = buffers.get_array("product", shape) if buffers is not None else np.empty(shape, dtype=np.float32)
    np.matmul(a.numpy(), b.numpy().T, out=out)
    return torch.from_numpy(out)


def _transposed(sims, buffers: _Buffers):
    """``sims.T`` as a contiguous tensor (a row-wise top-k on it is ~4x faster than on the view)."""
    import torch

    if sims.device.type != "cpu":
        return sims.T
    out = torch.from_numpy(buffers.get_array("transposed", (sims.shape[1], sims.shape[0])))
    return out.copy_(sims.T)


def _finish(top_idx, top_sim) -> tuple[np.ndarray, np.ndarray]:
    """To numpy, with excluded slots (similarity -inf) as index -1 and similarity NaN."""
    import torch

    missing = torch.isinf(top_sim)
    top_idx = torch.where(missing, torch.full_like(top_idx, -1), top_idx)
    top_sim = torch.where(missing, torch.full_like(top_sim, float("nan")), top_sim)
    return top_idx.cpu().numpy(), top_sim.cpu().numpy()


def _symmetric_topk(vectors, ids, k: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (self excluded) of every row of ``vectors`` against all rows, [m, k] indices from ``ids``.

    Each pair of row blocks (i <= j) is multiplied once; its product updates the running top-k
    of block i's rows and, transposed, of block j's rows.
    """
    import torch

    m, dev = vectors.shape[0], vectors.device
    # blocks of about m/4 rows: 10 products instead of 16, yet large enough for an efficient matmul
    size = max(1, min(block, max(512, -(-m // 4)), math.isqrt(MAX_BLOCK_ELEMENTS)))
    best_sim = torch.full((m, k), -torch.inf, device=dev)
    best_pos = torch.full((m, k), -1, dtype=torch.long, device=dev)
    buffers = _Buffers()

    def merge(lo: int, hi: int, sims, offset: int) -> None:
        take = min(k, sims.shape[1])
        top_sim, top_pos = torch.topk(sims, take, dim=1)
        both_sim = torch.cat([best_sim[lo:hi], top_sim], dim=1)
        both_pos = torch.cat([best_pos[lo:hi], top_pos + offset], dim=1)
        keep_sim, keep = torch.topk(both_sim, k, dim=1)
        best_sim[lo:hi] = keep_sim
        best_pos[lo:hi] = torch.gather(both_pos, 1, keep)

    starts = list(range(0, m, size))
    for a in starts:
        a_end = min(a + size, m)
        for b in starts[starts.index(a) :]:
            b_end = min(b + size, m)
            sims = _product(vectors[a:a_end], vectors[b:b_end], buffers)
            if a == b:
                sims.fill_diagonal_(-torch.inf)
            merge(a, a_end, sims, b)
            if a != b:
                merge(b, b_end, _transposed(sims, buffers), a)
    top_idx = ids[best_pos.clamp(min=0)]
    return _finish(top_idx, best_sim)


def seed_examples(
    metrics: pd.DataFrame,
    labels: np.ndarray | None = None,
    quantile: float = SEED_QUANTILE,
    exclude_genres: Sequence[str] = (),
    genres: Sequence[str] | np.ndarray | None = None,
    score: str = "variability",
) -> np.ndarray:
    """Row indices of the seeds: per label, the ambiguity ``score`` (WaNLI: variability; another score of
    :mod:`cartomap.scores.ambiguity` on request) strictly above that label's ``quantile``.

    ``metrics`` is a run's metrics frame (a column named ``score``, rows in examples order);
    ``labels`` default to its ``label`` column. Examples whose genre is in ``exclude_genres``
    (WaNLI leaves out MultiNLI's ``telephone``) are neither seeds nor counted in the quantile.
    Returns the seeds' row indices in ascending order.
    """
    if score not in metrics.columns:
        raise CartomapError(f"the metrics have no {score} column to pick seeds by")
    variability = metrics[score].to_numpy(dtype=np.float64)
    labels = metrics["label"].to_numpy() if labels is None else np.asarray(labels)
    if labels.shape != variability.shape:
        raise ValueError(f"expected {variability.size} labels, got shape {labels.shape}")
    if not 0.0 <= quantile < 1.0:
        raise ValueError(f"quantile must be in [0, 1), got {quantile}")
    eligible = np.isfinite(variability)  # an example without metrics is no seed
    if exclude_genres:
        if genres is None:
            raise CartomapError("excluding genres needs the examples' genres")
        genres = np.asarray(genres, dtype=object)
        eligible &= ~np.isin(genres.astype(str), [str(g) for g in exclude_genres])
    chosen = np.zeros(variability.size, dtype=bool)
    for label in np.unique(labels):
        members = eligible & (labels == label)
        if not members.any():
            continue
        cut = np.quantile(variability[members], quantile)
        chosen |= members & (variability > cut)
    return np.flatnonzero(chosen)


def _text_columns(frame: pd.DataFrame) -> list[str]:
    return list(task_kinds.text_fields_in(frame.columns))


def embedded_rows(run: Run, examples: pd.DataFrame | None = None, labelled: bool = True) -> pd.DataFrame:
    """One row per vector of the run's embeddings, in their order
    (:func:`cartomap.training.embeddings.embedding_ids`): ``examples`` (default ``run.examples()``) as
    they are, or for a word-unit kind (token classification) each word: its unit id ``<sentence id>#<k>``,
    the word as the text field, its sentence (:data:`cartomap.analysis.datamap.SENTENCE`) and ``label``,
    its gold tag (so same-label neighbours of a word are words of the same tag). ``labelled``: RunError
    naming the kind when its points have no one gold label (a multi-label example's is a set); else such
    examples come as they are."""
    kind = run.task_kind
    examples = examples if examples is not None else run.examples()
    if kind.unit.sentences:
        return unit_rows(examples).assign(label=kind.gold(examples))
    if labelled and (not kind.unit.per_example or "label" not in examples.columns):
        raise RunError(
            f"run {run.id}: neighbours by label need one gold label per point; this run's task is "
            f"{kind.name} ({kind.description})"
        )
    return examples


def aligned_rows(run: Run, ids, examples: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`embedded_rows` when they are the rows of embeddings keyed by ``ids``; RunError (compute
    them again) otherwise."""
    rows = embedded_rows(run, examples)
    if len(ids) != len(rows) or not np.array_equal(
        rows["id"].astype(str).to_numpy(dtype=object), np.asarray([str(i) for i in ids], dtype=object)
    ):
        raise RunError(f"the embeddings of run {run.id} are out of date: compute them again")
    return rows


def with_default_regions(metrics: pd.DataFrame, rule: RegionRule | None = None) -> pd.DataFrame:
    """``metrics`` with its regions drawn by ``rule``: the run's default (:meth:`Run.region_rule`, its task
    kind's: a token run's by threshold) whatever rule the run saved; None: by rank on the default axis.
    Metrics without the rule's axis column (written before that score existed, their dynamics gone, so
    :meth:`Run.metrics` could not compute it again) keep the regions they were saved with."""
    rule = rule or RegionRule()
    if rule.axis not in metrics.columns:
        return metrics
    return with_regions(metrics, rule)


def labelled_by_name(group: pd.DataFrame) -> pd.DataFrame:
    """A :func:`neighbour_group` as a person reads it: ``label`` is the class name (``label_name``'s
    values); the integer code is left out."""
    if "label_name" not in group.columns:
        return group
    return group.drop(columns=["label"], errors="ignore").rename(columns={"label_name": "label"})


def neighbour_group(
    run: Run,
    seed_id: str,
    k: int = DEFAULT_K,
    embeddings: tuple[list[str], np.ndarray] | None = None,
    exclude_genres: Sequence[str] = (),
    examples: pd.DataFrame | None = None,
    metrics: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The seed's group: its k same-label neighbours by increasing similarity, then the seed last.

    This is the order of a WaNLI prompt. Columns: position (1..), role (neighbour/seed), id,
    similarity (cosine with the seed; 1.0 for the seed), label, label_name, the text columns,
    genre when known, and each example's data-map metrics when the run has them: confidence, every
    ambiguity axis the metrics have (:data:`cartomap.analysis.datamap.AXIS_COLUMNS`) and the region by the
    run's default rule (:func:`with_default_regions`, its kind's). Fewer than k
    neighbours come back when the label has too few examples. ``embeddings`` (from
    :func:`cartomap.training.embeddings.load_embeddings`), ``examples`` (``run.examples()``) and
    ``metrics`` (``run.metrics()``) save reading them again on every call (a page keeps them).
    """
    from cartomap.training.embeddings import load_embeddings

    embeddings = embeddings if embeddings is not None else load_embeddings(run)
    if embeddings is None:
        raise RunError(f"run {run.id} has no embeddings yet: run `cartomap embed {run.id}` first")
    ids, emb = embeddings
    examples = aligned_rows(run, ids, examples)  # a token run's words
    seed_id = str(seed_id)
    try:
        seed_row = list(ids).index(seed_id)
    except ValueError:
        raise CartomapError(f"{seed_id!r} is not an example of run {run.id}") from None
    labels = examples["label"].to_numpy()
    mask = None
    if exclude_genres and "genre" in examples.columns:
        mask = ~examples["genre"].astype(str).isin([str(g) for g in exclude_genres]).to_numpy()
    idx, sims = same_label_neighbors(
        emb, labels, k=k, query_idx=[seed_row], candidate_mask=mask, normalize=False
    )
    found = idx[0] >= 0
    rows = list(idx[0][found][::-1]) + [seed_row]  # increasing similarity, seed last
    similarity = list(sims[0][found][::-1].astype(float)) + [1.0]
    extra = [c for c in ("genre", SENTENCE) if c in examples.columns]
    columns = ["id", "label"] + _text_columns(examples) + extra
    group = examples.iloc[rows][columns].reset_index(drop=True)
    group["id"] = group["id"].astype(str)
    names = run.label_names
    group.insert(2, "label_name", [names[int(v)] for v in group["label"]])
    group.insert(1, "similarity", np.round(np.asarray(similarity, dtype=np.float64), 6))
    group.insert(0, "role", ["neighbour"] * (len(rows) - 1) + ["seed"])
    group.insert(0, "position", np.arange(1, len(rows) + 1))
    if metrics is None:
        try:
            metrics = run.metrics()
        except RunError:
            metrics = None
    if metrics is not None:
        metrics = with_default_regions(metrics, run.region_rule())
        at = metrics.iloc[[r for r in rows if r < len(metrics)]] if len(metrics) == len(examples) else None
        if at is None or at["id"].astype(str).tolist() != group["id"].tolist():  # not in examples order
            at = metrics.set_index(metrics["id"].astype(str)).reindex(group["id"])
        for col in ("confidence", *AXIS_COLUMNS, "region"):
            if col in metrics.columns:
                group[col] = at[col].to_numpy()
    return group
