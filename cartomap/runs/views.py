"""Saved views of a run's data map: how someone left the map, under a name, to come back to or to share.

A view is one JSON file in the run folder (``views/<slug>.json``, written atomically): its ``name``, the
map's ``settings`` (filters, colour, ambiguity axis and region rule, epoch, split by gold label, ...: a
flat mapping of setting name to a JSON value, as the dashboard keeps them), the ``selection`` (example
ids, in order) and the ``focus`` (the example opened under the selection table), when it was saved and,
in team mode, who saved it (``saved_by``, as groups keep it). What the settings mean belongs to the page
that draws them; this module only keeps them, checks they are plain values, and lists, reads and
deletes views (``cartomap views``; the Data map restores one from ``?view=NAME`` in its address).
"""

from __future__ import annotations

import errno
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from cartomap.errors import CartomapError
from cartomap.io import atomic_write_json, read_json_file
from cartomap.runs import layout
from cartomap.runs.groups import name_slug
from cartomap.runs.store import Run

#: The longest view name (characters).
MAX_NAME = 80
#: The longest text value of a setting (characters).
MAX_TEXT = 2_000
#: The query parameter of the Data map's address that names a view to restore (``?run=ID&view=NAME``).
PARAM = "view"
#: The latest ``created_at`` a view may have: the end of the year 9999 (seconds since 1970), the last
#: moment a date can be written of.
LATEST = 253_402_300_799.0
#: What a view file holds, for messages.
WHAT = "a saved view: a JSON object with name, settings, selection, focus and created_at"


def clean_name(name: Any) -> str:
    """A view's name with its whitespace collapsed; CartomapError when empty, too long or without a letter
    or digit."""
    text = " ".join(str(name or "").split())
    if not text:
        raise CartomapError("a view needs a name")
    if len(text) > MAX_NAME:
        raise CartomapError(f"view names have at most {MAX_NAME} characters ({len(text)} given)")
    name_slug(text, "view")  # letters or digits in it
    return text


def view_path(run: Run, name: str) -> Path:
    """Where view ``name`` of ``run`` is saved (whether or not it exists)."""
    return run.views_dir / layout.VIEW_FILE.format(slug=name_slug(clean_name(name), "view"))


def _scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return len(value) <= MAX_TEXT
    return value is None or isinstance(value, bool | int)


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as a plain dict: names are text, values None, booleans, numbers (finite), text or lists
    of those (a tuple becomes a list). CartomapError naming the first setting that is none of these."""
    if not isinstance(settings, Mapping):
        raise CartomapError(
            f"a view's settings are a mapping of names to values, not {type(settings).__name__}"
        )
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key.strip():
            raise CartomapError(f"a view's setting needs a name, not {key!r}")
        if isinstance(value, list | tuple):
            if not all(_scalar(v) for v in value):
                raise CartomapError(
                    f"view setting {key!r}: a list of plain values expected, got {value!r:.80}"
                )
            value = list(value)
        elif not _scalar(value):
            raise CartomapError(
                f"view setting {key!r}: a plain value expected (text, number, true/false or a list), "
                f"got {type(value).__name__}"
            )
        out[key] = value
    return out


def address(run_id: str, name: str, param: str = PARAM) -> str:
    """The Data map's address part that restores view ``name`` of run ``run_id`` (``?run=ID&view=NAME``,
    the view under query parameter ``param``), each value percent-encoded: a name holding ``&``, ``=``,
    ``#``, ``?`` or a space opens that view, and only it."""
    return "?" + urlencode({"run": run_id, param: name}, quote_via=quote)


def _stored_name(path: Path) -> str | None:
    """The name view file ``path`` holds; None when it cannot be read (a damaged view)."""
    try:
        return _read(path)["name"]
    except CartomapError:
        return None


def _write(path: Path, view: dict[str, Any]) -> None:
    """Write ``view`` to ``path`` atomically; a disk error is one CartomapError naming the file."""
    try:
        atomic_write_json(path, view)
    except OSError as err:
        hint = " (the disk is full: free some space and save again)" if err.errno == errno.ENOSPC else ""
        raise CartomapError(
            f"{path}: the view could not be saved ({err.strerror or err}){hint}; nothing was changed"
        ) from None


def save_view(
    run: Run,
    name: str,
    settings: Mapping[str, Any],
    selection: Iterable[Any] = (),
    *,
    focus: str | None = None,
    overwrite: bool = False,
    by: str | None = None,
) -> dict[str, Any]:
    """Save the map's ``settings``, its ``selection`` (example ids, repeats dropped) and ``focus`` as view
    ``name`` of ``run``; returns what was saved. An existing view is replaced only with ``overwrite=True``.
    ``by``: the person saving it (kept as ``saved_by`` when given)."""
    name = clean_name(name)
    settings = check_settings(settings)
    path = view_path(run, name)
    stored = _stored_name(path) if path.exists() else None
    if path.exists() and stored is None and not overwrite:
        raise CartomapError(
            f"{path}: a damaged saved view is in the place of {name!r}: replace it or delete it"
        )
    if stored is not None and stored != name:  # no two names share a file, even by chance
        raise CartomapError(f"view name {name!r} clashes with the saved view {stored!r}: choose another")
    if path.exists() and not overwrite:
        raise CartomapError(f"a view named {name!r} exists already: pick another name or replace it")
    view = {
        "name": name,
        "settings": settings,
        "selection": list(dict.fromkeys(str(i) for i in selection)),
        "focus": None if focus is None else str(focus),
        "created_at": time.time(),
        **({"saved_by": by} if by else {}),
    }
    _write(path, view)
    return view


