"""The dashboard's launcher: ``python dashboard.py [streamlit run options]`` serves ``app.py`` from this
process (``cartomap dashboard`` runs it).

Streamlit (1.67) decides once per server process, when the first session opens, whether the app is a
legacy multipage app: a ``pages/`` folder next to the entry point turns that mode on
(``PagesManager.uses_pages_directory``, a class attribute) until a script calls ``st.navigation``. In
that mode a script run does not execute ``app.py`` but lists every file of ``pages/`` as a page
(``common`` too) and runs the one the address names: a server's first visit straight to
``/data_map?run=ID`` would get no run picker and the wrong navigation. The folder is the project's
layout, and Streamlit has no option to turn the mode off, so the launcher answers the question first:
no legacy pages, ``app.py``'s ``st.navigation`` always. Written defensively: a Streamlit without that
attribute (or one that already decided) is left as it is. ``pages.common.through_app()`` still covers
a plain ``streamlit run app.py``.

**Warm-up.** While the server starts, a background thread (:func:`warm_up`) imports every module the
app and the Data map page import (pandas, pyarrow, plotly, cartomap; seconds on a small CPU) and reads
the map frame of the run the picker opens by default (the newest with a data map) into the server's
cache, so the first page after a start draws its map without waiting for them; on a fresh install (a
store without runs) it first installs the NLI demo's recorded run shipped with cartomap
(:mod:`cartomap.runs.shipped`; ``app.py`` does too), which the picker then opens. ``CARTOMAP_WARM_UP=0``
turns it off; it never fails the server (what goes wrong is logged and the page does the work instead).
Streamlit's "missing ScriptRunContext" warning, which each of its cached calls outside a session would
log, is filtered out for that thread only.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import logging
import os
import sys
import threading
import time
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")
#: The scripts whose imports the warm-up loads: the entry point and the page a first visit opens.
WARM_SCRIPTS = (APP, APP.with_name("pages") / "data_map.py")
#: Set to "0" to start the server without the warm-up thread.
WARM_UP_ENV = "CARTOMAP_WARM_UP"
log = logging.getLogger("cartomap.dashboard")
#: The warm-up thread's name (its records are told apart by it).
WARM_UP_THREAD = "cartomap-warm-up"
#: Streamlit's logger that warns of a thread without a script-run context (every cached call of the warm-up).
CONTEXT_LOGGER = "streamlit.runtime.scriptrunner_utils.script_run_context"


class _QuietWarmUp(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warning when the warm-up thread causes it: the warm-up
    calls the page's cached functions outside a session on purpose. Other threads' warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName == WARM_UP_THREAD and "missing ScriptRunContext" in record.getMessage())


#: Streamlit's logger of its sign-in routes (``--login``), which logs a traceback when the provider cannot
#: be reached.
AUTH_LOGGER = "streamlit.web.server.starlette.starlette_auth_routes"


class _OneLine(logging.Filter):
    """Makes a record with a traceback one line: its message and the error's type and words (a provider
    that cannot be reached is no bug of the server: its traceback helps nobody)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            words = " ".join(str(err).split())
            record.msg, record.args = f"{record.getMessage()} ({type(err).__name__}: {words})", ()
            record.exc_info, record.exc_text = None, None
        return True


def quiet_auth_errors() -> None:
    """Streamlit's sign-in routes log one line per failure, not a traceback (:class:`_OneLine`)."""
    auth_log = logging.getLogger(AUTH_LOGGER)
    if not any(isinstance(f, _OneLine) for f in auth_log.filters):
        auth_log.addFilter(_OneLine())


def without_legacy_pages() -> bool:
    """Tell Streamlit the app uses ``st.navigation``, not the ``pages/`` folder. True when it was set."""
    try:  # an internal of Streamlit (1.67); absent elsewhere: nothing to do
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return False
    if getattr(PagesManager, "uses_pages_directory", False) is not None:
        return False  # absent, or already decided (a session opened before): leave it
    PagesManager.uses_pages_directory = False
    return True


