"""The ``cartomap`` command line: every long job the dashboard offers, plus run management.

One module per command group (:mod:`.train`, :mod:`.runs`, :mod:`.analysis`, :mod:`.wanli`,
:mod:`.experiments`, :mod:`.integrations`), each adding its subcommands with ``add_commands``; :mod:`.options` holds
the options they share. ``python -m cartomap.cli`` is how background jobs start it.
"""

from __future__ import annotations

import argparse
import os
import sys

from cartomap.cli import analysis, experiments, integrations, runs, train, wanli
from cartomap.cli.options import option_error
from cartomap.errors import CartomapError, DataError

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GROUPS = (train, experiments, runs, analysis, wanli, integrations)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cartomap", description="Data maps for text-classification datasets."
    )
    parser.add_argument("--cache", default=os.environ.get("CARTOMAP_CACHE", "cache"), help="run store folder")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CartomapError as err:
        if isinstance(err, DataError):
            err = option_error(err)  # a config field's refusal names the option that set it
        print(f"cartomap: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cartomap: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
