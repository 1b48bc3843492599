"""The sequence-classification kinds: one label per example, one row of logits per example.

``pair``: two texts read together (NLI's premise and hypothesis), the default of every config and
the bundled demo. ``single``: one text (sentiment, topic). Both predict with a sequence-classification
head and a softmax over the classes.
"""

from __future__ import annotations

from cartomap.tasks.base import TaskKind

PAIR = TaskKind(
    name="pair",
    description="two texts per example (premise and hypothesis: NLI), one label",
    text_fields=("premise", "hypothesis"),
    noun="pair",
    source_columns=(("sentence1", "sentence2"), ("question", "sentence")),
)

SINGLE = TaskKind(
    name="single",
    description="one text per example (sentiment, topic), one label",
    text_fields=("text",),
    noun="text",
    source_columns=(("sentence",), ("review",), ("content",)),
)
