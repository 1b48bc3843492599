"""Warnings about data that loads but looks wrong: a class far smaller than the others (a typo such
as "maybe" among entailment / neutral / contradiction makes a class of one), a class without
training examples, and dev or test sets whose classes differ from training's.

Pure functions returning messages for the user. Training goes on: a run keeps its warnings
(``Run.warnings``) and the command line and the Train page show them. To refuse unknown labels
instead, give the class names (``--label-names`` / ``DataConfig.label_names``).
"""

from __future__ import annotations

#: A class with fewer examples than this fraction of the largest class gets a warning.
SMALL_CLASS_FRACTION = 0.01


def class_counts(dataset) -> dict[str, int]:
    """{class name: number of examples}, every class of ``dataset.label_names`` (zero included)."""
    # examples (or words) per class; multi-label: the examples each label applies to
    counts = dataset.task_kind.class_counts(dataset.labels, len(dataset), len(dataset.label_names))
    return {name: int(n) for name, n in zip(dataset.label_names, counts, strict=True)}


def small_class_warnings(
    dataset, what: str = "training set", fraction: float = SMALL_CLASS_FRACTION
) -> list[str]:
    """A class with no example, or with fewer than ``fraction`` x the largest class's examples."""
    counts = class_counts(dataset)
    largest_name, largest = max(counts.items(), key=lambda item: item[1])
    out = []
    for name, n in counts.items():
        if n == 0:
            out.append(f"{dataset.source}: the {what} has no example of class {name!r} (of {list(counts)})")
        elif n < fraction * largest:
            out.append(
                f"{dataset.source}: class {name!r} has {n} example{'s' if n != 1 else ''} in the {what} against "
                f"{largest:,} of {largest_name!r} (under {fraction:.0%}): a typo or a stray label? Give the "
                "class names (--label-names) to refuse labels outside them"
            )
    return out


def small_tag_warnings(
    dataset, what: str = "training set", fraction: float = SMALL_CLASS_FRACTION
) -> list[str]:
    """Token data: an entity type (its B-, I-, ... tags together, :func:`cartomap.data.conll.entity_type`)
    with no word, or with fewer than ``fraction`` x the words of the largest entity type. ``O`` is left
    out: most words of named-entity data are outside every entity, so every entity type is under 1 %
    of ``O`` in the normal shape of such data; a stray tag (``B-LCO``) is a type of its own."""
    from cartomap.data.conll import entity_type

    tags_of: dict[str, dict[str, int]] = {}
    for tag, n in class_counts(dataset).items():
        kind = entity_type(tag)
        if kind is not None:
            tags_of.setdefault(kind, {})[tag] = n
    if not tags_of:
        return []
    totals = {kind: sum(tags.values()) for kind, tags in tags_of.items()}
    largest_kind, largest = max(totals.items(), key=lambda item: item[1])
    out = []
    for kind, n in totals.items():
        tags = ", ".join(tags_of[kind])
        name = f"entity type {kind!r} ({tags})" if tags != kind else f"tag {kind!r}"
        if n == 0:
            out.append(f"{dataset.source}: the {what} has no word tagged as {name}")
        elif n < fraction * largest:
            out.append(
                f"{dataset.source}: {name} has {n} word{'s' if n != 1 else ''} in the {what} against "
                f"{largest:,} of {largest_kind!r} (under {fraction:.0%} of the largest entity type): a typo "
                "or a stray tag? Give the tag names (--label-names) to refuse tags outside them"
            )
    return out


def label_set_warnings(dataset) -> list[str]:
    """Multi-label data: the labels no example or every example has
    (:func:`cartomap.data.multilabel.label_warnings`)."""
    from cartomap.data.multilabel import label_warnings as multilabel_warnings

    indicator = dataset.labels.reshape(len(dataset), len(dataset.label_names))
    return multilabel_warnings(indicator, dataset.label_names, source=dataset.source)


#: The class warnings of a training set, by its kind's :attr:`~cartomap.tasks.base.TaskKind.reader`
#: (the readers themselves: :data:`cartomap.data.loading.READERS`).
CLASS_WARNINGS = {
    "labels": small_class_warnings,
    "tagged": small_tag_warnings,
    "label_sets": label_set_warnings,
}


def split_class_warnings(train, other, what: str) -> list[str]:
    """Classes of training that a dev or test set lacks (unknown labels there are already an error)."""
    theirs = class_counts(other)
    missing = [name for name, n in class_counts(train).items() if n > 0 and theirs.get(name, 0) == 0]
    if not missing:
        return []
    return [
        f"{other.source}: the {what} has no example of class{'es' if len(missing) > 1 else ''} "
        f"{', '.join(map(repr, missing))}, which training has: its classes differ from training's"
    ]


def label_warnings(train, dev=None, tests=()) -> list[str]:
    """Every warning of this module for a run's training, dev and test sets (the class warnings of its
    kind's reader, :data:`CLASS_WARNINGS`: small classes, small entity types, labels no example or every
    example has), after the ones their readers found (``dataset.warnings``: tags breaking the BIO
    scheme, blank tokens skipped, ...)."""
    out = [w for d in (train, dev, *tests) if d is not None for w in getattr(d, "warnings", ())]
    out += CLASS_WARNINGS[train.task_kind.reader](train)
    if dev is not None:
        out += split_class_warnings(train, dev, "dev set")
    for k, test in enumerate(tests):
        out += split_class_warnings(train, test, f"test set {k + 1}" if len(tests) > 1 else "test set")
    return out
