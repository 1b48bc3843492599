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
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")


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


def main(argv: list[str] | None = None) -> int | None:
    """``streamlit run app.py ARGV...`` in this process, the legacy pages mode turned off first."""
    without_legacy_pages()
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
