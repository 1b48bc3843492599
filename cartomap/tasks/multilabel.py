"""The multi-label kind: one text per example and any number of labels from a label space (none allowed).

An example is a text (``text``) and its set of labels (``labels``: the list of the label names that apply,
in label-space order). The model has one sigmoid output per label (a sequence-classification head, binary
cross-entropy per label); the dynamics are kept per (example, label), each label of each example a unit
keyed by (example id, label index): unit id ``"<id>#<j>"``. A unit's recorded row is the two-class logits
``(0, z)`` of its label's logit z (softmax((0, z))[1] = sigmoid(z)), gold class 1 when the label applies,
so the per-unit metrics are those of any other kind. Files need ``--task multilabel``: JSON Lines or a
table with a labels column of name lists (``--label-separator`` for delimited strings in a CSV cell), or
one 0/1 column per label (``--label-columns``); :mod:`cartomap.data.multilabel` reads them.
"""

from __future__ import annotations

from cartomap.tasks.base import TaskKind
from cartomap.tasks.units import Unit

MULTILABEL = TaskKind(
    name="multilabel",
    description="one text per example, any number of labels (each a yes/no question), dynamics per (example, label)",
    text_fields=("text",),
    noun="text",
    label_field="labels",
    unit=Unit.LABEL,
    head="sequence",
    output="sigmoid",
    source_columns=(("sentence",), ("review",), ("content",)),
    reader="label_sets",  # how its files are read and checked (cartomap.data.loading.READERS)
)
