"""Read token-classification data (named entities, part-of-speech, chunks): one row per sentence.

Two file shapes are read:

* **CoNLL columns** (``.conll``, ``.conllu``, ``.bio``, ``.iob``, ``.iob2``, each optionally ``.gz``):
  one token per line, columns separated by a tab (when the line has one) or by runs of whitespace,
  the tag in the last column and the token in the first, or in the second when the first numbers the
  words 1, 2, ... (CoNLL-U, Universal NER); both columns can be chosen. A blank line ends a sentence.
  ``-DOCSTART-`` lines (CoNLL-2003's document marks) end a sentence and are skipped. Lines starting
  with ``#`` before a sentence's first token are comments, as in CoNLL-U (:func:`parse_conll` says
  when such a line is a token instead); ``# sent_id = X`` names the sentence when
  ``id_field="sent_id"``. In ``.conllu`` files the lines of multiword tokens (``3-4``) and empty
  nodes (``5.1``) are skipped.
* **JSONL** (``.jsonl``, ``.ndjson``, optionally ``.gz``): one JSON object per line with a list of
  token strings and a list of tag strings of the same length (fields ``tokens`` and ``tags`` by
  default; integer tags are read as positions in ``tag_names`` when those are given).

The result, :class:`TaggedSentences`, holds a DataFrame with the columns ``id`` (str, unique: from
``id_field`` when given, else ``sent-<n>`` with n the sentence's 0-based position in the file, so ids
do not change when the file is read again), ``tokens`` (list of str) and ``tags`` (list of str); the
sorted tag set; and warnings about tags that break the BIO scheme (:func:`bio_warnings`).

A bad line raises one :class:`~cartomap.errors.DataError` naming the file, the 1-based physical line
and the field, as :mod:`cartomap.data.loading` does; reading never partially succeeds.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.errors import DataError
from cartomap.io import atomic_write_text, decode_utf8, json_objects, read_data_bytes
from cartomap.tasks.token import TOKEN

#: Suffixes of files in CoNLL columns (each also with ``.gz``).
CONLL_SUFFIXES: tuple[str, ...] = (".conll", ".conllu", ".bio", ".iob", ".iob2")
#: Suffixes of token-classification JSONL (each also with ``.gz``); the suffix alone does not tell
#: these from sentence-level JSONL, so :func:`is_token_data` does not claim them.
JSONL_SUFFIXES: tuple[str, ...] = (".jsonl", ".ndjson")
DOCSTART = "-DOCSTART-"
#: Tag of a word outside every entity in the BIO schemes.
OUTSIDE = "O"
ID_PREFIX = "sent-"
#: The columns of a read file: the token kind's words and tags (:mod:`cartomap.tasks.token`).
WORDS, TAGS = TOKEN.text_fields[0], TOKEN.label_field
_CONLLU_SKIP = re.compile(r"^\d+(-\d+|\.\d+)$")  # multiword token ranges and empty nodes
_COMMENT_FIELD = re.compile(r"^#\s*([^=\s]+)\s*=\s*(.*?)\s*$")
_BIO_TAG = re.compile(r"^([BIESLU])-(.+)$")
#: Values of an unused CoNLL column: a tag column of mostly these is the wrong column.
_PLACEHOLDERS = ("_", "-")
#: What a refused blank token's message offers.
SKIP_HINT = "or drop such tokens with their tags (--skip-blank-tokens, DataConfig.skip_blank_tokens)"


@dataclass(frozen=True, eq=False)
class TaggedSentences:
    """Sentences read from one file: ``frame`` (id, tokens, tags), the sorted tag set, warnings.

    ``lines`` gives the physical line (1-based) of each sentence's first word in its file, for messages.
    """

    frame: pd.DataFrame
    tag_names: tuple[str, ...]
    source: str
    lines: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def num_words(self) -> int:
        return int(self.frame[WORDS].map(len).sum())

    def __repr__(self) -> str:
        return (
            f"TaggedSentences({self.source!r}, {len(self)} sentences, {self.num_words} words, "
            f"tags={list(self.tag_names)})"
        )


# ----------------------------------------------------------------------------- file names


def _suffix(path: str | Path) -> str:
    """The format suffix of ``path``, lower case, with a final ``.gz`` looked through."""
    suffixes = [s.lower() for s in Path(str(path)).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def is_token_data(path: str | Path) -> bool:
    """Whether ``path`` names a file in CoNLL columns by its suffix (``.conll``, ``.conllu``, ``.bio``,
    ``.iob``, optionally ``.gz``). JSONL is not claimed: its suffix says nothing about the task."""
    return _suffix(path) in CONLL_SUFFIXES


# ----------------------------------------------------------------------------- reading


def read_tagged(
    path: str | Path,
    *,
    token_column: int | None = None,
    tag_column: int = -1,
    tokens_field: str = WORDS,
    tags_field: str = TAGS,
    id_field: str | None = None,
    tag_names: Sequence[str] | None = None,
    comments: bool = True,
    source: str | None = None,
    skip_blank: bool = False,
) -> TaggedSentences:
    """Read a token-classification file, CoNLL columns or JSONL by its suffix (see the module text).

    CoNLL (:func:`parse_conll`): ``token_column`` (default: 1 when the first column numbers the words,
    else 0) and ``tag_column`` (default -1, the last) are 0-based column indices, negative ones
    counting from the end; ``id_field`` names a ``# key = value`` comment; ``comments=False`` reads
    ``#`` lines as tokens. JSONL: ``tokens_field`` and ``tags_field`` name the two lists and
    ``id_field`` the id. ``tag_names`` is the tag set: a tag outside it is an error (and in JSONL an
    integer tag is a position in it); otherwise the tag set is what the file has, sorted.
    ``skip_blank``: a token of only spaces is dropped with its tag (a warning names their lines)
    instead of being an error.
    """
    path = Path(path)
    source = str(path) if source is None else source
    suffix = _suffix(path)
    if suffix in JSONL_SUFFIXES:
        text = read_text(path, source)
        return parse_token_jsonl(
            text,
            source,
            tokens_field=tokens_field,
            tags_field=tags_field,
            id_field=id_field,
            tag_names=tag_names,
            skip_blank=skip_blank,
        )
    if suffix in CONLL_SUFFIXES:
        text = read_text(path, source)
        return parse_conll(
            text,
            source,
            token_column=token_column,
            tag_column=tag_column,
            id_field=id_field,
            conllu=suffix == ".conllu",
            tag_names=tag_names,
            comments=comments,
            skip_blank=skip_blank,
        )
    known = ", ".join((*CONLL_SUFFIXES, *JSONL_SUFFIXES))
    raise DataError(
        f"cannot tell the token data's format from the suffix {suffix or '(none)'!r}; expected one of "
        f"{known} (optionally .gz)",
        location=source,
    )


def read_text(path: Path, source: str) -> str:
    """The file's text: gunzipped when it starts with the gzip mark, UTF-8, byte order mark dropped."""
    if not path.exists():
        raise DataError(f"file not found: {path}", location=source)
    if path.is_dir():
        raise DataError("expected a file, found a folder", location=source)
    return decode_utf8(read_data_bytes(path, source), source)


