"""Before training: load and validate a config's datasets and create (or find) its run.

:func:`prepare_run` is "train or load"'s first half: the same config on the same data is the
same run, so it returns the existing run folder when there is one. It trains nothing.
"""

from __future__ import annotations

from cartomap.config import RunConfig
from cartomap.data.checks import label_warnings
from cartomap.data.loading import load_dataset
from cartomap.errors import DataError
from cartomap.runs.store import Run, RunStore
from cartomap.scores import columns as _score_columns  # noqa: F401 (reserves the score columns)
from cartomap.training.batching import subwordless_warnings, tokenize_words
from cartomap.training.models import check_max_length, load_tokenizer
from cartomap.training.orders import check_order


def load_data(config: RunConfig):
    """Load and validate the train, dev and test sets named by ``config`` (raises DataError)."""
    train = load_dataset(config.data)
    dev = load_dataset(config.dev, label_names=train.label_names) if config.dev is not None else None
    tests = tuple(load_dataset(t, label_names=train.label_names) for t in config.tests)
    return train, dev, tests


def prepare_run(config: RunConfig, store: RunStore | None = None, made_for: str = "") -> Run:
    """Validate the data and return the run for this config (existing or newly created). Trains nothing.
    ``made_for``: the experiment making it (:meth:`cartomap.runs.store.RunStore.create`).

    What looks wrong but is no error (a class of one example, a dev set without a class of training,
    words the model's tokenizer turns into no sub-word) is kept with the run: ``run.warnings``
    (:func:`cartomap.data.checks.label_warnings`, :func:`cartomap.training.batching.subwordless_warnings`)."""
    store = store or RunStore()
    if problem := config.data.task_kind.reserved_field():  # the score columns reserved too by now
        raise DataError(problem, field="task")
    if config.origin.kind.trains_here:  # runs recorded elsewhere were tokenised by their own code
        check_max_length(config.model.name_or_path, config.model.max_length)
    train, dev, tests = load_data(config)
    check_order(config, train)
    warnings = label_warnings(train, dev, tests)
    if config.origin.kind.trains_here and train.task_kind.unit.sentences:
        # token data is tokenised once here (sentences: small), so that a sentence longer than
        # max_length is refused before the run exists, and words without a sub-word are told
        tokenizer = load_tokenizer(config.model.name_or_path)
        for data in (train, dev, *tests):
            if data is not None:
                tokenize_words(tokenizer, data.frame, config.model.max_length, data.task_kind, data.source)
                warnings += subwordless_warnings(tokenizer, data)
    return store.create(config, train, dev, tests, warnings=warnings, made_for=made_for)
