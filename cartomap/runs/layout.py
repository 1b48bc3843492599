"""The layout of a run folder: every file and folder name in it, defined once.

Only the run-store package (``cartomap.runs``) spells these names. Everything else asks a
:class:`cartomap.runs.store.Run` for a path (``run.metrics_path()``, ``run.task_log(name)``,
``run.embeddings_path``, ...) or builds one from these constants. :data:`LAYOUT` describes every
entry; ``docs/architecture.md`` prints it.

Names with ``{...}`` are templates: fill them with :func:`str.format`.
"""

from __future__ import annotations

from cartomap.tasks.sequence import PAIR

# --- what the run is ------------------------------------------------------------------------------
CONFIG = "config.json"
STATUS = "status.json"
LOCK = "run.lock"
CANCEL = "cancel"
LOG = "log.txt"
JOB_CONFIG = "job_config.json"
JOB_LOG = "job.log"

# --- its own copy of the data ---------------------------------------------------------------------
EXAMPLES = "examples.parquet"
EXAMPLES_ARROW = "examples.arrow"
DEV_EXAMPLES = "dev_examples.parquet"
TEST_EXAMPLES = "test_examples_{k}.parquet"

# --- what training recorded -----------------------------------------------------------------------
DYNAMICS = "dynamics"
EPOCH_FILE = "epoch_{epoch}.parquet"
HISTORY = "history.json"
STEPS = "steps.jsonl"
METRICS = "metrics.parquet"
METRICS_OF_SOURCE = "metrics_{source}.parquet"
EXAMPLE_METRICS = "example_metrics.parquet"
EXAMPLE_METRICS_OF_SOURCE = "example_metrics_{source}.parquet"
PLAN = "plan.json"
MODEL = "model"
CHECKPOINTS = "checkpoints"
CHECKPOINT = "epoch_{epoch}"
STATE = "state"
STATE_EPOCH = "epoch_{epoch}"
STATE_LATEST = "latest.json"
STATE_WEIGHTS = "model.safetensors"
STATE_OPTIMIZER = "optimizer.pt"
STATE_SCHEDULER = "scheduler.pt"
STATE_COUNTERS = "trainer.json"

# --- what later work adds -------------------------------------------------------------------------
TASKS = "tasks"
TASK_STATUS = "{name}.json"
TASK_LOCK = "{name}.lock"
TASK_LOG = "{name}.log"
GROUPS = "groups"
GROUP_FILE = "{slug}.json"
AUTO_GROUPS = "auto.parquet"
VIEWS = "views"
VIEW_FILE = "{slug}.json"
TAGS_DB = "tags.sqlite"
EMBEDDINGS = "embeddings.npy"
EMBEDDING_IDS = "embeddings_ids.json"
PROJECTION = "projection_{method}.npy"
SIMILARITY = "similarity.parquet"
WANLI = "wanli"
GENERATION_INFO = "generation.json"
GENERATED = "generated.parquet"
GENERATION_STOP = "stop"
FILTERED = "filtered.parquet"
FILTER_REPORT = "filter.json"
REVIEW_DB = "review.sqlite"
REVIEW = "review"
QUEUE = "queue.parquet"
CORRECTED = "corrected.parquet"
DECISIONS = "decisions.parquet"

