"""A run's training order: checks before the run exists, the baseline's score file, the batch sampler.

The plans themselves are pure functions in :mod:`cartomap.training.curricula`; this module joins
them to a run: it reads the scores file a cartography order sorts by, checks that the order can
run on the config, and builds the sampler the loop iterates (writing the stage table to the run).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.config import TRAIN_PASS, RunConfig, recorded_sources
from cartomap.errors import DataError
from cartomap.io import atomic_write_json
from cartomap.runs import layout
from cartomap.runs.store import Run
from cartomap.training.batching import EpochBatches, PlannedBatches
from cartomap.training.curricula import needs_columns, training_plan

SCORE_COLUMNS = ("confidence", "variability", "correctness")
#: Read from the scores file when present: the integer count of correct epochs (Cart-CL++ "code").
OPTIONAL_SCORE_COLUMNS = ("correct_count",)


def check_order(config: RunConfig, train) -> None:
    """Raise DataError when the training order cannot run on this config and data."""
    order = config.order
    if order == type(order)():
        return
    from cartomap.errors import DataError

    kind = train.task_kind
    if not kind.unit.per_example:
        raise DataError(f"order {order.name!r}: a {kind.name} run trains in the shuffled order only")

    if order.name not in ("shuffled",) and TRAIN_PASS in recorded_sources(config.train.record):
        raise DataError(
            f"order {order.name!r}: recording the training pass needs every example in every epoch; "
            "use record 'eval' (an eval-mode pass after each epoch) or 'none'"
        )
    from cartomap.scores import ambiguity

    if order.ambiguity not in ambiguity.MAP_SCORES:
        raise DataError(
            f"unknown ambiguity score {order.ambiguity!r}; expected one of {', '.join(ambiguity.MAP_SCORES)}",
            field="ambiguity",
        )
    needed = [c for c in needs_columns(order) if c in (*SCORE_COLUMNS, order.ambiguity)]
    if needed and not order.scores:
        raise DataError(
            f"order {order.name!r} needs {', '.join(needed)} from a baseline data map: "
            f"set the scores file (a finished run's {layout.METRICS})"
        )
    if needed:
        order_table(order, train.frame)  # validates the scores file


def order_table(order, examples, resolve=None) -> pd.DataFrame:
    """Per-example columns an order sorts by, row-aligned with ``examples`` (scores joined on id).

    ``resolve`` maps the scores path to one this process can open (a run's :meth:`Run.resolve_path`)."""
    table = pd.DataFrame(index=range(len(examples)))
    if not order.scores:
        return table
    path = Path(resolve(order.scores) if resolve is not None else order.scores)
    if not path.exists():
        raise DataError(f"order {order.name!r}: scores file {path} does not exist (a run's {layout.METRICS})")
    scores = pd.read_parquet(path)
    wanted = tuple(dict.fromkeys((*SCORE_COLUMNS, order.ambiguity)))
    missing = [c for c in ("id", *wanted) if c not in scores.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; expected id, {', '.join(wanted)}")
    scores = scores.set_index(scores["id"].astype(str))
    ids = examples["id"].astype(str)
    absent = ids[~ids.isin(scores.index)]
    if len(absent):
        raise DataError(
            f"{path}: no scores for {len(absent)} training example(s), e.g. id {absent.iloc[0]!r}; "
            "the scores must come from a run on the same training set"
        )
    for col in wanted:
        table[col] = scores.loc[ids, col].to_numpy(dtype=np.float64)
    for col in OPTIONAL_SCORE_COLUMNS:
        if col in scores.columns:
            table[col] = scores.loc[ids, col].to_numpy(dtype=np.float64)
    missing = [c for c in needs_columns(order) if c in OPTIONAL_SCORE_COLUMNS and c not in table.columns]
    if missing:
        raise DataError(
            f"{path}: order {order.name!r} with difficulty {order.difficulty!r} needs column(s) {missing} "
            f"(the integer count of correct epochs, as in a run's {layout.METRICS})"
        )
    return table


def training_batches(run: Run, examples, labels: np.ndarray, lengths: np.ndarray):
    """The batch sampler for the run's order: reshuffled epochs, or a curriculum's plan."""
    cfg = run.config
    tc, order = cfg.train, cfg.order
    if order.name == "shuffled" and not order.oversample:
        return EpochBatches(lengths, tc.batch_size, tc.seed, group_by_length=tc.group_by_length)
    table = order_table(order, examples, run.resolve_path)
    table["length"] = lengths
    if "similarity" in needs_columns(order):
        table["similarity"] = run_similarity(run, examples)
    plan = training_plan(order, labels, tc.batch_size, tc.epochs, tc.seed, table=table)
    atomic_write_json(run.plan_path, plan.stage_table(run.label_names).to_dict(orient="records"))
    return PlannedBatches(plan)


def run_similarity(run: Run, examples) -> np.ndarray:
    """Premise-hypothesis similarity of every example by the run's base encoder (cached in the run)."""
    from cartomap.training.similarity import aligned_similarity, similarity_run

    saved = similarity_run(run, model=run.resolve_path(run.config.model.name_or_path))
    return aligned_similarity(saved, examples["id"])
