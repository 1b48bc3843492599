"""Reviewing suspected label errors: ``cartomap review-queue {create,list,show,guidelines,next,decide,undo,import,export}``."""

from __future__ import annotations

import argparse
import math

from cartomap.cli.options import detector_names
from cartomap.cli.team import acting, decider


def _run(a: argparse.Namespace):
    from cartomap.runs.store import RunStore

    return RunStore(a.cache).get(a.run)


def cmd_create(a: argparse.Namespace) -> int:
    """Make a review queue from a detector's top k, a saved group, ids in a file, or pruning suspects."""

    from cartomap.curation import levels, queue, sources
    from cartomap.errors import DataError

    run = _run(a)
    levels.check_level(run, a.by)
    sources.check_per(run, a.per)
    rule = run.region_rule(axis=a.ambiguity) if a.region else None
    if a.detector:
        from cartomap.experiments.truth import detector_extras

        extra = detector_extras(run, a.cache)
        try:
            candidates = levels.from_detector_by(
                run,
                a.detector,
                a.top,
                a.by,
                a.sentence_score,
                oof_logits=extra.oof,
                seeds=extra.seeds,
                folds=extra.folds,
                region=a.region,
                rule=rule,
                per=a.per,
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
        from cartomap.io import read_ids_file

        candidates = sources.from_selection(run, read_ids_file(a.ids))
    if a.region and not a.detector:  # a detector's top k are found among the region's examples already
        candidates = sources.in_region(run, candidates, a.region, rule)
    if not a.detector:  # a token run's words as sentences or entity spans (a detector's are already)
        candidates = levels.regroup(run, candidates, a.by, a.sentence_score)
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
    unit = run.task_kind.unit
    if a.by != levels.WORD:
        what = f"{len(items)} {a.by}s"
    elif a.per == sources.PER_EXAMPLE:
        what = f"{len(items)} examples, each at its most suspect label"
    else:
        what = f"{len(items)} examples" if unit.per_example else unit.plural(len(items))
    print(
        f"review queue {a.name} of run {run.id}: {what} ({candidates.queued_by}), "
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

    if getattr(a, "guidelines_file", None):
        from cartomap.io import read_user_text

        return read_user_text(a.guidelines_file, "guidelines as text")
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
    """Each queue: its examples, progress, who made it and when, and who wrote its corrected set."""
    from cartomap.curation.queue import list_queues, open_queue, queue_summary

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
            + corrected_note(open_queue(run, name).writes("corrected"))
        )
    return 0


def corrected_note(writes: list[dict]) -> str:
    """ "; corrected set written 2026-01-02 10:00 by alice" for the latest of a queue's corrected-set writes
    (who only in team mode), "" when none was written."""
    import time

    if not writes:
        return ""
    last = writes[-1]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(last.get("at") or 0)))
    return f"; corrected set written {when}" + (f" by {last['by']}" if last.get("by") else "")


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
        shown = ("id", *task_kinds.text_fields(), "label_name", "label_set", "gold", "predicted")
        for key in (*shown, "p_predicted", "score"):  # label_name, label_set: a multi-label unit's card
            if key in card and card[key] is not None:
                print(f"{key}: {card[key]}")
        _print_words(card)
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


def _print_words(card: dict) -> None:
    """A sentence or span card's words, one a line: index, word, gold tag, predicted tag (a span's marked)."""
    words = card.get("words")
    if words is None or isinstance(words, float):
        return
    predicted = list(card.get("predicted_tags") if card.get("predicted_tags") is not None else [])
    first, last = int(card.get("span_first", -1)), int(card.get("span_last", -1))
    for k, (word, gold) in enumerate(zip(list(words), list(card["gold_tags"]), strict=True)):
        guess = predicted[k] if k < len(predicted) else "-"
        mark = "*" if first <= k <= last else " "
        print(f" {mark}{k:>3} {word}  gold {gold}  predicted {guess}")


def cmd_next(a: argparse.Namespace) -> int:
    from cartomap.curation.queue import open_queue

    # team mode: one's own by default (another's next items may be read); else --annotator is needed
    annotator = " ".join(a.annotator.split()) if a.annotator else decider(a)
    db = open_queue(_run(a), a.queue)
    ids = db.next_items(annotator, a.n)
    print("\n".join(ids) if ids else f"nothing left for {annotator} in queue {a.queue}")
    return 0


def _word_changes(values) -> dict[int, str]:
    """{word: tag} of --set K=TAG options; CartomapError naming a malformed one."""
    from cartomap.errors import CartomapError

    out = {}
    for value in values or ():
        word, sep, tag = str(value).partition("=")
        if not sep or not word.strip().isdigit() or not tag.strip():
            raise CartomapError(f"--set {value!r}: expected WORD=TAG, e.g. --set 3=B-PER (words from 0)")
        out[int(word)] = tag.strip()
    return out


