"""The run store: ``cartomap runs``, ``show``, ``export``, ``import-dynamics``, ``map``, ``repair``, ``delete``,
``cancel``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cartomap.cli.options import add_data_arguments, data_config
from cartomap.cli.printing import print_run_summary, printable, printable_frame
from cartomap.config import SOURCES, Source
from cartomap.errors import CartomapError, RunError
from cartomap.runs.progress import time_left
from cartomap.runs.state import State

SEEDS_EXPORT = "seeds.parquet"  # `cartomap export`: the seeds experiment's per-example table
DETECTORS_EXPORT = "detectors.parquet"  # `cartomap export`: every available detector's score per example
SENTENCE_METHOD_CHOICES = ("min", "mean", "softmin")  # cartomap.scores.aggregate.names("word"), a test checks
SENTENCES_EXPORT = "sentences.parquet"  # `cartomap export` of a token run: the sentence-level map
PREDICTIONS_EXPORT = (
    "predictions_{source}.parquet"  # `cartomap export`: a dev or test set's predictions per unit
)
TAGS_EXPORT = "tags.parquet"  # `cartomap export` of a run with tags: (example, tag, who, when) rows


def cmd_runs(a: argparse.Namespace) -> int:
    """List the runs; a damaged run is listed as damaged, with what is wrong, and the others as usual."""
    from cartomap.runs.store import RunStore

    table = RunStore(a.cache).table()
    if table.empty:
        print(f"no runs in {RunStore(a.cache).runs_dir}")
        return 0
    damaged = table[table["problem"] != ""]
    print(printable_frame(table.drop(columns=["problem"])).to_string(index=False))
    for row in damaged.itertuples():
        print(f"damaged run {row.id}: {printable(row.problem)}", file=sys.stderr)
    if len(damaged):
        print(
            "repair with `cartomap repair RUN`, or remove with `cartomap delete RUN --yes`", file=sys.stderr
        )
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    from cartomap.integrations.origin import known_training, shown_settings
    from cartomap.runs.store import RunStore

    run = RunStore(a.cache).get(a.run)
    status = run.status()
    print(f"run {run.id}  ({status['state']})  {run.path}")
    if status["state"] == State.DAMAGED:
        print(f"  damaged: {status.get('error')}; `cartomap repair {run.id}` writes a fresh status")
    cfg = run.config
    print(
        f"  data   {cfg.data.path}  dev {cfg.dev.path if cfg.dev else '-'}  labels {', '.join(run.label_names)}"
    )
    origin = run.provenance
    if origin.get("data") and origin["data"] != cfg.data.path:
        print(f"  from   {origin['data']} (the run holds its own copy)")
    for warning in run.warnings:
        print(f"  warning: {warning}")
    shown = shown_settings(cfg)
    print(
        f"  model  {cfg.model.name_or_path}  epochs {shown['epochs']}  batch {shown['batch']}  "
        f"lr {shown['lr']}  seed {shown['seed']}  record {cfg.train.record}"
    )
    if not cfg.origin.kind.trains_here:
        source = known_training(cfg).get("source")
        print(
            f"  origin {cfg.origin.kind}"
            + (f" (settings from {source})" if source else "")
            + (f", {len(cfg.origin.checkpoints)} checkpoint(s) scored" if cfg.origin.checkpoints else "")
            + "".join(f"\n    {c}" for c in cfg.origin.checkpoints)
        )
    if status["state"] in (State.RUNNING, State.INTERRUPTED, State.CANCELLED, State.FAILED):
        print(
            f"  progress: epoch {status.get('epoch')}/{status.get('epochs')} step {status.get('global_step')}/"
            f"{status.get('total_steps')} time left {time_left(status, status['state'])}"
            + (f"  error: {status['error']}" if status.get("error") else "")
        )
    for h in run.history():  # an entity table (a dict) is printed by print_run_summary
        print(
            "  "
            + "  ".join(
                f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in h.items()
                if not isinstance(v, dict)
            )
        )
    if status["state"] == State.DONE and run.has_metrics():
        print_run_summary(run)
        from cartomap.analysis.datamap import RANGE_COLUMNS

        m = run.metrics()
        print(m[[c for c in RANGE_COLUMNS if c in m.columns]].describe().round(3).to_string())
        print_seeds(run, a.cache)
    return 0


def print_seeds(run, cache) -> None:
    """The "Seeds" block of `cartomap show`: how stable the run's map was over its seeds experiment."""
    from cartomap.experiments.seeds import SUMMARY, done_seeds_of, seeds_of, summary_lines
    from cartomap.experiments.store import ExperimentStore

    store = ExperimentStore(cache)
    exp = done_seeds_of(run, store)
    if exp is None:
        pending = seeds_of(run, store)
        if pending is not None:
            print(f"Seeds: experiment {pending.id} is {pending.state}")
        return
    summary = exp.result(SUMMARY)
    seeds = ", ".join(str(s) for s in summary.get("seeds", []))
    print(f"Seeds: {summary.get('n_seeds')} seeds ({seeds}), experiment {exp.id}")
    for line in summary_lines(summary):
        print(f"  {line}")
    if summary.get(Source.EVAL):  # a run that recorded both passes: the eval-mode pass's map too
        for line in summary_lines(summary[Source.EVAL]):
            print(f"  {line}")


