"""Training dynamics of any PyTorch loop, keyed by example id: :class:`DynamicsRecorder`.

Create it with the training set's ids and gold labels (and optionally texts), call it with
``(epoch, batch_ids, logits)`` from your loop, and close it::

    recorder = DynamicsRecorder(ids, labels, texts, label_names=("entailment", "neutral", "contradiction"))
    for epoch in range(epochs):
        for batch in loader:
            logits = model(**inputs).logits
            recorder(epoch, batch["id"], logits)      # detached and copied; any order, any batch size
            loss = ...
    run = recorder.close()                            # a finished run in the store

Logits go into a preallocated ``[N, C]`` array per epoch, at the row of each id, so shuffling and
uneven batches cannot misplace them. The checks are exact: an id unknown to the recorder or seen
twice in one epoch is an error at once; an epoch that is missing ids is an error when a later epoch
starts or at :meth:`~DynamicsRecorder.close`, naming the epoch, how many ids and which.

Token classification (``task="token"``, an ``AutoModelForTokenClassification``): give each sentence's
id, its word tags (one list per id) and its words (``texts``: one list of words per id); record the
model's sub-word logits ``[B, T, C]`` with the batch's aligned ``labels`` ``[B, T]``, in which the
first sub-word of each word holds its tag and every other position -100 (the Hugging Face convention)::

    recorder = DynamicsRecorder(ids, word_tags, words, task="token", label_names=tag_names)
    recorder(epoch, batch["id"], logits, labels=batch["labels"])

Each word is recorded at its first sub-word, keyed by (sentence id, word index): unit ids
``<id>#<k>``, as cartomap's own token runs. A sentence whose labelled positions are not its words (cut
by ``max_length``, or labels of another sentence) is an error naming it.

Multi-label classification (``task="multilabel"``, one sigmoid output per label): give each example's id,
its gold labels (a multi-hot vector of the L labels, or a list of label names) and the label names in the
model's output order (required); record the model's logits ``[B, L]``::

    recorder = DynamicsRecorder(ids, [[0, 1], [1, 1]], texts, task="multilabel", label_names=("politics", "sports"))
    recorder(epoch, batch["id"], logits)

Each label of each example is recorded as the two-class row (0, z) of its logit z, keyed by (example id,
label index): unit ids ``<id>#<j>``, as cartomap's own multi-label runs, with their combined map.

Under several processes (DDP) every process sees part of each epoch: gather each batch's
``(ids, logits)`` to one process (``torch.distributed.all_gather_object``) and record there, dropping
the repeats a distributed sampler adds to even out the last batch. The ``Trainer`` callback
(:mod:`cartomap.integrations.trainer`) does this for you.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.config import SOURCES, DataConfig, Origin, Record, TrainConfig, map_source
from cartomap.data.dataset import TextDataset
from cartomap.data.loading import from_frame
from cartomap.errors import DataError, RunError
from cartomap.integrations.origin import canonical, recorded_config
from cartomap.integrations.unit_rows import (
    as_numpy,
    id_strings,
    label_unit_rows,
    preview_ids,
    word_unit_rows,
)
from cartomap.runs.importer import dynamics_digest, examples_without_texts, finish_run
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import unit_id_of
from cartomap.tasks.multilabel import MULTILABEL
from cartomap.tasks.sequence import PAIR, SINGLE
from cartomap.tasks.token import TOKEN

#: Names a recorder's ``settings`` may give a training setting under (cartomap's name first).
SETTING_ALIASES = {
    "batch_size": ("batch", "train_batch_size"),
    "per_device_batch_size": ("per_device_train_batch_size",),
    "learning_rate": ("lr",),
    "seed": ("random_seed",),
    "weight_decay": (),
    "optimizer": ("optim",),
    "lr_scheduler": ("scheduler", "lr_scheduler_type"),
    "warmup": ("warmup_ratio", "warmup_steps"),
    "gradient_accumulation_steps": (),
}
MODES = SOURCES  # the logits of the training forward pass, or of an eval-mode pass after each epoch


class DynamicsRecorder:
    """Per-epoch logits of every example by id, checked exactly once, written as a run on :meth:`close`.

    ``ids``: the N example ids (unique; strings or integers). ``labels``: N gold labels, class
    indices (or class names when ``label_names`` are given). ``texts``: optional, N strings or N
    (first, second) pairs (an NLI premise and hypothesis), shown on the data map. ``label_names``: the class order (default
    ``class_0`` ... from the width of the logits). ``epochs``: how many epochs to expect (then a
    missing one is an error at close; default: as many as were recorded). ``mode``: ``"train"``
    (logits of the training forward pass, as Cartography) or ``"eval"`` (an eval-mode pass after
    each epoch, as WaNLI). ``store``: the run store (default ``CARTOMAP_CACHE`` or ``cache/``).
    ``model`` and ``settings`` (e.g. learning rate, batch size) describe the training: they are saved
    with the run and are part of its identity, with the data and the recorded logits. ``task``:
    ``"token"`` (word tags) or ``"multilabel"`` (label sets, ``label_names`` required): the module text.
    """

    def __init__(
        self,
        ids: Sequence[Any],
        labels: Sequence[Any],
        texts: Sequence[Any] | None = None,
        *,
        label_names: Sequence[str] | None = None,
        epochs: int | None = None,
        mode: str = Record.TRAIN,
        store: RunStore | str | Path | None = None,
        name: str = "",
        model: str = "",
        settings: dict[str, Any] | None = None,
        data_name: str = "dataset",
        task: str = "",
    ):
        self.task = task_kinds.kind(task) if task else None
        self.words = self.task is not None and self.task.unit.sentences
        self.multilabel = self.task is not None and self.task.unit.label_sets
        self.label_names = tuple(str(x) for x in label_names) if label_names is not None else None
        if self.words:
            ids, labels, texts = self._word_units(ids, labels, texts)
        elif self.multilabel:
            ids, labels, texts = self._label_units(ids, labels, texts)
        self.ids = id_strings(ids)
        n = len(self.ids)
        if n == 0:
            raise DataError("no ids: a recorder needs the ids of the training examples", field="ids")
        self.index = {v: k for k, v in enumerate(self.ids)}
        if len(self.index) != n:
            seen: dict[str, int] = {}
            for k, v in enumerate(self.ids):
                if v in seen:
                    raise DataError(
                        f"duplicate id {v!r} (positions {seen[v]} and {k}); ids must be unique", field="ids"
                    )
                seen[v] = k
        self.labels = np.asarray(labels, dtype=np.int64) if self.multilabel else self._label_codes(labels, n)
        self.texts = texts if self.words or self.multilabel else self._texts(texts, n)
        if mode not in MODES:
            raise DataError(f"unknown mode {mode!r}: expected one of {MODES}", field="mode")
        if epochs is not None and (int(epochs) != epochs or epochs < 1):
            raise DataError(f"epochs must be a whole number of at least 1, got {epochs!r}", field="epochs")
        self.expected_epochs = epochs
        self.mode, self.name, self.model, self.data_name = mode, name, model, data_name
        self.settings = dict(settings or {})
        self.store = store if isinstance(store, RunStore) else RunStore(store)
        self.n_classes = len(self.label_names) if self.label_names is not None else None
        if self.multilabel:  # a unit's row: (absent, present)
            self.n_classes = len(self.task.unit_classes(self.label_names))
        self._logits: dict[int, np.ndarray] = {}
        self._seen: dict[int, np.ndarray] = {}
        self._block: np.ndarray | None = None  # [epochs, N, C] when the number of epochs is known
        self._integer_ids = self.ids == [str(k) for k in range(n)]
        self.closed: Run | None = None

    # -- inputs ------------------------------------------------------------------------------------
    def _word_units(self, ids, labels, texts):
        """A token task's sentences as word units: (unit ids ``<id>#<k>``, each word's tag, the words);
        keeps the sentences' ids, row offsets and word counts to turn a batch of sentences into words."""
        sentences = id_strings(ids)
        tags = [
            list(as_numpy(t)) if hasattr(t, "detach") else list(np.asarray(t).reshape(-1)) for t in labels
        ]
        if len(tags) != len(sentences):
            raise DataError(
                f"{len(tags)} tag lists for {len(sentences)} ids; give one list of word tags per sentence",
                field="labels",
            )
        if texts is None:
            raise DataError(
                "a token task needs each sentence's words (texts=[[word, ...], ...]): the map shows them",
                field="texts",
            )
        words = [[str(w) for w in row] for row in texts]
        if len(words) != len(sentences):
            raise DataError(f"{len(words)} word lists for {len(sentences)} ids", field="texts")
        for sid, row, tag_row in zip(sentences, words, tags, strict=True):
            if len(row) != len(tag_row) or not row:
                raise DataError(
                    f"sentence {sid!r}: {len(row)} words and {len(tag_row)} tags; expected one tag per word "
                    "and at least one word",
                    field="labels",
                )
        if len(set(sentences)) != len(sentences):
            twice = next(v for k, v in enumerate(sentences) if v in sentences[:k])
            raise DataError(f"duplicate id {twice!r}; ids must be unique", field="ids")
        self.sentences = sentences
        self.sentence_index = {v: k for k, v in enumerate(sentences)}
        self.counts = np.asarray([len(row) for row in words], dtype=np.int64)
        self.offsets = np.cumsum(self.counts) - self.counts
        unit_ids = [
            unit_id_of(sid, k) for sid, row in zip(sentences, words, strict=True) for k in range(len(row))
        ]
        return unit_ids, [t for row in tags for t in row], words

    def _label_units(self, ids, labels, texts):
        """A multi-label task's examples as label units: (unit ids ``<id>#<j>``, 1/0 of each label of each
        example, the texts); keeps the examples' ids and label sets to turn a batch into units."""
        from cartomap.integrations.examples import label_lists
        from cartomap.tasks.base import label_indicator

        if self.label_names is None:
            raise DataError(
                "a multi-label recorder needs the label names, in the model's output order (one logit per "
                "label): label_names=[...]",
                field="label_names",
            )
        examples = id_strings(ids)
        if len(set(examples)) != len(examples):
            twice = next(v for k, v in enumerate(examples) if v in examples[:k])
            raise DataError(f"duplicate id {twice!r}; ids must be unique", field="ids")
        rows = list(as_numpy(labels)) if hasattr(labels, "detach") else list(labels)
        if len(rows) != len(examples):
            raise DataError(
                f"{len(rows)} label sets for {len(examples)} ids; give one per id (a multi-hot vector of "
                f"{len(self.label_names)} entries or a list of label names)",
                field="labels",
            )
        self.label_sets = label_lists(rows, self.label_names, where="recorder labels", field="labels")
        if texts is not None:
            texts = list(texts)
            if len(texts) != len(examples):
                raise DataError(
                    f"{len(texts)} texts for {len(examples)} ids; give one text per id", field="texts"
                )
            if any(not isinstance(t, str) for t in texts):
                raise DataError("multi-label examples are one text each (a string per id)", field="texts")
        self.example_ids = examples
        self.example_index = {v: k for k, v in enumerate(examples)}
        n = len(self.label_names)
        unit_ids = [unit_id_of(i, j) for i in examples for j in range(n)]
        return unit_ids, label_indicator(self.label_sets, self.label_names).reshape(-1), texts

    def example_rows(self, ids: Any, epoch: int) -> np.ndarray:
        """Row positions of the multi-label examples ``ids`` (DataError for an id the recorder does not know)."""
        try:
            return np.asarray([self.example_index[k] for k in id_strings(ids)], dtype=np.int64)
        except KeyError as err:
            raise DataError(
                f"epoch {epoch}: id {err.args[0]!r} is not one of the recorder's {len(self.example_ids)} ids",
                field="ids",
            ) from None

    def _label_codes(self, labels: Sequence[Any], n: int) -> np.ndarray:
        values = list(as_numpy(labels)) if hasattr(labels, "detach") else list(labels)
        if len(values) != n:
            raise DataError(f"{len(values)} labels for {n} ids; give one gold label per id", field="labels")
        names = {name: k for k, name in enumerate(self.label_names or ())}
        codes = np.empty(n, dtype=np.int64)
        for k, v in enumerate(values):
            if isinstance(v, str) and v in names:
                codes[k] = names[v]
                continue
            if isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, np.integer, float, np.floating, str)
            ):
                raise DataError(
                    f"label of id {self.ids[k]!r} is {v!r}; expected a class index", field="labels"
                )
            try:
                code = int(v)
            except ValueError:
                known = f"one of {list(names)}" if names else "a class index (or give label_names)"
                raise DataError(
                    f"label of id {self.ids[k]!r} is {v!r}; expected {known}", field="labels"
                ) from None
            if (
                code != float(v)
                or code < 0
                or (self.label_names is not None and code >= len(self.label_names))
            ):
                top = f"0..{len(self.label_names) - 1}" if self.label_names is not None else "0 or more"
                raise DataError(
                    f"label of id {self.ids[k]!r} is {v!r}; expected a class index {top}", field="labels"
                )
            codes[k] = code
        return codes

    def _texts(self, texts: Sequence[Any] | None, n: int) -> pd.DataFrame | None:
        if texts is None:
            return None
        texts = list(texts)
        if len(texts) != n:
            raise DataError(f"{len(texts)} texts for {n} ids; give one text (or pair) per id", field="texts")
        if texts and isinstance(texts[0], (tuple, list)):
            if not all(isinstance(t, (tuple, list)) and len(t) == 2 for t in texts):
                raise DataError(
                    f"texts mix pairs and single texts; give all ({', '.join(PAIR.text_fields)})",
                    field="texts",
                )
            return pd.DataFrame(PAIR.texts_frame(texts))
        return pd.DataFrame(SINGLE.texts_frame(texts))

    def rows_of(self, ids: Any, epoch: int) -> np.ndarray:
        """Row positions of ``ids`` (DataError for an id the recorder does not know)."""
        if self._integer_ids and (isinstance(ids, np.ndarray) or hasattr(ids, "detach")):
            rows = as_numpy(ids)
            if np.issubdtype(rows.dtype, np.integer):
                bad = (rows < 0) | (rows >= len(self.ids))
                if bad.any():
                    raise DataError(
                        f"epoch {epoch}: id {int(rows[bad][0])} is not one of the recorder's {len(self.ids)} ids",
                        field="ids",
                    )
                return rows.astype(np.int64).reshape(-1)
        keys = id_strings(ids)
        try:
            return np.fromiter((self.index[k] for k in keys), dtype=np.int64, count=len(keys))
        except KeyError as err:
            raise DataError(
                f"epoch {epoch}: id {err.args[0]!r} is not one of the recorder's {len(self.ids)} ids",
                field="ids",
            ) from None

    # -- recording ---------------------------------------------------------------------------------
    def __call__(self, epoch: int, ids: Any, logits: Any, labels: Any = None) -> None:
        self.record(epoch, ids, logits, labels)

    def record(self, epoch: int, ids: Any, logits: Any, labels: Any = None) -> None:
        """Logits [B, C] of the examples ``ids`` (B of them) in ``epoch`` (0-based). A token task: the
        sub-word logits [B, T, C] of the sentences ``ids`` with their aligned ``labels`` [B, T]
        (:func:`first_subwords`); each word is recorded at its first sub-word."""
        if not self.words:
            if labels is not None:
                raise DataError("labels are for a token task's sub-words (task='token')", field="labels")
            if self.multilabel:  # one logit per label: each label of each example a unit
                rows = self.example_rows(ids, epoch)
                self.record_rows(epoch, *label_unit_rows(rows, logits, len(self.label_names), epoch))
                return
            self.record_rows(epoch, self.rows_of(ids, epoch), logits)
            return
        if labels is None:
            raise DataError(
                "a token task records sub-word logits with the batch's aligned labels (labels=...)",
                field="labels",
            )
        self.record_rows(epoch, *self.word_rows(ids, logits, labels, epoch))

    def word_rows(self, ids: Any, logits: Any, labels: Any, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(unit rows [M], logits [M, C]) of a batch of sentences: every word at its first sub-word. A
        DataError names a sentence whose labelled sub-words are not its words (count or tags)."""
        sentences = id_strings(ids)
        try:
            rows = np.asarray([self.sentence_index[k] for k in sentences], dtype=np.int64)
        except KeyError as err:
            raise DataError(
                f"epoch {epoch}: id {err.args[0]!r} is not one of the recorder's {len(self.sentences)} sentences",
                field="ids",
            ) from None
        if as_numpy(logits).ndim == 3 and len(as_numpy(logits)) != len(rows):
            raise DataError(
                f"epoch {epoch}: logits for {len(as_numpy(logits))} sentences, {len(rows)} ids",
                field="logits",
            )
        return word_unit_rows(
            rows, logits, labels, self.offsets, self.counts, self.labels, self.ids, self.sentences, epoch
        )

    def record_rows(self, epoch: int, rows: np.ndarray, logits: Any) -> None:
        """Like :meth:`record`, with row positions (0..N-1 in the order of ``ids``) instead of ids."""
        if self.closed is not None:
            raise RunError(
                f"the recorder was closed (run {self.closed.id}); create a new one to record again"
            )
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise DataError(f"epoch must be an integer >= 0, got {epoch!r}", field="epoch")
        epoch = int(epoch)
        if self.expected_epochs is not None and epoch >= self.expected_epochs:
            raise DataError(
                f"epoch {epoch} is beyond the {self.expected_epochs} epochs the recorder expects (0-based)",
                field="epoch",
            )
        values = as_numpy(logits).astype(np.float32, copy=False)
        if values.ndim != 2 or values.shape[0] != len(rows):
            raise DataError(
                f"epoch {epoch}: logits of shape {tuple(values.shape)} for {len(rows)} ids; expected [{len(rows)}, classes]",
                field="logits",
            )
        if not np.all(np.isfinite(values)):
            bad = int(np.flatnonzero(~np.all(np.isfinite(values), axis=1))[0])
            raise DataError(
                f"epoch {epoch}: non-finite logits for id {self.ids[rows[bad]]!r}", field="logits"
            )
        self._check_width(values.shape[1])
        if epoch not in self._logits:
            self._start(epoch)
        seen = self._seen[epoch]
        unique, counts = np.unique(rows, return_counts=True)
        twice = unique[(counts > 1) | seen[unique]]
        if len(twice):
            raise DataError(
                f"epoch {epoch}: id {self.ids[twice[0]]!r} recorded twice (each example once per epoch)",
                field="ids",
            )
        self._logits[epoch][rows] = values
        seen[rows] = True

    def _check_width(self, width: int) -> None:
        if self.n_classes is None:
            if width < 2:
                raise DataError(
                    f"logits have {width} column(s); a classifier has at least two", field="logits"
                )
            if len(self.labels) and self.labels.max() >= width:
                raise DataError(
                    f"a gold label is {int(self.labels.max())} but the logits have {width} classes",
                    field="labels",
                )
            self.n_classes = width
        elif width != self.n_classes:
            raise DataError(
                f"logits have {width} columns, expected {self.n_classes} (one per class)", field="logits"
            )

    def _start(self, epoch: int) -> None:
        for earlier in sorted(self._logits):
            if earlier < epoch:
                self.check_epoch(earlier, when=f"when epoch {epoch} began")
        n = len(self.ids)
        if self.expected_epochs is not None and self._block is None:  # every epoch at once
            self._block = np.zeros((self.expected_epochs, n, self.n_classes), dtype=np.float32)
        block = self._block
        self._logits[epoch] = block[epoch] if block is not None else np.zeros((n, self.n_classes), np.float32)
        self._seen[epoch] = np.zeros(n, dtype=bool)

    def missing(self, epoch: int) -> list[str]:
        """Ids not recorded in ``epoch``."""
        seen = self._seen.get(epoch)
        if seen is None:
            return list(self.example_ids if self.multilabel else self.ids)
        if self.multilabel:  # the examples, not their label units
            return [self.example_ids[k] for k in np.unique(np.flatnonzero(~seen) // len(self.label_names))]
        return [self.ids[k] for k in np.flatnonzero(~seen)]

    def check_epoch(self, epoch: int, when: str = "") -> None:
        """DataError unless every id was recorded in ``epoch``."""
        missing = self.missing(epoch)
        if missing:
            raise DataError(
                f"epoch {epoch} is missing {len(missing)} of {len(self.example_ids if self.multilabel else self.ids)} ids"
                + (f" {when}" if when else "")
                + f": {preview_ids(missing)} (a loader that drops its last batch, or a sampler that skips examples?)",
                field="ids",
            )

    @property
    def epochs(self) -> list[int]:
        """The epochs recorded so far, ascending."""
        return sorted(self._logits)

    def logits(self) -> np.ndarray:
        """[E, N, C] of the recorded epochs, all checked complete and consecutive from epoch 0."""
        epochs = self.epochs
        if not epochs:
            raise DataError("nothing was recorded: call the recorder with (epoch, ids, logits) first")
        for e in range(self.expected_epochs or epochs[-1] + 1):  # in order: the first problem is named
            if e not in self._logits:
                raise DataError(
                    f"epoch {e} was never recorded (recorded: {epochs}); epochs count from 0", field="epoch"
                )
            self.check_epoch(e)
        return np.stack([self._logits[e] for e in epochs])

    # -- the run ---------------------------------------------------------------------------------
    def examples(self, label_names: tuple[str, ...]) -> TextDataset:
        """The examples of the run: ids, labels and texts (empty texts when none were given); a token
        task's sentences with their words and tags. Texts recorded with no ``task`` named are read as the
        kind their columns show (the user's bare table: no run exists yet to ask)."""
        if self.words:
            from cartomap.data.loading import tagged_dataset

            splits = np.cumsum(self.counts)[:-1]
            frame = pd.DataFrame(
                {
                    "id": self.sentences,
                    TOKEN.text_fields[0]: self.texts,
                    TOKEN.label_field: [row.tolist() for row in np.split(self.labels, splits)],
                }
            )
            return tagged_dataset(frame, TOKEN, label_names, f"recorder words ({self.data_name})")
        if self.multilabel:  # texts and label sets; empty texts when none were given
            from cartomap.integrations.examples import multilabel_dataset

            frame = pd.DataFrame(
                {
                    "id": self.example_ids,
                    MULTILABEL.text_fields[0]: self.texts
                    if self.texts is not None
                    else [""] * len(self.example_ids),
                    MULTILABEL.label_field: self.label_sets,
                }
            )
            where = f"recorder labels ({self.data_name})"
            return multilabel_dataset(frame, label_names, where, check_texts=self.texts is not None)
        if self.texts is None:
            digest = hashlib.sha256(
                canonical({"ids": self.ids, "labels": self.labels.tolist(), "names": label_names}).encode()
            )
            return examples_without_texts(self.ids, self.labels, label_names, digest.hexdigest())
        frame = self.texts.assign(id=self.ids, label=self.labels)
        task = self.task or task_kinds.of_columns(frame.columns)  # no kind named: the texts' columns say
        config = DataConfig(
            path=self.data_name, text_columns=task.text_fields, label_names=label_names, genre_column=None
        )
        return from_frame(frame, config, source=f"recorder texts ({self.data_name})", label_names=label_names)

    def training(self, epochs: int) -> dict[str, Any]:
        """What the user told of the training (``settings``, under cartomap's names or common aliases) and
        the recorded epochs: ``cartomap show`` prints these, "not recorded" for the rest."""
        known: dict[str, Any] = {"epochs": epochs, "source": "recorder settings"}
        for key, aliases in SETTING_ALIASES.items():
            for alias in (key, *aliases):
                value = self.settings.get(alias)
                if isinstance(value, (bool, int, float, str)):
                    known[key] = value
                    break
        return known

    def close(self) -> Run:
        """Check every epoch and write the run (or return the existing run with identical config,
        data and dynamics). Closing twice returns the same run."""
        if self.closed is not None:
            return self.closed
        logits = self.logits()
        names = self.label_names or tuple(f"class_{c}" for c in range(self.n_classes))
        digest = dynamics_digest(self.ids, self.labels, logits)
        examples = self.examples(names)
        train = TrainConfig(
            **{
                k: v
                for k, v in self.settings.items()
                if k in TrainConfig.__dataclass_fields__ and k != "record"
            }
            | {"epochs": len(logits), "record": self.mode, "save_checkpoints": False}
        )
        config = recorded_config(
            Origin.RECORDER,
            examples,
            data_name=self.data_name,
            model=self.model or "unknown",
            train=train,
            settings={"settings": self.settings, "dynamics": digest},
            name=self.name,
            training=self.training(len(logits)),
        )
        run = self.store.create(config, examples)
        if run.state != State.DONE:
            source = map_source(self.mode)
            history = [{"epoch": e + 1} for e in range(len(logits))]
            with run.work():
                finish_run(run, {source: logits}, self.labels, self.ids, history)
                run.log(f"recorded {len(logits)} epochs of {source} logits with DynamicsRecorder")
        self.closed = run
        return run

    def __enter__(self) -> DynamicsRecorder:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
