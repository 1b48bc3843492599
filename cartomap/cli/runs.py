"""The run store: ``cartomap runs``, ``show``, ``export``, ``import-dynamics``, ``map``, ``delete``, ``cancel``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cartomap.cli.options import add_data_arguments, data_config, print_run_summary
from cartomap.errors import CartomapError


def cmd_runs(a: argparse.Namespace) -> int:
    from cartomap.runs.store import RunStore

    table = RunStore(a.cache).table()
    if table.empty:
        print(f"no runs in {RunStore(a.cache).runs_dir}")
    else:
        print(table.to_string(index=False))
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    from cartomap.runs.store import RunStore

    run = RunStore(a.cache).get(a.run)
    status = run.status()
    print(f"run {run.id}  ({status['state']})  {run.path}")
    cfg = run.config
    print(
        f"  data   {cfg.data.path}  dev {cfg.dev.path if cfg.dev else '-'}  labels {', '.join(run.label_names)}"
    )
    print(
        f"  model  {cfg.model.name_or_path}  epochs {cfg.train.epochs}  batch {cfg.train.batch_size}  "
        f"lr {cfg.train.learning_rate}  record {cfg.train.record}"
    )
    if cfg.origin.kind != "cartomap":
        print(f"  origin {cfg.origin.kind}" + "".join(f"\n    {c}" for c in cfg.origin.checkpoints))
    if status["state"] in ("running", "interrupted", "cancelled", "failed"):
        print(
            f"  progress: epoch {status.get('epoch')}/{status.get('epochs')} step {status.get('global_step')}/"
            f"{status.get('total_steps')} eta {status.get('eta_s')}s"
            + (f"  error: {status['error']}" if status.get("error") else "")
        )
    for h in run.history():
        print("  " + "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in h.items()))
    if status["state"] == "done":
        print_run_summary(run)
        m = run.metrics()
        print(
            m[["confidence", "variability", "correctness", "forgetfulness", "aum"]]
            .describe()
            .round(3)
            .to_string()
        )
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from cartomap.runs.interop import write_reference_dynamics, write_reference_metrics
    from cartomap.runs.store import RunStore

    run = RunStore(a.cache).get(a.run)
    out = Path(a.out)
    ids, logits = run.dynamics(a.source)
    labels = run.examples()["label"].to_numpy()
    write_reference_dynamics(out, ids, logits, labels)
    write_reference_metrics(out / "td_metrics.jsonl", run.metrics(a.source))
    run.metrics(a.source).to_csv(out / "metrics.csv", index=False)
    print(f"wrote {logits.shape[0]} dynamics_epoch_*.jsonl, td_metrics.jsonl and metrics.csv to {out}")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from cartomap.runs.importer import import_reference_run
    from cartomap.runs.store import RunStore

    data = data_config(a, a.data, a.split) if a.data else None
    run = import_reference_run(a.folder, RunStore(a.cache), data=data, label_names=a.label_names, name=a.name)
    print(f"imported run {run.id}: {run.path}")
    print_run_summary(run)
    return 0


def cmd_map(a: argparse.Namespace) -> int:
    from cartomap.analysis.datamap import map_frame
    from cartomap.analysis.figures import SAVE_SUFFIXES, save_data_map
    from cartomap.runs.store import RunStore

    if Path(a.out).suffix.lower() not in SAVE_SUFFIXES:
        raise CartomapError(f"--out {a.out}: expected a file name ending in {' or '.join(SAVE_SUFFIXES)}")
    run = RunStore(a.cache).get(a.run)
    title = a.title or f"{run.config.data.path} ({run.id})"
    path = save_data_map(map_frame(run, a.source), a.out, title=title)
    print(f"wrote {path}")
    return 0


def cmd_delete(a: argparse.Namespace) -> int:
    from cartomap.runs.store import RunStore

    store = RunStore(a.cache)
    run = store.get(a.run)
    if not a.yes:
        if not sys.stdin.isatty():
            print(f"refusing to delete run {run.id} without --yes", file=sys.stderr)
            return 2
        if input(f"delete run {run.id} at {run.path}? [y/N] ").strip().lower() != "y":
            return 1
    store.delete(run.id)
    print(f"deleted run {run.id}")
    return 0


def cmd_cancel(a: argparse.Namespace) -> int:
    from cartomap.runs.store import RunStore

    run = RunStore(a.cache).get(a.run)
    run.request_cancel()
    print(f"cancel requested for run {run.id}; it stops after the current step and can be resumed")
    return 0


def add_commands(sub) -> None:
    sub.add_parser("runs", help="list runs").set_defaults(func=cmd_runs)

    s = sub.add_parser("show", help="a run's config, progress, history and metric summary")
    s.add_argument("run")
    s.set_defaults(func=cmd_show)

    e = sub.add_parser("export", help="write dynamics_epoch_*.jsonl and td_metrics.jsonl (reference format)")
    e.add_argument("run")
    e.add_argument("--out", required=True)
    e.add_argument("--source", default="train", choices=("train", "eval"))
    e.set_defaults(func=cmd_export)

    i = sub.add_parser("import-dynamics", help="make a run from a folder of reference dynamics_epoch_*.jsonl")
    i.add_argument("folder")
    i.add_argument("--name", default="")
    add_data_arguments(i)
    i.set_defaults(func=cmd_import, data=None)

    m = sub.add_parser("map", help="draw the data map of a run to PNG or HTML")
    m.add_argument("run")
    m.add_argument("--out", required=True, help="map.png or map.html")
    m.add_argument("--source", default="train", choices=("train", "eval"))
    m.add_argument("--title", default="")
    m.set_defaults(func=cmd_map)

    x = sub.add_parser("delete", help="delete a run folder")
    x.add_argument("run")
    x.add_argument("--yes", action="store_true")
    x.set_defaults(func=cmd_delete)

    c = sub.add_parser("cancel", help="ask a running training job to stop after its current step")
    c.add_argument("run")
    c.set_defaults(func=cmd_cancel)