def detector_table(run, metrics, seeds_table, cache):
    """id, label and every registered detector the run can feed (its metrics, its seeds experiment's
    table, a pruning experiment's out-of-fold logits on its data; a token run's from its k folds of sentences),
    one row per example (a token run's: per word) in the run's order."""
    import pandas as pd

    from cartomap.experiments.truth import detector_extras
    from cartomap.scores import detectors
    from cartomap.scores.token_quality import sentence_keys

    unit_ids, unit_labels = run.unit_labels()  # a token run's: one per word
    examples = pd.DataFrame({"id": unit_ids, "label": unit_labels})
    ids = unit_ids

    def aligned(table):
        if table is None:
            return None
        by_id = table.assign(id=table["id"].astype(str)).drop_duplicates("id").set_index("id")
        return by_id.loc[ids].reset_index() if set(ids) <= set(by_id.index) else None

    extra = detector_extras(run, cache)  # the out-of-fold inputs (a token run's: k folds of its sentences)
    inputs = detectors.DetectorInputs(
        labels=examples["label"].to_numpy(),
        metrics=aligned(metrics),
        oof_logits=extra.oof,
        seeds=aligned(seeds_table),
        folds=extra.folds,
        unit=run.task_kind.unit,  # the detectors serving the run's unit
        sentences=sentence_keys(ids) if run.task_kind.unit.sentences else None,
    )
    return pd.concat([examples.assign(id=ids), detectors.score_all(inputs)], axis=1)


def evaluated_sets(run) -> list[str]:
    """The dev and test sets whose predictions the run recorded at its best epoch ("dev", "test_<k>")."""
    epoch = run.best_epoch()
    sources = ["dev"] + [f"test_{k}" for k in range(len(run.test_names))]
    return [s for s in sources if epoch is not None and epoch in run.dynamics_epochs(s)]


def export_predictions(run, sources: list[str], out: Path) -> None:
    """Write each set's predictions per unit at the run's best epoch
    (:func:`cartomap.analysis.tables.set_predictions`) as ``predictions_<set>.parquet`` in ``out``."""
    from cartomap.analysis.tables import set_predictions
    from cartomap.io import atomic_write_parquet

    for source in sources:
        table = set_predictions(run, source)
        path = out / PREDICTIONS_EXPORT.format(source=source)
        atomic_write_parquet(path, table)
        name = "dev" if source == "dev" else f"test {run.test_names[int(source.removeprefix('test_'))]}"
        units = run.task_kind.unit.plural(len(table))
        print(
            f"wrote {path}: the {name} set's {units} with gold, prediction and p(prediction) "
            f"(epoch {run.best_epoch() + 1}, the best on dev)"
        )


