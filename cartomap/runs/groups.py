"""Named groups of example ids (lasso selections, neighbour groups), kept in the run folder."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError
from cartomap.io import atomic_write_json, read_json
from cartomap.runs import layout
from cartomap.runs.store import Run


def _slug(name: str) -> str:
    """A file-name-safe form of a group name (letters, digits, ``_.-``; at most 80 characters)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-.")
    if not slug:
        raise CartomapError(f"group name {name!r} has no letters or digits: choose another")
    return slug[:80]


def group_path(run: Run, name: str) -> Path:
    """Where group ``name`` of ``run`` is saved (whether or not it exists)."""
    return run.groups_dir / layout.GROUP_FILE.format(slug=_slug(name))


def save_group(
    run: Run,
    name: str,
    ids: list[str],
    *,
    source: str = "selection",
    note: str = "",
    overwrite: bool = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Save ``ids`` as group ``name``. An existing group is replaced only with ``overwrite=True``."""
    if not ids:
        raise CartomapError("a group needs at least one example")
    known = set(run.examples()["id"].astype(str))
    unknown = [i for i in ids if str(i) not in known]
    if unknown:
        raise CartomapError(f"{len(unknown)} ids are not examples of run {run.id}, e.g. {unknown[:3]}")
    path = group_path(run, name)
    if path.exists() and not overwrite:
        raise CartomapError(f"a group named {name!r} exists already: pick another name or replace it")
    group = {
        "name": name,
        "ids": [str(i) for i in ids],
        "source": source,
        "note": note,
        "created_at": time.time(),
        **(extra or {}),
    }
    atomic_write_json(path, group)
    return group


def list_groups(run: Run) -> list[dict[str, Any]]:
    folder = run.groups_dir
    if not folder.exists():
        return []
    groups = [read_json(p) for p in folder.glob("*.json")]
    return sorted(groups, key=lambda g: g.get("created_at", 0), reverse=True)


def load_group(run: Run, name: str) -> dict[str, Any]:
    path = group_path(run, name)
    if not path.exists():
        raise CartomapError(f"run {run.id} has no group named {name!r}")
    return read_json(path)


def delete_group(run: Run, name: str) -> None:
    group_path(run, name).unlink(missing_ok=True)