def _column(index: int, count: int, name: str, where: str) -> int:
    """``index`` (negative counts from the end) as a position in ``count`` columns, or DataError."""
    position = index + count if index < 0 else index
    if not 0 <= position < count:
        raise DataError(
            f"column {index} does not exist: the line has {count} columns", location=where, field=name
        )
    return position


def _is_comment(line: str, fields: list[str], width: int | None, tabbed: bool, conllu: bool) -> bool:
    """Whether a ``#`` line before a sentence's first token is a comment (see :func:`parse_conll`)."""
    if conllu or _COMMENT_FIELD.match(line):
        return True
    has_tab = "\t" in line
    if width is None or tabbed:
        return not has_tab
    return len(fields) != width


def _numbered(rows: list[tuple[int, list[str]]]) -> bool:
    """Whether the first column numbers the words 1, 2, ... (CoNLL-U and its relatives)."""
    return all(fields[0] == str(k) for k, (_, fields) in enumerate(rows, start=1))


def _sentence_rows(
    text: str, source: str, id_field: str | None, conllu: bool, comments: bool
) -> tuple[list[list[tuple[int, list[str]]]], list[str | None], list[int | None], tuple[int, int] | None]:
    """(sentences as (line, fields) rows, each one's id from a ``id_field`` comment or None, that
    comment's line, (columns, line) of the first token line or None) of CoNLL ``text``: blank lines
    and -DOCSTART- end a sentence, comments are skipped (:func:`_is_comment`), every token line must
    have at least two columns and as many as the first; DataError naming the line otherwise."""
    ids: list[str | None] = []
    id_lines: list[int | None] = []
    sentences: list[list[tuple[int, list[str]]]] = []
    rows: list[tuple[int, list[str]]] = []
    pending: tuple[str, int] | None = None  # (id from a comment, its line)
    width: tuple[int, int] | None = None  # (columns, line of the first token line)
    tabbed = False

    def close() -> None:
        nonlocal rows, pending
        if rows:
            sentences.append(rows)
            ids.append(pending[0] if pending else None)
            id_lines.append(pending[1] if pending else None)
        elif pending is not None:
            raise DataError(
                f"comment {id_field} = {pending[0]!r} names a sentence without tokens",
                location=f"{source}: line {pending[1]}",
                field=id_field,
            )
        rows, pending = [], None

    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            close()
            continue
        where = f"{source}: line {lineno}"
        fields = [f.strip() for f in line.split("\t")] if "\t" in line else line.split()
        if (
            comments
            and line.startswith("#")
            and not rows
            and _is_comment(line, fields, width and width[0], tabbed, conllu)
        ):
            match = _COMMENT_FIELD.match(line)
            if id_field is not None and match and match.group(1) == id_field:
                if not match.group(2):
                    raise DataError("empty sentence id", location=where, field=id_field)
                pending = (match.group(2), lineno)
            continue
        if fields[0] == DOCSTART:
            close()
            continue
        if conllu and _CONLLU_SKIP.match(fields[0]):
            continue
        if len(fields) < 2:
            raise DataError(
                f"expected a token and a tag separated by a tab or spaces, got one column {line.strip()!r}",
                location=where,
            )
        if width is None:
            width, tabbed = (len(fields), lineno), "\t" in line
        elif len(fields) != width[0]:
            raise DataError(
                f"expected {width[0]} columns (as on line {width[1]}), got {len(fields)}: {line.strip()!r}",
                location=where,
            )
        rows.append((lineno, fields))
    close()
    return sentences, ids, id_lines, width


