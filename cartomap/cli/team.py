"""Team mode on the command line: which commands write (one table), and the check before they run.

While the run store has a team file (:mod:`cartomap.team.roles`), a command that writes runs only for
a person whose role allows it: the person is env ``CARTOMAP_USER``, else the operating system's user.
A refusal is one line (``cartomap: error: ...``, exit 2). ``review-queue decide`` records the decision
under that person's name (``--annotator`` may only repeat it). A background job (``--job``) is checked
too: the dashboard or the command that spawned it passes the person who started it on as the job's
``CARTOMAP_USER`` (:func:`cartomap.runs.jobs.spawn`), whose role the job checks again (a role taken
away since is refused) and records as ``started_by``; no flag skips the check.

This guards against mistakes on a shared machine; it is no security boundary against someone with a
shell there (they can write the store's files, or set ``CARTOMAP_USER``). The dashboard's logins are.
"""

from __future__ import annotations

import argparse

from cartomap.errors import CartomapError
from cartomap.team.roles import Action, Refused, author, check, local_member, name_key

#: Every command that writes to the run store, and what it does (a command with a sub-command: "group sub").
WRITES: dict[str, Action] = {
    "train": Action.TRAIN,
    "demo": Action.TRAIN,
    "score-checkpoints": Action.TRAIN,
    "import-dynamics": Action.MANAGE,
    "repair": Action.MANAGE,
    "delete": Action.MANAGE,
    "cancel": Action.CANCEL,
    "embed": Action.TASK,
    "project": Action.TASK,
    "similarity": Action.TASK,
    "groups": Action.TASK,
    "generate": Action.TASK,
    "filter": Action.TASK,
    "curriculum": Action.EXPERIMENT,
    "combine": Action.EXPERIMENT,
    "seeds": Action.EXPERIMENT,
    "retrain": Action.EXPERIMENT,
    "prune": Action.EXPERIMENT,
    "noise-benchmark": Action.EXPERIMENT,
    "experiment run": Action.EXPERIMENT,
    "experiment start": Action.EXPERIMENT,
    "experiment cancel": Action.CANCEL,
    "experiment delete": Action.MANAGE,
    "review-queue create": Action.QUEUE,
    "review-queue import": Action.QUEUE,
    "review-queue export": Action.CORRECT,
    "review-queue decide": Action.DECIDE,
    "review-queue undo": Action.DECIDE,
    "review-queue guidelines": Action.QUEUE,  # showing them writes nothing; its creator may replace them
    "views delete": Action.VIEW,
    "tags add": Action.TAG,
    "tags remove": Action.TAG,
}
#: The commands that only read the store (files they write go where the user says, outside it).
READS = frozenset(
    {
        "runs",
        "show",
        "export",
        "map",
        "truth",
        "swaps",
        "subset",
        "artifacts",
        "report",
        "dashboard",
        "review-export",
        "experiment list",
        "experiment show",
        "review-queue list",
        "review-queue show",
        "review-queue next",
        "views list",
        "views show",
        "tags list",
        "tags show",
    }
)


def command_of(a: argparse.Namespace) -> str:
    """The command of parsed arguments as :data:`WRITES` and :data:`READS` name it."""
    if a.command == "review-queue":
        return f"{a.command} {a.review_command}"
    if a.command == "experiment":
        return f"{a.command} {a.action}"
    if a.command in ("views", "tags"):
        return f"{a.command} {getattr(a, a.command + '_command')}"
    return a.command


def check_command(a: argparse.Namespace) -> None:
    """Refuse (:class:`~cartomap.team.roles.Refused`, one line) a command that writes when the person's
    role does not allow it. Nothing to check without a team file; a job (``--job``) is checked as any
    command is, for the person who started it (its ``CARTOMAP_USER``)."""
    action = WRITES.get(command_of(a))
    if action is None:
        return
    member = local_member(a.cache)
    if member is None:
        return
    queue = getattr(a, "queue", None) if action is Action.DECIDE else None
    check(member, action, queue)


def decider(a: argparse.Namespace) -> str:
    """The name a ``review-queue decide`` is recorded under: in team mode the person's own (an
    ``--annotator`` naming someone else is refused), else ``--annotator``, which is then needed."""
    member = local_member(a.cache)
    if member is None:
        if not a.annotator:
            raise CartomapError("--annotator NAME is needed: whose decision is it?")
        return a.annotator
    if a.annotator and name_key(a.annotator) != name_key(member.name):
        raise Refused(
            f"decisions are recorded under your own name in team mode: you are {member.name}, not "
            f"{' '.join(a.annotator.split())} (set CARTOMAP_USER to who you are)"
        )
    return member.name


def acting(a: argparse.Namespace) -> str | None:
    """The person a command writes as, kept with what it writes: in team mode theirs, else None."""
    member = local_member(a.cache)
    return None if member is None else member.name


def author_of(a: argparse.Namespace) -> str:
    """The person a write that keeps its writer (a tag) is kept under: theirs in team mode, else the
    person at this machine (:func:`cartomap.team.roles.author`)."""
    return author(local_member(a.cache))
