"""A store of folders, one per item, each named by a content hash: shared by runs and experiments.

An item folder exists once its marker file does (``config.json`` for a run, ``spec.json`` for an
experiment). :meth:`FolderStore.create_folder` assembles a new folder under a temporary name and
renames it into place, so a reader never sees a half-made item and two processes creating the
same item end with one. Items are found by id, unique id prefix or name; deletion renames the
folder away first, so it leaves every listing at once.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from cartomap.errors import RunError
from cartomap.io import temp_folder, writable

Item = TypeVar("Item")


class FolderStore(Generic[Item]):
    """Items (runs, experiments) in ``self.dir``, one folder each.

    Subclasses set ``dir``, ``MARKER`` (the file that makes a folder an item), ``WHAT`` (the word
    for an item in messages), ``LIST_COMMAND`` and implement :meth:`open`, :meth:`name_of` and
    :meth:`created_at`.
    """

    dir: Path
    MARKER = ""
    WHAT = "item"
    LIST_COMMAND = ""

    def open(self, path: Path) -> Item:
        raise NotImplementedError

    def name_of(self, item: Item) -> str:
        raise NotImplementedError

    def created_at(self, item: Item) -> float:
        raise NotImplementedError

    def is_item(self, path: Path) -> bool:
        """Whether folder ``path`` is an item (by default: it holds the marker file)."""
        return (path / self.MARKER).exists()

    # -- finding ---------------------------------------------------------------------------------
    def path_for(self, item_id: str) -> Path:
        return self.dir / item_id

    @staticmethod
    def is_key(key: str) -> bool:
        """Whether ``key`` can name an item of the store: no path separator, no ``..``, no hidden name, no
        control character. An absolute path or ``ID/../..`` never leaves the store."""
        seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
        return (
            bool(key)
            and not key.startswith(".")
            and ".." not in key
            and not any(sep in key for sep in seps)
            and key.isprintable()
        )

    def find_id(self, item_id: str) -> Item | None:
        """The item with exactly this id, or None when there is none (deleted, never made)."""
        if not self.is_key(item_id):
            return None
        path = self.path_for(item_id)
        return self.open(path) if self.is_item(path) else None

    def get(self, key: str) -> Item:
        """An item by id, by a unique prefix of its id, or by its name (RunError otherwise). A key with a
        path separator or ``..`` is refused: an item is found inside the store, never by a path."""
        if not self.is_key(key):
            raise RunError(
                f"{key!r} is not a {self.WHAT} of the store: expected a {self.WHAT} id, a unique id prefix "
                f"or a {self.WHAT}'s name (no path separators or '..'; the store is {self.dir})"
            )
        exact = self.find_id(key)
        if exact is not None:
            return exact
        items = self.list()
        found = [i for i in items if i.id.startswith(key)] or [i for i in items if self.name_of(i) == key]
        if len(found) == 1:
            return found[0]
        if not found:
            hint = f" (see `{self.LIST_COMMAND}`)" if self.LIST_COMMAND else ""
            raise RunError(f"no {self.WHAT} {key!r} in {self.dir}{hint}")
        raise RunError(f"{key!r} matches several {self.WHAT}s: {', '.join(i.id for i in found)}")

    def list(self) -> list[Item]:
        """Every item, newest first."""
        if not self.dir.exists():
            return []
        items = [self.open(p) for p in self.dir.iterdir() if not p.name.startswith(".") and self.is_item(p)]
        return sorted(items, key=self.created_at, reverse=True)

    def require_writable(self, doing: str, item: Item | None = None) -> None:
        """RunError, in one line, when the store (or ``item``'s folder) cannot be written: a read-only
        copy or mount is browsable, and a command that must write (``doing``) says so before it starts."""
        folders = [self.dir] + ([item.path] if item is not None else [])
        for folder in folders:
            if not writable(folder):
                raise RunError(
                    f"{folder} is read-only: {doing} needs to write there (a read-only store can be "
                    f"browsed: `{self.LIST_COMMAND or 'cartomap runs'}`, `cartomap show`, `map`, `export`)"
                )

    # -- creating and deleting ---------------------------------------------------------------------
    def create_folder(self, item_id: str, write: Callable[[Path], None]) -> Item:
        """The item ``item_id``: the existing one, or a new one whose files ``write(tmp_folder)``
        puts into a temporary folder that is then renamed into place. A failure leaves nothing."""
        final = self.path_for(item_id)
        if (final / self.MARKER).exists():
            return self.open(final)
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = temp_folder(final, socket.gethostname(), os.getpid())  # unique on a shared store
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            write(tmp)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process created it first
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.open(final)

    def delete(self, key: str) -> None:
        """Delete an item's folder; refused while a process works on it."""
        item = self.get(key)
        if item.is_locked():
            raise RunError(f"{self.WHAT} {item.id} is busy right now: cancel it first")
        trash = self.dir / f".deleting-{item.id}-{os.getpid()}"
        os.rename(item.path, trash)  # disappears from listings at once
        shutil.rmtree(trash, ignore_errors=True)