def parse_conll(
    text: str,
    source: str = "<text>",
    *,
    token_column: int | None = None,
    tag_column: int = -1,
    id_field: str | None = None,
    conllu: bool = False,
    tag_names: Sequence[str] | None = None,
    comments: bool = True,
    skip_blank: bool = False,
) -> TaggedSentences:
    """Sentences from text in CoNLL columns (see the module text).

    Every token line must have as many columns as the file's first token line. ``token_column`` None
    takes column 1 when the first column numbers the words of every sentence 1, 2, ... (CoNLL-U, the
    Universal NER files), else column 0. ``conllu`` skips word ranges and empty nodes, and reads every
    ``#`` line before a sentence as a comment. Otherwise a ``#`` line before a sentence's first token
    is a comment unless it has the shape of a token line (a tab in a tab-separated file, as many
    columns in a whitespace-separated one; before the first token line, a tab) and is not
    ``# key = value``, so a hashtag token can open a sentence. ``comments=False``: no line is a comment.
    A token of only spaces is an error naming its line, or with ``skip_blank`` dropped with its tag
    (:func:`blank_warnings`; a sentence left without tokens is dropped, the others keep their ids).
    """
    sentences, ids, id_lines, width = _sentence_rows(text, source, id_field, conllu, comments)
    if not sentences or width is None:
        raise DataError("no sentences; expected at least one token line with a tag", location=source)
    first = f"{source}: line {width[1]}"
    if token_column is None:
        token_column = 1 if conllu or all(_numbered(s) for s in sentences) else 0
    token_at = _column(token_column, width[0], "token", first)
    tag_at = _column(tag_column, width[0], "tag", first)
    if token_at == tag_at:
        raise DataError(
            f"the token column and the tag column are the same (column {token_at})", location=first
        )
    values = [fields[tag_at] for s in sentences for _, fields in s]
    if sum(value in _PLACEHOLDERS for value in values) > len(values) / 2:
        raise DataError(
            f"column {tag_column} holds mostly placeholders ({'/'.join(_PLACEHOLDERS)}), not tags: choose "
            "the tag column (0-based; negative counts from the end)",
            location=first,
            field="tag",
        )
    skipped: list[str] = []
    kept: list[list[tuple[int, list[str]]]] = []
    kept_ids: list[str | None] = []
    kept_id_lines: list[int | None] = []
    for i, s in enumerate(sentences):
        rows = []
        for lineno, fields in s:
            if not fields[token_at]:
                if not skip_blank:
                    raise DataError(
                        f"empty token (nothing or only spaces); expected a non-empty string, {SKIP_HINT}",
                        location=f"{source}: line {lineno}",
                        field="token",
                    )
                skipped.append(f"line {lineno}")
                continue
            if not fields[tag_at]:
                raise DataError(
                    "empty tag; expected a non-empty string", location=f"{source}: line {lineno}", field="tag"
                )
            rows.append((lineno, fields))
        if rows:
            kept.append(rows)
            kept_ids.append(ids[i] if ids[i] is not None else f"{ID_PREFIX}{i}")  # ids of the file's order
            kept_id_lines.append(id_lines[i])
    dropped = len(sentences) - len(kept)
    if not kept:
        raise DataError("no sentences; every token is blank", location=source)
    pairs = [([f[token_at] for _, f in s], [f[tag_at] for _, f in s]) for s in kept]
    word_lines = [[lineno for lineno, _ in s] for s in kept]
    read = _finish(pairs, kept_ids, word_lines, source, id_field, tag_names, kept_id_lines)
    return _with_warnings(read, blank_warnings(skipped, dropped, source))


