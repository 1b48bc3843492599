"""A generation batch's folder in a run, shared by the WaNLI stages: ``<run>/wanli/<slug>/``.

Stage 2 (generation) writes the batch's settings and its generated pairs, Stage 3 (filtering) the
filtered table and its report, Stage 4 (review) the review database; the file names are in
:mod:`cartomap.runs.layout`. This module names the folder and its files, lists the batches and
reads what the stages wrote.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from cartomap.errors import CartomapError
from cartomap.io import read_json
from cartomap.runs import layout
from cartomap.runs.store import Run

#: Columns every generated table has (Stage 2's contract with the later stages).
GENERATED_COLUMNS = ("gen_id", "intended_label", "premise", "hypothesis")


def batch_slug(name: str) -> str:
    """A batch's folder name: lower case letters, digits, - and _ (at most 40); no name can leave
    the run's WaNLI folder."""
    slug = re.sub(r"[^a-z0-9_]+", "-", str(name).strip().lower()).strip("-_")[:40].strip("-_")
    if not slug:
        raise CartomapError(f"batch name {name!r} has no letters or digits: choose another")
    return slug


def batch_dir(run: Run, batch: str) -> Path:
    return run.wanli_dir / batch_slug(batch)


def info_path(run: Run, batch: str) -> Path:
    """Stage 2's settings, groups, template and label words (written before generation starts)."""
    return batch_dir(run, batch) / layout.GENERATION_INFO


def generated_path(run: Run, batch: str) -> Path:
    return batch_dir(run, batch) / layout.GENERATED


def stop_path(run: Run, batch: str) -> Path:
    """Present while a stop of the generation job is asked for."""
    return batch_dir(run, batch) / layout.GENERATION_STOP


def filtered_path(run: Run, batch: str) -> Path:
    return batch_dir(run, batch) / layout.FILTERED


def report_path(run: Run, batch: str) -> Path:
    return batch_dir(run, batch) / layout.FILTER_REPORT


def review_path(run: Run, batch: str) -> Path:
    return batch_dir(run, batch) / layout.REVIEW_DB


def list_batches(run: Run, having: str = layout.GENERATION_INFO) -> list[str]:
    """The run's batches whose folder holds the file ``having`` (a layout name: the settings by
    default, ``layout.GENERATED`` for generated ones, ``layout.FILTERED`` for filtered ones), newest
    first: by the batch's creation time, or the file's modification time for a batch without settings."""
    folder = run.wanli_dir
    if not folder.exists():
        return []
    found = []
    for path in folder.iterdir():
        try:
            if not (path / having).exists():
                continue
            info = path / layout.GENERATION_INFO
            created = read_json(info).get("created_at") if info.exists() else None
            when = float(created) if created is not None else (path / having).stat().st_mtime_ns / 1e9
        except (OSError, ValueError):  # written or removed right now
            continue
        found.append((-when, path.name))
    return [name for _, name in sorted(found)]


def batch_info(run: Run, batch: str) -> dict[str, Any]:
    path = info_path(run, batch)
    if not path.exists():
        raise CartomapError(f"run {run.id} has no generation batch {batch!r}")
    return read_json(path)


def load_generated(run: Run, batch: str) -> pd.DataFrame:
    """The generated pairs of ``batch`` (Stage 2's table), checked for the columns later stages need."""
    path = generated_path(run, batch)
    if not path.exists():
        raise CartomapError(f"run {run.id} has no generated batch {batch!r} yet (no {path})")
    frame = pd.read_parquet(path)
    missing = [c for c in GENERATED_COLUMNS if c not in frame.columns]
    if missing:
        raise CartomapError(f"{path}: missing column(s) {', '.join(missing)}")
    if frame["gen_id"].duplicated().any():
        raise CartomapError(f"{path}: gen_id is not unique")
    if "in_context_ids" in frame.columns:
        frame["in_context_ids"] = frame["in_context_ids"].map(
            lambda v: [str(i) for i in v] if v is not None and not isinstance(v, (str, float)) else []
        )
    return frame


def load_filtered(run: Run, batch: str) -> pd.DataFrame | None:
    """Stage 3's table of ``batch`` (every generated pair, kept or the rule that removed it), or None."""
    path = filtered_path(run, batch)
    return pd.read_parquet(path) if path.exists() else None


def load_report(run: Run, batch: str) -> dict[str, Any] | None:
    """Stage 3's counts per rule of ``batch``, or None."""
    path = report_path(run, batch)
    return read_json(path) if path.exists() else None
