"""Annotation-artifact analysis of an NLI dataset (WaNLI §4; METHODS.md section 2, "Artifact analysis").

* Lexical correlations in the style of Gardner et al. (2021), "Competency problems": for every word
  and label, p(label | word) against the number of examples that contain the word, with the curve
  above which a correlation is statistically detectable (:func:`lexical_correlations`,
  :func:`significance_curve`, :func:`lexical_figure`).
* Partial-input baselines (Gururangan et al. 2018): a classifier that sees only the hypothesis (or only
  the premise) should be at chance; how far above chance it gets measures the artifacts. Fast TF-IDF +
  logistic-regression baselines (:func:`bow_baseline`, :func:`partial_input_baselines`) and the config
  of a real transformer baseline trained as an ordinary run (:func:`hypothesis_only_config`).
* Premise-hypothesis similarity per label: see :mod:`cartomap.training.similarity` (:func:`similarity_figure`
  draws it).

Pure functions over arrays and frames; plotly and scikit-learn are imported where used. Dataset text is
untrusted: every word and label name that goes into a figure is HTML-escaped.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cartomap.analysis.style import escape, palette_color
from cartomap.config import OrderConfig, RunConfig
from cartomap.data.dataset import TextDataset
from cartomap.errors import DataError, RunError
from cartomap.tasks import registry as task_kinds
from cartomap.tasks import support
from cartomap.tasks.sequence import PAIR, SINGLE

#: A word: a run of letters, digits or underscores, with inner apostrophes kept ("don't", "man's").
#: Punctuation is dropped. The same pattern tokenizes the TF-IDF baselines.
WORD_PATTERN = r"\w+(?:['’]\w+)*"
_WORD_RE = re.compile(WORD_PATTERN)

LEXICAL_COLUMNS = ("word", "label", "count", "p_label", "z", "p_value", "significant")
DEFAULT_MIN_COUNT = 20  # words in fewer examples are left out (too rare to test; the plot stays readable)
DEFAULT_ALPHA = 0.01  # family-wise significance level, Bonferroni-corrected over all (word, label) tests
SAGA_FROM = 5_000  # training rows from which the baselines' logistic regression uses the saga solver
TEST_FRACTION = 0.2  # held-out share when no test set is given (stratified; pairs split by premise)
#: A pair's two texts (NLI's premise and hypothesis), as the pair kind names them.
FIRST, SECOND = PAIR.text_fields
BASELINE_COLUMNS = (
    "input",
    "train_examples",
    "test_examples",
    "accuracy",
    "macro_f1",
    "majority_accuracy",
    "chance",
)
WHICH = (SECOND, FIRST)


# --------------------------------------------------------------------------- words
def tokenize_words(texts: Sequence[str], lowercase: bool = True) -> list[list[str]]:
    """Word tokens of every text: the matches of :data:`WORD_PATTERN` (``\\w+`` with inner apostrophes),
    lowercased by default. "The man isn't sleeping." -> ["the", "man", "isn't", "sleeping"]."""
    return [_WORD_RE.findall(t.lower() if lowercase else t) for t in map(str, texts)]


def _presence(texts: Sequence[str], lowercase: bool):
    """(vocabulary, binary sparse matrix [examples, words]): each word counted once per example."""
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(binary=True, lowercase=lowercase, token_pattern=WORD_PATTERN)
    try:
        matrix = vectorizer.fit_transform([str(t) for t in texts])
    except ValueError:  # empty vocabulary: no text has a word
        return np.array([], dtype=object), None
    return vectorizer.get_feature_names_out(), matrix.tocsc()


def require_kind(kind, location: str | None = None) -> None:
    """DataError when task ``kind`` has no one label per example. Both analyses are of one label among
    several: p(label | word) is tested against the uniform null 1/|labels| of mutually exclusive labels,
    and a partial-input baseline is a classifier of that one label. A multi-label set would need each
    label tested on its own (p(present | word) against that label's own rate) and a one-vs-rest
    baseline per label; a token run's tags are per word, not per text."""
    support.ARTIFACTS.require(kind, location)


def _check_labels(labels: np.ndarray, n: int, label_names: Sequence[str]) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise DataError(f"labels: expected one label per text ({n}), got shape {labels.shape}")
    if len(label_names) < 2:
        raise DataError(f"label_names: expected at least two classes, got {list(label_names)}")
    if n and (
        not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0 or labels.max() >= len(label_names)
    ):
        raise DataError(f"labels: expected integer codes 0..{len(label_names) - 1} into label_names")
    return labels.astype(np.int64)


def lexical_correlations(
    texts: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    label_names: Sequence[str],
    min_count: int = DEFAULT_MIN_COUNT,
    alpha: float = DEFAULT_ALPHA,
    lowercase: bool = True,
) -> pd.DataFrame:
    """Gardner et al. (2021) word-label statistics: one row per (word, label), most over-represented first.

    For word x_i present in n examples (counted once per example, words from :func:`tokenize_words`)
    and label y: ``p_label`` = p̂(y | x_i) = n(x_i, y) / n, and against the uniform null p0 = 1/|labels|

        z = (p̂ - p0) / sqrt(p0 (1 - p0) / n),   p_value = P(Z >= z)  (one-sided, normal approximation).

    ``significant``: p_value < alpha / m, Bonferroni over the m = (#words with n >= min_count) x |labels|
    tests, i.e. every row of the table (so m == len(result)). Higher z = the word is more suspect of
    being an artifact for that label. The null assumes balanced labels: balance the data first
    (:func:`cartomap.data.derived.balanced_sample`), as the paper does. Columns: :data:`LEXICAL_COLUMNS`.
    """
    from scipy.stats import norm

    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if min_count < 1:
        raise ValueError(f"min_count must be at least 1, got {min_count}")
    texts = list(texts)
    codes = _check_labels(np.asarray(labels), len(texts), label_names)
    n_labels = len(label_names)
    vocab, presence = _presence(texts, lowercase)
    if presence is None:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in LEXICAL_COLUMNS})
    counts = np.asarray(presence.sum(axis=0)).ravel()
    keep = np.flatnonzero(counts >= min_count)
    presence, vocab, counts = presence[:, keep], vocab[keep], counts[keep]
    onehot = np.zeros((len(texts), n_labels), dtype=np.float64)
    onehot[np.arange(len(texts)), codes] = 1.0
    joint = np.asarray(presence.T @ onehot)  # [words, labels]: examples with the word and the label

    n = np.repeat(counts, n_labels).astype(np.float64)
    p_hat = joint.ravel() / np.maximum(n, 1)
    p0 = 1.0 / n_labels
    z = (p_hat - p0) / np.sqrt(p0 * (1 - p0) / np.maximum(n, 1))
    p_value = norm.sf(z)
    n_tests = max(len(z), 1)
    frame = pd.DataFrame(
        {
            "word": np.repeat(vocab, n_labels).astype(str),
            "label": np.tile(np.asarray([str(x) for x in label_names], dtype=object), len(vocab)),
            "count": n.astype(np.int64),
            "p_label": p_hat,
            "z": z,
            "p_value": p_value,
            "significant": p_value < alpha / n_tests,
        }
    )
    frame = frame.sort_values(["z", "count", "word"], ascending=[False, False, True], kind="stable")
    return frame.reset_index(drop=True)


