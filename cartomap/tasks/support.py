"""What each piece of work needs of a task kind, declared once: the rows of the command × kind matrix.

A piece of work (pruning, a curriculum, premise-hypothesis similarity, WaNLI generation, ...) either
serves a kind or refuses it in one line that names the kind and what the work would need. The need is a
predicate on the kind's declaration (its unit's traits, its number of texts), never a list of kind names,
so a kind registered later (a plug-in) is served or refused by what it is. The command line and the pages
declare which work each command and page does (``cartomap.cli.matrix``); the code that does the work asks
:func:`require` of the same :class:`Work`, and the conformance test (``tests/test_command_matrix.py``) runs
every command on a run of every kind and checks that what it does is what is declared here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cartomap.errors import DataError
from cartomap.tasks.base import TaskKind
from cartomap.tasks.sequence import PAIR


@dataclass(frozen=True)
class Need:
    """What a piece of work needs of a kind: ``says`` completes "works on ...", ``serves`` tests a kind."""

    name: str
    says: str
    serves: Callable[[TaskKind], bool]


#: Every kind: the work reads the run's units whatever they are (a map, an export, tags, ...).
ANY = Need("any", "any task kind", lambda kind: True)
#: One gold label per example (the unit is the example): folds by example, orders of examples, a
#: training set pruned or corrected example by example.
PER_EXAMPLE = Need("per-example", "examples with one label each", lambda kind: kind.unit.per_example)
#: At least two texts per example with one label: the similarity of the first two (a premise and a
#: hypothesis, a claim and its evidence).
TEXT_PAIRS = Need(
    "text-pairs",
    "examples of two texts with one label each",
    lambda kind: kind.unit.per_example and len(kind.text_fields) >= 2,
)
#: Premise-hypothesis pairs with one label (the ``pair`` kind's fields): WaNLI's few-shot prompts, the
#: pairs a language model writes from them, their filter and review.
NLI_PAIRS = Need(
    "nli-pairs",
    f"{'-'.join(PAIR.text_fields)} pairs with one label each",
    lambda kind: kind.unit.per_example and kind.text_fields == PAIR.text_fields,
)
#: One label per example, or sentences of tagged words: out-of-fold probabilities by k folds (pruning's
#: consensus on examples; on token data the folds of its sentences, for cleanlab's token detectors).
FOLDABLE = Need(
    "foldable",
    "examples with one label each, or sentences of tagged words (k folds of sentences)",
    lambda kind: kind.unit.per_example or kind.unit.sentences,
)
#: Sentences of tagged words (token classification): what is about a word's tag in its sentence.
TAGGED_WORDS = Need("tagged-words", "sentences of tagged words", lambda kind: kind.unit.sentences)


@dataclass(frozen=True)
class Work:
    """A piece of work as a user names it (``what``: "pruning suspected label errors") and its need."""

    what: str
    need: Need

    def refusal(self, kind: TaskKind) -> str:
        """ "" when the work serves ``kind``; else the one line that says why not."""
        if self.need.serves(kind):
            return ""
        return f"{self.what} works on {self.need.says}; this is {kind.name} data ({kind.description})"

    def require(self, kind: TaskKind, location: str | None = None) -> None:
        """A DataError (field ``task``) with :meth:`refusal` when the work does not serve ``kind``."""
        if reason := self.refusal(kind):
            raise DataError(reason, location=location, field="task")


#: The work each command and page does, as its code asks it (a refusal spelled once).
ANYTHING = Work("this", ANY)
PRUNING = Work("pruning suspected label errors", PER_EXAMPLE)
#: What `cartomap prune` and the Prune labels page do: pruning of examples, or a token run's k folds.
OUT_OF_FOLD = Work(
    "out-of-fold probabilities by k folds (pruning, or a token run's folds of sentences)", FOLDABLE
)
CURRICULUM = Work("a curriculum of training orders", PER_EXAMPLE)
COMBINATION = Work("a dataset combination (its table: the accuracy on each test set)", PER_EXAMPLE)
CORRECTION = Work("retraining after a review (original, pruned and corrected sets)", PER_EXAMPLE)
REFERENCE_IMPORT = Work("importing reference dynamics (one row of logits per example)", PER_EXAMPLE)
CHECKPOINT_SCORING = Work("scoring checkpoints (one row of logits per example)", PER_EXAMPLE)
NOISE_BENCHMARK = Work("the label-noise benchmark (planted label flips)", PER_EXAMPLE)
ARTIFACTS = Work("artifact analysis (lexical correlations, partial-input baselines)", PER_EXAMPLE)
SWAPS = Work("recurring tag swaps (a word's gold tag predicted as another)", TAGGED_WORDS)
SIMILARITY = Work("the similarity of an example's two texts", TEXT_PAIRS)
GROUPS = Work("WaNLI's automatic groups (a seed and its nearest neighbours of its label)", PER_EXAMPLE)
WANLI = Work("WaNLI generation (few-shot prompts, generated pairs, their filter and review)", NLI_PAIRS)
