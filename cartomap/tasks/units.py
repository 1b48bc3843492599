"""What one row of a run's dynamics is about: a task kind's unit, and everything the library asks of it.

A unit is a :class:`Unit`, a ``str``-valued enum (``Unit.WORD == "word"``, so a kind declared with
``unit="word"`` and any text that says "word" read the same). The other layers never compare a unit with
a name: they ask it what it implies, or name a member (``Unit.WORD``) where a table is keyed by unit
(``tests/test_architecture.py`` checks it), so what a unit means is written once, in :data:`TRAITS`:

========  ==========  ========================  ===========  =========  ==========  ======  ========
unit      key column  unit id                   per_example  sentences  label_sets  shards  group
========  ==========  ========================  ===========  =========  ==========  ======  ========
example   (none)      ``<id>``                  yes          no         no          yes     (itself)
word      ``word``    ``<sentence id>#<k>``     no           yes        no          no      sentence
label     ``label``   ``<example id>#<j>``      no           no         yes         no      example
========  ==========  ========================  ===========  =========  ==========  ======  ========

* ``per_example``: one gold label per example, so an example is the unit of everything the papers do on
  examples with one label each: pruning, curricula, the retrain after review, same-label neighbours,
  metric columns read straight from the examples' ``label`` column.
* ``sentences``: an example is a sentence of words and each word a unit (token classification): the
  tokenizer reads split words and the model's sub-word rows are aligned back to them, sentences get their
  own map, BIO tags get entity-level scores, a review queue holds words whose tags are corrected inside
  their sentences, CoNLL files are read.
* ``label_sets``: an example has a set of labels and each label is a yes/no unit (multi-label): the gold
  is an indicator row per example, class counts are sums of it, subset accuracy is scored, and the map
  has a view per label and one of the examples.
* ``shards``: a run of this unit may train across several processes (per-word and per-label units are
  recorded by one process).
* ``group``: what holds a unit's units, where scores aggregate them into one (``cartomap.scores.aggregate``:
  a sentence of its words, an example of its labels; the units marked present are a label set's).

A fourth unit is a member here, a row of :data:`TRAITS`, and the code of each trait it sets (the readers
of its files, its batching, its maps): the traits name where that code lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Unit(str, Enum):
    """What one row of dynamics is about; ask its traits (:data:`TRAITS`), never compare it with a name."""

    def __str__(self) -> str:  # "word" in messages and f-strings, not "Unit.WORD"
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    EXAMPLE = "example"
    WORD = "word"
    LABEL = "label"

    @property
    def traits(self) -> Traits:
        return TRAITS[self]

    @property
    def keys(self) -> tuple[str, ...]:
        """The key columns of one unit beside the example id: () per example, ("word",), ("label",)."""
        return self.traits.keys

    @property
    def per_example(self) -> bool:
        """One gold label per example: the units are neither a sentence's words nor an example's labels."""
        return not (self.sentences or self.label_sets)

    @property
    def sentences(self) -> bool:
        return self.traits.sentences

    @property
    def label_sets(self) -> bool:
        return self.traits.label_sets

    @property
    def shards(self) -> bool:
        return self.traits.shards

    @property
    def group(self) -> str:
        """What holds a unit's units, for the scores that aggregate them: "sentence" (a word's), "example"
        (a label's); "" for an example, a group of itself."""
        return self.traits.group

    def plural(self, count: int | None = None) -> str:
        """What ``count`` units are called ("1,234 words", "3 (example, label) units"); the plural alone
        without a count."""
        noun = self.traits.noun
        if count is None:
            return f"{noun}s"
        return f"{count:,} {noun}{'' if count == 1 else 's'}"

    def count_note(self, count: int) -> str:
        """ " (1,234 words)" after a number of examples when the units are not examples, else ""."""
        return "" if self.per_example else f" ({self.plural(count)})"

    @property
    def ids_described(self) -> str:
        """The units and the form of their ids, for messages: "examples", "words (<sentence id>#<k>)"."""
        form = self.traits.id_form
        return self.plural() if not form else f"{self.plural()} ({form})"


@dataclass(frozen=True)
class Traits:
    """What a unit implies (the module docstring says what each trait changes, and where); ``per_example``
    is derived: a unit that is neither a word nor a label."""

    keys: tuple[str, ...]
    noun: str
    id_form: str
    sentences: bool
    label_sets: bool
    shards: bool
    group: str


#: Every unit's traits: the one place a unit's meaning is written.
TRAITS: dict[Unit, Traits] = {
    Unit.EXAMPLE: Traits(
        keys=(),
        noun="example",
        id_form="",
        sentences=False,
        label_sets=False,
        shards=True,
        group="",
    ),
    Unit.WORD: Traits(
        keys=("word",),
        noun="word",
        id_form="<sentence id>#<k>",
        sentences=True,
        label_sets=False,
        shards=False,
        group="sentence",
    ),
    Unit.LABEL: Traits(
        keys=("label",),
        noun="(example, label) unit",
        id_form="<example id>#<j>",
        sentences=False,
        label_sets=True,
        shards=False,
        group="example",
    ),
}

#: The units' names, for messages and checks.
UNITS: tuple[str, ...] = tuple(u.value for u in Unit)