def cmd_export(a: argparse.Namespace) -> int:
    """Write a reference model folder: training_dynamics/dynamics_epoch_E.jsonl, td_metrics.jsonl, metrics.csv;
    detectors.parquet (every available detector's score per example, higher = more suspect); seeds.parquet (every seed's and the mean metrics of each example) when the run has a finished
    seeds experiment; tags.parquet (every tag of an example, who set it and when) when the run has tags;
    predictions_<set>.parquet of each recorded dev and test set (per unit: a token run's per word with its text);
    a token run's tables carry each word's text (word_text) beside its position (word)."""
    from cartomap.analysis.tables import with_word_text
    from cartomap.experiments.seeds import PER_EXAMPLE, PER_EXAMPLE_EVAL, done_seeds_of
    from cartomap.experiments.store import ExperimentStore
    from cartomap.io import atomic_write_parquet, refuse_overwrite
    from cartomap.runs.interop import DYNAMICS_DIR, METRICS_CSV, METRICS_NAME, write_reference_export
    from cartomap.runs.store import RunStore
    from cartomap.scores.metrics import burn_out_epochs, compute_metrics

    run = RunStore(a.cache).get(a.run)
    out = Path(a.out)
    seeds_exp = done_seeds_of(run, ExperimentStore(a.cache))
    seeds_table = None
    if seeds_exp is not None:
        if a.source == Source.EVAL and seeds_exp.result_stamp(PER_EXAMPLE_EVAL):
            seeds_table = seeds_exp.result(PER_EXAMPLE_EVAL)
        else:
            seeds_table = seeds_exp.result(PER_EXAMPLE)
        refuse_overwrite([out / SEEDS_EXPORT], a.force)  # before anything is written
    refuse_overwrite([out / DETECTORS_EXPORT], a.force)
    from cartomap.runs.tags import tags_of

    tags = tags_of(run)
    if not tags.empty:
        refuse_overwrite([out / TAGS_EXPORT], a.force)
    token_run = run.task_kind.unit.sentences
    if token_run:
        refuse_overwrite([out / SENTENCES_EXPORT], a.force)
    evaluated = evaluated_sets(run)
    refuse_overwrite([out / PREDICTIONS_EXPORT.format(source=s) for s in evaluated], a.force)
    recorded = run.recorded_source(a.source)
    ids, logits = run.dynamics(recorded)
    labels = run.unit_labels(recorded)[1]  # a token run's: one per word
    if a.burn_out is None:
        metrics = run.metrics(a.source)
    else:
        metrics = compute_metrics(logits, labels, ids, regions=run.region_rule(), burn_out=a.burn_out)
    n = burn_out_epochs(logits.shape[0], a.burn_out)
    metrics = with_word_text(metrics, run)  # a token run's words by their text beside their position
    write_reference_export(out, ids, logits[:n], labels, metrics, force=a.force)
    print(
        f"wrote {n} epochs to {out / DYNAMICS_DIR}/dynamics_epoch_*.jsonl, and {METRICS_NAME} and "
        f"{METRICS_CSV} to {out} (the reference's model folder: train_dy_filtering.py --model_dir {out})"
    )
    table = detector_table(run, metrics, seeds_table, a.cache)
    scored = ", ".join(table.columns[2:])
    atomic_write_parquet(out / DETECTORS_EXPORT, with_word_text(table, run))
    print(f"wrote {out / DETECTORS_EXPORT}: {scored} (higher = more suspect)")
    export_predictions(run, evaluated, out)
    if token_run:
        from cartomap.analysis.tokens import sentence_map_frame

        sentences = sentence_map_frame(run, a.method)
        atomic_write_parquet(out / SENTENCES_EXPORT, sentences)
        print(
            f"wrote {out / SENTENCES_EXPORT}: {len(sentences):,} sentences, each scored by the {a.method} of "
            "its words' confidences, with its worst word"
        )
    if not tags.empty:
        atomic_write_parquet(out / TAGS_EXPORT, tags)
        print(
            f"wrote {out / TAGS_EXPORT}: {len(tags):,} tags of {tags['id'].nunique():,} examples "
            f"({', '.join(printable(t) for t in tags['tag'].unique()[:10])}), who set each and when"
        )
    if seeds_table is not None:
        atomic_write_parquet(out / SEEDS_EXPORT, seeds_table)
        n = seeds_table.attrs.get("n_seeds") or len(seeds_exp.params["seeds"])
        print(f"wrote {out / SEEDS_EXPORT}: every example's metrics in each of {n} seeds and their mean")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from cartomap.runs.importer import import_reference_run
    from cartomap.runs.store import RunStore

    data = data_config(a, a.data, a.split) if a.data else None
    run = import_reference_run(a.folder, RunStore(a.cache), data=data, label_names=a.label_names, name=a.name)
    print(f"imported run {run.id}: {run.path}")
    print_run_summary(run)
    return 0


