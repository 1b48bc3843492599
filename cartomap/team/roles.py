"""The team file, its roles and the one check of every write (the dashboard's controls and the CLI's
commands ask :func:`refusal`; nothing else decides who may do what).

The team file is TOML. It lives in the run store's folder (``<cache>/team.toml``: the dashboard and
the CLI of that store read the same file), or where env ``CARTOMAP_TEAM`` says::

    # team.toml: who may do what on this run store
    [users]
    "alice@example.org" = "owner"                      # train, cancel, experiments, queues, corrected sets
    "bob@example.org" = { role = "annotator", queues = ["aum-top50", "b1"] }   # decides on these only
    "dana@example.org" = "annotator"                   # decides on every review queue
    "carol@example.org" = "viewer"                     # reads

Roles: ``owner`` may do everything (:class:`Action`); ``annotator`` decides on the review queues
(Review suspects) and WaNLI batches (Review) named in ``queues`` (every one when ``queues`` is left
out or is ``["*"]``), tags examples and saves views of the data map, and reads the rest; ``viewer``
reads (:data:`ROLE_ACTIONS`). A person missing from the file gets the
least role, viewer, and is told so. Names are matched without regard to case or repeated spaces.

**Team mode** is on while the file exists: every write is checked, and a review decision is recorded
under the person's own name (the dashboard's login, or on the command line env ``CARTOMAP_USER``,
else the operating system's user: :func:`local_user`). Without the file everybody may do everything
and annotators type their names, as on a one-person machine.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError
from cartomap.io import file_stamp, parse_toml_text, read_user_text, tomllib  # noqa: F401 (access reads it)

#: The team file's name in the run store's folder.
TEAM_FILE = "team.toml"
#: What a team file holds, for messages.
TEAM_WHAT = 'a team file: TOML with a [users] table of lines such as "alice@example.org" = "owner"'
#: Env naming another team file (for the dashboard and the CLI alike).
TEAM_ENV = "CARTOMAP_TEAM"
#: Env naming the person on the command line (else the operating system's user).
USER_ENV = "CARTOMAP_USER"
#: ``queues = ["*"]``: every queue.
EVERY_QUEUE = "*"


class Role(str, Enum):
    """What a person may do: an owner everything, an annotator decide on their queues, a viewer read."""

    OWNER = "owner"
    ANNOTATOR = "annotator"
    VIEWER = "viewer"


#: The role of a person the team file does not list: the least one.
LEAST_ROLE = Role.VIEWER


class Action(Enum):
    """Everything that writes, as the refusals name it (:attr:`doing`)."""

    TRAIN = "train"
    CANCEL = "cancel"
    EXPERIMENT = "experiment"
    TASK = "task"
    MANAGE = "manage"
    GROUP = "group"
    TAG = "tag"
    VIEW = "view"
    QUEUE = "queue"
    CORRECT = "correct"
    DECIDE = "decide"

    @property
    def doing(self) -> str:
        """What the action does, to end "only an owner can ..."."""
        return _DOING[self]


_DOING = {
    Action.TRAIN: "start or resume training",
    Action.CANCEL: "cancel a job",
    Action.EXPERIMENT: "start experiments (pruning, curricula, combinations, seeds, retraining)",
    Action.TASK: "start a job on a run (embeddings, projections, baselines, WaNLI groups, generation, filtering)",
    Action.MANAGE: "delete, repair or import runs",
    Action.GROUP: "save groups",
    Action.TAG: "tag examples",
    Action.VIEW: "save or delete views of the data map",
    Action.QUEUE: "make review queues or import decisions into them",
    Action.CORRECT: "write corrected sets",
    Action.DECIDE: "decide on review queues",
}

#: What each role may do (an annotator's decisions only on the queues assigned to them). An annotator
#: also tags examples and saves views of the data map, on every run: flagging an example for later is
#: part of reviewing, and both keep who did it.
ROLE_ACTIONS: dict[Role, frozenset[Action]] = {
    Role.OWNER: frozenset(Action),
    Role.ANNOTATOR: frozenset({Action.DECIDE, Action.TAG, Action.VIEW}),
    Role.VIEWER: frozenset(),
}


def roles_that_may(action: Action) -> list[Role]:
    """The roles whose :data:`ROLE_ACTIONS` hold ``action``, in the order of :class:`Role`."""
    return [role for role in Role if action in ROLE_ACTIONS[role]]


def name_key(name: Any) -> str:
    """How names are compared: repeated spaces collapsed, case folded."""
    return " ".join(str(name or "").split()).casefold()


@dataclass(frozen=True)
class Member:
    """A person as the team file sees them."""

    name: str
    role: Role
    #: The queues (review queues and WaNLI batches, by name) an annotator decides on; None: every one.
    queues: frozenset[str] | None = None
    #: Whether the team file lists them (an unknown person is a viewer).
    known: bool = True
    #: How they were identified: "login", "proxy", "local user".
    source: str = ""
    #: The team file, named in refusals (where to change a role).
    team_file: str = ""

    def describe(self) -> str:
        """ "alice (owner)", or "mallory (viewer: not in the team file)"."""
        if not self.known:
            return f"{self.name} ({self.role.value}: not in the team file)"
        return f"{self.name} ({self.role.value})"

    def decides_on(self, queue: str | None) -> bool:
        """Whether their role lets them decide on ``queue`` (None: on some queue)."""
        if Action.DECIDE not in ROLE_ACTIONS[self.role]:
            return False
        if self.role is Role.OWNER or self.queues is None or queue is None:
            return True
        return queue in self.queues


@dataclass(frozen=True)
class Team:
    """The members of a team file."""

    path: Path
    members: tuple[Member, ...]

    def member(self, name: str, source: str = "") -> Member:
        """The listed member of this name (matched by :func:`name_key`), else a viewer who is not known."""
        key = name_key(name)
        for m in self.members:
            if name_key(m.name) == key:
                return Member(m.name, m.role, m.queues, True, source, str(self.path))
        shown = " ".join(str(name or "").split())
        return Member(shown, LEAST_ROLE, frozenset(), False, source, str(self.path))

    @property
    def owners(self) -> list[str]:
        return [m.name for m in self.members if m.role is Role.OWNER]


def team_path(root: str | Path) -> Path:
    """The team file of the run store at ``root``: env ``CARTOMAP_TEAM``, else ``<root>/team.toml``."""
    named = os.environ.get(TEAM_ENV, "").strip()
    return Path(named).expanduser() if named else Path(root) / TEAM_FILE


def _role(value: Any, where: str) -> Role:
    try:
        return Role(str(value).strip().lower())
    except ValueError:
        roles = ", ".join(r.value for r in Role)
        raise CartomapError(f"{where}: unknown role {value!r}: expected one of {roles}") from None


def _queues(value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(q, str) and q.strip() for q in value):
        raise CartomapError(f'{where}: queues must be a list of queue names, e.g. ["aum-top50"] or ["*"]')
    names = frozenset(q.strip() for q in value)
    return None if EVERY_QUEUE in names else names


def parse_team(text: str, path: str | Path) -> Team:
    """The team of a team file's text; CartomapError naming the file (and line, user or field) otherwise."""
    path = Path(path)
    data = parse_toml_text(text, str(path), TEAM_WHAT)
    unknown = sorted(set(data) - {"users"})
    if unknown:
        raise CartomapError(f"{path}: unknown table or key {unknown[0]!r}: expected [users]")
    users = data.get("users")
    if not isinstance(users, dict) or not users:
        raise CartomapError(f'{path}: no [users] table: expected lines such as "alice@example.org" = "owner"')
    members, seen = [], {}
    for name, value in users.items():
        where = f"{path}: user {name!r}"
        shown = " ".join(name.split())
        if not shown:
            raise CartomapError(f"{path}: a user needs a name")
        if name_key(shown) in seen:
            raise CartomapError(f"{where}: listed twice (as {seen[name_key(shown)]!r} too)")
        seen[name_key(shown)] = name
        if isinstance(value, dict):
            extra = sorted(set(value) - {"role", "queues"})
            if extra:
                raise CartomapError(f"{where}: unknown field {extra[0]!r}: expected role and queues")
            if "role" not in value:
                raise CartomapError(f'{where}: no role: expected role = "owner", "annotator" or "viewer"')
            role = _role(value["role"], where)
            queues = _queues(value.get("queues"), where)
        else:
            role, queues = _role(value, where), None
        members.append(Member(shown, role, queues if role is Role.ANNOTATOR else None, True, "", str(path)))
    team = Team(path, tuple(members))
    if not team.owners:
        raise CartomapError(f'{path}: no owner: name at least one, e.g. "alice@example.org" = "owner"')
    return team


