"""Import / export in the file format of the reference Dataset Cartography code.

The reference (allenai/cartography, ``selection_utils.log_training_dynamics`` and
``read_training_dynamics`` at commit 6c43e86) writes a *model folder*::

    MODEL_DIR/training_dynamics/dynamics_epoch_{E}.jsonl    one file per epoch, E = 0 .. n-1
    MODEL_DIR/td_metrics.jsonl                              written by train_dy_filtering.py

Each dynamics line is ``{"guid": ..., "logits_epoch_{E}": [raw logits], "gold": label index}``; its
reader counts *every file* in ``training_dynamics/`` as an epoch and opens
``dynamics_epoch_{e}.jsonl`` for e = 0 .. count-1, so nothing else may live in that folder.
``td_metrics.jsonl`` holds guid, index, threshold_closeness, confidence, variability, correctness
(integer count of correct epochs) and forgetfulness (1000 = never learned). SNLI and MNLI guids are
integers there; :func:`guid_value` keeps integer ids as JSON integers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.errors import DataError
from cartomap.io import atomic_write_bytes, atomic_write_text, refuse_overwrite
from cartomap.scores.metrics import compute_metrics

DYNAMICS_PATTERN = re.compile(r"^dynamics_epoch_(\d+)\.jsonl$")
DYNAMICS_NAME = "dynamics_epoch_{epoch}.jsonl"
#: The dynamics folder inside a reference model folder.
DYNAMICS_DIR = "training_dynamics"
METRICS_NAME = "td_metrics.jsonl"
#: cartomap's full metrics table, written beside td_metrics.jsonl by an export.
METRICS_CSV = "metrics.csv"
#: What the reference code writes as forgetfulness of an example that was never learned.
NEVER_LEARNED_SENTINEL = 1000


@dataclass
class ReferenceDynamics:
    """Training dynamics read from a reference folder.

    ids: guids as strings, in the order of the first epoch file; logits: float32 [E, N, C];
    gold: int64 [N]; epochs: the epoch numbers of the files, ascending.
    """

    ids: list[str]
    logits: np.ndarray
    gold: np.ndarray
    epochs: list[int]


def _is_int(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def _read_epoch(path: Path, epoch: int, n_classes: int | None):
    """Parse one epoch file -> (guids, logits [N, C] float32, gold [N], locations, n_classes)."""
    key = f"logits_epoch_{epoch}"
    guids: list[str] = []
    rows: list[list[float]] = []
    golds: list[int] = []
    lines: list[int] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            loc = f"{path.name}:{lineno}"
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DataError(f"malformed JSON line ({exc.msg})", location=loc) from None
            if not isinstance(record, dict):
                raise DataError("each line must be a JSON object", location=loc)
            for field in ("guid", key, "gold"):
                if field not in record:
                    raise DataError(
                        f"missing key {field!r}; each line of {path.name} needs 'guid', {key!r} and 'gold'",
                        location=loc,
                        field=field,
                    )
            guid = str(record["guid"])
            if guid in seen:
                raise DataError(
                    f"duplicate guid {guid!r} (first on line {seen[guid]})", location=loc, field="guid"
                )
            seen[guid] = lineno
            values = record[key]
            if (
                not isinstance(values, list)
                or not values
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            ):
                raise DataError("logits must be a non-empty list of numbers", location=loc, field=key)
            if not all(math.isfinite(v) for v in values):
                raise DataError("logits must be finite numbers", location=loc, field=key)
            if n_classes is None:
                n_classes = len(values)
            elif len(values) != n_classes:
                raise DataError(
                    f"{len(values)} logits where earlier lines have {n_classes}", location=loc, field=key
                )
            gold = record["gold"]
            if not _is_int(gold) or not 0 <= int(gold) < n_classes:
                raise DataError(
                    f"gold must be a label index in [0, {n_classes}), got {gold!r}",
                    location=loc,
                    field="gold",
                )
            guids.append(guid)
            rows.append(values)
            golds.append(int(gold))
            lines.append(lineno)
    if not guids:
        raise DataError("file holds no examples", location=path.name)
    return guids, np.asarray(rows, dtype=np.float32), np.asarray(golds, dtype=np.int64), lines, n_classes


def dynamics_folder(folder: str | Path) -> Path:
    """The folder of epoch files: ``folder/training_dynamics`` for a reference model folder, else ``folder``."""
    folder = Path(folder)
    inner = folder / DYNAMICS_DIR
    return inner if inner.is_dir() else folder


def list_dynamics_files(folder: str | Path) -> list[tuple[int, Path]]:
    """The ``dynamics_epoch_{E}.jsonl`` files of ``folder`` (or of its ``training_dynamics/``, a
    reference model folder) as (E, path), sorted by E numerically."""
    folder = dynamics_folder(folder)
    if not folder.is_dir():
        raise DataError(
            f"folder not found; expected a folder of {DYNAMICS_NAME.format(epoch='{E}')} files",
            location=str(folder),
        )
    found = []
    for path in folder.iterdir():
        match = DYNAMICS_PATTERN.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    if not found:
        raise DataError(
            "no training-dynamics files; expected files named dynamics_epoch_0.jsonl, "
            "dynamics_epoch_1.jsonl, ... (one per epoch)",
            location=str(folder),
        )
    found.sort(key=lambda item: item[0])
    return found


def read_reference_dynamics(folder: str | Path) -> ReferenceDynamics:
    """Read a reference training-dynamics folder; rows aligned by guid across epochs.

    Raises DataError (with file:line location and field) for a missing folder or files, malformed
    JSON, missing keys, logits of inconsistent length, a guid missing from an epoch, extra or
    duplicated, and a gold label that differs between epochs.
    """
    files = list_dynamics_files(folder)
    n_classes: int | None = None
    ids: list[str] = []
    position: dict[str, int] = {}
    gold_ref = np.empty(0, dtype=np.int64)
    stacked: list[np.ndarray] = []
    for k, (epoch, path) in enumerate(files):
        guids, logits, gold, lines, n_classes = _read_epoch(path, epoch, n_classes)
        if k == 0:
            ids = guids
            position = {g: i for i, g in enumerate(ids)}
            gold_ref = gold
            stacked.append(logits)
            continue
        order = np.fromiter((position.get(g, -1) for g in guids), dtype=np.int64, count=len(guids))
        if np.any(order < 0):
            j = int(np.flatnonzero(order < 0)[0])
            raise DataError(
                f"guid {guids[j]!r} is not in {files[0][1].name}",
                location=f"{path.name}:{lines[j]}",
                field="guid",
            )
        if len(guids) != len(ids):
            present = np.zeros(len(ids), dtype=bool)
            present[order] = True
            missing = ids[int(np.flatnonzero(~present)[0])]
            raise DataError(
                f"guid {missing!r} of {files[0][1].name} is missing ({len(ids) - len(guids)} missing in all)",
                location=path.name,
                field="guid",
            )
        differs = gold != gold_ref[order]
        if np.any(differs):
            j = int(np.flatnonzero(differs)[0])
            raise DataError(
                f"gold {int(gold[j])} for guid {guids[j]!r} differs from {int(gold_ref[order[j]])} "
                f"in {files[0][1].name}",
                location=f"{path.name}:{lines[j]}",
                field="gold",
            )
        aligned = np.empty_like(logits)
        aligned[order] = logits
        stacked.append(aligned)
    return ReferenceDynamics(
        ids=ids, logits=np.stack(stacked), gold=gold_ref, epochs=[epoch for epoch, _ in files]
    )


def metrics_from_reference(folder: str | Path, burn_out: int | None = None) -> pd.DataFrame:
    """Read a reference dynamics folder and compute :func:`cartomap.scores.metrics.compute_metrics` on it
    (over the first ``burn_out`` epochs only, as the reference's ``--burn_out``)."""
    dynamics = read_reference_dynamics(folder)
    return compute_metrics(dynamics.logits, dynamics.gold, dynamics.ids, burn_out=burn_out)


def guid_value(guid):
    """A guid as the reference writes it: an int when the id is an integer written canonically
    ("17", "-3"; not "007" or "1.0"), else the string."""
    text = str(guid)
    try:
        number = int(text)
    except ValueError:
        return text
    return number if str(number) == text else text


def write_reference_dynamics(
    folder: str | Path,
    ids: Sequence,
    logits: np.ndarray,
    gold: np.ndarray,
    epochs: Sequence[int] | None = None,
) -> list[Path]:
    """Write ``dynamics_epoch_{E}.jsonl`` files (E from ``epochs``, default 0..E-1), each atomically.

    logits: [E, N, C] raw logits; gold: [N]; ids: N guids (integers stay integers: :func:`guid_value`).
    """
    logits = np.asarray(logits)
    gold = np.asarray(gold)
    ids = [guid_value(g) for g in ids]
    if logits.ndim != 3:
        raise DataError(
            f"expected logits of shape [epochs, examples, classes], got {logits.shape}", field="logits"
        )
    n_epochs, n_examples, _ = logits.shape
    if len(ids) != n_examples or gold.shape != (n_examples,):
        raise DataError(
            f"expected {n_examples} ids and gold labels, got {len(ids)} and {gold.shape[0] if gold.ndim else 0}",
            field="ids",
        )
    epochs = list(range(n_epochs)) if epochs is None else [int(e) for e in epochs]
    if len(epochs) != n_epochs or len(set(epochs)) != n_epochs:
        raise ValueError(f"epochs must be {n_epochs} distinct integers, got {epochs}")
    gold_list = gold.astype(np.int64).tolist()
    folder = Path(folder)
    written = []
    for k, epoch in enumerate(epochs):
        key = f"logits_epoch_{epoch}"
        rows = logits[k].astype(np.float64).tolist()
        text = "".join(
            json.dumps({"guid": g, key: row, "gold": y}) + "\n"
            for g, row, y in zip(ids, rows, gold_list, strict=True)
        )
        written.append(atomic_write_text(folder / DYNAMICS_NAME.format(epoch=epoch), text))
    return written


def reference_metrics_frame(metrics: pd.DataFrame) -> pd.DataFrame:
    """The ``td_metrics.jsonl`` columns from a :func:`compute_metrics` frame.

    correctness = integer count of correct epochs; forgetfulness = 1000 for never-learned examples
    (reference sentinel), plus a ``never_learned`` bool column.
    """
    needed = ["id", "index", "threshold_closeness", "confidence", "variability", "correct_count"]
    needed += ["forgetfulness", "never_learned"]
    missing = [c for c in needed if c not in metrics.columns]
    if missing:
        raise DataError(f"metrics frame lacks columns {missing}", field=missing[0])
    never = metrics["never_learned"].to_numpy(dtype=bool)
    forget = np.where(never, NEVER_LEARNED_SENTINEL, metrics["forgetfulness"].to_numpy(dtype=np.int64))
    return pd.DataFrame(
        {
            "guid": np.asarray([guid_value(g) for g in metrics["id"]], dtype=object),
            "index": metrics["index"].to_numpy(dtype=np.int64),
            "threshold_closeness": metrics["threshold_closeness"].to_numpy(dtype=np.float64),
            "confidence": metrics["confidence"].to_numpy(dtype=np.float64),
            "variability": metrics["variability"].to_numpy(dtype=np.float64),
            "correctness": metrics["correct_count"].to_numpy(dtype=np.int64),
            "forgetfulness": forget.astype(np.int64),
            "never_learned": never,
        }
    )


def write_reference_metrics(path: str | Path, metrics_frame: pd.DataFrame) -> Path:
    """Write ``td_metrics.jsonl`` in the reference shape (one JSON object per line), atomically.

    ``path`` may be a folder (then ``td_metrics.jsonl`` inside it) or a file path.
    """
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_NAME
    frame = reference_metrics_frame(metrics_frame)
    text = frame.to_json(orient="records", lines=True, double_precision=15) if len(frame) else ""
    if text and not text.endswith("\n"):
        text += "\n"
    return atomic_write_text(path, text)


def write_reference_export(
    folder: str | Path,
    ids: Sequence,
    logits: np.ndarray,
    gold: np.ndarray,
    metrics: pd.DataFrame,
    force: bool = False,
) -> list[Path]:
    """A reference model folder (module docstring): ``training_dynamics/dynamics_epoch_E.jsonl`` for
    every epoch, ``td_metrics.jsonl`` and cartomap's full ``metrics.csv`` beside that folder.

    Refuses (CartomapError, nothing written) when a file would be replaced or ``training_dynamics/``
    already holds other files (the reference would count them as epochs), unless ``force``; with
    ``force`` the stale files of ``training_dynamics/`` are removed."""
    folder = Path(folder)
    n_epochs = np.asarray(logits).shape[0]
    dyn = folder / DYNAMICS_DIR
    planned = [dyn / DYNAMICS_NAME.format(epoch=e) for e in range(n_epochs)]
    planned += [folder / METRICS_NAME, folder / METRICS_CSV]
    extra = sorted(p for p in dyn.iterdir() if p not in planned) if dyn.is_dir() else []
    refuse_overwrite([p for p in planned if p.exists()] + extra, force)
    for path in extra:  # with force: the reference counts every file of the folder as an epoch
        if path.is_dir():
            raise DataError(
                f"{path} is a folder inside {DYNAMICS_DIR}/, which the reference reads as an epoch; remove it",
                location=str(dyn),
            )
        path.unlink()
    written = write_reference_dynamics(dyn, ids, logits, gold)
    written.append(write_reference_metrics(folder / METRICS_NAME, metrics))
    written.append(atomic_write_bytes(folder / METRICS_CSV, metrics.to_csv(index=False).encode("utf-8")))
    return written


def read_reference_metrics(path: str | Path) -> pd.DataFrame:
    """Read a ``td_metrics.jsonl`` file, or the one of a model folder (guid read as str)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_NAME
    if not path.is_file():
        raise DataError(f"file not found; expected {METRICS_NAME}", location=str(path))
    return pd.read_json(path, lines=True, dtype={"guid": str})