def region_rule(a: argparse.Namespace, run=None):
    """The RegionRule of the --regions options; ``--regions`` left out: ``run``'s kind's (a token run's by
    threshold), by rank without a run."""
    from cartomap.scores.metrics import RegionRule

    return RegionRule.for_kind(
        run.task_kind if run is not None else None,
        method=a.regions,
        fraction=a.ambiguous_fraction,
        ambiguous_var=a.ambiguous_var,
        conf_split=a.conf_split,
        axis=a.ambiguity,
    )


def cmd_map(a: argparse.Namespace) -> int:
    from cartomap.analysis.datamap import axis_of, map_frame, with_x_axis
    from cartomap.analysis.map_files import SAVE_SUFFIXES, save_data_map
    from cartomap.analysis.map_points import axis_title
    from cartomap.io import refuse_overwrite
    from cartomap.runs.store import RunStore

    if Path(a.out).suffix.lower() not in SAVE_SUFFIXES:
        raise CartomapError(f"--out {a.out}: expected a file name ending in {' or '.join(SAVE_SUFFIXES)}")
    refuse_overwrite([a.out], a.force)
    run = RunStore(a.cache).get(a.run)
    title = a.title or f"{run.config.data.path} ({run.id})"
    rule = region_rule(a, run)
    from cartomap.analysis import tokens

    if a.level == tokens.SENTENCE_LEVEL:
        from cartomap.analysis.tokens import sentence_map_frame

        if a.source != Source.TRAIN:
            raise CartomapError("--level sentence: the sentence map is of the run's metrics (no --source)")
        frame = sentence_map_frame(run, a.method, regions=rule, burn_out=a.burn_out)
        title = a.title or f"{title}: sentences by the {a.method} of their words' confidences"
    elif run.task_kind.unit.label_sets:  # multi-label: one of the views the Data map page offers
        from cartomap.analysis import multilabel

        if a.source != Source.TRAIN:
            raise CartomapError("--view: a multi-label run's maps are of its metrics (no --source)")
        view = multilabel_view(a.view, run.label_names)
        frame = multilabel.view_frame(run, view, rule, a.burn_out)
        title = a.title or f"{title}: {multilabel.view_title(view, run.label_names)}"
    else:
        if a.view:
            raise CartomapError(f"--view is for multi-label runs; run {run.id} is a {run.task_kind.name} run")
        frame = map_frame(run, a.source, regions=rule, burn_out=a.burn_out)
    if a.table:
        from cartomap.io import atomic_write_parquet

        if Path(a.table).suffix.lower() not in (".parquet", ".csv"):
            raise CartomapError(f"--table {a.table}: expected a file name ending in .parquet or .csv")
        refuse_overwrite([a.table], a.force)
        if a.table.lower().endswith(".csv"):
            from cartomap.io import atomic_write_text

            atomic_write_text(Path(a.table), frame.to_csv(index=False))
        else:
            atomic_write_parquet(Path(a.table), frame)
        print(f"wrote {a.table}: {len(frame):,} rows")
    if a.x:
        frame = with_x_axis(frame, a.x)
    path = save_data_map(frame, a.out, title=title)
    print(f"wrote {path}")
    print(f"  x axis: {axis_title(axis_of(frame))}; y axis: confidence")
    print(f"  regions: {rule.describe(rule.values(frame))}")
    return 0


