"""WaNLI Stage 2, overgeneration: sample new pairs from a language model prompted with each group.

One batch of generations lives in ``<run>/wanli/<batch>/``::

    generation.json     the GenerationConfig, the groups, the template and label words (written
                        before the job starts), and "stats" once it is done
    generated.parquet   one row per parsed completion: gen_id, group, seed_id, intended_label,
                        premise, hypothesis, raw, prompt_index, sample_index, in_context_ids, model

Completions that do not parse (:func:`cartomap.wanli.prompts.parse_completion`) are not rows; they are
counted in ``stats["unparsable"]``. The job reports as task ``generate-<batch>``.

The language models that sample (the bundled SmolLM2 run here, or any OpenAI-compatible server) and
how they sample are :mod:`cartomap.wanli.generators`'.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from cartomap.errors import CartomapError, RunError
from cartomap.io import atomic_save, atomic_write_json
from cartomap.runs.progress import Phase
from cartomap.runs.state import State
from cartomap.runs.store import Run, RunStore
from cartomap.wanli.batches import (
    batch_dir,
    batch_info,
    batch_slug,
    generated_path,
    info_path,
    stop_path,
)
from cartomap.wanli.exemplars import group_examples, in_context_examples
from cartomap.wanli.generators import (
    GenerationConfig,
    Generator,
    make_generator,
)
from cartomap.wanli.prompts import PromptTemplate, build_prompt, parse_completion

ProgressCallback = Callable[[int, int], None]  # (prompts done, total)


# --------------------------------------------------------------------------- batches


def task_name(batch: str) -> str:
    return f"generate-{batch_slug(batch)}"


def batch_status(run: Run, batch: str) -> dict[str, Any] | None:
    from cartomap.runs.tasks import task_status

    return task_status(run, task_name(batch))


COLUMNS = {
    "gen_id": "string",
    "group": "string",
    "seed_id": "string",
    "intended_label": "string",
    "premise": "string",
    "hypothesis": "string",
    "raw": "string",
    "prompt_index": "int64",
    "sample_index": "int64",
    "in_context_ids": "list<string>",
    "model": "string",
}


def _schema():
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "list<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS.items()])


def resolve_groups(run: Run, spec: str | Sequence[str]) -> list[str]:
    """Group names from "all", "auto" or names (a list or comma-separated)."""
    from cartomap.runs.groups import list_groups
    from cartomap.wanli.exemplars import auto_groups

    if isinstance(spec, str):
        if spec.strip() == "all":
            names = [g["name"] for g in auto_groups(run)]
            names += [g["name"] for g in list_groups(run) if g.get("source") != "auto"]
        elif spec.strip() == "auto":
            names = [g["name"] for g in auto_groups(run)]
        else:
            names = [n.strip() for n in spec.split(",") if n.strip()]
    else:
        names = [str(n) for n in spec]
    if not names:
        which = "automatic groups" if spec == "auto" else "groups"
        raise CartomapError(f"run {run.id} has no {which}: run `cartomap groups {run.id} --save` first")
    return names


def build_prompts(
    run: Run, group_names: Sequence[str], cfg: GenerationConfig, template: PromptTemplate
) -> list[dict[str, Any]]:
    """One prompt per group: group, seed_id, intended_label, in_context_ids, prompt. Errors name the group."""
    from cartomap.runs.groups import load_group
    from cartomap.training.embeddings import load_embeddings

    examples = run.examples()
    if "premise" not in examples.columns:
        raise CartomapError(f"run {run.id} has single texts: WaNLI prompts need premise/hypothesis pairs")
    indexed = examples.set_index(examples["id"].astype(str), drop=False)
    embeddings = None
    prompts = []
    for name in group_names:
        group = load_group(run, name)
        if group.get("source") != "auto" and embeddings is None:
            embeddings = load_embeddings(run) or ([], np.zeros((0, 0), dtype=np.float32))
        rows = in_context_examples(
            group_examples(run, group, embeddings=embeddings, examples=indexed), cfg.max_examples
        )
        label = str(rows["label_name"].iloc[-1])
        try:
            template.word(label)
        except CartomapError as err:
            raise CartomapError(f"group {name!r}: {err}") from None
        pairs = list(zip(rows["premise"].astype(str), rows["hypothesis"].astype(str), strict=True))
        prompts.append(
            {
                "group": str(group.get("name", name)),
                "seed_id": str(rows["id"].iloc[-1]),
                "intended_label": label,
                "in_context_ids": rows["id"].astype(str).tolist(),
                "prompt": build_prompt(pairs, label, template),
            }
        )
    return prompts


def prepare_generation(
    run: Run,
    batch: str,
    group_names: Sequence[str],
    cfg: GenerationConfig,
    template: PromptTemplate,
    *,
    overwrite: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """Check everything and write the batch's generation.json (before any job starts); returns it.

    Errors (unknown groups, labels without a separator word, a batch that exists) come here,
    before anything is written.
    """
    slug = batch_slug(batch)
    if (batch_status(run, slug) or {}).get("state") == State.RUNNING:
        raise RunError(f"batch {slug!r} is being generated right now")
    if generated_path(run, slug).exists() and not overwrite:
        raise CartomapError(f"batch {slug!r} exists already: pick another name or replace it")
    names = list(dict.fromkeys(str(n) for n in group_names))
    prompts = build_prompts(run, names, cfg, template)  # validates groups and label words
    labels = sorted({p["intended_label"] for p in prompts})
    info = {
        "batch": slug,
        "name": name if name is not None else str(batch),
        "run": run.id,
        "config": cfg.to_dict(),
        "groups": names,
        "template": template.to_dict(),
        "label_words": {label: template.word(label) for label in labels},
        "prompts": len(prompts),
        "created_at": time.time(),
        "stats": None,
    }
    if overwrite:
        generated_path(run, slug).unlink(missing_ok=True)
    atomic_write_json(info_path(run, slug), info)
    return info


def _rows_for(prompt_index: int, prompt: dict[str, Any], completions: list[str], batch: str, model: str):
    rows, bad = [], 0
    for sample_index, raw in enumerate(completions):
        parsed = parse_completion(raw, prompt["word"])
        if parsed is None:
            bad += 1
            continue
        rows.append(
            {
                "gen_id": f"{batch}-{prompt_index}-{sample_index}",
                "group": prompt["group"],
                "seed_id": prompt["seed_id"],
                "intended_label": prompt["intended_label"],
                "premise": parsed[0],
                "hypothesis": parsed[1],
                "raw": raw,
                "prompt_index": prompt_index,
                "sample_index": sample_index,
                "in_context_ids": prompt["in_context_ids"],
                "model": model,
            }
        )
    return rows, bad


def execute_generation(
    run: Run,
    batch: str,
    progress: ProgressCallback | None = None,
    generator: Generator | None = None,
) -> pd.DataFrame:
    """Generate a prepared batch (its generation.json) as task ``generate-<batch>``; returns the rows.

    The generated table is written atomically at the end; the task status counts prompts done,
    rows parsed and completions dropped as it goes. :func:`request_stop` ends it early after the
    current chunk of prompts: what was generated so far is written, and stats say "stopped".
    """
    from cartomap.runs.tasks import task

    slug = batch_slug(batch)
    info = batch_info(run, slug)
    cfg = GenerationConfig.from_dict(info["config"])
    template = PromptTemplate.from_dict(info["template"])
    stop_path(run, slug).unlink(missing_ok=True)
    with task(run, task_name(slug), batch=slug) as update:
        prompts = build_prompts(run, info["groups"], cfg, template)
        for p in prompts:
            p["word"] = template.word(p["intended_label"])
        total = len(prompts)
        update(total=total, done=0, generated=0, unparsable=0, phase=Phase.LOADING_MODEL)
        t0 = time.time()
        generator = generator if generator is not None else make_generator(cfg, RunStore.root_of(run))
        load_s = time.time() - t0
        update(phase=Phase.GENERATING)
        rows: list[dict[str, Any]] = []
        unparsable = done = completions_seen = 0
        stopped = False
        t1 = time.time()
        step = cfg.batch_size
        for start in range(0, total, step):
            if stop_path(run, slug).exists():
                stopped = True
                break
            chunk = prompts[start : start + step]
            completions = generator.generate([p["prompt"] for p in chunk], cfg)
            if len(completions) != len(chunk):
                raise CartomapError(f"the generator gave {len(completions)} answers for {len(chunk)} prompts")
            for offset, (prompt, texts) in enumerate(zip(chunk, completions, strict=True)):
                new, bad = _rows_for(start + offset, prompt, list(texts), slug, cfg.model)
                rows.extend(new)
                unparsable += bad
                completions_seen += len(texts)
            done += len(chunk)
            update(
                progress=round(done / max(total, 1), 4), done=done, generated=len(rows), unparsable=unparsable
            )
            if progress is not None:
                progress(done, total)
        frame = pd.DataFrame(rows, columns=list(COLUMNS))
        for col, kind in COLUMNS.items():
            if kind == "int64":
                frame[col] = frame[col].astype("int64")
        schema = _schema()
        atomic_save(generated_path(run, slug), lambda p: frame.to_parquet(p, index=False, schema=schema))
        seconds = time.time() - t1
        stats = {
            "prompts": total,
            "prompts_done": done,
            "stopped": stopped,
            "completions": completions_seen,
            "parsed": len(rows),
            "unparsable": unparsable,
            "load_seconds": round(load_s, 2),
            "seconds": round(seconds, 2),
            "new_tokens": getattr(generator, "new_tokens", None),
            "finished_at": time.time(),
        }
        info = batch_info(run, slug)
        info["stats"] = stats
        atomic_write_json(info_path(run, slug), info)
        update(phase=Phase.STOPPED if stopped else State.DONE, stats=stats)
    run.log(f"generation {slug}: {len(rows)} parsed of {completions_seen} completions in {seconds:.1f}s")
    return frame


def request_stop(run: Run, batch: str) -> None:
    """Ask a running generation job to stop after its current chunk (it keeps what it generated)."""
    if batch_dir(run, batch).exists():
        stop_path(run, batch).touch()


def run_generation(
    run: Run,
    batch: str,
    group_names: Sequence[str],
    cfg: GenerationConfig,
    template: PromptTemplate | None = None,
    progress: ProgressCallback | None = None,
    *,
    generator: Generator | None = None,
    overwrite: bool = False,
) -> pd.DataFrame:
    """Prepare (generation.json) and generate batch ``batch`` from ``group_names`` in this process."""
    template = template or PromptTemplate(label_words=_default_words(run))
    prepare_generation(run, batch, group_names, cfg, template, overwrite=overwrite)
    return execute_generation(run, batch, progress=progress, generator=generator)


def _default_words(run: Run) -> dict[str, str]:
    from cartomap.wanli.prompts import label_words_for

    return label_words_for(run.label_names)