_LOADED: dict[str, tuple[tuple, Team]] = {}


def load_team(root: str | Path) -> Team | None:
    """The team of the run store at ``root`` (:func:`team_path`), None when there is no team file (one
    person, no roles). Read again only when the file changed. CartomapError for a file that cannot be
    used (naming it): a broken team file never means "no team"."""
    path = team_path(root)
    stamp = file_stamp(path)
    if not stamp:
        if path.exists():
            raise CartomapError(f"{path}: the team file cannot be read")
        if os.environ.get(TEAM_ENV, "").strip():
            raise CartomapError(f"{path}: no such team file ({TEAM_ENV} names it)")
        return None
    cached = _LOADED.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    team = parse_team(read_user_text(path, TEAM_WHAT), path)
    _LOADED[str(path)] = (stamp, team)
    return team


def local_user() -> str:
    """The person at this machine: env ``CARTOMAP_USER``, else the operating system's user name."""
    named = " ".join(os.environ.get(USER_ENV, "").split())
    if named:
        return named
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): the uid
        return f"uid{os.getuid()}"


def local_member(root: str | Path) -> Member | None:
    """The local person (:func:`local_user`) in the team of ``root``; None without a team file."""
    team = load_team(root)
    return None if team is None else team.member(local_user(), "local user")