#: (path inside the run folder, what it holds), in the order a run grows.
LAYOUT: tuple[tuple[str, str], ...] = (
    (
        CONFIG,
        "RunConfig (paths as given), package versions, data fingerprints, provenance (absolute paths, "
        "the folder it was made from, the experiment that made it), label names, data warnings",
    ),
    (STATUS, "state (queued, running, done, failed, cancelled), progress, error, pid"),
    (
        LOCK,
        "locked (fcntl OFD lock; readers only query it) by the process training the run; a running state without it reads 'interrupted'",
    ),
    (CANCEL, "present when a cancel was asked for; the job stops after its current step"),
    (JOB_CONFIG, "the config a background job was started with (written before it starts)"),
    (JOB_LOG, "stdout and stderr of the background training job"),
    (LOG, "human-readable log: start, epochs, resume, errors with tracebacks"),
    (EXAMPLES, "the training examples as loaded (id, texts, label, genre, ...): the run's own copy"),
    (
        EXAMPLES_ARROW,
        "the same examples as an uncompressed Arrow file, made from examples.parquet (written with it, or on "
        "the first read of the texts): memory-mapped, the texts of 2M pairs read in milliseconds; safe to delete",
    ),
    (DEV_EXAMPLES, "the dev examples, when a dev set was given"),
    (TEST_EXAMPLES, "test set k, evaluated after every epoch"),
    (
        f"{DYNAMICS}/<source>/{EPOCH_FILE}",
        "logits of every example by id; source train, eval, dev or test_<k>",
    ),
    (HISTORY, "one record per epoch: loss, dev and test accuracy, seconds"),
    (
        STEPS,
        "the training loss every k steps while it trains, one JSON line each (epoch, step, global step, mean "
        "loss; at most 500 an epoch), appended whole; a resume first drops the lines of the epoch it trains again",
    ),
    (METRICS, "data-map metrics and region of every training example (first recorded source)"),
    (METRICS_OF_SOURCE, "the same for a second recorded source (record 'both')"),
    (
        EXAMPLE_METRICS,
        "multi-label runs: the combined map, one row per example at its worst label "
        "(scores.label_examples.example_metrics, method min); example_metrics_<source>.parquet for a second source",
    ),
    (PLAN, "the stages of a curriculum order"),
    (f"{MODEL}/", "final weights (safetensors) and tokenizer"),
    (f"{CHECKPOINTS}/{CHECKPOINT}/", "end-of-epoch weights (WaNLI filtering needs them)"),
    (
        f"{STATE}/{STATE_EPOCH}/",
        f"resume point of the last completed epoch: {STATE_WEIGHTS}, {STATE_OPTIMIZER}, "
        f"{STATE_SCHEDULER}, {STATE_COUNTERS} (removed when the run is done)",
    ),
    (f"{STATE}/{STATE_LATEST}", "which epoch the resume point holds"),
    (f"{TASKS}/{TASK_STATUS}", "state and progress of a background task (embeddings, projection_pca, ...)"),
    (f"{TASKS}/{TASK_LOCK}", "held by the process running the task"),
    (f"{TASKS}/{TASK_LOG}", "stdout and stderr of the task's job"),
    (f"{GROUPS}/{GROUP_FILE}", "a named group of example ids (lasso selection, neighbour group)"),
    (f"{GROUPS}/{AUTO_GROUPS}", "WaNLI's automatic groups, one row each (100k+ on a full-size dataset)"),
    (
        f"{VIEWS}/{VIEW_FILE}",
        "a saved view of the Data map: its filters, colour, axis and region settings, epoch, split, selection "
        "and focus, who saved it and when",
    ),
    (
        TAGS_DB,
        "tags of examples (SQLite: each example's tags with who set them and when, and every tagging "
        "and untagging, committed at once)",
    ),
    (
        EMBEDDINGS,
        "[CLS] vectors [N, H] of the trained model, rows in examples order (a token run's: a row per word, "
        "its first sub-word's)",
    ),
    (EMBEDDING_IDS, "the example ids of those rows (a token run's: the words' unit ids)"),
    (PROJECTION, "2-D coordinates (pca, umap) of the embeddings"),
    (SIMILARITY, f"{'-'.join(PAIR.text_fields)} similarity of every pair (STS-CL, artifacts)"),
    (f"{WANLI}/<batch>/{GENERATION_INFO}", "a generation batch's config, groups, template and label words"),
    (f"{WANLI}/<batch>/{GENERATED}", "generated pairs with their intended label and group"),
    (f"{WANLI}/<batch>/{GENERATION_STOP}", "present when a stop of the generation was asked for"),
    (f"{WANLI}/<batch>/{FILTERED}", "every generated pair with the rule that removed it, or kept"),
    (f"{WANLI}/<batch>/{FILTER_REPORT}", "counts per filtering rule"),
    (f"{WANLI}/<batch>/{REVIEW_DB}", "human review (SQLite, every action committed)"),
    (
        f"{REVIEW}/<queue>/{QUEUE}",
        "a review queue of suspects: ids in score order, texts, gold, prediction, p(gold) over epochs, "
        "votes, neighbours",
    ),
    (
        f"{REVIEW}/<queue>/{REVIEW_DB}",
        "the queue's decisions per annotator (SQLite, append-only, every click committed)",
    ),
    (f"{REVIEW}/<queue>/{CORRECTED}", "the training set with the queue's relabels applied, removals dropped"),
    (f"{REVIEW}/<queue>/{DECISIONS}", "the final decision of every queued example (provenance)"),
)


def file_names() -> set[str]:
    """Every name above, templates cut at their first placeholder (``test_examples_``)."""
    names = set()
    for key, value in globals().items():
        if key.isupper() and isinstance(value, str):
            stem = value.split("{", 1)[0]
            if stem and stem != "epoch_":  # "epoch_" alone says nothing
                names.add(stem)
    return names


def markdown_table() -> str:
    """:data:`LAYOUT` as a markdown table (docs/architecture.md prints it; a test keeps them equal)."""
    rows = ["| path in the run folder | what it holds |", "|---|---|"]
    rows += [f"| `{path}` | {what} |" for path, what in LAYOUT]
    return "\n".join(rows)