def parse_token_jsonl(
    text: str,
    source: str = "<text>",
    *,
    tokens_field: str = WORDS,
    tags_field: str = TAGS,
    id_field: str | None = None,
    tag_names: Sequence[str] | None = None,
    skip_blank: bool = False,
) -> TaggedSentences:
    """Sentences from JSON lines, each an object with a token list and an equally long tag list.
    ``skip_blank``: as :func:`parse_conll`'s."""
    names = tuple(tag_names) if tag_names is not None else None
    ids: list[str | None] = []
    sentences: list[tuple[list[str], list[str]]] = []
    word_lines: list[list[int]] = []
    skipped: list[str] = []
    dropped = 0
    for i, (lineno, where, record) in enumerate(json_objects(text, source)):
        words = _string_list(record, tokens_field, "token", where, blank_ok=skip_blank)
        labels = _tag_list(record, tags_field, names, where)
        if len(words) != len(labels):
            raise DataError(
                f"{len(words)} tokens but {len(labels)} tags; expected one tag per token",
                location=where,
                field=tags_field,
            )
        if skip_blank:
            blank = [k for k, w in enumerate(words) if not w.strip()]
            skipped += [f"line {lineno} token {k}" for k in blank]
            words = [w for w in words if w.strip()]
            labels = [t for k, t in enumerate(labels) if k not in set(blank)]
            if not words:
                dropped += 1
                continue
        if id_field is not None:
            value = record.get(id_field)
            if value is None or isinstance(value, (dict, list, bool)) or str(value) == "":
                raise DataError(
                    f"missing id; expected a non-empty string or number, got {value!r}",
                    location=where,
                    field=id_field,
                )
            ids.append(str(value))
        else:
            ids.append(f"{ID_PREFIX}{i}" if skip_blank else None)  # ids of the file's order
        sentences.append((words, labels))
        word_lines.append([lineno] * len(words))
    if not sentences and dropped:
        raise DataError("no sentences; every token is blank", location=source)
    read = _finish(sentences, ids, word_lines, source, id_field, names)
    return _with_warnings(read, blank_warnings(skipped, dropped, source))


