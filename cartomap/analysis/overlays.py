"""What the Data map draws over its points: a focused example's neighbours and a WaNLI batch's pairs.

* :func:`focus_neighbour_ids`: the k nearest examples of a focused example in [CLS] space, of any
  label and of its own label (the two searches of a WaNLI exemplar group,
  :mod:`cartomap.wanli.exemplars`: the nearest of any label, then those with the seed's label).
* :func:`neighbour_overlay`: (map frame, focus id, neighbour ids) -> one row per example drawn: the
  focused example (role ``seed``) and its neighbours (role ``neighbour``) at their place on the map
  (x = the map's axis, y = confidence), with their gold label and whether it is the seed's.
* :func:`generated_overlay`: a filtered batch (``wanli/<batch>/filtered.parquet``) -> one row per
  generated pair with a score: x = its estimated max variability, y = its estimated confidence when
  the table has one (NaN otherwise: Stage 3 computes none, a generated pair has no gold label),
  ``status`` = kept or the rule that removed it. Pairs removed by a heuristic have no score and are
  counted (``attrs["n_unscored"]``), not drawn.

No text of the data goes into these frames: ids and labels only (figures escape them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from cartomap.analysis.datamap import axis_of
from cartomap.analysis.neighbours import DEFAULT_K, aligned_rows, same_label_neighbors
from cartomap.errors import CartomapError, DataError, RunError
from cartomap.runs.store import Run

SEED, NEIGHBOUR = "seed", "neighbour"
KEPT = "kept"
NEIGHBOUR_COLUMNS = ("id", "role", "rank", "label", "same_label", "x", "y")
#: The ``attrs`` key of a :func:`neighbour_overlay`: the map's axis its x is (a column of the map frame).
AXIS = "axis"
GENERATED_COLUMNS = ("gen_id", "label", "status", "x", "y")
#: Columns a filtered table needs for :func:`generated_overlay`.
FILTERED_NEEDS = ("gen_id", "intended_label", "max_variability", "kept")


def focus_neighbour_ids(
    run: Run,
    focus_id: str,
    k: int = DEFAULT_K,
    embeddings: tuple[list[str], np.ndarray] | None = None,
) -> dict[str, list[str]]:
    """The ``k`` nearest examples of ``focus_id`` by cosine similarity of the run's [CLS] vectors (a token
    run's: words by their vectors, the same label = the same gold tag), nearest first:
    ``{"any label": [...], "same label": [...]}`` (the focused example left out).
    ``embeddings`` as :func:`cartomap.training.embeddings.load_embeddings` returns them (a page keeps them)."""
    from cartomap.training.embeddings import load_embeddings

    if k < 1:
        raise CartomapError(f"k must be at least 1, got {k}")
    embeddings = embeddings if embeddings is not None else load_embeddings(run)
    if embeddings is None:
        raise RunError(f"run {run.id} has no embeddings yet: run `cartomap embed {run.id}` first")
    ids, emb = embeddings
    columns = tuple(dict.fromkeys(("id", *run.task_kind.gold_columns)))  # ids and gold only: no texts
    examples = aligned_rows(run, ids, run.examples(columns=columns))  # a token run's words with their tags
    try:
        row = [str(i) for i in ids].index(str(focus_id))
    except ValueError:
        raise CartomapError(f"{focus_id!r} is not an example of run {run.id}") from None
    labels = examples["label"].to_numpy()
    found = {}
    for name, by in (("any label", np.zeros(len(ids), dtype=np.int64)), ("same label", labels)):
        idx, _ = same_label_neighbors(emb, by, k=k, query_idx=[row])
        found[name] = [str(ids[i]) for i in idx[0] if i >= 0]
    return found


def neighbour_overlay(frame: pd.DataFrame, focus_id: str, neighbour_ids: Sequence[str]) -> pd.DataFrame:
    """The focused example and its neighbours at their place on the map ``frame`` (id, the map's axis,
    confidence, gold): columns id, role (seed / neighbour), rank (0 for the seed, then 1, 2, ... in the
    order given, repeats dropped), label (gold), same_label (the seed's gold label), x = the map's axis
    (:func:`cartomap.analysis.datamap.axis_of`; its name is ``attrs["axis"]``), y = confidence. Ids not on
    the map are left out (``attrs["missing"]`` counts the neighbours left out); a focus not on the map gives
    an empty frame."""
    axis = axis_of(frame)
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in NEIGHBOUR_COLUMNS})
    empty.attrs[AXIS] = axis
    focus_id = str(focus_id)
    order = [focus_id] + [i for i in dict.fromkeys(str(n) for n in neighbour_ids) if i != focus_id]
    at = frame.assign(_id=frame["id"].astype(str)).drop_duplicates("_id").set_index("_id")
    if focus_id not in at.index:
        empty.attrs["missing"] = len(order) - 1
        return empty
    present = [i for i in order if i in at.index]
    rows = at.loc[present]
    gold = rows["gold"].astype(str).to_numpy()
    out = pd.DataFrame(
        {
            "id": present,
            "role": [SEED] + [NEIGHBOUR] * (len(present) - 1),
            "rank": [order.index(i) for i in present],
            "label": gold,
            "same_label": gold == gold[0],
            "x": rows[axis].to_numpy(dtype=np.float64),
            "y": rows["confidence"].to_numpy(dtype=np.float64),
        }
    )
    out.attrs["missing"] = len(order) - len(present)
    out.attrs[AXIS] = axis
    return out


def generated_overlay(filtered: pd.DataFrame, source: str = "the filtered table") -> pd.DataFrame:
    """The generated pairs of a filtered batch that have an estimated max variability: columns gen_id,
    label (intended), status ("kept" or the rule that removed it), x = max_variability, y = the table's
    ``confidence`` when it has one, else NaN (Stage 3 estimates no confidence). ``attrs``: n_total (rows of
    the table), n_unscored (rows without a score: removed by a heuristic before the score), has_y."""
    missing = [c for c in FILTERED_NEEDS if c not in filtered.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)} (filter the batch again)")
    x = pd.to_numeric(filtered["max_variability"], errors="coerce").to_numpy(dtype=np.float64)
    scored = np.isfinite(x)
    has_y = "confidence" in filtered.columns
    y = (
        pd.to_numeric(filtered["confidence"], errors="coerce").to_numpy(dtype=np.float64)
        if has_y
        else np.full(len(filtered), np.nan)
    )
    kept = filtered["kept"].to_numpy(dtype=bool)
    removed = (
        filtered["removed_by"] if "removed_by" in filtered.columns else pd.Series([None] * len(filtered))
    )
    status = np.where(kept, KEPT, removed.fillna("removed").astype(str).to_numpy(dtype=object))
    out = pd.DataFrame(
        {
            "gen_id": filtered["gen_id"].astype(str).to_numpy(dtype=object)[scored],
            "label": filtered["intended_label"].astype(str).to_numpy(dtype=object)[scored],
            "status": status[scored].astype(object),
            "x": x[scored],
            "y": y[scored],
        }
    )
    out.attrs.update(n_total=int(len(filtered)), n_unscored=int((~scored).sum()), has_y=bool(has_y))
    return out