def author(member: Member | None) -> str:
    """The name a write that keeps its writer (a tag, a saved view) is kept under: the member's in team
    mode, else the person at this machine (:func:`local_user`): one person without a team is still
    somebody."""
    return local_user() if member is None else member.name


def refusal(member: Member | None, action: Action, queue: str | None = None) -> str | None:
    """Why ``member`` may not do ``action`` (on review queue or WaNLI batch ``queue``), in one line;
    None when they may. ``member`` None is one person without a team: everything is allowed."""
    if member is None or member.role is Role.OWNER:
        return None
    where = f" (roles: {member.team_file})" if member.team_file else ""
    if action is Action.DECIDE:
        if member.decides_on(queue):
            return None
        if member.role is Role.ANNOTATOR:
            return f"{member.describe()} is not assigned to the queue {queue!r}: an owner can add it to their queues{where}."
        return (
            f"{member.describe()} may only read: an owner or an annotator can decide on review queues{where}."
        )
    if action in ROLE_ACTIONS[member.role]:
        return None
    who = " or ".join(
        f"an {r.value}" if r.value[0] in "aeiou" else f"a {r.value}" for r in roles_that_may(action)
    )
    return f"{member.describe()} may not {action.doing}: only {who} can{where}."


class Refused(CartomapError):
    """A write the person's role does not allow (the message is :func:`refusal`'s line)."""


def check(member: Member | None, action: Action, queue: str | None = None) -> None:
    """Raise :class:`Refused` when ``member`` may not do ``action`` (see :func:`refusal`)."""
    why = refusal(member, action, queue)
    if why is not None:
        raise Refused(why)
