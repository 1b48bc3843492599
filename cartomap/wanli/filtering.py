"""WaNLI Stage 3: automatic filtering of generated examples (Liu et al., 2022).

Order of work (METHODS.md §2, Stage 3):

1. Heuristic rules, in this order; a row removed by an earlier rule is attributed to that rule
   only:

   ``too_short``
       premise or hypothesis missing, or shorter than ``min_chars`` (5) characters once leading
       and trailing whitespace is stripped;
   ``same_text``
       premise equals hypothesis after lowercasing, removing punctuation (every Unicode
       punctuation character) and collapsing whitespace;
   ``instruction_phrase``
       premise or hypothesis contains a phrase of the prompt's instruction ("pair of sentences",
       "previous examples", "same relationship as"), case-insensitively;
   ``copied_example``
       an exact copy of an in-context example of the row's group: the (premise, hypothesis) pair
       equals one of the examples' pairs, or the premise equals an example's premise *and* the
       hypothesis equals an example's hypothesis (possibly of two different examples).
       Texts are compared exactly, after stripping leading and trailing whitespace.

2. Survivors are tidied (:func:`tidy`). Tidying only shortens a text, so a survivor whose tidied
   text falls below ``min_chars`` is attributed to ``too_short`` too (the same rule, applied to
   the text that is kept; e.g. a premise ``"(...)"``).

3. Estimated max variability (:func:`max_variability`): every saved end-of-epoch checkpoint of
   the run's task model, in eval mode, gives softmax probabilities p_e(y) of every survivor;
   score = max over labels y of std over epochs of p_e(y), population std (ddof=0).

4. Selection (:func:`select_top`): keep the highest-scoring ``keep_fraction`` (one half), the
   same number per intended label. The rest are removed as ``low_max_variability``.

Files of a batch, in ``run.path/"wanli"/<batch>/`` (written atomically)::

    generated.parquet   input (Stage 2): gen_id, group, seed_id, intended_label, premise, hypothesis, ...
    filtered.parquet    every generated row; premise/hypothesis tidied for survivors (originals in
                        premise_raw/hypothesis_raw), removed_by (None or a rule name),
                        max_variability (NaN for rows removed by a heuristic), kept (bool)
    filter.json         the FilterConfig, counts per rule, the per-label cut, epochs used
"""

from __future__ import annotations

import dataclasses
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_write_json, atomic_write_parquet
from cartomap.runs import shipped
from cartomap.runs.progress import Phase
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.wanli.batches import filtered_path, load_generated, report_path

INSTRUCTION_PHRASES = ("pair of sentences", "previous examples", "same relationship as")
RULES = ("too_short", "same_text", "instruction_phrase", "copied_example")
VARIABILITY_RULE = "low_max_variability"
ALL_RULES = (*RULES, VARIABILITY_RULE)
RULE_DESCRIPTIONS = {
    "too_short": "premise or hypothesis missing or shorter than the minimum length",
    "same_text": "premise equals hypothesis (ignoring case and punctuation)",
    "instruction_phrase": "contains a phrase of the prompt's instruction",
    "copied_example": "copies an in-context example of its group",
    VARIABILITY_RULE: "not in the highest-scoring fraction of its intended label (estimated max variability)",
}

ProgressCallback = Callable[[int, int], None]  # (done, total) of the checkpoint passes


