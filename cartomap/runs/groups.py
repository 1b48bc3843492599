"""Named groups of example ids (lasso selections, neighbour groups, WaNLI's automatic groups), kept in the run folder.

A group saved by hand is one JSON file (``groups/<slug>.json``). Automatic groups come by the
hundred thousand on a full-size dataset (WaNLI makes one per ambiguous seed: 137k on 550k pairs),
so they are rows of one Parquet table (``groups/auto.parquet``), read once per process while the
file is unchanged. :func:`list_groups` and :func:`load_group` see both kinds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from cartomap.errors import CartomapError
from cartomap.io import atomic_save, atomic_write_json, read_json
from cartomap.runs import layout
from cartomap.runs.store import Run

_UNSAFE = re.compile(r"[^\w.-]+")  # \w: Unicode letters and digits, and _
_SLUG_MAX = 80


def _legacy_slug(name: str) -> str:
    """The slug groups were saved under before names got a hash suffix (found when loading)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-.")[:_SLUG_MAX]


def name_slug(name: str, what: str = "group") -> str:
    """A file-name-safe form of a group's (or a saved view's: ``what``) name: Unicode letters and digits,
    ``_.-~``, at most 80 characters.

    A name that is not file-name-safe as written (``a/b``, ``a?b``, ``a b``, too long) gets a short
    hash of the whole name appended, so two names that read the same once slugged never share a file;
    the file keeps the name as written."""
    slug = _UNSAFE.sub("-", name.strip()).strip("-.")
    if not slug:
        raise CartomapError(f"{what} name {name!r} has no letters or digits: choose another")
    if slug == name and len(slug) <= _SLUG_MAX:
        return slug
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
    return f"{slug[: _SLUG_MAX - len(digest) - 1]}~{digest}"


def group_path(run: Run, name: str) -> Path:
    """Where group ``name`` of ``run`` is saved (whether or not it exists)."""
    return run.groups_dir / layout.GROUP_FILE.format(slug=name_slug(name))


def group_file(run: Run, name: str) -> Path | None:
    """The saved file of group ``name`` (one holding this very name): at :func:`group_path`, or
    under the slug of older versions; None when there is none."""
    path = group_path(run, name)
    if path.exists() and _stored_name(path) == name:
        return path
    legacy = _legacy_slug(name)
    if legacy:
        old = run.groups_dir / layout.GROUP_FILE.format(slug=legacy)
        if old.exists() and _stored_name(old) == name:
            return old
    return None


def _stored_name(path: Path) -> str | None:
    try:
        return str(read_json(path).get("name"))
    except (OSError, ValueError, AttributeError):
        return None


def group_table_path(run: Run) -> Path:
    """The table of the run's automatic groups, one row per group."""
    return run.groups_dir / layout.AUTO_GROUPS


