"""The command × kind matrix: which work each command and each page does (:mod:`cartomap.tasks.support`).

Every subcommand of ``cartomap`` is declared here (a test fails on one that is not), with the work it does
on a run or a dataset of a kind; the work's need decides whether it serves each registered kind or refuses
it in one line. :func:`markdown_table` writes the matrix for the docs (docs/architecture.md prints it; a
test keeps them equal), and ``tests/test_command_matrix.py`` runs every command on a run of every kind and
checks that each cell does what the table says. Commands that read no run or dataset of a kind (the demo,
the dashboard's launcher) are listed as such.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from cartomap.tasks import registry as task_kinds
from cartomap.tasks import support
from cartomap.tasks.base import TaskKind
from cartomap.tasks.support import Work

#: A command that reads no run or dataset of a kind: the bundled demos (their own data), the launcher.
KIND_FREE = None

#: Every command (``group sub`` for a command with subcommands) and the work it does on a kind.
COMMANDS: dict[str, Work | None] = {
    "train": support.ANYTHING,
    "demo": KIND_FREE,
    "dashboard": KIND_FREE,
    "curriculum": support.CURRICULUM,
    "combine": support.COMBINATION,
    "seeds": support.ANYTHING,
    "retrain": support.CORRECTION,
    "report": support.ANYTHING,
    "prune": support.OUT_OF_FOLD,
    "experiment list": support.ANYTHING,
    "experiment show": support.ANYTHING,
    "experiment run": support.ANYTHING,
    "experiment start": support.ANYTHING,
    "experiment cancel": support.ANYTHING,
    "experiment delete": support.ANYTHING,
    "noise-benchmark": support.NOISE_BENCHMARK,
    "runs": support.ANYTHING,
    "show": support.ANYTHING,
    "export": support.ANYTHING,
    "import-dynamics": support.REFERENCE_IMPORT,
    "map": support.ANYTHING,
    "repair": support.ANYTHING,
    "delete": support.ANYTHING,
    "cancel": support.ANYTHING,
    "views list": support.ANYTHING,
    "views show": support.ANYTHING,
    "views delete": support.ANYTHING,
    "tags list": support.ANYTHING,
    "tags show": support.ANYTHING,
    "tags add": support.ANYTHING,
    "tags remove": support.ANYTHING,
    "embed": support.ANYTHING,
    "project": support.ANYTHING,
    "similarity": support.SIMILARITY,
    "swaps": support.SWAPS,
    "artifacts": support.ARTIFACTS,
    "truth": support.ANYTHING,
    "subset": support.ANYTHING,
    "groups": support.GROUPS,
    "generate": support.WANLI,
    "filter": support.WANLI,
    "review-export": support.WANLI,
    "review-queue create": support.ANYTHING,
    "review-queue guidelines": support.ANYTHING,
    "review-queue list": support.ANYTHING,
    "review-queue show": support.ANYTHING,
    "review-queue next": support.ANYTHING,
    "review-queue decide": support.ANYTHING,
    "review-queue undo": support.ANYTHING,
    "review-queue import": support.ANYTHING,
    "review-queue export": support.ANYTHING,
    "score-checkpoints": support.CHECKPOINT_SCORING,
}

#: Every dashboard page (its file under ``pages/``) and the work its parts do on the selected run's kind. A
#: part whose work does not serve the kind says why in the work's own refusal; the page's other parts draw.
PAGES: dict[str, Work | tuple[Work, ...]] = {
    "train.py": support.ANYTHING,
    "data_map.py": support.ANYTHING,
    "neighbours.py": support.ANYTHING,
    "prompts.py": support.WANLI,
    "generate.py": support.WANLI,
    "filter.py": support.WANLI,
    "review.py": support.WANLI,
    "review_suspects.py": support.ANYTHING,
    "pruning.py": (support.OUT_OF_FOLD, support.PRUNING),
    "artifacts.py": support.ARTIFACTS,
    "experiments.py": (support.CURRICULUM, support.CORRECTION),
    "compare.py": support.ANYTHING,
}


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every command of ``parser`` as :data:`COMMANDS` names it: ``name``, or ``name sub`` for each
    subcommand (a positional with choices, as ``experiment``'s action, counts as subcommands)."""
    names = []
    for action in parser._subparsers._group_actions:  # noqa: SLF001 (argparse keeps them there)
        for name, sub in action.choices.items():
            subs = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
            actions = [a for a in sub._actions if a.dest == "action" and a.choices]
            if subs:
                names += [f"{name} {s}" for s in subs[0].choices]
            elif actions:
                names += [f"{name} {s}" for s in actions[0].choices]
            else:
                names.append(name)
    return names


def works_of(declared: Work | tuple[Work, ...] | None) -> tuple[Work, ...]:
    """The works a command or page declares, as a tuple (none for a kind-free command)."""
    if declared is None:
        return ()
    return declared if isinstance(declared, tuple) else (declared,)


def cell(declared: Work | tuple[Work, ...] | None, kind: TaskKind) -> str:
    """One cell: ✓ where every work serves the kind, "refuses" where none does, "in part" between, — for a
    kind-free command."""
    works = works_of(declared)
    if not works:
        return "—"
    served = sum(w.need.serves(kind) for w in works)
    return "✓" if served == len(works) else "refuses" if served == 0 else "in part"


def markdown_table(kinds: Iterable[TaskKind] | None = None) -> str:
    """The matrix as markdown: a row per command, then per page, a column per kind (the registered ones
    unless given), and what a refused cell would need."""
    kinds = list(task_kinds.KINDS.values() if kinds is None else kinds)
    head = "| command | " + " | ".join(f"`{k.name}`" for k in kinds) + " | needs |"
    rule = "|---|" + "---|" * len(kinds) + "---|"
    rows = [head, rule]
    for prefix, table in (("`cartomap ", COMMANDS), ("page `", PAGES)):
        for name, work in table.items():
            works = works_of(work)
            needs = "; ".join(dict.fromkeys(w.need.says for w in works)) or "its own data"
            cells = " | ".join(cell(work, k) for k in kinds)
            rows.append(f"| {prefix}{name}` | {cells} | {needs} |")
    return "\n".join(rows)