@dataclass(frozen=True)
class FilterConfig:
    """Settings of Stage 3; the defaults are WaNLI's."""

    min_chars: int = 5  # WaNLI: shorter than 5 characters is removed
    instruction_phrases: tuple[str, ...] = INSTRUCTION_PHRASES  # phrases of the prompt's instruction
    keep_fraction: float = 0.5  # WaNLI: keep the highest-scoring half
    balance: bool = True  # WaNLI: the same number per intended label
    batch_size: int = 64  # examples per forward pass of a checkpoint
    device: str = "auto"  # auto = cuda, then mps, then cpu

    def __post_init__(self) -> None:
        if not 0.0 <= self.keep_fraction <= 1.0:
            raise CartomapError(f"keep_fraction must be between 0 and 1, got {self.keep_fraction}")
        if self.min_chars < 0:
            raise CartomapError(f"min_chars must be at least 0, got {self.min_chars}")
        if self.batch_size < 1:
            raise CartomapError(f"batch_size must be at least 1, got {self.batch_size}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FilterConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in names}
        return cls(**kwargs)


# --------------------------------------------------------------------------- batch files


def task_name(batch: str) -> str:
    return f"filter-{batch}"


# --------------------------------------------------------------------------- text helpers
def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def normalize_text(text: str) -> str:
    """Lowercased, every Unicode punctuation character removed, whitespace collapsed."""
    no_punct = "".join(ch for ch in str(text).lower() if not unicodedata.category(ch).startswith("P"))
    return " ".join(no_punct.split())


_PAIRS = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "(": ")", "[": "]", "{": "}"}
_BRACKETS = {"(": ")", "[": "]", "{": "}"}
_DANGLING = {'"': '"', "\u201c": "\u201d", "(": ")", "[": "]", "{": "}"}  # not "'": apostrophes


def _wraps(s: str) -> bool:
    """Whether the first and last characters of ``s`` are a matching pair around all of it."""
    if len(s) < 2 or s[0] not in _PAIRS or s[-1] != _PAIRS[s[0]]:
        return False
    opener, closer = s[0], s[-1]
    inner = s[1:-1]
    if opener == closer:  # a symmetric quote: wrapping only when none is inside
        return opener not in inner
    if opener in _BRACKETS:  # the opening bracket must close at the very end: "(a) or (b)" is not wrapped
        depth = 0
        for ch in inner:
            depth += (ch == opener) - (ch == closer)
            if depth < 0:
                return False
        return depth == 0
    return opener not in inner and closer not in inner  # typographic quotes


def tidy(text: Any) -> Any:
    """A generated text without a single wrapping pair of quotes or brackets, or a lone dangling one.

    * ``"A man sleeps."`` → ``A man sleeps.`` (also ``'...'``, curly quotes, ``(...)``, ``[...]``,
      ``{...}``); only one pair, and only when it wraps the whole text (``(a) or (b)`` stays);
    * a lone quote or bracket at either end whose partner is nowhere in the text:
      ``"A man sleeps.`` → ``A man sleeps.``, ``A man sleeps.)`` → ``A man sleeps.``;
      a single quote ``'`` is not treated as dangling (it is usually an apostrophe: ``the dogs'``).

    Surrounding whitespace is stripped. Anything that is not a string is returned unchanged.
    """
    if not _is_text(text):
        return text
    s = text.strip()
    if _wraps(s):
        return s[1:-1].strip()
    if s and s[0] in _DANGLING and _DANGLING[s[0]] not in s[1:] and (s[0] != '"' or s.count('"') == 1):
        return s[1:].strip()
    closers = {v: k for k, v in _DANGLING.items()}
    if s and s[-1] in closers and closers[s[-1]] not in s[:-1] and (s[-1] != '"' or s.count('"') == 1):
        return s[:-1].strip()
    return s


# --------------------------------------------------------------------------- heuristic rules
def rule_too_short(frame: pd.DataFrame, min_chars: int = 5) -> np.ndarray:
    """True where premise or hypothesis is missing (not a string) or shorter than ``min_chars``."""

    def short(value: Any) -> bool:
        return not _is_text(value) or len(value.strip()) < min_chars

    return np.array(
        [short(p) or short(h) for p, h in zip(frame["premise"], frame["hypothesis"], strict=True)],
        dtype=bool,
    )


def rule_same_text(frame: pd.DataFrame) -> np.ndarray:
    """True where premise equals hypothesis after lowercasing and removing punctuation."""
    return np.array(
        [
            _is_text(p) and _is_text(h) and normalize_text(p) == normalize_text(h)
            for p, h in zip(frame["premise"], frame["hypothesis"], strict=True)
        ],
        dtype=bool,
    )