def blank_warnings(skipped: Sequence[str], dropped: int, source: str, limit: int = 5) -> list[str]:
    """The warning of tokens of only spaces dropped (``skipped``: where each was), or none."""
    if not skipped:
        return []
    shown = ", ".join(skipped[:limit]) + (", ..." if len(skipped) > limit else "")
    left = f"; {dropped} sentence{'s' if dropped != 1 else ''} left without tokens dropped" if dropped else ""
    return [
        f"{source}: skipped {len(skipped)} blank token{'s' if len(skipped) != 1 else ''} (only spaces) "
        f"with {'their tags' if len(skipped) != 1 else 'its tag'} ({shown}){left}"
    ]


def _with_warnings(read: TaggedSentences, warnings: Sequence[str]) -> TaggedSentences:
    """``read`` with ``warnings`` before its own."""
    if not warnings:
        return read
    return dataclasses.replace(read, warnings=(*warnings, *read.warnings))


def _string_list(record: dict, field: str, what: str, where: str, blank_ok: bool = False) -> list[str]:
    if field not in record:
        raise DataError(
            f"missing; expected a list of {what}s (fields: {sorted(record)})", location=where, field=field
        )
    values = record[field]
    if not isinstance(values, list):
        raise DataError(
            f"expected a list of {what}s, got {type(values).__name__}", location=where, field=field
        )
    if not values:
        raise DataError(f"no {what}s; expected at least one", location=where, field=field)
    for k, value in enumerate(values):
        if not isinstance(value, str):
            raise DataError(
                f"{what} {k} is {type(value).__name__} {value!r}; expected a string",
                location=where,
                field=field,
            )
        if not value.strip() and not blank_ok:
            hint = f", {SKIP_HINT}" if what == "token" else ""
            raise DataError(
                f"empty {what} at position {k}; expected a non-empty string{hint}",
                location=where,
                field=field,
            )
    return values


def _tag_list(record: dict, field: str, names: tuple[str, ...] | None, where: str) -> list[str]:
    if names is None or field not in record or not isinstance(record[field], list):
        return _string_list(record, field, "tag", where)
    out = []
    for k, value in enumerate(record[field]):
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value < len(names):
                raise DataError(
                    f"tag {k} is {value}, outside [0, {len(names)}) for the {len(names)} tag names",
                    location=where,
                    field=field,
                )
            out.append(names[value])
        else:
            out.append(value)
    return _string_list({field: out}, field, "tag", where)


