"""WaNLI Stage 1, exemplar collection: groups of in-context examples, a seed and its neighbours.

Automatic groups (Liu et al., 2022): seeds are, per gold label, the examples above that label's
0.75 quantile of variability (the paper's procedure, the default; another ambiguity score of
:mod:`cartomap.scores.ambiguity` on request, ``score``); each seed's group is the seed and its k = 4 nearest neighbours
with the same gold label, by cosine similarity of the task model's L2-normalised final-layer
[CLS] vectors (:mod:`cartomap.training.embeddings`). As in the reference code, the ``query`` nearest
examples of any label (the seed itself included) are searched, those with the seed's label are
kept, and a seed with fewer than k of them is skipped; ``query=None`` searches all examples of
the seed's label instead (the exact k nearest). Excluded genres (MultiNLI's telephone) are
neither seeds nor neighbours. A group lists its examples by increasing similarity to the seed,
the seed last: the order of the prompt.

Hand-made groups (a lasso selection on the Data map page, a saved neighbour group) are used as
well: their seed is the group's ``seed`` when it has one, else its last id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.neighbours import DEFAULT_K, SEED_QUANTILE, same_label_neighbors, seed_examples
from cartomap.errors import CartomapError, RunError
from cartomap.runs.groups import group_file, group_table, list_groups, save_group_table
from cartomap.runs.store import Run
from cartomap.scores import ambiguity
from cartomap.tasks import support

AUTO = "auto"  # the ``source`` of automatically collected groups
DEFAULT_QUERY = 15  # the reference code searches the 15 nearest examples, then keeps the seed's label
DEFAULT_EXCLUDE = ("telephone",)
MAX_EXAMPLES = DEFAULT_K + 1  # in-context examples of a prompt: 4 neighbours and the seed
#: Examples up to which a page may collect groups while the user waits (seconds). The search is
#: quadratic: on 550k pairs it is minutes of a background job (``cartomap groups RUN --save``).
COLLECT_IN_PAGE_MAX = 20_000


def _embeddings_for(run: Run, embeddings: tuple[list[str], np.ndarray] | None):
    from cartomap.training.embeddings import load_embeddings

    embeddings = embeddings if embeddings is not None else load_embeddings(run)
    if embeddings is None:
        raise RunError(f"run {run.id} has no embeddings yet: run `cartomap embed {run.id}` first")
    return embeddings


def require_kind(run: Run, work: support.Work = support.GROUPS) -> None:
    """DataError when ``run``'s examples have no one gold label each (a multi-label run's label sets, a token
    run's tags): a WaNLI group is a seed and its nearest neighbours of the seed's one label, written as
    in-context examples of that label, generated and filtered as examples of one label; a label set has no
    such label to group by, to generate or to filter by. ``work``: the stage that asks (its need)."""
    work.require(run.task_kind, f"run {run.id}")


def auto_group_name(label_name: str, seed_id: str) -> str:
    return f"auto-{label_name}-{seed_id}"


def collect_groups(
    run: Run,
    k: int = DEFAULT_K,
    quantile: float = SEED_QUANTILE,
    exclude_genres: Sequence[str] = DEFAULT_EXCLUDE,
    query: int | None = DEFAULT_QUERY,
    embeddings: tuple[list[str], np.ndarray] | None = None,
    score: str = ambiguity.VARIABILITY,
) -> list[dict[str, Any]]:
    """The automatic groups of ``run`` (WaNLI Stage 1), per label, most ambiguous seed first by ``score``
    (variability, WaNLI's; or another ambiguity score of the run's metrics).

    Each group: name, seed, label (int), label_name, ids (k neighbours by increasing
    similarity, then the seed), similarities (cosine with the seed, 1.0 for the seed),
    seed_variability, and with another ``score`` also ``seed_score`` and ``score`` (its name). Needs the
    run's metrics and embeddings.
    """
    require_kind(run)
    if k < 1:
        raise CartomapError(f"k must be at least 1, got {k}")
    if query is not None and query < k + 1:
        raise CartomapError(f"query must be at least k + 1 = {k + 1} (the seed is among the results)")
    ids, emb = _embeddings_for(run, embeddings)
    examples = run.examples()
    if examples["id"].astype(str).tolist() != list(ids):
        raise RunError(f"the embeddings of run {run.id} are out of date: compute them again")
    metrics = run.metrics()
    metrics = metrics.set_index(metrics["id"].astype(str)).reindex(ids)
    labels = examples["label"].to_numpy()
    variability = metrics[ambiguity.VARIABILITY].to_numpy(dtype=np.float64)
    if score not in metrics.columns:
        raise RunError(f"run {run.id}'s metrics have no {score} score to pick seeds by")
    ranked = metrics[score].to_numpy(dtype=np.float64)
    genres = examples["genre"].astype(str).to_numpy() if "genre" in examples.columns else None
    exclude = tuple(exclude_genres) if genres is not None else ()
    seeds = seed_examples(
        pd.DataFrame({score: ranked, "label": labels}),
        quantile=quantile,
        exclude_genres=exclude,
        genres=genres,
        score=score,
    )
    allowed = np.ones(len(ids), dtype=bool)
    if exclude:
        allowed &= ~np.isin(genres, [str(g) for g in exclude])

    if query is None:  # the exact k nearest of the seed's label
        idx, sims = same_label_neighbors(emb, labels, k=k, query_idx=seeds, candidate_mask=allowed)
    else:  # the reference code: the query nearest (seed included) of any label, then the seed's label
        found, found_sims = same_label_neighbors(
            emb,
            np.zeros(len(ids), dtype=np.int64),
            k=query - 1,
            query_idx=seeds,
            candidate_mask=allowed,
        )
        idx = np.full((seeds.size, k), -1, dtype=np.int64)
        sims = np.full((seeds.size, k), np.nan, dtype=np.float32)
        for row, seed in enumerate(seeds):
            same = (found[row] >= 0) & (labels[np.maximum(found[row], 0)] == labels[seed])
            take = found[row][same][:k]
            idx[row, : take.size] = take
            sims[row, : take.size] = found_sims[row][same][:k]

    names = run.label_names
    groups = []
    for row, seed in enumerate(seeds):
        if (idx[row] < 0).any():  # fewer than k same-label neighbours: skipped, as in the reference code
            continue
        order = list(idx[row][::-1]) + [seed]  # increasing similarity, seed last
        similarities = [round(float(s), 6) for s in sims[row][::-1]] + [1.0]
        label_name = names[int(labels[seed])]
        groups.append(
            {
                "name": auto_group_name(label_name, ids[seed]),
                "seed": ids[seed],
                "label": int(labels[seed]),
                "label_name": label_name,
                "ids": [ids[i] for i in order],
                "similarities": similarities,
                "seed_variability": round(float(variability[seed]), 6),
                **(
                    {}
                    if score == ambiguity.VARIABILITY
                    else {"score": score, "seed_score": round(float(ranked[seed]), 6)}
                ),
            }
        )
    label_rank = {name: n for n, name in enumerate(names)}
    key = "seed_variability" if score == ambiguity.VARIABILITY else "seed_score"
    groups.sort(key=lambda g: (label_rank[g["label_name"]], -g[key]))
    return groups


def save_auto_groups(
    run: Run,
    groups: list[dict[str, Any]],
    *,
    replace: bool = True,
    settings: dict[str, Any] | None = None,
) -> int:
    """Save ``groups`` (from :func:`collect_groups`) as run groups with source "auto".

    The record is that of :func:`cartomap.runs.groups.save_group` (name, ids, source, note,
    created_at) plus seed, label_name, similarities, seed_variability, rank and the collection
    ``settings``. They go into the run's table of groups (one file: a full-size run has 100k+).
    ``replace`` first deletes the automatic groups saved before (a new collection replaces the old
    one); hand-made groups are never touched. Returns the number saved.
    """
    import time

    known = set(run.examples(columns=["id"])["id"].astype(str))  # checked once, not once per group
    for group in groups:
        unknown = [i for i in group["ids"] if str(i) not in known]
        if unknown:
            raise CartomapError(f"group {group['name']!r}: ids not in run {run.id}, e.g. {unknown[:3]}")
    if replace:  # automatic groups saved one file each, as before the table
        for old in list_groups(run, include_table=False):
            if old.get("source") == AUTO:
                path = group_file(run, old["name"])
                if path is not None:
                    path.unlink(missing_ok=True)
    now = time.time()
    records = []
    for rank, group in enumerate(groups):
        records.append(
            {
                "name": group["name"],
                "ids": [str(i) for i in group["ids"]],
                "source": AUTO,
                "note": f"seed {group['seed']} ({group['label_name']}) and its nearest same-label neighbours",
                "created_at": now,
                "seed": group["seed"],
                "label_name": group["label_name"],
                "similarities": [float(x) for x in group["similarities"]],
                "seed_variability": float(group["seed_variability"]),
                "order": "increasing similarity, seed last",
                "rank": rank,
                "settings": dict(settings or {}),
            }
        )
    if not replace:
        new = {r["name"] for r in records}
        kept = [g for g in group_table(run) if g["name"] not in new]
        records = kept + [{**r, "rank": len(kept) + n} for n, r in enumerate(records)]
    save_group_table(run, records)
    return len(groups)


def auto_groups(run: Run) -> list[dict[str, Any]]:
    """The saved automatic groups, in collection order (per label, most variable seed first)."""
    groups = [g for g in list_groups(run) if g.get("source") == AUTO]
    return sorted(groups, key=lambda g: (g.get("rank", 0), g.get("name", "")))


def group_seed(group: dict[str, Any]) -> str:
    """The seed of a group: its ``seed`` field, else its last id (the last one selected)."""
    ids = [str(i) for i in group.get("ids", [])]
    if not ids:
        raise CartomapError(f"group {group.get('name')!r} is empty")
    seed = str(group.get("seed") or ids[-1])
    return seed if seed in ids else ids[-1]


def group_examples(
    run: Run,
    group: dict[str, Any],
    embeddings: tuple[list[str], np.ndarray] | None = None,
    examples: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The examples of ``group`` in prompt order: by increasing similarity to the seed, the seed last.

    Automatic groups keep their stored order. Hand-made groups are ordered by cosine
    similarity to their seed (:func:`group_seed`) when the run has embeddings, else kept as
    stored with the seed moved last. Columns: position, role (example/seed), id, similarity
    (NaN without embeddings), label, label_name, premise, hypothesis, genre when known.
    """
    examples = examples if examples is not None else run.examples()
    if "premise" not in examples.columns or "hypothesis" not in examples.columns:
        raise CartomapError(f"run {run.id} has single texts: WaNLI prompts need premise/hypothesis pairs")
    ids = list(dict.fromkeys(str(i) for i in group.get("ids", [])))  # drop repeats, keep the order
    seed = group_seed(group)
    frame = (
        examples
        if examples.index.name == "id"
        else examples.set_index(examples["id"].astype(str), drop=False)
    )
    unknown = [i for i in ids if i not in frame.index]
    if unknown:
        raise CartomapError(
            f"group {group.get('name')!r} holds ids that are not examples of run {run.id}, e.g. {unknown[:3]}"
        )
    similarity: list[float]
    if group.get("source") == AUTO and len(group.get("similarities") or []) == len(ids):
        similarity = [float(s) for s in group["similarities"]]
    else:
        if embeddings is None:
            from cartomap.training.embeddings import load_embeddings

            embeddings = load_embeddings(run)
        where = {i: n for n, i in enumerate(embeddings[0])} if embeddings is not None else {}
        if embeddings is not None and len(where) == len(frame) and all(i in where for i in ids):
            vectors = np.asarray(embeddings[1][[where[i] for i in ids]], dtype=np.float64)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            sims = vectors @ vectors[ids.index(seed)]
            others = [n for n in np.argsort(sims, kind="stable") if ids[n] != seed]
            ids = [ids[n] for n in others] + [seed]
            similarity = [float(sims[n]) for n in others] + [1.0]
        else:
            ids = [i for i in ids if i != seed] + [seed]
            similarity = [float("nan")] * len(ids)
    columns = ["id", "label", "premise", "hypothesis"] + (["genre"] if "genre" in frame.columns else [])
    out = frame.loc[ids, columns].reset_index(drop=True)
    out["id"] = out["id"].astype(str)
    names = run.label_names
    out.insert(2, "label_name", [names[int(v)] for v in out["label"]])
    out.insert(1, "similarity", np.round(np.asarray(similarity, dtype=np.float64), 6))
    out.insert(0, "role", ["example"] * (len(ids) - 1) + ["seed"])
    out.insert(0, "position", np.arange(1, len(ids) + 1))
    return out


def in_context_examples(frame: pd.DataFrame, max_examples: int = MAX_EXAMPLES) -> pd.DataFrame:
    """The rows of a :func:`group_examples` frame that go into the prompt.

    Only examples with the seed's label (a WaNLI group is one label), the ``max_examples``
    closest to the seed, the seed last. Positions are renumbered from 1.
    """
    if max_examples < 1:
        raise CartomapError(f"a prompt needs at least one example, got max_examples={max_examples}")
    seed_label = frame["label"].iloc[-1]
    kept = frame[frame["label"] == seed_label].tail(max_examples).copy()
    kept["position"] = np.arange(1, len(kept) + 1)
    return kept.reset_index(drop=True)
