"""Task kinds: the one owner of a task's shape (what an example holds and what the model predicts).

A *task kind* says which columns a loaded dataset has for its inputs and its labels, how rows become
tokenizer inputs, which model head predicts them, what one row of dynamics is about (its *unit*: an
example for sequence classification; a word for token classification; a label for multi-label) and
how logits become per-unit probabilities. Loading, batching, the training loop, the integrations,
the run store, the analyses and the pages ask the kind; no module outside this package (and the
WaNLI pipeline, which is about premise-hypothesis pairs by nature) spells a column name.

* :mod:`.units`: the :class:`~cartomap.tasks.units.Unit` of a kind and its traits, which every layer
  asks instead of comparing units by name;
* :mod:`.base`: the :class:`~cartomap.tasks.base.TaskKind` description and the output functions;
* :mod:`.sequence`: the built-in sequence-classification kinds, ``single`` (one text) and ``pair``;
* :mod:`.token`: token classification, ``token`` (a tag per word);
* :mod:`.multilabel`: multi-label classification, ``multilabel`` (a set of labels per text);
* :mod:`.registry`: the kinds by name, and which kind a config or a loaded frame has.

Not to be confused with :mod:`cartomap.runs.tasks`, the background jobs run on a finished run.
"""