def _finish(
    sentences: list[tuple[list[str], list[str]]],
    ids: list[str | None],
    word_lines: list[list[int]],
    source: str,
    id_field: str | None,
    tag_names: Sequence[str] | None,
    id_lines: Sequence[int | None] | None = None,
) -> TaggedSentences:
    """The checked result: ids filled in and unique, tags inside ``tag_names`` when given.
    ``id_lines``: the line naming each sentence's id (an id comment), else its first word's."""
    if not sentences:
        raise DataError("no sentences; expected at least one token line with a tag", location=source)
    first_lines = [lines[0] for lines in word_lines]
    final_ids = [f"{ID_PREFIX}{i}" if given is None else given for i, given in enumerate(ids)]
    named = [
        first if at is None else at for first, at in zip(first_lines, id_lines or first_lines, strict=True)
    ]
    seen: dict[str, int] = {}
    for sid, line in zip(final_ids, named, strict=True):
        if sid in seen:
            raise DataError(
                f"id {sid!r} repeats the id of line {seen[sid]}; expected unique ids",
                location=f"{source}: line {line}",
                field=id_field or "id",
            )
        seen[sid] = line
    tag_lists = [tags for _, tags in sentences]
    if tag_names is not None:
        allowed = set(tag_names)
        for tags, lines in zip(tag_lists, word_lines, strict=True):
            for k, tag in enumerate(tags):
                if tag not in allowed:
                    raise DataError(
                        f"tag {tag!r} (word {k} of its sentence) is not one of the tag names {list(tag_names)}",
                        location=f"{source}: line {lines[k]}",
                        field="tag",
                    )
        names = tuple(tag_names)
    else:
        names = tag_set(tag_lists)
    frame = pd.DataFrame({"id": final_ids, WORDS: [tokens for tokens, _ in sentences], TAGS: tag_lists})
    return TaggedSentences(
        frame=frame,
        tag_names=names,
        source=source,
        lines=tuple(first_lines),
        warnings=tuple(bio_warnings(tag_lists, final_ids, source=source)),
    )


# ----------------------------------------------------------------------------- tag sets and BIO


