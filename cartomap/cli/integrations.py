"""Training that cartomap did not run: ``cartomap score-checkpoints`` (dynamics from saved checkpoints)."""

from __future__ import annotations

import argparse

from cartomap.cli.options import add_column_arguments, data_config
from cartomap.cli.printing import CountBar, print_run_summary
from cartomap.cli.team import acting
from cartomap.errors import CartomapError, RunError
from cartomap.runs.state import State


def cmd_score_checkpoints(a: argparse.Namespace) -> int:
    """Score checkpoints (or, with ``--run``, go on with an existing scoring run) and print the run."""
    from cartomap.integrations.checkpoints import prepare_scoring, score_run, start_scoring
    from cartomap.runs.store import RunStore

    store = RunStore(a.cache)
    if a.run:
        run = store.get(a.run)
        if not run.config.origin.kind.scored_checkpoints:
            raise CartomapError(f"run {run.id} was not made by score-checkpoints ({run.config.origin.kind})")
    else:
        if not a.checkpoints:
            raise CartomapError("give a Trainer output_dir, or checkpoint folders / hub ids in epoch order")
        if not a.data:
            raise CartomapError("give the training data the checkpoints are scored on with --data")
        options = {
            "batch_size": a.batch_size,
            "max_length": a.max_length,
            "tokenizer": a.tokenizer or "",
            "device": a.device,
            "save_model": a.save_model,
            "name": a.name,
        }
        data = data_config(a, a.data, a.split)
        if a.background:
            run = start_scoring(a.checkpoints, data, store, by=acting(a), **options)
            print(f"run {run.id} ({run.state}): {run.path}; follow it with `cartomap show {run.id}`")
            return 0
        run = prepare_scoring(a.checkpoints, data, store, **options)
    if run.state == State.DONE:
        print(f"run {run.id} exists (done): {run.path}")
        print_run_summary(run)
        return 0
    if not a.job:
        run.clear_cancel()  # a direct call is an explicit start
    if run.is_locked():
        raise RunError(
            f"run {run.id} is being scored by another process; follow it with `cartomap show {run.id}`"
        )
    print(f"run {run.id}: {run.path}", flush=True)
    bar = CountBar(a.quiet, "example", f"run {run.id}")
    try:
        score_run(run, lambda s: bar(s["global_step"], s["total_steps"]))
    finally:
        bar.close()
    print(f"run {run.id} {run.state}: {run.path}")
    if run.state == State.DONE:
        print_run_summary(run)
    return 0 if run.state == State.DONE else 3


def add_commands(sub) -> None:
    from cartomap.config import ModelConfig

    s = sub.add_parser(
        "score-checkpoints",
        help="map a finished fine-tuning: the eval-mode pass of each saved checkpoint over the training data",
        description="Dynamics from saved checkpoints: each checkpoint (a Trainer output_dir's checkpoint-<step> "
        "folders in step order, or folders / hub ids given one per epoch, in order) scores every training "
        "example in eval mode; the logits of checkpoint k are epoch k of the run.",
    )
    s.add_argument(
        "checkpoints", nargs="*", help="a Trainer output_dir, or checkpoint folders / hub ids in order"
    )
    g = s.add_argument_group("data")
    g.add_argument(
        "--data", default=None, help="the training data: file, saved HF dataset folder, hf:NAME, demo:train"
    )
    add_column_arguments(g)
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--max-length", type=int, default=ModelConfig().max_length, help="tokens per example")
    s.add_argument(
        "--tokenizer",
        default="",
        help="when the checkpoints hold none (default: theirs, or the output_dir's)",
    )
    s.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    s.add_argument(
        "--no-model",
        dest="save_model",
        action="store_false",
        help="do not keep the last checkpoint as the run's model (embeddings and neighbours need it)",
    )
    s.add_argument("--name", default="")
    s.add_argument("--background", action="store_true", help="run as a background job and return")
    s.add_argument(
        "--run", default=None, help="go on with an existing scoring run (the background job uses it)"
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    s.set_defaults(func=cmd_score_checkpoints)
