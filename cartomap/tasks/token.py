"""The token-classification kind: a sentence of words, one tag per word (named entities, parts of speech).

An example is a sentence: its words in ``tokens`` (a list of strings) and a tag per word in ``tags``
(codes into the tag names, as a sequence kind's label). The model is a token classifier (one row of
logits per sub-word); the dynamics are kept per word, at the word's first sub-word, as units keyed by
(sentence id, word index). Files in CoNLL columns (``.conll``, ``.conllu``, ``.bio``, ``.iob``,
``.iob2``) are of this kind by their suffix; JSONL of token and tag lists needs ``--task token``.
"""

from __future__ import annotations

from cartomap.tasks.base import TaskKind
from cartomap.tasks.units import Unit

TOKEN = TaskKind(
    name="token",
    description="a sentence of words, one tag per word (named entities: CoNLL files), dynamics per word",
    text_fields=("tokens",),
    noun="sentence",
    label_field="tags",
    unit=Unit.WORD,
    head="token",
    source_columns=(("words",),),
    suffixes=(".conll", ".conllu", ".bio", ".iob", ".iob2"),
    # "O" holds most words (83 % of WikiGold's): a rank among all words calls every entity word ambiguous
    region_method="threshold",
    reader="tagged",  # how its files are read and checked (cartomap.data.loading.READERS)
)
