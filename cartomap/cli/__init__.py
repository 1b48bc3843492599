"""The ``cartomap`` command line: every long job the dashboard offers, plus run management.

One module per command group (:mod:`.train`, :mod:`.runs`, :mod:`.analysis`, :mod:`.wanli`,
:mod:`.experiments`, :mod:`.integrations`, :mod:`.curation`, :mod:`.explore`), each adding its subcommands with ``add_commands``; :mod:`.options` holds
the options they share. ``python -m cartomap.cli`` is how background jobs start it.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sqlite3
import sys

from cartomap.cli import analysis, curation, experiments, explore, integrations, runs, train, wanli
from cartomap.cli.options import option_error
from cartomap.cli.printing import PrintableStream, printable
from cartomap.cli.team import check_command
from cartomap.errors import CartomapError, DataError
from cartomap.runs import cpu

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GROUPS = (train, experiments, runs, explore, analysis, wanli, curation, integrations)


class _Warnings(logging.Handler):
    """A plug-in that could not be loaded (cartomap.plugins), as one line on standard error."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"cartomap: warning: {printable(record.getMessage())}", file=sys.stderr)


_plugins_log = logging.getLogger("cartomap.plugins")
_plugins_log.addHandler(_Warnings())
_plugins_log.propagate = False


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
    """The ``cartomap`` command: ``argv`` None when this process is the command (the console script,
    ``python -m cartomap.cli``), a list when another program calls it (a test)."""
    if argv is None:
        cpu.own_process()  # a training may restart this process as the load changes (runs/cpu.py)
    args = build_parser().parse_args(argv)
    stdout = sys.stdout
    sys.stdout = PrintableStream(stdout)  # what any command prints: control characters escaped
    try:
        cpu.apply()  # before anything imports torch: how its threads wait and how many (runs/cpu.py)
        check_command(args)  # team mode: a command that writes, for a person whose role allows it
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except CartomapError as err:
        if isinstance(err, DataError):
            err = option_error(err)  # a config field's refusal names the option that set it
        print(f"cartomap: error: {printable(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f"cartomap: {err or 'interrupted; run the same command again to resume'}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return broken_pipe()
    except sqlite3.OperationalError as err:  # the review store: locked by another writer, or a full disk
        full = "full" in str(err)  # SQLite's "database or disk is full"
        hint = OS_HINTS[errno.ENOSPC] if full else " (try again in a moment)"
        print(f"cartomap: error: the review database: {err}{hint}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"cartomap: error: {printable(os_error_line(err))}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout


def os_error_line(err: OSError) -> str:
    """An OSError as one line for a user: the path (both, for a rename) and what happened."""
    what = err.strerror or str(err) or type(err).__name__
    hint = OS_HINTS.get(err.errno, "")
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    where = " -> ".join(str(os.fsdecode(p)) for p in paths)
    return f"{where}: {what}{hint}" if where else f"{what}{hint}"


OS_HINTS = {
    errno.ENOSPC: " (the disk is full: free some space and run the command again)",
    errno.EROFS: " (the folder is read-only: this command needs to write there)",
    errno.EACCES: " (permission denied: this command needs access there)",
    errno.ENOENT: " (it was removed or never existed)",
}


def broken_pipe() -> int:
    """The reader of our output went away (``cartomap show ID | head -1``): stop quietly, as Python's
    documentation recommends (stdout pointed at devnull, so the exit's flush raises nothing more)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test's capture)
        pass
    finally:
        os.close(devnull)
    return 1