def rule_instruction_phrase(frame: pd.DataFrame, phrases: Sequence[str] = INSTRUCTION_PHRASES) -> np.ndarray:
    """True where premise or hypothesis contains one of ``phrases`` (case-insensitive)."""
    lowered = [p.lower() for p in phrases]

    def has(value: Any) -> bool:
        return _is_text(value) and any(p in value.lower() for p in lowered)

    return np.array(
        [has(p) or has(h) for p, h in zip(frame["premise"], frame["hypothesis"], strict=True)], dtype=bool
    )


def rule_copied_example(
    frame: pd.DataFrame, examples: Mapping[str, tuple[str, str]], ids_column: str = "in_context_ids"
) -> np.ndarray:
    """True where a row copies an in-context example of its group.

    ``examples`` maps an example id to its (premise, hypothesis); each row's ``in_context_ids``
    lists its group's example ids (ids unknown to ``examples`` are ignored). A copy is the pair of
    one example, or a premise equal to an example's premise together with a hypothesis equal to
    an example's hypothesis. Texts are compared after stripping surrounding whitespace.
    """
    out = np.zeros(len(frame), dtype=bool)
    if ids_column not in frame.columns:
        return out
    for i, (p, h, ids) in enumerate(
        zip(frame["premise"], frame["hypothesis"], frame[ids_column], strict=True)
    ):
        if not (_is_text(p) and _is_text(h)) or ids is None or isinstance(ids, (str, float)):
            continue
        shown = [examples[str(x)] for x in list(ids) if str(x) in examples]
        premises = {str(ep).strip() for ep, _ in shown}
        hypotheses = {str(eh).strip() for _, eh in shown}
        pairs = {(str(ep).strip(), str(eh).strip()) for ep, eh in shown}
        p, h = p.strip(), h.strip()
        out[i] = (p, h) in pairs or (p in premises and h in hypotheses)
    return out


def heuristic_masks(
    frame: pd.DataFrame, examples: Mapping[str, tuple[str, str]], cfg: FilterConfig = FilterConfig()
) -> list[tuple[str, np.ndarray]]:
    """(rule name, mask of the rows it flags) for every heuristic, in WaNLI's order."""
    return [
        ("too_short", rule_too_short(frame, cfg.min_chars)),
        ("same_text", rule_same_text(frame)),
        ("instruction_phrase", rule_instruction_phrase(frame, cfg.instruction_phrases)),
        ("copied_example", rule_copied_example(frame, examples)),
    ]


def attribute(masks: Sequence[tuple[str, np.ndarray]], n: int) -> np.ndarray:
    """Per row the first rule (in order) that flags it, else None: object array [n]."""
    removed = np.full(n, None, dtype=object)
    for name, mask in masks:
        removed[np.asarray(mask, dtype=bool) & (removed == None)] = name  # noqa: E711 - elementwise
    return removed


def count_rules(removed_by: Sequence[Any], rules: Sequence[str] = ALL_RULES) -> dict[str, int]:
    """Rows removed per rule, every rule listed (0 when none)."""
    values = pd.Series(list(removed_by), dtype=object)
    return {rule: int((values == rule).sum()) for rule in rules}


def examples_by_id(run: Run) -> dict[str, tuple[str, str]]:
    """The run's training examples as id -> (premise, hypothesis)."""
    ex = run.examples()
    if "premise" not in ex.columns:
        raise CartomapError(
            f"run {run.id} is not on sentence pairs: WaNLI filtering needs premise/hypothesis"
        )
    return {
        str(i): (str(p), str(h))
        for i, p, h in zip(ex["id"].astype(str), ex["premise"], ex["hypothesis"], strict=True)
    }


