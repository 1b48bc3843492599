"""WaNLI Stage 2 prompts: the instruction, the separator word of each label, and the completion parser.

The prompt of Liu et al. (2022), Figure 2, the same instruction for every label::

    Write a pair of sentences that have the same relationship as the previous examples. Examples:

    1. {premise}
    {Word}: {hypothesis}

    ...
    5. {premise of the seed}
    {Word}: {hypothesis of the seed}

    6.

Word is "Implication" (entailment), "Possibility" (neutral) or "Contradiction" (contradiction);
the examples come by increasing similarity to the seed, the seed last, and the prompt ends with
the bare next number (no trailing space or newline). A completion is cut at its first blank line
and split on ``"\\n{Word}: "``; anything that does not give exactly two parts is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cartomap.errors import CartomapError

DEFAULT_INSTRUCTION = (
    "Write a pair of sentences that have the same relationship as the previous examples. Examples:"
)
DEFAULT_LABEL_WORDS: dict[str, str] = {
    "entailment": "Implication",
    "neutral": "Possibility",
    "contradiction": "Contradiction",
}
STOP = "\n\n"  # a blank line ends a generated example

_LINE_BREAKS = re.compile(r"[ \t]*[\r\n]+[ \t]*")


@dataclass(frozen=True)
class PromptTemplate:
    """How a group of examples becomes a prompt. Saved with every generation batch."""

    # the first line of every prompt; WaNLI uses the same instruction for every label
    instruction: str = DEFAULT_INSTRUCTION
    # label name -> the word between premise and hypothesis (WaNLI: Implication / Possibility / Contradiction)
    label_words: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_LABEL_WORDS))

    def __post_init__(self) -> None:
        words = {str(k): str(v).strip() for k, v in dict(self.label_words).items()}
        for label, word in words.items():
            if not word:
                raise CartomapError(f"the separator word of label {label!r} is empty")
            if "\n" in word or "\r" in word:
                raise CartomapError(f"the separator word of label {label!r} must fit on one line")
        object.__setattr__(self, "label_words", words)
        object.__setattr__(self, "instruction", str(self.instruction).strip())

    def word(self, label: str) -> str:
        """The separator word of ``label``; a clear error when the template has none."""
        try:
            return self.label_words[label]
        except KeyError:
            raise CartomapError(
                f"no separator word for label {label!r}: give one (known: "
                f"{', '.join(self.label_words) or 'none'})"
            ) from None

    def check_labels(self, labels: Iterable[str]) -> None:
        missing = [str(label) for label in labels if str(label) not in self.label_words]
        if missing:
            raise CartomapError(_missing_message(missing))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"label_words": dict(self.label_words)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptTemplate:
        return cls(
            instruction=data.get("instruction", DEFAULT_INSTRUCTION),
            label_words=dict(data.get("label_words", DEFAULT_LABEL_WORDS)),
        )


def _missing_message(missing: Sequence[str]) -> str:
    return (
        f"no separator word for label{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)}: "
        "WaNLI's words cover entailment (Implication), neutral (Possibility) and contradiction "
        "(Contradiction); give a word for each other label (e.g. --label-word LABEL=Word)"
    )


def label_words_for(label_names: Sequence[str], custom: Mapping[str, str] | None = None) -> dict[str, str]:
    """The separator word of every label: ``custom`` first, then WaNLI's words (matched case-insensitively).

    Raises CartomapError naming the labels left without a word (e.g. RoNLI's contrastive and
    reasoning classes).
    """
    custom = {str(k): str(v).strip() for k, v in (custom or {}).items() if str(v).strip()}
    words: dict[str, str] = {}
    missing: list[str] = []
    for label in label_names:
        label = str(label)
        word = custom.get(label) or DEFAULT_LABEL_WORDS.get(label.strip().lower())
        if word:
            words[label] = word
        else:
            missing.append(label)
    if missing:
        raise CartomapError(_missing_message(missing))
    return words


def one_line(text: str) -> str:
    """``text`` with its line breaks turned into single spaces (a break would change the prompt's format)."""
    return _LINE_BREAKS.sub(" ", str(text)).strip()


def build_prompt(
    examples: Sequence[tuple[str, str]], label: str, template: PromptTemplate | None = None
) -> str:
    """The WaNLI prompt for ``examples`` (premise, hypothesis), in order (the seed last), all of ``label``.

    ``instruction + "\\n\\n" + "1. {premise}\\n{Word}: {hypothesis}\\n\\n" ... + "{N+1}."`` with
    no trailing space or newline. Line breaks inside a text become spaces. An empty instruction
    leaves out the instruction line and the blank line after it.
    """
    template = template or PromptTemplate()
    if not examples:
        raise CartomapError("a prompt needs at least one example")
    word = template.word(label)
    parts = [template.instruction + "\n\n"] if template.instruction else []
    for number, (premise, hypothesis) in enumerate(examples, start=1):
        parts.append(f"{number}. {one_line(premise)}\n{word}: {one_line(hypothesis)}\n\n")
    parts.append(f"{len(examples) + 1}.")
    return "".join(parts)


def encode(tokenizer, texts: str | list[str], **kwargs):
    """Tokenise as the local generator does (the tokenizer's own special tokens)."""
    return tokenizer(texts, add_special_tokens=True, **kwargs)


def count_tokens(prompt: str, tokenizer) -> int:
    """Tokens of ``prompt`` as fed to the generator by :class:`cartomap.wanli.generators.LocalLM`."""
    return len(encode(tokenizer, prompt)["input_ids"])


def cut_at_stop(text: str, stop: str = STOP) -> str:
    """``text`` up to (not including) the first ``stop``."""
    return text.split(stop, 1)[0] if stop else text


def parse_completion(text: str, word: str) -> tuple[str, str] | None:
    """(premise, hypothesis) from a completion of a prompt ending in ``"N."``; None when malformed.

    The completion is cut at its first blank line and split on ``"\\n{word}: "``: exactly two
    parts, else None (WaNLI's rule). Both parts are stripped; they may be empty (the filters
    of Stage 3 drop short texts).
    """
    if not text:
        return None
    parts = cut_at_stop(text, STOP).split(f"\n{word}: ")
    if len(parts) != 2:
        return None
    return parts[0].strip(), parts[1].strip()