def script_imports(path: Path) -> list[str]:
    """The modules ``path`` imports at its top level (``import a.b`` and ``from a.b import c``: ``a.b``, and
    ``a.b.c`` where that is a module), in order, each once."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return list(dict.fromkeys(names))


def _default_map_frame(root: str) -> str | None:
    """Read the map frame of the run the picker opens by default into the cache the Data map page reads
    (``pages.components.maps``: the same key as the page's first draw, regions by the rule its sidebar
    starts with, ``pages.components.map_filters.default_rule``) and draw its figure and the figure's
    picture once (both kept with the frame); returns the run's id, None when there is none."""
    from cartomap.analysis.datamap import axis_of
    from cartomap.experiments.picker import default_run, picker_runs
    from cartomap.experiments.store import ExperimentStore
    from cartomap.runs.store import RunStore
    from pages.components import cached, map_filters, maps

    store = RunStore(root)
    run_id = default_run(picker_runs(store.list(), ExperimentStore(store.root).list()))
    if run_id is None:
        return None
    run = store.get(run_id)
    if not run.has_metrics():
        return None
    frame = maps.map_frame(run, map_filters.default_rule(run, cached.axes(run)))
    if {"confidence", axis_of(frame), "correctness"} <= set(frame.columns):
        from cartomap.analysis import preview

        # the figure once, and its picture: the drawn sample, hover text, density, histograms and the
        # picture are kept with the cached frame (cartomap.analysis.datamap.frame_memo), so the first visit
        # sends the picture at once and only lays the figure out
        preview.data_map_png(frame, "correctness")
    return run_id


def _warm(root: str) -> None:
    t0 = time.perf_counter()
    from cartomap.runs import shipped
    from cartomap.runs.store import RunStore

    shipped.install_if_fresh(RunStore(root))  # a fresh install: the demo's recorded run, its map at once
    if str(APP.parent) not in sys.path:  # ``pages`` importable, as under the server's script runs
        sys.path.insert(0, str(APP.parent))
    for script in WARM_SCRIPTS:
        for name in script_imports(script):
            with contextlib.suppress(ImportError):  # ``from pkg import function``: not a module
                importlib.import_module(name)
    imported = time.perf_counter() - t0
    run_id = _default_map_frame(root)
    print(
        f"cartomap warm-up: imports {imported:.1f} s, the map frame of "
        f"{run_id or 'no run'} {time.perf_counter() - t0 - imported:.1f} s",
        file=sys.stderr,
        flush=True,
    )


def warm_up(root: str | None = None) -> threading.Thread | None:
    """Start the warm-up thread (see the module docstring) for the run store ``root`` (default: env
    CARTOMAP_CACHE, else "cache"); None when ``CARTOMAP_WARM_UP=0``."""
    if os.environ.get(WARM_UP_ENV, "1") == "0":
        return None
    root = root or os.environ.get("CARTOMAP_CACHE", "cache")

    def target() -> None:
        try:
            _warm(root)
        except Exception:  # noqa: BLE001 - a warm-up never stops the server; the page does the work
            log.warning("warm-up failed; the first page reads what it needs itself", exc_info=True)

    context_log = logging.getLogger(CONTEXT_LOGGER)
    if not any(isinstance(f, _QuietWarmUp) for f in context_log.filters):
        context_log.addFilter(_QuietWarmUp())
    thread = threading.Thread(target=target, name=WARM_UP_THREAD, daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int | None:
    """``streamlit run app.py ARGV...`` in this process, the legacy pages mode turned off first, cartomap's
    thread policy in its environment (its jobs inherit it) and the warm-up started."""
    from cartomap.errors import CartomapError
    from cartomap.runs import cpu

    try:
        cpu.apply()
    except CartomapError as err:  # a bad CARTOMAP_WAIT: one line, before the server starts
        raise SystemExit(f"cartomap: error: {err}") from None
    without_legacy_pages()
    quiet_auth_errors()
    warm_up()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
