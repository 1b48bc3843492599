"""Reviewing suspected label errors: queues of suspects, decisions by several annotators, the
corrected training set.

* :mod:`.sources`: the examples to review, from a detector's top k, a saved group or selection, or a
  pruning experiment's suspects (ids, scores, who queued them);
* :mod:`.levels`: what a token run's item is: a word, a sentence (its words' scores aggregated) or an
  entity span (gold or predicted, by its worst word), and those items' cards;
* :mod:`.tags`: a sentence's tags edited in one decision, kept valid in the file's IOB1/IOB2 scheme
  (repaired, or refused naming the word);
* :mod:`.queue`: a queue in the run folder (``review/<queue>/``): each item's card (texts, gold,
  prediction, p(gold) over epochs, votes, neighbours);
* :mod:`.store`: the queue's SQLite store of decisions (keep / relabel / remove / unsure per annotator,
  append-only, every click committed), the assignment of k annotators per item and progress;
* :mod:`.aggregate`: the final decision per item and the annotators' agreement;
* :mod:`.corrected`: the corrected training set and the decisions file (``run:RUN:corrected/<queue>``);
* :mod:`.exchange`: the queue to Label Studio / Argilla files and their decisions back.
"""