def save_group(
    run: Run,
    name: str,
    ids: list[str],
    *,
    source: str = "selection",
    note: str = "",
    overwrite: bool = False,
    extra: dict[str, Any] | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """Save ``ids`` as group ``name``. An existing group is replaced only with ``overwrite=True``.
    ``by``: the person who saved it (kept as ``saved_by`` when given)."""
    if not ids:
        raise CartomapError("a group needs at least one example")
    known = set(run.examples(columns=["id"])["id"].astype(str))
    unknown = [i for i in ids if str(i) not in known]
    if unknown:
        raise CartomapError(f"{len(unknown)} ids are not examples of run {run.id}, e.g. {unknown[:3]}")
    path = group_path(run, name)
    existing = group_file(run, name)
    if existing is not None and not overwrite:
        raise CartomapError(f"a group named {name!r} exists already: pick another name or replace it")
    if path.exists() and _stored_name(path) != name:  # no two names share a file, even by chance
        raise CartomapError(f"group name {name!r} clashes with the saved group {_stored_name(path)!r}")
    group = {
        "name": name,
        "ids": [str(i) for i in ids],
        "source": source,
        "note": note,
        "created_at": time.time(),
        **({"saved_by": by} if by else {}),
        **(extra or {}),
    }
    atomic_write_json(path, group)
    if existing is not None and existing != path:  # saved by an older version under its old slug
        existing.unlink(missing_ok=True)
    return group


# --------------------------------------------------------------------------- the table of groups
_TABLES: dict[str, tuple[tuple[int, int], list[dict[str, Any]], dict[str, int]]] = {}
_JSON_COLUMNS = "cartomap.json_columns"  # file metadata: the columns holding JSON text


def save_group_table(run: Run, groups: list[dict[str, Any]]) -> int:
    """Write ``groups`` (dicts as :func:`save_group` makes them, with the same keys in every one) as
    the run's table of groups, replacing it; an empty list removes it. Returns the number written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = group_table_path(run)
    if not groups:
        path.unlink(missing_ok=True)
        return 0
    names = [str(g["name"]) for g in groups]
    if len(set(names)) != len(names):
        raise CartomapError("group names in one table must be unique")
    as_json = sorted({key for g in groups for key, value in g.items() if isinstance(value, dict)})
    rows = [
        {**g, "ids": [str(i) for i in g["ids"]], **{key: json.dumps(g.get(key)) for key in as_json}}
        for g in groups
    ]
    table = pa.Table.from_pylist(rows).replace_schema_metadata({_JSON_COLUMNS: json.dumps(as_json)})
    atomic_save(path, lambda p: pq.write_table(table, p))
    return len(groups)


def _table(run: Run) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(groups of the table, name -> position), read again only when the file changed."""
    import pyarrow.parquet as pq

    path = group_table_path(run)
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return [], {}
    key, stamp = str(path.resolve()), (stat.st_mtime_ns, stat.st_size)
    cached = _TABLES.get(key)
    if cached is None or cached[0] != stamp:
        table = pq.read_table(path)
        as_json = json.loads((table.schema.metadata or {}).get(_JSON_COLUMNS.encode(), b"[]"))
        groups = table.to_pylist()
        for group in groups:  # dict fields (a collection's settings) were stored as JSON text
            for key in as_json:
                group[key] = json.loads(group[key]) if group.get(key) is not None else None
        cached = (stamp, groups, {g["name"]: n for n, g in enumerate(groups)})
        _TABLES[key] = cached
    return cached[1], cached[2]


def group_table(run: Run) -> list[dict[str, Any]]:
    """The groups of the run's table (automatic groups), in the order saved. Treat them as read-only."""
    return _table(run)[0]


# --------------------------------------------------------------------------- every group
def list_groups(run: Run, *, include_table: bool = True) -> list[dict[str, Any]]:
    """Every group of the run, newest first: the saved JSON files and (unless ``include_table`` is
    False, as on pages that list groups by name) the rows of the table of automatic groups."""
    folder = run.groups_dir
    if not folder.exists():
        return []
    groups = [g for g in map(_readable, sorted(folder.glob("*.json"))) if g is not None]
    if include_table:
        groups += group_table(run)
    return sorted(groups, key=lambda g: g.get("created_at", 0), reverse=True)


def _readable(path: Path) -> dict[str, Any] | None:
    """The group saved at ``path``, or None for a damaged file (not JSON, not an object with a name and a
    list of ids): one damaged file never hides the groups beside it (:func:`damaged_groups` names it)."""
    try:
        group = read_json(path)
    except (OSError, ValueError):
        return None
    ok = isinstance(group, dict) and isinstance(group.get("name"), str) and isinstance(group.get("ids"), list)
    return group if ok else None


def damaged_groups(run: Run) -> list[Path]:
    """The group files of the run that cannot be read as groups (hand-edited, cut short): listing skips
    them; deleting the file removes them."""
    folder = run.groups_dir
    return [p for p in sorted(folder.glob("*.json")) if _readable(p) is None] if folder.exists() else []


def count_table_groups(run: Run) -> int:
    """How many groups the table of automatic groups holds."""
    return len(group_table(run))


def load_group(run: Run, name: str) -> dict[str, Any]:
    path = group_file(run, name)
    if path is not None:
        group = _readable(path)
        if group is None:
            raise CartomapError(
                f"{path}: the group {name!r} is damaged (expected a JSON object with its ids)"
            )
        return group
    groups, where = _table(run)
    if name in where:
        return dict(groups[where[name]])
    own = group_path(run, name)
    if own.exists() and _readable(own) is None:
        raise CartomapError(f"{own}: the group {name!r} is damaged (expected a JSON object with its ids)")
    raise CartomapError(f"run {run.id} has no group named {name!r}")


def delete_group(run: Run, name: str) -> None:
    path = group_file(run, name)
    if path is not None:
        path.unlink(missing_ok=True)
    groups, where = _table(run)
    if name in where:
        save_group_table(run, [g for g in groups if g["name"] != name])