def _check_fields(view: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a view read from its file (None: nothing)."""
    if not isinstance(view.get("settings", {}), dict):
        return "field 'settings': expected a mapping of setting names to values"
    try:
        check_settings(view.get("settings", {}))
    except CartomapError as err:
        return f"field 'settings': {err}"
    if not isinstance(view.get("selection", []), list):
        return "field 'selection': expected a list of example ids"
    focus = view.get("focus")
    if focus is not None and not isinstance(focus, str | int):
        return "field 'focus': expected an example id or null"
    when = view.get("created_at", 0.0)
    if isinstance(when, bool) or not isinstance(when, int | float) or not 0 <= when <= LATEST:
        return f"field 'created_at': expected seconds since 1970 (a number from 0 to {LATEST:.0f}), got {when!r:.40}"
    if not isinstance(view.get("saved_by", ""), str):
        return "field 'saved_by': expected a name"
    return None


def _read(path: Path) -> dict[str, Any]:
    """The view of file ``path``; CartomapError naming the file, the field and what was expected, and how
    to get rid of it (``cartomap views delete``, or saving the view again replacing it)."""
    run_id = path.parent.parent.name  # views/<slug>.json in the run's folder
    remedy = f"delete it (`cartomap views delete {run_id} {path.stem}`) or save the view again, replacing it"
    try:
        view = read_json_file(path, WHAT)
    except CartomapError as err:
        raise CartomapError(f"the saved view cannot be read: {err}; {remedy}") from None
    if not isinstance(view, dict) or not isinstance(view.get("name"), str):
        raise CartomapError(f"{path}: not a saved view (no name); {remedy}")
    problem = _check_fields(view)
    if problem:
        raise CartomapError(f"{path}: saved view {view['name']!r} is damaged: {problem}; {remedy}")
    return view


def load_view(run: Run, name: str) -> dict[str, Any]:
    """View ``name`` of ``run``; CartomapError when there is none (naming the views there are) or its file
    is damaged."""
    path = _file_of(run, name)
    view = None if path is None else _read(path)  # a damaged view: its problem, naming the file
    if view is None or view["name"] != clean_name(name):
        names = [v["name"] for v in list_views(run) if "problem" not in v]
        there = f"; its views: {', '.join(names[:10])}" if names else "; it has none"
        raise CartomapError(f"run {run.id} has no saved view named {clean_name(name)!r}{there}")
    view.setdefault("settings", {})
    view.setdefault("selection", [])
    view.setdefault("focus", None)
    return view


def list_views(run: Run) -> list[dict[str, Any]]:
    """Every saved view of ``run``, newest first. A file that cannot be read is listed too, as
    ``{"name": <file name>, "problem": <one line>}`` (never dropped silently)."""
    folder = run.views_dir
    if not folder.is_dir():
        return []
    views = []
    for path in folder.glob(layout.VIEW_FILE.format(slug="*")):
        try:
            views.append(_read(path))
        except CartomapError as err:
            views.append({"name": path.stem, "problem": str(err), "created_at": 0.0})
    return sorted(views, key=lambda v: float(v.get("created_at") or 0.0), reverse=True)


def _file_of(run: Run, name: str) -> Path | None:
    """The file of view ``name`` (by its name's slug, or, for a damaged view listed by its file's name,
    that file); None when there is none."""
    path = view_path(run, name)
    if path.exists():
        return path
    by_file = run.views_dir / layout.VIEW_FILE.format(slug=str(name).strip())
    return by_file if by_file.parent == run.views_dir and by_file.is_file() else None


def delete_view(run: Run, name: str) -> None:
    """Delete view ``name`` of ``run``: a view by its name, or a damaged one (that cannot be read) by the
    name :func:`list_views` lists it under, its file's. CartomapError when there is none."""
    path = _file_of(run, name)
    if path is None or _stored_name(path) is not None:
        load_view(run, name)  # exists, and is this name's
        path = view_path(run, name)
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        raise CartomapError(f"{path}: the view could not be deleted ({err.strerror or err})") from None


def describe(view: Mapping[str, Any]) -> str:
    """One line about a view: its name, how many settings and selected examples, who saved it and when."""
    if "problem" in view:
        return f"{view['name']}: {view['problem']}"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(view.get("created_at") or 0.0)))
    selected = len(view.get("selection") or [])
    by = f" by {view['saved_by']}" if view.get("saved_by") else ""
    return (
        f"{view['name']}: {len(view.get('settings') or {})} settings, {selected:,} selected"
        + (f", focus {view['focus']}" if view.get("focus") else "")
        + f", saved {when}{by}"
    )