def cmd_decide(a: argparse.Namespace) -> int:
    from cartomap.curation.queue import edited_tags, open_queue
    from cartomap.errors import CartomapError

    changes = _word_changes(a.set)
    if changes and a.label:
        raise CartomapError("give the new tags with --label or with --set, not both")
    if a.decision == "relabel" and not (a.label or changes):
        raise CartomapError("--decision relabel needs --label NEW_LABEL (or a sentence's --set WORD=TAG)")
    if a.decision != "relabel" and (a.label or changes):
        raise CartomapError("--label and --set go with --decision relabel only")
    annotator = decider(a)  # team mode: the person's own name
    db = open_queue(_run(a), a.queue)
    label = edited_tags(db, a.item, changes, repair=not a.no_repair) if changes else a.label
    db.record(annotator, a.item, a.decision, label, a.note or "", origin="cli")
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


def _add_create(cmds) -> None:
    """``review-queue create``: its sources, level, region and guidelines."""
    from cartomap.curation.sources import LEVELS
    from cartomap.scores import aggregate, ambiguity
    from cartomap.scores.metrics import DEFAULT_AXIS, REGIONS
    from cartomap.tasks.units import Unit

    c = cmds.add_parser("create", help="make a review queue of a finished run")
    c.add_argument("run")
    c.add_argument("name", help="the queue's name (letters, digits, _ . -)")
    source = c.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--detector",
        metavar="NAME",
        help=f"a registered detector's most suspect examples (see --top): one of {detector_names()}",
    )
    source.add_argument("--group", help="a saved group or lasso selection of the run")
    source.add_argument("--pruning", metavar="EXPERIMENT", help="the suspects of a pruning experiment")
    source.add_argument("--ids", metavar="FILE", help="a file of example ids, one per line")
    c.add_argument("--top", type=int, default=50, help="how many examples a detector queues (default 50)")
    c.add_argument("--per-item", type=int, default=2, help="annotators per example (default 2)")
    c.add_argument(
        "--by",
        choices=LEVELS,
        default=LEVELS[0],
        help="a token run's items: each word (default), each sentence (one place per sentence, scored by "
        "--sentence-score of its words' scores) or each gold or predicted entity span (by its worst word); "
        "a sentence or span is decided as its whole tag list",
    )
    c.add_argument(
        "--sentence-score",
        choices=aggregate.names(Unit.WORD),
        default="min",
        help="with --by sentence: how its words' detector scores make the sentence's (default min: its worst word)",
    )
    c.add_argument(
        "--per",
        default=None,  # checked by its owner, curation.sources.check_per
        help="a multi-label run's queue: each (example, label) on its own card (unit, the default) or each "
        "example once, scored by its most suspect label and asked about it (example); either way relabel "
        "toggles that label's presence (--label present or absent)",
    )
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


def _add_decide(cmds) -> None:
    """``review-queue decide``: one decision, a sentence's tags by --label or --set."""
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
    de.add_argument(
        "--label",
        help="the new label (with --decision relabel); in a queue by sentence or span the sentence's whole "
        "tag list, quoted: 'B-PER O B-LOC'",
    )
    de.add_argument(
        "--set",
        action="append",
        metavar="WORD=TAG",
        help="in a queue by sentence or span: give word WORD (from 0) tag TAG (repeat for several words in one "
        "decision); the tags are kept valid in the file's scheme (an entity's type changes all its words; a "
        "word set to O makes the next I- a B-)",
    )
    de.add_argument(
        "--no-repair",
        action="store_true",
        help="with --set: refuse changes that break the scheme instead of repairing them",
    )
    de.add_argument("--note", help="an optional note")
    de.set_defaults(func=cmd_decide)


def add_commands(sub) -> None:
    rq = sub.add_parser(
        "review-queue", help="review suspected label errors: queues, decisions, the corrected set"
    )
    cmds = rq.add_subparsers(dest="review_command", required=True)

    _add_create(cmds)

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
    nx.add_argument(
        "--annotator", default=None, help="whose next examples (team mode: yours unless given; else needed)"
    )
    nx.add_argument("--n", type=int, default=1)
    nx.set_defaults(func=cmd_next)

    _add_decide(cmds)

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
        help="the corrected set (.jsonl, .csv, .parquet; a token run's also .conll), or with --to the tool's file (Label Studio's tasks "
        ".json; Argilla's records .json) or, for argilla, a folder (what rg.Dataset.to_disk writes)",
    )
    ex.add_argument("--decisions", help="the decisions file (.jsonl, .csv, .parquet)")
    ex.add_argument(
        "--format",
        default="auto",
        choices=("auto", "jsonl", "csv", "parquet", "conll"),
        help="auto: by --out's suffix (a token run's .conll/.bio/.iob/.iob2: CoNLL columns, token and tag)",
    )
    ex.add_argument("--to", choices=("labelstudio", "argilla"), help="export the queue for this tool")
    ex.add_argument("--force", action="store_true", help="replace existing files")
    ex.set_defaults(func=cmd_export)