def multilabel_view(text: str, label_names) -> str:
    """The multi-label view named on the command line: ``combined`` (the default, as on the Data map
    page), ``units`` (every (example, label)) or a label's name; CartomapError listing them otherwise."""
    from cartomap.analysis import multilabel

    text = (text or multilabel.COMBINED).strip()
    if text in (multilabel.COMBINED, multilabel.UNITS):
        return text
    names = [str(n) for n in label_names]
    if text in names:
        return f"{multilabel.LABEL_PREFIX}{names.index(text)}"
    raise CartomapError(
        f"--view {text!r}: expected {multilabel.COMBINED}, {multilabel.UNITS} or one of the run's labels "
        f"({', '.join(names)})"
    )


def cmd_repair(a: argparse.Namespace) -> int:
    """Say what is wrong with a run and fix what can be fixed from what it still holds."""
    from cartomap.runs.repair import repair_run
    from cartomap.runs.store import RunStore

    store = RunStore(a.cache)
    run = store.get(a.run)
    store.require_writable("`cartomap repair`", run)
    report = repair_run(run)
    for line in report.fixed:
        print(f"fixed: {printable(line)}")
    for line in report.notes:
        print(f"note: {printable(line)}")
    for line in report.remaining:
        print(f"cannot fix: {printable(line)}", file=sys.stderr)
    if report.remaining:
        print(f"remove the run with `cartomap delete {run.id} --yes`", file=sys.stderr)
        return 2
    print(f"run {run.id}: nothing wrong" if not report.fixed else f"run {run.id} repaired")
    return 0


def cmd_delete(a: argparse.Namespace) -> int:
    from cartomap.runs.store import RunStore

    store = RunStore(a.cache)
    run = store.get(a.run)
    store.require_writable("`cartomap delete`", run)
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
    from cartomap.runs.state import is_active, is_done
    from cartomap.runs.store import RunStore

    store = RunStore(a.cache)
    run = store.get(a.run)
    store.require_writable("`cartomap cancel`", run)
    state = run.status()["state"]
    if not is_active(state):  # nothing trains it: a cancel file would only linger
        what = "finished" if is_done(state) else "not training"
        raise RunError(f"run {run.id} is {state} ({what}): there is nothing to cancel")
    run.request_cancel()
    print(f"cancel requested for run {run.id}; it stops after the current step and can be resumed")
    return 0


def add_region_arguments(p: argparse.ArgumentParser) -> None:
    """How the map draws regions and how many epochs its metrics use (shared by `map` and the page's defaults)."""
    from cartomap.scores import ambiguity
    from cartomap.scores.metrics import REGION_METHODS, RegionRule

    d = RegionRule()
    g = p.add_argument_group("regions and epochs")
    g.add_argument(
        "--ambiguity",
        choices=ambiguity.MAP_SCORES,
        default=d.axis,
        help=f"the ambiguity score the ambiguous region is drawn on (default {d.axis}; variability is "
        "Dataset Cartography's; docs/stability.md compares them)",
    )
    g.add_argument(
        "--regions",
        choices=REGION_METHODS,
        default=None,
        help="ambiguous = the share with the highest --ambiguity score (rank) or the score >= a threshold; "
        "default: the run's kind's (rank; a token run's threshold, where 'O' holds most words)",
    )
    g.add_argument(
        "--ambiguous-fraction", type=float, default=d.fraction, help="rank: share called ambiguous"
    )
    g.add_argument(
        "--ambiguous-var",
        type=float,
        default=None,
        help="threshold: the cut on the --ambiguity score (default: the score's own; variability 0.2)",
    )
    g.add_argument(
        "--conf-split", type=float, default=d.conf_split, help="easy-to-learn from this confidence"
    )
    g.add_argument(
        "--burn-out",
        type=int,
        default=None,
        help="metrics over the first N epochs only (reference --burn_out)",
    )


