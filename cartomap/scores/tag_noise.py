"""Entity-level label noise for token classification: plant realistic annotation errors in IOB2 tags.

A token-classification annotator rarely mistypes one word; they get an entity wrong. Four kinds of error,
each applied to a distinct gold entity (or, for a spurious one, to words outside every entity), so that
the tags stay valid IOB2 (every ``I-X`` follows ``B-X`` or ``I-X``):

* ``type``: the entity's type swapped for another type (``B-PER I-PER`` -> ``B-ORG I-ORG``);
* ``boundary``: the span shifted by one word: grown into an ``O`` neighbour (left or right), or shrunk by
  its last word when it has no ``O`` neighbour and two or more words;
* ``drop``: the entity removed (every word ``O``);
* ``spurious``: a new one-word entity of a random type on an ``O`` word whose neighbours are ``O`` too
  (capitalised words first: those an annotator tags by mistake).

The entities are read with seqeval (:func:`seqeval.metrics.sequence_labeling.get_entities`). Pure: tag
codes and tag names in, the noisy codes and the masks of what changed out (:func:`plant_entity_noise`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cartomap.errors import DataError

TYPE_SWAP, BOUNDARY, DROP, SPURIOUS = "type", "boundary", "drop", "spurious"
NOISE_KINDS: tuple[str, ...] = (TYPE_SWAP, BOUNDARY, DROP, SPURIOUS)
OUTSIDE = "O"


@dataclass(frozen=True)
class TagScheme:
    """The codes of an IOB2 tag set: ``O``, and ``B-X`` / ``I-X`` of every entity type X that has both."""

    outside: int
    begin: dict[str, int]
    inside: dict[str, int]

    @classmethod
    def of(cls, names: Sequence[str]) -> TagScheme:
        """DataError when ``names`` has no ``O`` or fewer than two entity types with both ``B-`` and ``I-``."""
        names = list(names)
        if OUTSIDE not in names:
            raise DataError(f"the tag names have no {OUTSIDE!r}: expected IOB2 tags", field="tags")
        begin = {n[2:]: i for i, n in enumerate(names) if n.startswith("B-")}
        inside = {n[2:]: i for i, n in enumerate(names) if n.startswith("I-")}
        types = sorted(set(begin) & set(inside))
        if len(types) < 2:
            raise DataError("entity noise needs two or more entity types with B- and I- tags", field="tags")
        return cls(names.index(OUTSIDE), {t: begin[t] for t in types}, {t: inside[t] for t in types})

    @property
    def types(self) -> list[str]:
        return sorted(self.begin)

    def span(self, etype: str, length: int) -> list[int]:
        """The codes of an entity of ``etype`` over ``length`` words: B-X then I-X."""
        return [self.begin[etype]] + [self.inside[etype]] * (length - 1)


def entities(codes: Sequence[int], names: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one sentence as (type, first word, last word), by seqeval's reading of IOB tags."""
    from seqeval.metrics.sequence_labeling import get_entities

    return [(t, int(s), int(e)) for t, s, e in get_entities([names[int(c)] for c in codes])]


def is_valid_iob2(codes: Sequence[int], names: Sequence[str]) -> bool:
    """True when every ``I-X`` of the sentence follows a ``B-X`` or ``I-X`` (strict IOB2)."""
    previous = OUTSIDE
    for c in codes:
        name = names[int(c)]
        if name.startswith("I-") and previous[2:] != name[2:]:
            return False
        previous = name
    return True


def _type_swap(tags: np.ndarray, ent: tuple[str, int, int], scheme: TagScheme, rng) -> bool:
    etype, start, end = ent
    if etype not in scheme.begin:
        return False
    other = str(rng.choice([t for t in scheme.types if t != etype]))
    tags[start : end + 1] = scheme.span(other, end - start + 1)
    return True


def _boundary(tags: np.ndarray, ent: tuple[str, int, int], scheme: TagScheme, rng) -> bool:
    """Grow into an O neighbour (left or right at random), else shrink by the last word."""
    etype, start, end = ent
    if etype not in scheme.begin:
        return False
    sides = [s for s in ("left", "right") if _free(tags, start - 1 if s == "left" else end + 1, scheme)]
    if sides:
        if str(rng.choice(sides)) == "left":
            start -= 1
        else:
            end += 1
    elif end > start:
        tags[end] = scheme.outside
        end -= 1
    else:
        return False
    tags[start : end + 1] = scheme.span(etype, end - start + 1)
    return True


