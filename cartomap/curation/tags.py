"""A sentence's tags edited in one decision, kept valid in the file's BIO scheme.

A token run's tags are kept as its file wrote them (:mod:`cartomap.data.conll`), in one of two schemes:

* ``IOB2``: ``B-X`` opens every entity of type X, ``I-X`` continues one: an ``I-X`` must follow ``B-X``
  or ``I-X``;
* ``IOB1`` (CoNLL-2003's original scheme, the bundled WikiGold demo): ``I-X`` opens an entity and
  continues it, ``B-X`` only separates two adjacent entities of one type: a ``B-X`` must follow
  ``B-X`` or ``I-X``.

:func:`scheme_of` tells the scheme from a run's gold tags (None: tags that are not all ``O`` and
``B-``/``I-`` ones, part-of-speech tags say, which have no scheme to keep). :func:`problems` lists
what breaks it, :func:`check_tags` refuses a tag list in one line naming the first ("word 4 ``I-PER``
would follow ``O``: an entity must start with B-"), and :func:`edit_tags` applies a reviewer's changes
to several words at once, repairing what they would break (or refusing, without ``repair``):

* a word moved from one entity type to another with its prefix kept (``B-PER`` to ``B-LOC``) takes its
  whole entity with it (the words of that entity the reviewer did not change themselves get the new
  type); a changed prefix (``I-PER`` to ``B-LOC``) splits the entity instead;
* then every tag that would break the scheme is made to fit: in IOB2 an ``I-X`` that no longer
  continues an entity becomes ``B-X`` (a word set to ``O`` inside an entity: the next word opens
  the rest), in IOB1 a ``B-X`` that no longer follows an entity of type X becomes ``I-X``.

A tag list travels as one value (the decision's ``label``): the tags joined by single spaces
(:func:`encode_tags`), so that two reviewers who fixed a sentence alike agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cartomap.data.conll import OUTSIDE, is_bio_tagged
from cartomap.errors import CartomapError

#: The schemes whose validity the editor keeps.
SCHEMES = ("IOB1", "IOB2")
_TAG = re.compile(r"^([BI])-(.+)$")
#: What an entity must start with, by scheme (the prefix, and the other prefix that continues it).
_OPENS = {"IOB2": "B", "IOB1": "I"}
_SEPARATOR = " "


def _parts(tag: str) -> tuple[str | None, str | None]:
    """(prefix B or I, entity type) of a tag; (None, None) for ``O`` or any other tag."""
    match = _TAG.match(tag)
    return (match.group(1), match.group(2)) if match else (None, None)


def scheme_of(tag_lists: Sequence[Sequence[str]]) -> str | None:
    """``IOB1`` or ``IOB2``, whichever opens more of the entities of ``tag_lists`` (an entity opens at a
    tag that does not continue one of its type: ``B-X`` in IOB2, ``I-X`` in IOB1; IOB2 on a tie, e.g. no
    entity at all); None when a tag is neither ``O`` nor ``B-``/``I-`` (IOBES, part of speech)."""
    if not all(
        is_bio_tagged(tags) and all(t == OUTSIDE or _TAG.match(t) for t in tags) for tags in tag_lists
    ):
        return None
    opened = {"B": 0, "I": 0}
    for tags in tag_lists:
        before = None
        for tag in tags:
            prefix, kind = _parts(tag)
            if prefix is not None and (prefix == "B" or kind != before):
                opened[prefix] += 1
            before = kind
    return "IOB1" if opened["I"] > opened["B"] else "IOB2"


def problems(tags: Sequence[str], scheme: str | None) -> list[tuple[int, str]]:
    """(word index, what) for every tag that breaks ``scheme`` (none when ``scheme`` is None): in IOB2 an
    ``I-X`` not after ``B-X`` / ``I-X``, in IOB1 a ``B-X`` not after ``B-X`` / ``I-X``."""
    if scheme is None:
        return []
    if scheme not in SCHEMES:
        raise CartomapError(f"unknown tagging scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
    closes = "I" if scheme == "IOB2" else "B"  # the prefix that may only continue an entity
    out = []
    previous = None
    for k, tag in enumerate(tags):
        prefix, kind = _parts(tag)
        if prefix == closes and (previous is None or _parts(previous)[1] != kind):
            after = "start the sentence" if previous is None else f"follow `{previous}`"
            rule = (
                "an entity must start with B-"
                if scheme == "IOB2"
                else "in IOB1 an entity starts with I-, and B- only separates two adjacent entities of one type"
            )
            out.append((k, f"word {k} `{tag}` would {after}: {rule}"))
        previous = tag
    return out


def check_tags(tags: Sequence[str], scheme: str | None, names: Sequence[str] | None = None) -> list[str]:
    """``tags`` as a list when every one is a tag of ``names`` (when given) and they keep ``scheme``;
    CartomapError naming the first word that does not."""
    tags = [str(t) for t in tags]
    if names is not None:
        known = set(names)
        for k, tag in enumerate(tags):
            if tag not in known:
                raise CartomapError(
                    f"word {k} `{tag}` is not a tag of this run: expected one of {', '.join(names)}"
                )
    found = problems(tags, scheme)
    if found:
        raise CartomapError(f"{found[0][1]} ({scheme}, the tagging scheme of this run's file)")
    return tags


def entity_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """The entities of ``tags`` as (first word, last word, type), in order, read as ``conlleval`` reads
    IOB1 and IOB2 alike (seqeval's ``get_entities``)."""
    from seqeval.metrics.sequence_labeling import get_entities

    return [(int(start), int(end), str(kind)) for kind, start, end in get_entities([str(t) for t in tags])]


def _span_of(tags: Sequence[str], k: int) -> tuple[int, int] | None:
    """(first, last) word of the entity holding word ``k``, or None when it is outside every entity."""
    return next(((s, e) for s, e, _ in entity_spans(tags) if s <= k <= e), None)


def _retyped(tags: list[str], changes: Mapping[int, str]) -> list[str]:
    """``tags`` with ``changes`` applied, and every entity one of whose words changed type (entity to
    entity) moved to that type as a whole, but for the words the changes name themselves."""
    out = list(tags)
    for k, new in sorted(changes.items()):
        out[k] = new
    for k, new in sorted(changes.items()):
        (old_prefix, old_kind), (new_prefix, new_kind) = _parts(tags[k]), _parts(new)
        if old_kind is None or old_kind == new_kind or old_prefix != new_prefix:
            continue  # not a retype: a word into or out of an entity, or one that opens or splits one
        first, last = _span_of(tags, k) or (k, k)
        for j in range(first, last + 1):
            prefix, kind = _parts(tags[j])
            if j not in changes and kind == old_kind:
                out[j] = f"{prefix}-{new_kind}"
    return out


def _fitted(tags: list[str], scheme: str | None) -> list[str]:
    """``tags`` made to keep ``scheme``: each tag of :func:`problems` given the prefix that opens an
    entity in IOB2 (``B-``) or continues one in IOB1 (``I-``), from the left."""
    out = list(tags)
    while True:
        found = problems(out, scheme)
        if not found:
            return out
        k = found[0][0]
        out[k] = f"{_OPENS[scheme]}-{_parts(out[k])[1]}"


def edit_tags(
    tags: Sequence[str],
    changes: Mapping[int, str],
    scheme: str | None,
    *,
    repair: bool = True,
    names: Sequence[str] | None = None,
) -> list[str]:
    """A sentence's ``tags`` with a reviewer's ``changes`` ({word index: new tag}) applied in one
    decision. With ``repair`` (the module text) a retyped word takes its entity along and the tags are
    made to keep ``scheme``; without it the changes are applied as they are and refused (CartomapError
    naming the first word, e.g. "word 4 `I-PER` would follow `O`: an entity must start with B-") when
    they break it. ``names``: the run's tags, the only ones a change may set."""
    tags = [str(t) for t in tags]
    changes = {int(k): str(v) for k, v in changes.items()}
    for k in changes:
        if not 0 <= k < len(tags):
            raise CartomapError(f"word {k} is outside the sentence's {len(tags)} words")
    if names is not None:
        check_tags(list(changes.values()), None, names)
    if not repair:
        return check_tags([changes.get(k, t) for k, t in enumerate(tags)], scheme)
    return check_tags(_fitted(_retyped(tags, changes), scheme), scheme)


def encode_tags(tags: Sequence[str]) -> str:
    """A tag list as one value: the tags joined by single spaces; CartomapError for a tag holding a space
    (it could not be read back)."""
    tags = [str(t) for t in tags]
    for k, tag in enumerate(tags):
        if not tag or tag != "".join(tag.split()):
            raise CartomapError(
                f"word {k}'s tag {tag!r} is empty or holds a space: it cannot be reviewed by sentence"
            )
    return _SEPARATOR.join(tags)


def decode_tags(value: str) -> list[str]:
    """The tag list of a value :func:`encode_tags` wrote (any run of spaces separates two tags)."""
    return str(value).split()