def significance_curve(counts, n_labels: int, alpha: float, n_tests: int) -> np.ndarray:
    """The smallest p(label | word) that is significant for a word in n examples, for every n of ``counts``:

        p0 + z_crit * sqrt(p0 (1 - p0) / n),   p0 = 1 / n_labels,   z_crit = Φ⁻¹(1 - alpha / n_tests)

    (the one-sided Bonferroni-corrected critical value of :func:`lexical_correlations`). Points above the
    curve are detectable correlations; the curve falls towards p0 as n grows.
    """
    from scipy.stats import norm

    if n_labels < 2:
        raise ValueError(f"n_labels must be at least 2, got {n_labels}")
    if n_tests < 1:
        raise ValueError(f"n_tests must be at least 1, got {n_tests}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = np.asarray(counts, dtype=np.float64)
    if np.any(n <= 0):
        raise ValueError("counts must be positive")
    p0 = 1.0 / n_labels
    z_crit = norm.isf(alpha / n_tests)
    return p0 + z_crit * np.sqrt(p0 * (1 - p0) / n)


def top_words(table: pd.DataFrame, n: int = 50, significant_only: bool = True) -> pd.DataFrame:
    """The ``n`` (word, label) rows with the highest z (only the significant ones unless told otherwise)."""
    rows = table[table["significant"]] if significant_only else table
    return rows.sort_values("z", ascending=False, kind="stable").head(n).reset_index(drop=True)


# --------------------------------------------------------------------------- partial-input baselines
def _features(train_texts, test_texts):
    """TF-IDF of word 1-2 grams; a DataFrame of several text columns gets one vectorizer per column."""
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer

    def vectorizer():
        return TfidfVectorizer(
            ngram_range=(1, 2), lowercase=True, token_pattern=WORD_PATTERN, sublinear_tf=True
        )

    if isinstance(train_texts, pd.DataFrame):
        if list(train_texts.columns) != list(test_texts.columns):
            raise ValueError("train and test texts must have the same columns")
        parts = []
        for col in train_texts.columns:
            vec = vectorizer()
            parts.append(
                (vec.fit_transform(train_texts[col].astype(str)), vec.transform(test_texts[col].astype(str)))
            )
        return hstack([p[0] for p in parts]).tocsr(), hstack([p[1] for p in parts]).tocsr()
    vec = vectorizer()
    return vec.fit_transform([str(t) for t in train_texts]), vec.transform([str(t) for t in test_texts])


def bow_baseline(
    train_texts: Sequence[str] | pd.DataFrame,
    train_labels,
    test_texts: Sequence[str] | pd.DataFrame,
    test_labels,
    seed: int = 0,
) -> dict[str, Any]:
    """A fast bag-of-words classifier: TF-IDF of word 1-2 grams (sublinear tf) + L2 logistic regression
    (scikit-learn, C = 1; saga solver from :data:`SAGA_FROM` rows, lbfgs below).

    Texts are a list of strings, or a DataFrame of text columns (e.g. premise and hypothesis), each
    column with its own vocabulary. Returns ``accuracy`` and ``macro_f1`` on the test set, and
    ``majority_accuracy``: the accuracy of always predicting the most frequent training label. On a
    partial input, accuracy above the majority baseline = label information in that input alone
    (higher = more artifacts).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from threadpoolctl import threadpool_limits

    y_train, y_test = np.asarray(train_labels), np.asarray(test_labels)
    if len(y_train) != len(train_texts) or len(y_test) != len(test_texts):
        raise ValueError("expected one label per text")
    if len(np.unique(y_train)) < 2:
        raise DataError("baseline: the training part has fewer than two classes")
    if len(y_test) == 0:
        raise DataError("baseline: the test part is empty")
    x_train, x_test = _features(train_texts, test_texts)
    # saga on the L2-normalised TF-IDF rows: ~20x faster than lbfgs on 30k pairs, same accuracy (±0.1%);
    # lbfgs on small sets, where saga converges slowly (separable toy data) and speed does not matter
    if len(y_train) >= SAGA_FROM:
        model = LogisticRegression(solver="saga", tol=1e-3, max_iter=300, random_state=seed)
    else:
        model = LogisticRegression(solver="lbfgs", max_iter=1000, random_state=seed)
    # One BLAS thread: the work is sparse, and a busy machine's BLAS threads slow lbfgs down ~20x.
    with threadpool_limits(limits=1):
        model.fit(x_train, y_train)
        predicted = model.predict(x_test)
    values, counts = np.unique(y_train, return_counts=True)
    majority = values[np.argmax(counts)]  # ties: the smallest label code
    return {
        "accuracy": float(accuracy_score(y_test, predicted)),
        "macro_f1": float(f1_score(y_test, predicted, average="macro", zero_division=0)),
        "majority_accuracy": float(np.mean(y_test == majority)),
        "train_examples": int(len(y_train)),
        "test_examples": int(len(y_test)),
    }


def split_train_test(
    dataset: TextDataset, test_fraction: float = TEST_FRACTION, seed: int = 0
) -> tuple[TextDataset, TextDataset]:
    """A stratified random split: (train part, held-out part of about ``test_fraction``).

    Pairs whose premise occurs more than once are split by premise (every pair of a premise on the same
    side, stratified as far as possible: scikit-learn's StratifiedGroupKFold, one fold held out)."""
    from sklearn.model_selection import train_test_split

    counts = np.bincount(dataset.labels, minlength=dataset.num_labels)
    if np.any((counts > 0) & (counts < 2)) or len(dataset) < 2 * dataset.num_labels:
        raise DataError(
            f"{dataset.source}: a held-out split needs at least 2 examples of every class present; "
            f"class counts {dict(zip(dataset.label_names, counts.tolist(), strict=True))}"
        )
    positions = np.arange(len(dataset))
    if dataset.is_pair:
        # A premise written with one hypothesis per label (MultiNLI, SNLI) must not be on both sides:
        # a premise-only model would learn "seen with A and B, so C" and score far below chance.
        groups = pd.factorize(dataset.frame[dataset.text_columns[0]])[0]
        n_splits = max(2, int(round(1 / test_fraction)))
        if len(np.unique(groups)) < len(groups) and len(np.unique(groups)) >= n_splits:
            from sklearn.model_selection import StratifiedGroupKFold

            folds = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
            train_idx, test_idx = next(folds.split(positions, dataset.labels, groups))
            return dataset.subset(np.sort(train_idx)), dataset.subset(np.sort(test_idx))
    n_test = max(int(round(test_fraction * len(dataset))), int(np.count_nonzero(counts)))
    train_idx, test_idx = train_test_split(
        positions, test_size=n_test, stratify=dataset.labels, random_state=seed
    )
    return dataset.subset(np.sort(train_idx)), dataset.subset(np.sort(test_idx))


def partial_inputs(columns) -> list[tuple[str, tuple[str, ...]]]:
    """The inputs of a two-text kind's baselines, as NLI's are (the second text alone, the first alone,
    both), named by the kind's own fields: ``hypothesis only``, ``premise only``, ``premise + hypothesis``
    for a pair; ``evidence only``, ... for a claim and its evidence."""
    first, second = columns[:2]
    return [
        (f"{second} only", (second,)),
        (f"{first} only", (first,)),
        (f"{first} + {second}", (first, second)),
    ]


def side_column(columns, which: str) -> str:
    """The column of a two-text kind that plays NLI's ``which`` (:data:`WHICH`): the first text is the
    premise's place, the second the hypothesis's."""
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, got {which!r}")
    return columns[PAIR.text_fields.index(which)]


def partial_input_baselines(
    train: TextDataset, test: TextDataset | None = None, seed: int = 0, balanced: bool = True
) -> pd.DataFrame:
    """:func:`bow_baseline` on the hypothesis alone, the premise alone and both (pairs), or the text.

    ``balanced``: train on a label-balanced sample (:func:`cartomap.data.derived.balanced_sample`), as WaNLI
    does. Without ``test`` the (balanced) training set is split 80/20, stratified; a given test set is
    used as it is (compare with ``majority_accuracy``). ``chance`` = 1/|labels|. Columns:
    :data:`BASELINE_COLUMNS`; one row per input.
    """
    from cartomap.data.derived import balanced_sample

    require_kind(train.task_kind, train.source)
    if test is not None:
        if tuple(test.label_names) != tuple(train.label_names):
            raise DataError(
                f"test set: classes {list(test.label_names)} differ from the training set's {list(train.label_names)}"
            )
        if test.text_columns != train.text_columns:
            raise DataError("test set: one dataset has pairs, the other single texts")
    data = balanced_sample(train, seed=seed) if balanced else train
    if test is None:
        data, test = split_train_test(data, seed=seed)
    inputs = (
        partial_inputs(train.text_columns)
        if train.is_pair
        else [(train.task_kind.fields_label, train.text_columns)]
    )
    rows = []
    for name, columns in inputs:
        cols = list(columns)
        texts_train = data.frame[cols] if len(cols) > 1 else data.frame[cols[0]].tolist()
        texts_test = test.frame[cols] if len(cols) > 1 else test.frame[cols[0]].tolist()
        result = bow_baseline(texts_train, data.labels, texts_test, test.labels, seed=seed)
        rows.append({"input": name, **result, "chance": 1.0 / train.num_labels})
    return pd.DataFrame(rows, columns=list(BASELINE_COLUMNS))


# --------------------------------------------------------------------------- transformer baseline
def one_side(dataset: TextDataset, which: str) -> TextDataset:
    """The single-text dataset of the premises or the hypotheses of ``dataset`` (ids, labels and extra
    columns kept). The other text is dropped, not merely unmapped: a pair's text column left in a
    frame would make the rows read as pairs again (``TextDataset.is_pair``)."""
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, got {which!r}")
    if not dataset.is_pair:
        raise DataError(f"{dataset.source}: a {which}-only baseline needs {PAIR.fields_label} pairs")
    frame = dataset.frame.drop(columns=list(task_kinds.text_fields_in(dataset.frame.columns)))
    frame.insert(1, SINGLE.text_fields[0], dataset.frame[side_column(dataset.text_columns, which)].to_numpy())
    return TextDataset(
        frame=frame, label_names=dataset.label_names, source=f"{dataset.source} ({which} only)"
    )


def hypothesis_only_config(
    base: RunConfig, dataset: TextDataset, cache: str | Path, which: str = SECOND
) -> RunConfig:
    """A RunConfig that fine-tunes ``base``'s transformer on the hypothesis alone (``which="premise"``:
    the premise alone) of a label-balanced sample of ``dataset`` (WaNLI §4.1).

    The sample, reduced to that one text (:func:`one_side`), is saved once with
    :func:`cartomap.data.derived.save_dataset` under ``<cache>/datasets/``, so the baseline is an ordinary run
    (start it with :func:`cartomap.training.launch.start_training`; the same call again gives the same config, so
    the same run). Evaluation: ``base``'s dev and test sets, loaded and reduced to the same side and
    saved the same way; without a dev set, a stratified 20% of the sample (split by premise) is held out
    as dev. Model and training options are ``base``'s; the order is plain shuffled training.
    """
    from cartomap.data.derived import balanced_sample, save_dataset
    from cartomap.data.loading import load_dataset

    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, got {which!r}")
    if not dataset.is_pair:
        raise DataError(f"{dataset.source}: a {which}-only baseline needs {PAIR.fields_label} pairs")
    names = tuple(dataset.label_names)

    def saved(part: TextDataset):
        return save_dataset(one_side(part, which), cache)

    sample = balanced_sample(dataset, seed=base.train.seed)
    if base.dev is None:
        sample, held_out = split_train_test(sample, seed=base.train.seed)
        dev = saved(held_out)
    else:
        dev = saved(load_dataset(base.dev, label_names=names))
    tests = tuple(saved(load_dataset(t, label_names=names)) for t in base.tests)
    name = f"{which}-only" + (f" · {base.name}" if base.name else "")
    return dataclasses.replace(base, data=saved(sample), dev=dev, tests=tests, order=OrderConfig(), name=name)


def find_run(store, config: RunConfig):
    """The run of ``store`` made with ``config`` (same identity), newest first; None if there is none.

    Cheap (reads config files only), unlike :func:`cartomap.training.prepare.prepare_run`, which loads the data."""
    wanted = config.identity()
    for run in store.list():
        try:
            if RunConfig.from_dict(run.info["config"]).identity() == wanted:
                return run
        except (KeyError, TypeError, ValueError, OSError, RunError):  # being written, or damaged
            continue
    return None


# --------------------------------------------------------------------------- figures
def _label_color(code: int) -> str:
    """The colour of label ``code``, the same in every figure of this module."""
    return palette_color(code)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... between lo and hi: readable ticks for a log axis of counts."""
    ticks = [m * 10**e for e in range(0, 10) for m in (1, 2, 5)]
    return [t for t in ticks if lo <= t <= hi]


def lexical_figure(
    table: pd.DataFrame,
    alpha: float = DEFAULT_ALPHA,
    title: str = "",
    label_names: Sequence[str] | None = None,
):
    """Plotly scatter of p(label | word) (y) against the word's count (x, log), one colour per label,
    and the :func:`significance_curve` (dashed): points above it are detectable correlations.
    Hover shows the (HTML-escaped) word; ``table`` is a :func:`lexical_correlations` result. Labels
    are drawn in ``label_names`` order (default: their order in the table), coloured by position."""
    import plotly.graph_objects as go

    fig = go.Figure()
    present = list(dict.fromkeys(table["label"].astype(str)))
    labels = [str(x) for x in label_names] if label_names is not None else present
    for code, label in enumerate(labels):
        rows = table[table["label"].astype(str) == label]
        hover = (
            escape(rows["word"]).to_numpy()
            + " → "
            + escape([label]).iloc[0]
            + np.where(rows["significant"].to_numpy(), " (significant)", "")
        )
        fig.add_trace(
            go.Scattergl(
                x=rows["count"],
                y=rows["p_label"],
                mode="markers",
                name=escape([label]).iloc[0],
                hovertext=hover,
                hovertemplate="%{hovertext}<br>count %{x} · p(label | word) %{y:.3f}<extra></extra>",
                marker={"size": 6, "opacity": 0.65, "color": _label_color(code)},
            )
        )
    if len(table) and labels:
        n_labels = len(present) if label_names is None else len(labels)
        lo, hi = max(float(table["count"].min()), 1.0), max(float(table["count"].max()), 2.0)
        grid = np.geomspace(lo, hi * 1.05, 200)
        curve = significance_curve(grid, n_labels, alpha, len(table))
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=np.minimum(curve, 1.0),
                mode="lines",
                name=f"significant above (α = {alpha:g}, Bonferroni)",
                line={"color": "royalblue", "dash": "dash"},
                hovertemplate="count %{x:.0f}: significant above %{y:.3f}<extra></extra>",
            )
        )
        fig.add_hline(y=1.0 / n_labels, line={"color": "grey", "width": 1, "dash": "dot"})
    fig.update_layout(
        title=title or None,
        xaxis={
            "type": "log",
            "title": "examples containing the word (n)",
            "tickvals": _log_ticks(float(table["count"].min()), float(table["count"].max()) * 1.05)
            if len(table)
            else None,
        },
        yaxis={"title": "p(label | word)", "range": [0, 1.02]},
        legend={"title": "label", "orientation": "h", "yanchor": "bottom", "y": 1.01},
        margin={"t": 70 if title else 40},
        height=520,
    )
    return fig


def similarity_figure(frame: pd.DataFrame, label_names: Sequence[str], title: str = ""):
    """Violin (with box) plots of premise-hypothesis similarity per gold label; ``frame`` has columns
    ``label`` (int codes) and ``similarity``."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for code, name in enumerate(label_names):
        values = frame.loc[frame["label"] == code, "similarity"]
        if values.empty:
            continue
        fig.add_trace(
            go.Violin(
                y=values,
                name=escape([name]).iloc[0],
                box_visible=True,
                meanline_visible=True,
                points=False,
                hoverinfo="y",
                line={"color": _label_color(code)},
            )
        )
    fig.update_layout(
        title=title or None,
        yaxis={"title": f"cosine similarity ({FIRST}, {SECOND})"},
        xaxis={"title": "gold label"},
        showlegend=False,
        margin={"t": 40 if title else 10},
        height=420,
    )
    return fig
