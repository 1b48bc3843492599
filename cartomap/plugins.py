"""Plug-ins from other packages: entry points, as pytest, Hugging Face ``evaluate`` and Ray take them.

A package adds to cartomap without editing it by declaring entry points in one of the groups below (in its
``pyproject.toml``: ``[project.entry-points."cartomap.task_kinds"] my-kind = "my_pkg.kinds:MY_KIND"``).
Each group's registry is a :class:`Registry`, a table that loads its plug-ins the first time it is read
(so a command that never reads task kinds never imports a task-kind plug-in, and a plug-in module may
import any of cartomap, which is whole by then) and registers the objects they name:

| group | the object named | registered with |
|---|---|---|
| ``cartomap.task_kinds`` | a ``cartomap.tasks.base.TaskKind`` | ``cartomap.tasks.registry.register`` |
| ``cartomap.detectors`` | a ``cartomap.scores.detectors.Detector`` | ``cartomap.scores.detectors.register`` |
| ``cartomap.ambiguity`` | a ``cartomap.scores.ambiguity.AmbiguityScore`` | ``cartomap.scores.ambiguity.register`` |
| ``cartomap.executors`` | a ``cartomap.executors.registry.ExecutorEntry`` | ``cartomap.executors.registry.register`` |
| ``cartomap.experiment_kinds`` | a ``cartomap.experiments.registry.ExperimentKind`` | ``cartomap.experiments.registry.register`` |

A plug-in that cannot be loaded (its module fails to import, the name is missing, the object is of the
wrong type) is left out and said in one line naming the entry point and its package, on the logger
``cartomap.plugins`` (the command line prints it as ``cartomap: warning: ...``); the rest of cartomap
works. The names of a group's plug-ins are known without importing them (:func:`names`): the config layer
validates an executor's name so, below the executors' registry.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

TASK_KINDS = "cartomap.task_kinds"
DETECTORS = "cartomap.detectors"
AMBIGUITY = "cartomap.ambiguity"
EXECUTORS = "cartomap.executors"
EXPERIMENT_KINDS = "cartomap.experiment_kinds"
GROUPS = (TASK_KINDS, DETECTORS, AMBIGUITY, EXECUTORS, EXPERIMENT_KINDS)

log = logging.getLogger("cartomap.plugins")
#: The lines said of plug-ins that could not be loaded, once each (the tests and ``cartomap`` read them).
problems: list[str] = []


def _entry_points(group: str) -> tuple[EntryPoint, ...]:
    """``group``'s entry points by name, scanned once per process (:func:`_scan`)."""
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}; expected one of {', '.join(GROUPS)}")
    return _scan(group)


@functools.cache
def _scan(group: str) -> tuple[EntryPoint, ...]:
    """The installed distributions' entry points of ``group``, sorted by name: read from every
    distribution's metadata on the path the first time a group is asked, then kept for the process, as a
    :class:`Registry` keeps what it loaded (a distribution installed while a process runs counts from the
    next process on; the tests install one so, on the ``PYTHONPATH`` of a fresh process)."""
    return tuple(sorted(entry_points(group=group), key=lambda ep: ep.name))


def names(group: str) -> tuple[str, ...]:
    """The names of ``group``'s plug-ins, without importing them (the entry points scanned once)."""
    return tuple(ep.name for ep in _entry_points(group))


def _package(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown package"


def _say(line: str) -> None:
    if line not in problems:
        problems.append(line)
        log.warning(line)


def load(group: str, kind: type | tuple[type, ...], register: Callable[[Any], Any]) -> list[str]:
    """Load every plug-in of ``group``, check it is a ``kind``, ``register`` it; the names registered.
    One that fails is said once (:data:`problems`) and left out."""
    loaded = []
    for ep in _entry_points(group):
        where = f"plug-in {ep.name!r} ({group} = {ep.value}) of {_package(ep)}"
        try:
            obj = ep.load()
        except Exception as err:  # noqa: BLE001 (any failure of somebody else's import is one line)
            _say(f"{where} could not be loaded: {type(err).__name__}: {err}".splitlines()[0])
            continue
        if not isinstance(obj, kind):
            expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            _say(f"{where} is a {type(obj).__name__}, not a {expected}: left out")
            continue
        try:
            register(obj)
        except Exception as err:  # noqa: BLE001
            _say(f"{where} could not be registered: {type(err).__name__}: {err}".splitlines()[0])
            continue
        loaded.append(ep.name)
    return loaded


class Registry(dict):
    """A registry's table, name -> object, that loads ``group``'s plug-ins (:func:`load`, each checked to be
    a ``kind`` and passed to ``register``, the registry's own) the first time it is read. The built-in
    entries are registered when the registry's module is imported; a plug-in of the same name replaces one."""

    def __init__(self, group: str, kind: type | tuple[type, ...]) -> None:
        super().__init__()
        self.group, self.kind = group, kind
        self.register: Callable[[Any], Any] = self.__setitem__
        self._lock = threading.RLock()  # a second thread waits for the first one's load (re-entry passes)
        self._loading = False
        self._loaded = False

    def load_plugins(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:  # loaded meanwhile, or read by a plug-in's own register
                return
            self._loading = True
            try:
                load(self.group, self.kind, self.register)
            finally:
                self._loaded, self._loading = True, False

    def __getitem__(self, key):
        self.load_plugins()
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        self.load_plugins()
        return super().__contains__(key)

    def __iter__(self):
        self.load_plugins()
        return super().__iter__()

    def __len__(self) -> int:
        self.load_plugins()
        return super().__len__()

    def get(self, key, default=None):
        self.load_plugins()
        return super().get(key, default)

    def keys(self):
        self.load_plugins()
        return super().keys()

    def values(self):
        self.load_plugins()
        return super().values()

    def items(self):
        self.load_plugins()
        return super().items()
