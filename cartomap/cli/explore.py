"""Exploring a run's map, kept with the run: ``cartomap views {list,show,delete}`` (the Data map's
saved views) and ``cartomap tags {list,show,add,remove}`` (tags of examples)."""

from __future__ import annotations

import argparse
import time

from cartomap.cli.printing import printable, printable_frame
from cartomap.cli.team import author_of
from cartomap.errors import CartomapError


def _run(a: argparse.Namespace):
    from cartomap.runs.store import RunStore

    return RunStore(a.cache).get(a.run)


def _when(seconds) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(float(seconds)))


# --------------------------------------------------------------------------- views
def cmd_views_list(a: argparse.Namespace) -> int:
    from cartomap.runs.views import describe, list_views

    run = _run(a)
    views = list_views(run)
    if not views:
        print(f"run {run.id} has no saved views (save one on the Data map page)")
        return 0
    for view in views:
        print(printable(describe(view)))
    return 0


def cmd_views_show(a: argparse.Namespace) -> int:
    """A view's settings one per line, its focus, and how many it selects (``--ids``: the ids)."""
    import json

    from cartomap.runs.views import address, describe, load_view

    run = _run(a)
    view = load_view(run, a.name)
    print(printable(describe(view)))
    for key, value in sorted(view["settings"].items()):
        print(printable(f"  {key} = {json.dumps(value, ensure_ascii=False)}"))
    print(f"  address: {printable(address(run.id, view['name']))} (the Data map page restores it)")
    if a.ids:
        for example_id in view["selection"]:
            print(printable(example_id))
    return 0


def cmd_views_delete(a: argparse.Namespace) -> int:
    from cartomap.runs.views import delete_view

    run = _run(a)
    delete_view(run, a.name)
    print(f"deleted view {printable(a.name)} of run {run.id}")
    return 0


# --------------------------------------------------------------------------- tags
def _ids(a: argparse.Namespace) -> list[str]:
    """The example ids of ``--id`` and ``--ids FILE`` (one per line)."""
    from cartomap.io import read_ids_file

    return list(a.id or []) + (read_ids_file(a.ids) if a.ids else [])


def cmd_tags_list(a: argparse.Namespace) -> int:
    from cartomap.runs.tags import tag_counts

    run = _run(a)
    counts = tag_counts(run)
    if counts.empty:
        print(f"run {run.id} has no tags (tag examples on the Data map page or with `cartomap tags add`)")
        return 0
    counts["last_tagged_at"] = counts["last_tagged_at"].map(_when)
    print(printable_frame(counts).to_string(index=False))
    return 0


def cmd_tags_show(a: argparse.Namespace) -> int:
    from cartomap.runs.tags import tags_of

    run = _run(a)
    table = tags_of(run, a.tag)
    if table.empty:
        print(f"no example of run {run.id} has the tag {printable(a.tag)!r}")
        return 0
    table["tagged_by"] = table["tagged_by"].fillna("–")
    table["tagged_at"] = table["tagged_at"].map(_when)
    print(printable_frame(table.drop(columns=["tag"])).to_string(index=False))
    return 0


def cmd_tags_add(a: argparse.Namespace) -> int:
    from cartomap.runs.tags import add_tag

    run = _run(a)
    ids = _ids(a)
    added = add_tag(run, a.tag, ids, by=author_of(a))
    print(
        f"tagged {added:,} examples of run {run.id} {printable(a.tag)!r}"
        + (f" ({len(set(ids)) - added:,} had it already)" if added < len(set(ids)) else "")
    )
    return 0


def cmd_tags_remove(a: argparse.Namespace) -> int:
    from cartomap.runs.tags import remove_tag

    run = _run(a)
    ids = _ids(a)
    if not ids and not a.all:
        raise CartomapError("which examples? give --id ID, --ids FILE, or --all (every example that has it)")
    if ids and a.all:
        raise CartomapError("--all takes the tag off every example: give it without --id or --ids")
    removed = remove_tag(run, a.tag, None if a.all else ids, by=author_of(a))
    print(f"took the tag {printable(a.tag)!r} off {removed:,} examples of run {run.id}")
    return 0


def add_commands(sub) -> None:
    vw = sub.add_parser("views", help="the Data map's saved views of a run: list, show, delete")
    views = vw.add_subparsers(dest="views_command", required=True)
    ls = views.add_parser("list", help="the run's saved views, newest first")
    ls.add_argument("run")
    ls.set_defaults(func=cmd_views_list)
    sh = views.add_parser("show", help="a view's settings, focus and selection")
    sh.add_argument("run")
    sh.add_argument("name")
    sh.add_argument("--ids", action="store_true", help="also print the ids it selects, one per line")
    sh.set_defaults(func=cmd_views_show)
    de = views.add_parser("delete", help="delete a saved view")
    de.add_argument("run")
    de.add_argument("name")
    de.set_defaults(func=cmd_views_delete)

    tg = sub.add_parser("tags", help="tags of a run's examples: list, show, add, remove")
    tags = tg.add_subparsers(dest="tags_command", required=True)
    tl = tags.add_parser("list", help="the run's tags and how many examples have each")
    tl.add_argument("run")
    tl.set_defaults(func=cmd_tags_list)
    ts = tags.add_parser("show", help="the examples with a tag, who tagged them and when")
    ts.add_argument("run")
    ts.add_argument("tag")
    ts.set_defaults(func=cmd_tags_show)
    for name, func, text in (
        ("add", cmd_tags_add, "tag examples (kept with who tagged them and when)"),
        ("remove", cmd_tags_remove, "take a tag off examples"),
    ):
        p = tags.add_parser(name, help=text)
        p.add_argument("run")
        p.add_argument("tag")
        p.add_argument("--id", action="append", metavar="ID", help="an example id (repeat for more)")
        p.add_argument("--ids", metavar="FILE", help="a file of example ids, one per line")
        if name == "remove":
            p.add_argument("--all", action="store_true", help="off every example that has it")
        p.set_defaults(func=func)
