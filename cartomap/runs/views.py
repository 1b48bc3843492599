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

import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError
from cartomap.io import atomic_write_json, read_json
from cartomap.runs import layout
from cartomap.runs.groups import name_slug
from cartomap.runs.store import Run

#: The longest view name (characters).
MAX_NAME = 80
#: The longest text value of a setting (characters).
MAX_TEXT = 2_000


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


def _stored_name(path: Path) -> str | None:
    try:
        return str(read_json(path).get("name"))
    except (OSError, ValueError, AttributeError):
        return None


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
    if path.exists() and stored != name:  # no two names share a file, even by chance
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
    atomic_write_json(path, view)
    return view


def _read(path: Path) -> dict[str, Any]:
    try:
        view = read_json(path)
    except (OSError, ValueError) as err:
        raise CartomapError(
            f"{path}: the saved view cannot be read ({err}); delete the file or save it again"
        ) from None
    if not isinstance(view, dict) or not isinstance(view.get("name"), str):
        raise CartomapError(f"{path}: not a saved view (no name); delete the file or save it again")
    if not isinstance(view.get("settings", {}), dict) or not isinstance(view.get("selection", []), list):
        raise CartomapError(f"{path}: saved view {view['name']!r} is damaged (settings or selection)")
    return view


def load_view(run: Run, name: str) -> dict[str, Any]:
    """View ``name`` of ``run``; CartomapError when there is none (naming the views there are) or its file
    is damaged."""
    path = view_path(run, name)
    if not path.exists() or _stored_name(path) != clean_name(name):
        names = [v["name"] for v in list_views(run) if "problem" not in v]
        there = f"; its views: {', '.join(names[:10])}" if names else "; it has none"
        raise CartomapError(f"run {run.id} has no saved view named {clean_name(name)!r}{there}")
    view = _read(path)
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
    for path in folder.glob("*.json"):
        try:
            views.append(_read(path))
        except CartomapError as err:
            views.append({"name": path.stem, "problem": str(err), "created_at": 0.0})
    return sorted(views, key=lambda v: float(v.get("created_at") or 0.0), reverse=True)


def delete_view(run: Run, name: str) -> None:
    """Delete view ``name`` of ``run`` (CartomapError when there is none)."""
    load_view(run, name)  # exists, and is this name's
    view_path(run, name).unlink(missing_ok=True)


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
