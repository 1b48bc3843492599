"""Errors that carry a message meant for the user, not a traceback."""


class CartomapError(Exception):
    """Base class: the message says what went wrong and what was expected."""


class DataError(CartomapError, ValueError):
    """Bad input data. The message names the file, the line or row, and the field.

    ``location`` is e.g. ``"train.jsonl:12"`` and ``field`` the column concerned,
    so a user interface can show them apart; ``str(err)`` holds all of it.
    """

    def __init__(self, message: str, *, location: str | None = None, field: str | None = None):
        self.location = location
        self.field = field
        prefix = f"{location}: " if location else ""
        where = f"field {field!r}: " if field else ""
        super().__init__(f"{prefix}{where}{message}")


class RunError(CartomapError):
    """A run cannot be found, started, or resumed."""
