"""The task kinds by name, and which kind a config or a loaded table has.

One table read by everything that needs a task's shape: the config (``DataConfig.task`` is one of
:func:`names`, or "" for the kind its number of text columns implies), loading (:func:`for_columns`),
every reader of a run's examples (:func:`of_columns`, :func:`text_fields_in`), the CLI's ``--task``
choices. A new kind is a :class:`~cartomap.tasks.base.TaskKind` and one :func:`register` call here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cartomap import plugins
from cartomap.errors import DataError
from cartomap.tasks.base import TaskKind
from cartomap.tasks.multilabel import MULTILABEL
from cartomap.tasks.sequence import PAIR, SINGLE
from cartomap.tasks.token import TOKEN

KINDS: dict[str, TaskKind] = plugins.Registry(plugins.TASK_KINDS, TaskKind)  # with other packages' kinds


def register(kind: TaskKind) -> TaskKind:
    """Add (or replace) a kind; returns it. Registration order is the order of :func:`text_fields`."""
    KINDS[kind.name] = kind
    return kind


for _kind in (PAIR, SINGLE, TOKEN, MULTILABEL):
    register(_kind)
KINDS.register = register

#: The kind of a config that names none, by its number of text columns: the kinds every run had before
#: the task was saved (two columns: a pair; one: a single text).
BY_COLUMN_COUNT = {2: PAIR.name, 1: SINGLE.name}
#: The kind of the bundled demo, and of a config that says nothing.
DEFAULT = PAIR


def for_path(path: str) -> TaskKind | None:
    """The kind a file's suffix says (a final ".gz" looked through): ``.conll`` is token data; None
    when the suffix says nothing of the task (JSONL, CSV, Parquet, ...)."""
    parts = [s.lower() for s in str(path).replace("\\", "/").rpartition("/")[2].split(".")[1:]]
    if parts and parts[-1] == "gz":
        parts = parts[:-1]
    suffix = f".{parts[-1]}" if parts else ""
    return next((k for k in KINDS.values() if suffix and suffix in k.suffixes), None)


def config_name(kind: TaskKind, text_columns: Sequence[str]) -> str:
    """What a config's ``task`` says of ``kind`` read from ``text_columns``: "" when the number of columns
    implies it (:data:`BY_COLUMN_COUNT`: a pair or a single text, as configs saved before the field were),
    else its name."""
    return "" if BY_COLUMN_COUNT.get(len(tuple(text_columns))) == kind.name else kind.name


def names() -> tuple[str, ...]:
    return tuple(KINDS)


def kind(name: str) -> TaskKind:
    """The kind called ``name``; a DataError naming the field ``task`` when there is none."""
    try:
        return KINDS[name]
    except KeyError:
        raise DataError(f"unknown task {name!r}; expected one of {', '.join(KINDS)}", field="task") from None


def descriptions() -> dict[str, str]:
    return {name: k.description for name, k in KINDS.items()}


def for_columns(task: str, text_columns: Sequence[str]) -> TaskKind:
    """The kind of a dataset config: ``task`` when named, else the kind its number of text columns
    implies (:data:`BY_COLUMN_COUNT`). A DataError when the number of columns does not fit the kind."""
    count = len(tuple(text_columns))
    if task:
        found = kind(task)
        if count != len(found.text_fields):
            raise DataError(
                f"task {found.name!r} reads {len(found.text_fields)} text column(s) "
                f"({found.fields_label}), got {count}: {list(text_columns)}",
                field="text_columns",
            )
        return found
    if count not in BY_COLUMN_COUNT:
        raise DataError(
            f"expected 1 text column (single text) or 2 (a pair), got {list(text_columns)}",
            field="text_columns",
        )
    return KINDS[BY_COLUMN_COUNT[count]]


def of_columns(columns: Iterable[str]) -> TaskKind:
    """The kind of a loaded table (a dataset's frame, a run's examples) from its columns: the kind with
    the most text fields that are all present, with its label field (ties: registration order). A
    table without the label column (a run's texts alone) is judged by its text fields. DataError when
    no kind's text fields are all there."""
    present = set(columns)
    found = [k for k in KINDS.values() if set(k.text_fields) <= present]
    labelled = [k for k in found if k.label_field in present]
    found = labelled or found
    if not found:
        raise DataError(
            f"the table has no text columns of a known task ({fields_label()}); columns: {sorted(present)}"
        )
    return max(found, key=lambda k: len(k.text_fields))


def guess_text_columns(columns: Iterable[str]) -> tuple[str, ...] | None:
    """The text columns of a file whose mapping is not known: the first of every kind's
    :attr:`~cartomap.tasks.base.TaskKind.known_columns` (kinds in registration order) all present, or
    None."""
    present = set(columns)
    return next((names for k in KINDS.values() for names in k.known_columns if set(names) <= present), None)


def known_columns_label() -> str:
    """What :func:`guess_text_columns` looks for, for messages: "premise/hypothesis, sentence1/sentence2, ..."."""
    return ", ".join(dict.fromkeys("/".join(names) for k in KINDS.values() for names in k.known_columns))


def fields_label() -> str:
    """Every kind's text fields for messages: "premise/hypothesis, text or tokens"."""
    labels = list(dict.fromkeys(k.fields_label for k in KINDS.values()))  # kinds may share text fields
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} or {labels[-1]}"


def text_fields() -> tuple[str, ...]:
    """Every kind's text fields, each once, in registration order (the pair's before the single text)."""
    return tuple(dict.fromkeys(f for k in KINDS.values() for f in k.text_fields))


def text_fields_in(columns: Iterable[str]) -> tuple[str, ...]:
    """The text fields present in ``columns``, in :func:`text_fields` order (what a table shows of an
    example's texts)."""
    present = set(columns)
    return tuple(f for f in text_fields() if f in present)