# --------------------------------------------------------------------------- max variability
def max_variability(probs: np.ndarray) -> np.ndarray:
    """Estimated max variability [N] from probabilities [E, N, C]: max_y std_e p_e(y), ddof=0."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 3:
        raise ValueError(f"expected probabilities [epochs, examples, classes], got shape {probs.shape}")
    if probs.shape[1] == 0:
        return np.zeros(0, dtype=np.float64)
    return probs.std(axis=0, ddof=0).max(axis=1)


def _tokenizer_for(run: Run):
    """The run's tokenizer: saved with its final model, else the one of the model it started from."""
    from transformers import AutoTokenizer

    from cartomap.training.models import load_tokenizer, quiet_transformers

    if (run.model_dir / "tokenizer_config.json").exists():
        try:
            with quiet_transformers():
                return AutoTokenizer.from_pretrained(str(run.model_dir))
        except OSError as err:
            raise RunError(
                f"could not load the tokenizer of run {run.id} from {run.model_dir}: {err}"
            ) from err
    return load_tokenizer(run.resolve_path(run.config.model.name_or_path))


def checkpoint_probabilities(
    run: Run,
    frame: pd.DataFrame,
    batch_size: int = 64,
    device: str = "auto",
    progress: ProgressCallback | None = None,
) -> np.ndarray:
    """Softmax probabilities [E, N, C] of every (premise, hypothesis) row under each saved epoch checkpoint.

    Every checkpoint in ``run.checkpoint_dirs()`` runs in eval mode (no dropout) with the run's
    tokenizer and max_length. Rows are batched in length order and returned in the frame's order.
    """
    checkpoints = run.checkpoint_dirs()
    if not checkpoints and shipped.is_recording(run):
        raise RunError(f"run {run.id}: {shipped.NO_WEIGHTS}")
    if not checkpoints:
        raise RunError(
            f"run {run.id} has no end-of-epoch checkpoints, which estimated max variability needs: "
            "train with checkpoints (the default; not --no-checkpoints)"
        )
    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForSequenceClassification

    from cartomap.training.batching import DynamicPadding, TokenizedExamples, tokenize
    from cartomap.training.loop import model_inputs
    from cartomap.training.models import available_device, quiet_transformers

    n, n_classes = len(frame), len(run.label_names)
    out = np.zeros((len(checkpoints), n, n_classes), dtype=np.float32)
    if n == 0:
        return out
    device = available_device(device)
    tokenizer = _tokenizer_for(run)
    pairs = pd.DataFrame(
        {
            "premise": frame["premise"].astype(str).tolist(),
            "hypothesis": frame["hypothesis"].astype(str).tolist(),
        }
    )
    dataset = TokenizedExamples(
        tokenize(tokenizer, pairs, run.config.model.max_length), np.zeros(n, dtype=np.int64)
    )
    order = np.argsort(-dataset.lengths, kind="stable")
    batches = [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    loader = DataLoader(dataset, batch_sampler=batches, collate_fn=DynamicPadding(pad_id))
    total, done = len(checkpoints) * n, 0
    for e, folder in enumerate(checkpoints):
        try:
            with quiet_transformers():
                model = AutoModelForSequenceClassification.from_pretrained(str(folder))
        except OSError as err:
            raise RunError(f"could not load the checkpoint {folder}: {err}") from err
        if model.config.num_labels != n_classes:
            raise RunError(
                f"checkpoint {folder} has {model.config.num_labels} outputs, the run {n_classes} labels"
            )
        model.to(device).eval()
        with torch.inference_mode():
            for batch in loader:
                inputs = {k: v.to(device) for k, v in model_inputs(batch).items()}
                logits = model(**inputs).logits.float()
                out[e, batch["index"].numpy()] = torch.softmax(logits, dim=-1).cpu().numpy()
                done += len(batch["index"])
                if progress is not None:
                    progress(done, total)
        del model
    return out


# --------------------------------------------------------------------------- selection
def select_top(
    scores: Sequence[float] | np.ndarray,
    intended_labels: Sequence[Any],
    keep_fraction: float = 0.5,
    balance: bool = True,
) -> np.ndarray:
    """Boolean mask of the rows kept: the highest-scoring ``keep_fraction``.

    With ``balance`` (WaNLI), every intended label keeps the same number of rows,
    ``floor(keep_fraction * total / n_labels)``, where total is the number of rows and n_labels the
    number of distinct intended labels among them; a label with fewer rows than that keeps all of
    its rows (the shortfall is not given to other labels). Without ``balance``,
    ``floor(keep_fraction * total)`` rows are kept regardless of label. Ties keep the earlier row;
    a NaN score ranks lowest.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(list(intended_labels), dtype=object)
    if scores.shape != (len(labels),):
        raise ValueError(f"expected {len(labels)} scores, got shape {scores.shape}")
    if not 0.0 <= keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be between 0 and 1, got {keep_fraction}")
    keep = np.zeros(len(scores), dtype=bool)
    if len(scores) == 0:
        return keep
    ranked = np.where(np.isnan(scores), -np.inf, scores)
    if not balance:
        order = np.argsort(-ranked, kind="stable")
        keep[order[: int(np.floor(keep_fraction * len(scores) + 1e-9))]] = True
        return keep
    names = pd.unique(labels)
    per_label = int(np.floor(keep_fraction * len(scores) / len(names) + 1e-9))
    for name in names:
        rows = np.flatnonzero(labels == name)
        order = rows[np.argsort(-ranked[rows], kind="stable")]
        keep[order[:per_label]] = True
    return keep


# --------------------------------------------------------------------------- the stage
def filter_frame(
    generated: pd.DataFrame,
    examples: Mapping[str, tuple[str, str]],
    cfg: FilterConfig,
    probabilities: Callable[[pd.DataFrame], np.ndarray],
) -> pd.DataFrame:
    """Stage 3 on a generated frame; ``probabilities(survivors) -> [E, n, C]`` gives the checkpoints' outputs.

    Returns every row with premise/hypothesis tidied for survivors of the heuristics (originals in
    premise_raw/hypothesis_raw), removed_by, max_variability and kept.
    """
    frame = generated.reset_index(drop=True).copy()
    n = len(frame)
    frame["premise_raw"] = frame["premise"]
    frame["hypothesis_raw"] = frame["hypothesis"]
    removed = attribute(heuristic_masks(frame, examples, cfg), n)
    alive = removed == None  # noqa: E711
    for col in ("premise", "hypothesis"):
        frame[col] = [tidy(v) if ok else v for v, ok in zip(frame[col], alive, strict=True)]
    too_short_now = alive & rule_too_short(frame, cfg.min_chars)
    removed[too_short_now] = "too_short"
    alive = removed == None  # noqa: E711
    scores = np.full(n, np.nan, dtype=np.float64)
    rows = np.flatnonzero(alive)
    if rows.size:
        probs = np.asarray(probabilities(frame.iloc[rows]))
        scores[rows] = max_variability(probs)
        chosen = select_top(
            scores[rows], frame["intended_label"].iloc[rows].tolist(), cfg.keep_fraction, cfg.balance
        )
        removed[rows[~chosen]] = VARIABILITY_RULE
    frame["removed_by"] = pd.Series(removed, dtype=object)
    frame["max_variability"] = scores
    frame["kept"] = frame["removed_by"].isna()
    return frame


def cut_by_label(frame: pd.DataFrame) -> dict[str, float]:
    """Per intended label, the lowest max variability that was kept (the cut shown on plots)."""
    kept = frame[frame["kept"]]
    return {
        str(label): float(group["max_variability"].min())
        for label, group in kept.groupby("intended_label", sort=True)
        if group["max_variability"].notna().any()
    }


def run_filter(
    run: Run, batch: str, cfg: FilterConfig = FilterConfig(), progress: ProgressCallback | None = None
) -> pd.DataFrame:
    """Filter a generated batch (task ``filter-<batch>``); writes filtered.parquet and filter.json.

    Returns the filtered frame. Raises RunError when the run has no checkpoints.
    """
    from cartomap.runs.tasks import task, task_status, task_update, throttled_reporter

    name = task_name(batch)
    try:
        generated = load_generated(run, batch)
        if not run.checkpoint_dirs():
            checkpoint_probabilities(run, generated.iloc[:0])  # raises the "train with checkpoints" error
        examples = examples_by_id(run)
    except CartomapError as err:
        if (task_status(run, name) or {}).get("state") == State.QUEUED:  # started by the dashboard
            task_update(run, name, state=State.FAILED, error=str(err))
        raise
    t0 = time.time()
    with task(run, name, total=len(generated), batch=batch) as update:
        report = throttled_reporter(
            update,
            progress,
            lambda done, total: {
                "progress": round(0.05 + 0.9 * done / max(total, 1), 4),
                "phase": Phase.MAX_VARIABILITY,
            },
        )

        update(phase=Phase.HEURISTICS, progress=0.01)
        epochs = len(run.checkpoint_dirs())

        def probabilities(rows: pd.DataFrame) -> np.ndarray:
            return checkpoint_probabilities(run, rows, cfg.batch_size, cfg.device, report)

        frame = filter_frame(generated, examples, cfg, probabilities)
        counts = count_rules(frame["removed_by"])
        report_doc = {
            "batch": batch,
            "config": cfg.to_dict(),
            "counts": counts,
            "rules": list(ALL_RULES),
            "n_generated": int(len(frame)),
            "n_after_heuristics": int(len(frame) - sum(counts[r] for r in RULES)),
            "n_kept": int(frame["kept"].sum()),
            "kept_by_label": {
                str(k): int(v) for k, v in frame[frame["kept"]]["intended_label"].value_counts().items()
            },
            "cut_by_label": cut_by_label(frame),
            "epochs": epochs,
            "checkpoints": [p.name for p in run.checkpoint_dirs()],
            "seconds": round(time.time() - t0, 2),
            "created_at": time.time(),
        }
        update(phase=Phase.SAVING, progress=0.97)
        atomic_write_parquet(filtered_path(run, batch), frame)
        atomic_write_json(report_path(run, batch), report_doc)
        update(kept=report_doc["n_kept"], counts=counts)
    run.log(f"filter {batch}: {report_doc['n_kept']} of {len(frame)} kept; removed {counts}")
    return frame


# --------------------------------------------------------------------------- plot
def variability_figure(frame: pd.DataFrame, cuts: Mapping[str, float] | None = None, title: str = ""):
    """Plotly strip plot of estimated max variability by intended label (kept vs removed), with the cuts.

    Only rows that reached the variability step (a finite score) are drawn; no generated text
    goes into the figure (hover shows the gen_id and the score).
    """
    import plotly.graph_objects as go

    scored = frame[frame["max_variability"].notna()]
    labels = sorted(scored["intended_label"].astype(str).unique())
    fig = go.Figure()
    for kept, colour, name in (
        (True, "#1f77b4", "kept"),
        (False, "#bbbbbb", "removed (low max variability)"),
    ):
        part = scored[scored["kept"] == kept]
        fig.add_trace(
            go.Box(
                x=part["intended_label"].astype(str),
                y=part["max_variability"],
                name=name,
                boxpoints="all",
                jitter=0.5,
                pointpos=0,
                fillcolor="rgba(0,0,0,0)",
                line={"color": "rgba(0,0,0,0)"},
                marker={"color": colour, "size": 6, "opacity": 0.8},
                customdata=part["gen_id"].astype(str),
                hovertemplate="%{customdata}<br>max variability %{y:.4f}<extra></extra>",
            )
        )
    for i, label in enumerate(labels):
        cut = (cuts or {}).get(label)
        if cut is None:
            continue
        fig.add_shape(
            type="line",
            xref="x",
            yref="y",
            x0=i - 0.4,
            x1=i + 0.4,
            y0=cut,
            y1=cut,
            line={"color": "#d62728", "width": 2, "dash": "dash"},
        )
    fig.update_layout(
        title=title or "Estimated max variability by intended label (dashed: the cut)",
        xaxis={"title": "intended label", "categoryorder": "array", "categoryarray": labels},
        yaxis={"title": "max over labels of std over epochs of p(y)"},
        boxmode="overlay",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return fig