def add_commands(sub) -> None:
    from cartomap.scores import ambiguity

    sub.add_parser("runs", help="list runs").set_defaults(func=cmd_runs)

    s = sub.add_parser("show", help="a run's config, progress, history and metric summary")
    s.add_argument("run")
    s.set_defaults(func=cmd_show)

    e = sub.add_parser(
        "export",
        help="write a reference model folder: training_dynamics/dynamics_epoch_*.jsonl, td_metrics.jsonl",
    )
    e.add_argument("run")
    e.add_argument("--out", required=True, help="the model folder (the reference's --model_dir)")
    e.add_argument("--source", default=Source.TRAIN, choices=SOURCES)
    e.add_argument(
        "--burn-out", type=int, default=None, help="only the first N epochs (the reference's --burn_out)"
    )
    e.add_argument(
        "--method",
        default="min",
        choices=SENTENCE_METHOD_CHOICES,
        help=f"a token run: how {SENTENCES_EXPORT} scores a sentence over its words' confidences",
    )
    e.add_argument("--force", action="store_true", help="replace files already in --out")
    e.set_defaults(func=cmd_export)

    i = sub.add_parser(
        "import-dynamics",
        help="make a run from reference dynamics: a model folder (with training_dynamics/) or the folder "
        "of dynamics_epoch_*.jsonl itself",
    )
    i.add_argument("folder")
    i.add_argument("--name", default="")
    add_data_arguments(i)
    i.set_defaults(func=cmd_import, data=None)

    m = sub.add_parser("map", help="draw the data map of a run to PNG or HTML")
    m.add_argument("run")
    m.add_argument("--out", required=True, help="map.png or map.html")
    m.add_argument("--source", default=Source.TRAIN, choices=SOURCES)
    m.add_argument("--title", default="")
    m.add_argument(
        "--level",
        default="word",
        choices=("word", "sentence"),
        help="a token run's map: a point per word (the default; per example for other runs) or per sentence",
    )
    m.add_argument(
        "--method",
        default="min",
        choices=SENTENCE_METHOD_CHOICES,
        help="--level sentence: a sentence's score over its words' confidences (min: its worst word)",
    )
    m.add_argument(
        "--view",
        default="",
        help="a multi-label run's map: combined (each example at its worst label; the default), units "
        "(every (example, label)) or a label's name (that label's map)",
    )
    m.add_argument("--table", default="", help="also write the map's table to this .parquet or .csv file")
    m.add_argument(
        "--x",
        default="",
        choices=("", *ambiguity.MAP_SCORES),
        metavar="SCORE",
        help="the map's x axis, an ambiguity score (default: the one its regions are drawn on, --ambiguity); "
        "y is confidence",
    )
    add_region_arguments(m)
    m.add_argument("--force", action="store_true", help="replace --out if it exists")
    m.set_defaults(func=cmd_map)

    r = sub.add_parser("repair", help="say what is wrong with a damaged run and fix what can be fixed")
    r.add_argument("run")
    r.set_defaults(func=cmd_repair)

    x = sub.add_parser("delete", help="delete a run folder")
    x.add_argument("run")
    x.add_argument("--yes", action="store_true")
    x.set_defaults(func=cmd_delete)

    c = sub.add_parser("cancel", help="ask a running training job to stop after its current step")
    c.add_argument("run")
    c.set_defaults(func=cmd_cancel)