def _free(tags: np.ndarray, k: int, scheme: TagScheme) -> bool:
    """Word ``k`` exists, is O, and is not followed by an I- tag (which taking it would re-attach)."""
    if not 0 <= k < len(tags) or tags[k] != scheme.outside:
        return False
    return not (k + 1 < len(tags) and int(tags[k + 1]) in scheme.inside.values())


def _drop(tags: np.ndarray, ent: tuple[str, int, int], scheme: TagScheme, rng) -> bool:
    _, start, end = ent
    tags[start : end + 1] = scheme.outside
    return True


_CORRUPT = {TYPE_SWAP: _type_swap, BOUNDARY: _boundary, DROP: _drop}


def _spurious_slots(tags: list[np.ndarray], words, scheme: TagScheme, used: set[int]) -> list[tuple]:
    """(capitalised first, sentence, word) of the O words with O neighbours in sentences not yet corrupted."""
    slots = []
    for s, t in enumerate(tags):
        if s in used:
            continue
        for k in range(len(t)):
            if all(not 0 <= j < len(t) or t[j] == scheme.outside for j in (k - 1, k, k + 1)):
                text = str(words[s][k]) if words is not None else ""
                slots.append((not text[:1].isupper(), s, k))
    return slots


@dataclass(frozen=True)
class PlantedNoise:
    """Noisy tags of every sentence, and what changed: per word (flat, sentence after sentence) and per
    sentence, with the kind of error planted in each corrupted sentence ("" where none)."""

    tags: list[np.ndarray]
    word_changed: np.ndarray  # bool [M]: the word's tag differs from the clean one
    sentence_changed: np.ndarray  # bool [S]
    kind: list[str]  # [S]

    def counts(self) -> dict[str, int]:
        return {k: self.kind.count(k) for k in NOISE_KINDS}


def plant_entity_noise(
    tags: Sequence[Sequence[int]],
    names: Sequence[str],
    rate: float = 0.05,
    kinds: Sequence[str] = NOISE_KINDS,
    seed: int = 0,
    words: Sequence[Sequence[str]] | None = None,
) -> PlantedNoise:
    """Corrupt round(``rate`` x the number of gold entities) entities, one error each, in at most one error
    per sentence (so a sentence's corruption is one known kind), the kinds of ``kinds`` in turn.

    Drawn by ``np.random.default_rng(seed)``: the entities in random order; an error that does not apply
    (a one-word entity with no O neighbour cannot shift) moves on to the next entity. A spurious entity
    goes on an O word with O neighbours, capitalised words (``words``) first. DataError for an unknown
    kind or a rate outside [0, 1]."""
    unknown = [k for k in kinds if k not in NOISE_KINDS]
    if unknown or not kinds:
        raise DataError(
            f"unknown noise kind(s) {unknown}; expected of {', '.join(NOISE_KINDS)}", field="kinds"
        )
    if not 0.0 <= float(rate) <= 1.0:
        raise DataError(f"rate must be in [0, 1], got {rate!r}", field="rate")
    scheme = TagScheme.of(names)
    clean = [np.asarray(t, dtype=np.int64) for t in tags]
    noisy = [t.copy() for t in clean]
    found = [(s, e) for s, t in enumerate(clean) for e in entities(t, names)]
    n_target = int(round(float(rate) * len(found)))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(found))
    kind_of = [""] * len(clean)
    used: set[int] = set()
    want = [kinds[i % len(kinds)] for i in range(n_target)]
    pending = [k for k in want if k != SPURIOUS]
    cursor = 0
    for kind in pending:
        while cursor < len(order):
            s, ent = found[order[cursor]]
            cursor += 1
            if s not in used and _CORRUPT[kind](noisy[s], ent, scheme, rng):
                used.add(s)
                kind_of[s] = kind
                break
    n_spurious = want.count(SPURIOUS)
    if n_spurious:
        slots = sorted(_spurious_slots(noisy, words, scheme, used), key=lambda x: x[0])
        shuffled = [slots[i] for i in rng.permutation(len(slots))]
        shuffled.sort(key=lambda x: x[0])  # capitalised first, random among equals
        for _, s, k in shuffled:
            if n_spurious == 0:
                break
            if s in used:
                continue
            noisy[s][k] = scheme.begin[str(rng.choice(scheme.types))]
            used.add(s)
            kind_of[s] = SPURIOUS
            n_spurious -= 1
    changed = [n != c for n, c in zip(noisy, clean, strict=True)]
    word_changed = np.concatenate(changed) if changed else np.zeros(0, dtype=bool)
    return PlantedNoise(noisy, word_changed, np.array([c.any() for c in changed], dtype=bool), kind_of)