def tag_set(tag_lists: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The sorted distinct tags of all sentences."""
    return tuple(sorted({tag for tags in tag_lists for tag in tags}))


def entity_type(tag: str) -> str | None:
    """The entity type a tag marks: ``LOC`` for ``B-LOC`` / ``I-LOC`` (any BIO/BIOES prefix), None for
    ``O`` (outside every entity); any other tag (a part of speech, a stray ``LOC``) is its own type."""
    if tag == OUTSIDE:
        return None
    match = _BIO_TAG.match(tag)
    return match.group(2) if match else tag


def is_bio_tagged(tags: Sequence[str]) -> bool:
    """Whether every tag is ``O`` or ``<prefix>-<type>`` with a BIO/BIOES prefix (B, I, E, S, L, U)."""
    return all(tag == OUTSIDE or _BIO_TAG.match(tag) for tag in tags)


def bio_problems(tags: Sequence[str]) -> list[tuple[int, str]]:
    """(word index, what) for every ``I-X`` that does not continue an entity of type X: at the start,
    after ``O``, or after a tag of another type. Fine in IOB1 (CoNLL-2003's original scheme, where
    ``I-`` opens an entity and ``B-`` only separates two adjacent ones), wrong in IOB2."""
    out = []
    previous = OUTSIDE
    for k, tag in enumerate(tags):
        match = _BIO_TAG.match(tag)
        if match and match.group(1) == "I":
            kind = match.group(2)
            before = _BIO_TAG.match(previous)
            if k == 0:
                out.append((k, f"{tag} starts the sentence"))
            elif before is None or before.group(2) != kind or before.group(1) in ("E", "S", "L", "U"):
                out.append((k, f"{tag} after {previous}"))
        previous = tag
    return out


def bio_warnings(
    tag_lists: Sequence[Sequence[str]], ids: Sequence[str] | None = None, *, source: str = "", limit: int = 3
) -> list[str]:
    """One message counting the sentences with :func:`bio_problems` (naming the first ``limit``), or
    none; none either when the tags are not all BIO-shaped (part-of-speech tags, say)."""
    if not all(is_bio_tagged(tags) for tags in tag_lists):
        return []
    found = []
    for i, tags in enumerate(tag_lists):
        problems = bio_problems(tags)
        if problems:
            name = ids[i] if ids is not None else f"sentence {i}"
            k, what = problems[0]
            found.append(f"{name} word {k}: {what}")
    if not found:
        return []
    prefix = f"{source}: " if source else ""
    shown = "; ".join(found[:limit]) + ("; ..." if len(found) > limit else "")
    return [
        f"{prefix}{len(found)} of {len(tag_lists)} sentences have an I- tag that does not continue an "
        f"entity of its type ({shown}): the tags may be IOB1, where I- opens an entity; convert them with "
        "cartomap.data.conll.to_iob2 for IOB2 (B- opens every entity)"
    ]


def to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 (or broken IOB2) tags as IOB2: an ``I-X`` that does not continue an entity of type X
    becomes ``B-X``; everything else is kept."""
    out = list(tags)
    for k, _ in bio_problems(tags):
        out[k] = "B-" + tags[k][2:]
    return out


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The sentences as JSON-ready dicts (id, tokens, tags), e.g. to write token JSONL."""
    return [
        {"id": sid, WORDS: list(tokens), TAGS: list(tags)}
        for sid, tokens, tags in zip(frame["id"], frame[WORDS], frame[TAGS], strict=True)
    ]


def to_conll(frame: pd.DataFrame, *, id_comments: bool = False) -> str:
    """The sentences in two tab-separated columns (token, tag), a blank line after each sentence;
    with ``id_comments`` each sentence is preceded by ``# sent_id = <id>`` (read back with
    ``id_field="sent_id"``). A token or tag holding a tab or a line break cannot be written."""
    parts = []
    for i, (sid, tokens, tags) in enumerate(zip(frame["id"], frame[WORDS], frame[TAGS], strict=True)):
        for k, value in enumerate([*tokens, *tags]):
            if re.search(r"[\t\r\n]", value) or not value.strip():
                what = "token" if k < len(tokens) else "tag"
                raise DataError(
                    f"{what} {value!r} is empty or holds a tab or line break: it cannot be a CoNLL column",
                    location=f"row {i}",
                    field=what,
                )
        head = f"# sent_id = {sid}\n" if id_comments else ""
        body = "".join(f"{token}\t{tag}\n" for token, tag in zip(tokens, tags, strict=True))
        parts.append(head + body + "\n")
    return "".join(parts)


#: What :func:`write_tagged` writes, by a file's suffix: CoNLL columns or token JSONL.
WRITTEN = {
    **dict.fromkeys((".conll", ".bio", ".iob", ".iob2"), "conll"),
    **dict.fromkeys(JSONL_SUFFIXES, "jsonl"),
}


def tagged_format(path: str | Path) -> str:
    """``conll`` or ``jsonl``, the shape :func:`write_tagged` gives ``path`` by its suffix; DataError for any
    other (``.conllu``'s ten columns and gzip are read, not written)."""
    found = WRITTEN.get(Path(str(path)).suffix.lower())
    if found is None:
        raise DataError(
            f"cannot write tagged sentences to {Path(str(path)).name!r}: name it {', '.join(WRITTEN)}",
            location=str(path),
        )
    return found


def write_tagged(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write sentences (id, tokens, tags as tag names) in the shape of ``path``'s suffix
    (:func:`tagged_format`): CoNLL columns (token, tag) with each sentence's id in a ``# sent_id`` comment
    (:func:`to_conll`; :func:`read_tagged` reads them back, the ids with ``id_field="sent_id"``), or one
    JSON object per sentence (:func:`records`). Atomic."""
    if tagged_format(path) == "conll":
        return atomic_write_text(Path(path), to_conll(frame, id_comments=True))
    lines = [json.dumps(r, ensure_ascii=False) for r in records(frame)]
    return atomic_write_text(Path(path), "\n".join(lines) + "\n")
