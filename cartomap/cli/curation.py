"""Reviewing suspected label errors: ``cartomap review-queue {create,list,show,guidelines,next,decide,undo,import,export}``."""

from __future__ import annotations

import argparse
import math

from cartomap.cli.team import acting, decider


def _run(a: argparse.Namespace):
    from cartomap.runs.store import RunStore

    return RunStore(a.cache).get(a.run)


def cmd_create(a: argparse.Namespace) -> int:
    """Make a review queue from a detector's top k, a saved group, ids in a file, or pruning suspects."""
    from pathlib import Path

    from cartomap.curation import queue, sources
    from cartomap.errors import CartomapError, DataError

    run = _run(a)
    rule = run.region_rule(axis=a.ambiguity) if a.region else None
    if a.detector:
        from cartomap.experiments.truth import detector_extras

        extra = detector_extras(run, a.cache)
        try:
            candidates = sources.from_detector(
                run,
                a.detector,
                a.top,
                oof_logits=extra.oof,
                seeds=extra.seeds,
                folds=extra.folds,
                region=a.region,
                rule=rule,
            )
        except DataError as err:
            raise DataError(f"{err}{_made_by(run, a.detector)}") from None
    elif a.group:
        candidates = sources.from_group(run, a.group)
    elif a.pruning:
        from cartomap.experiments.pruning import suspects_of
        from cartomap.experiments.store import ExperimentStore
        from cartomap.runs.store import RunStore

        exp = ExperimentStore(a.cache).get(a.pruning)
        candidates = sources.from_suspects(run, suspects_of(exp, run, RunStore(a.cache)), exp.id)
    else:
        path = Path(a.ids)
        if not path.is_file():
            raise CartomapError(f"{path}: no such file (expected one example id per line)")
        ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        candidates = sources.from_selection(run, ids)
    if a.region and not a.detector:  # a detector's top k are found among the region's examples already
        candidates = sources.in_region(run, candidates, a.region, rule)
    top = a.top if not a.detector else None  # a detector's candidates are its top k already
    from cartomap.experiments.seeds import other_seeds
    from cartomap.runs.store import RunStore

    others = other_seeds(run, RunStore(a.cache))
    items = queue.create_queue(
        run,
        a.name,
        candidates,
        top=top,
        per_item=a.per_item,
        seed_runs=others,
        by=acting(a),
        guidelines=_guidelines_of(a),
    )
    print(
        f"review queue {a.name} of run {run.id}: {len(items)} examples ({candidates.queued_by}), "
        f"{a.per_item} annotator{'s' if a.per_item != 1 else ''} each"
    )
    return 0


def _made_by(run, name: str) -> str:
    """ "; make them with `<command>`" for the inputs of detector ``name`` an experiment makes ("" if none)."""
    from cartomap.experiments.truth import input_commands
    from cartomap.scores import detectors

    if name not in detectors.REGISTRY:
        return ""
    commands = input_commands(run)
    made_by = list(dict.fromkeys(commands[k] for k in detectors.get(name).needs if k in commands))
    return f"; make them with `{' and '.join(made_by)}`" if made_by else ""


def _guidelines_of(a: argparse.Namespace) -> str:
    """The text of --guidelines, or of the file --guidelines-file names ("" with neither)."""
    from pathlib import Path

    from cartomap.errors import CartomapError

    if getattr(a, "guidelines_file", None):
        path = Path(a.guidelines_file)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CartomapError(f"{path}: no such file (expected the guidelines as text)") from None
        except (OSError, UnicodeDecodeError) as err:
            raise CartomapError(f"{path}: cannot be read as UTF-8 text ({err})") from None
    return getattr(a, "guidelines", None) or ""


def cmd_guidelines(a: argparse.Namespace) -> int:
    """Show a queue's guidelines, or replace them (--text / --file; its creator only in team mode)."""
    from cartomap.curation.queue import open_queue

    db = open_queue(_run(a), a.queue)
    if a.guidelines is None and a.guidelines_file is None:
        print(db.guidelines or f"queue {a.queue} has no guidelines (set them with --text or --file)")
        return 0
    text = db.set_guidelines(_guidelines_of(a), by=acting(a))
    print(
        f"guidelines of queue {a.queue}: {len(text):,} characters"
        if text
        else f"queue {a.queue}: guidelines removed"
    )
    return 0


def cmd_list(a: argparse.Namespace) -> int:
    from cartomap.curation.queue import list_queues, queue_summary

    run = _run(a)
    names = list_queues(run)
    if not names:
        print(f"run {run.id} has no review queues (make one with `cartomap review-queue create`)")
        return 0
    for name in names:
        s = queue_summary(run, name)
        print(
            f"{name}: {s['items']} examples ({s['queued_by']}), {s['complete']} with {s['per_item']} "
            f"decisions, {s['undecided']} undecided, created {s['created']}"
            + (f" by {s['created_by']}" if s["created_by"] else "")
        )
    return 0


def _num(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def cmd_show(a: argparse.Namespace) -> int:
    """Progress, final decisions, agreement (and with --item, one item's card)."""
    from cartomap.curation.aggregate import agreement, counts
    from cartomap.curation.corrected import decisions
    from cartomap.curation.queue import item_card, open_queue
    from cartomap.tasks import registry as task_kinds

    run = _run(a)
    db = open_queue(run, a.queue)
    if a.item:
        card = item_card(run, a.queue, a.item)
        for key in ("id", *task_kinds.text_fields(), "gold", "predicted", "p_predicted", "score"):
            if key in card and card[key] is not None:
                print(f"{key}: {card[key]}")
        epochs = card.get("p_gold_epochs")
        if epochs is not None and len(epochs):
            print("p(gold) by epoch: " + " ".join(f"{p:.2f}" for p in epochs))
        if card.get("votes") is not None:
            print(
                "votes: "
                + ", ".join(f"{n} {v}" for n, v in zip(run.label_names, card["votes"], strict=False))
            )
        for row in card["neighbours"].to_dict("records"):
            print(f"  neighbour {row['id']} ({row['label']}, cosine {row['similarity']:.3f})")
        for annotator in db.annotators():
            mine = db.decision_of(annotator, a.item)
            if mine is not None:
                label = f" -> {mine['label']}" if mine["label"] else ""
                print(
                    f"  {annotator}: {mine['decision']}{label}"
                    + (f" ({mine['note']})" if mine["note"] else "")
                )
        return 0
    progress = db.progress()
    print(
        f"queue {a.queue} of run {run.id}: {progress['items']} examples, {progress['complete']} with "
        f"{progress['per_item']} decisions, {progress['partial']} partly decided, {progress['undecided']} undecided"
    )
    for name, n in progress["by_annotator"].items():
        print(f"  {name}: {n} decided")
    if db.guidelines:
        print("guidelines:")
        for line in db.guidelines.splitlines():
            print(f"  {line}")
    table = decisions(run, a.queue)
    print("final: " + ", ".join(f"{k} {v}" for k, v in counts(table).items()))
    stats = agreement(db.long_table())["summary"]
    print(
        f"agreement: Fleiss' kappa {_num(stats['fleiss_kappa'])}"
        + (f" ({stats['fleiss_kappa_note']})" if stats.get("fleiss_kappa_note") else "")
        + ", Krippendorff's alpha "
        f"{_num(stats['krippendorff_alpha'])}, observed {_num(stats['observed_agreement'])}"
    )
    return 0


def cmd_next(a: argparse.Namespace) -> int:
    from cartomap.curation.queue import open_queue

    db = open_queue(_run(a), a.queue)
    ids = db.next_items(a.annotator, a.n)
    print("\n".join(ids) if ids else f"nothing left for {a.annotator} in queue {a.queue}")
    return 0


def cmd_decide(a: argparse.Namespace) -> int:
    from cartomap.curation.queue import open_queue
    from cartomap.errors import CartomapError

    if a.decision == "relabel" and not a.label:
        raise CartomapError("--decision relabel needs --label NEW_LABEL")
    if a.decision != "relabel" and a.label:
        raise CartomapError("--label goes with --decision relabel only")
    annotator = decider(a)  # team mode: the person's own name
    db = open_queue(_run(a), a.queue)
    db.record(annotator, a.item, a.decision, a.label, a.note or "", origin="cli")
    mine = db.decision_of(annotator, a.item)
    label = f" -> {mine['label']}" if mine and mine["label"] else ""
    print(f"recorded: {annotator} on {a.item}: {mine['decision'] if mine else a.decision}{label}")
    return 0


def cmd_undo(a: argparse.Namespace) -> int:
    """Undo an annotator's own decision on one example (recorded; their decision before it counts again)."""
    from cartomap.curation.queue import open_queue

    annotator = decider(a)  # team mode: only one's own
    db = open_queue(_run(a), a.queue)
    db.undo(annotator, a.item)
    mine = db.decision_of(annotator, a.item)
    now = "no decision (the example is theirs to decide again)"
    if mine is not None:
        now = mine["decision"] + (f" -> {mine['label']}" if mine["label"] else "")
    print(f"undone: {annotator} on {a.item}; their decision now: {now}")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from cartomap.curation.exchange import import_decisions

    run = _run(a)
    n = import_decisions(run, a.queue, a.path, a.tool, by=acting(a))
    print(f"imported {n} decisions from {a.path} into queue {a.queue} of run {run.id}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    """The corrected set (+ decisions file), or the queue for Label Studio / Argilla with --to."""
    from cartomap.errors import CartomapError

    run = _run(a)
    if a.to:
        from cartomap.curation.exchange import export_queue

        if not a.out:
            raise CartomapError(
                f"--to {a.to} needs --out (labelstudio: a JSON file; argilla: a .json records file or a folder)"
            )
        paths = export_queue(run, a.queue, a.out, a.to, overwrite=a.force)
        print(f"wrote {', '.join(str(p) for p in paths)}")
        return 0
    from cartomap.curation.corrected import export_corrected

    result = export_corrected(run, a.queue, a.out, a.decisions, a.format, overwrite=a.force, by=acting(a))
    print(
        f"corrected set of queue {a.queue}: {result['corrected']} of {result['examples']} examples "
        f"({result['relabelled']} relabelled, {result['removed']} removed); train on it with --data {result['ref']}"
    )
    for path in (a.out, a.decisions):
        if path:
            print(f"wrote {path}")
    return 0


def add_commands(sub) -> None:
    from cartomap.scores import ambiguity
    from cartomap.scores.metrics import DEFAULT_AXIS, REGIONS

    rq = sub.add_parser(
        "review-queue", help="review suspected label errors: queues, decisions, the corrected set"
    )
    cmds = rq.add_subparsers(dest="review_command", required=True)

    c = cmds.add_parser("create", help="make a review queue of a finished run")
    c.add_argument("run")
    c.add_argument("name", help="the queue's name (letters, digits, _ . -)")
    source = c.add_mutually_exclusive_group(required=True)
    source.add_argument("--detector", help="a registered detector's most suspect examples (see --top)")
    source.add_argument("--group", help="a saved group or lasso selection of the run")
    source.add_argument("--pruning", metavar="EXPERIMENT", help="the suspects of a pruning experiment")
    source.add_argument("--ids", metavar="FILE", help="a file of example ids, one per line")
    c.add_argument("--top", type=int, default=50, help="how many examples a detector queues (default 50)")
    c.add_argument("--per-item", type=int, default=2, help="annotators per example (default 2)")
    c.add_argument(
        "--region",
        choices=REGIONS,
        default=None,
        help="only the examples in this region of the run's map (e.g. the most suspect of the ambiguous ones)",
    )
    c.add_argument(
        "--ambiguity",
        choices=ambiguity.MAP_SCORES,
        default=DEFAULT_AXIS,
        help=f"with --region: the score the regions are ranked by (default {DEFAULT_AXIS})",
    )
    text = c.add_mutually_exclusive_group()
    text.add_argument("--guidelines", help="guidelines for the annotators, shown with every example")
    text.add_argument("--guidelines-file", metavar="FILE", help="the guidelines from a UTF-8 text file")
    c.set_defaults(func=cmd_create)

    gl = cmds.add_parser(
        "guidelines", help="show a queue's guidelines, or replace them (--text / --file; its creator only)"
    )
    gl.add_argument("run")
    gl.add_argument("queue")
    text = gl.add_mutually_exclusive_group()
    text.add_argument("--text", dest="guidelines", help="the new guidelines ('' removes them)")
    text.add_argument("--file", dest="guidelines_file", metavar="FILE", help="the new guidelines from a file")
    gl.set_defaults(func=cmd_guidelines)

    ls = cmds.add_parser("list", help="the run's review queues and their progress")
    ls.add_argument("run")
    ls.set_defaults(func=cmd_list)

    sh = cmds.add_parser("show", help="progress, final decisions and agreement (or --item: one card)")
    sh.add_argument("run")
    sh.add_argument("queue")
    sh.add_argument("--item", help="show this example's card and decisions")
    sh.set_defaults(func=cmd_show)

    nx = cmds.add_parser("next", help="the next examples for an annotator")
    nx.add_argument("run")
    nx.add_argument("queue")
    nx.add_argument("--annotator", required=True)
    nx.add_argument("--n", type=int, default=1)
    nx.set_defaults(func=cmd_next)

    de = cmds.add_parser("decide", help="record one annotator's decision on one example")
    de.add_argument("run")
    de.add_argument("queue")
    de.add_argument(
        "--annotator",
        help="whose decision it is (needed without a team file; in team mode your own name, "
        "env CARTOMAP_USER or the OS user)",
    )
    de.add_argument("--item", required=True, help="the example id")
    de.add_argument("--decision", required=True, choices=("keep", "relabel", "remove", "unsure"))
    de.add_argument("--label", help="the new label (with --decision relabel)")
    de.add_argument("--note", help="an optional note")
    de.set_defaults(func=cmd_decide)

    un = cmds.add_parser(
        "undo", help="undo an annotator's own latest decision on one example (the undo is recorded)"
    )
    un.add_argument("run")
    un.add_argument("queue")
    un.add_argument(
        "--annotator", help="whose decision (needed without a team file; in team mode your own name)"
    )
    un.add_argument("--item", required=True, help="the example id")
    un.set_defaults(func=cmd_undo)

    im = cmds.add_parser("import", help="append the decisions of a Label Studio / Argilla export")
    im.add_argument("run")
    im.add_argument("queue")
    im.add_argument("path", help="Label Studio JSON export, or Argilla dataset folder / records.json")
    im.add_argument("--tool", required=True, choices=("labelstudio", "argilla"))
    im.set_defaults(func=cmd_import)

    ex = cmds.add_parser(
        "export",
        help="write the corrected set (run:RUN:corrected/QUEUE; --out/--decisions files) or, with --to, "
        "the queue for an annotation tool",
    )
    ex.add_argument("run")
    ex.add_argument("queue")
    ex.add_argument(
        "--out",
        help="the corrected set (.jsonl, .csv, .parquet), or with --to the tool's file (Label Studio's tasks "
        ".json; Argilla's records .json) or, for argilla, a folder (what rg.Dataset.to_disk writes)",
    )
    ex.add_argument("--decisions", help="the decisions file (.jsonl, .csv, .parquet)")
    ex.add_argument("--format", default="auto", choices=("auto", "jsonl", "csv", "parquet"))
    ex.add_argument("--to", choices=("labelstudio", "argilla"), help="export the queue for this tool")
    ex.add_argument("--force", action="store_true", help="replace existing files")
    ex.set_defaults(func=cmd_export)
