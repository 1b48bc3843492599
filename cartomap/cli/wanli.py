"""The WaNLI pipeline: ``cartomap groups``, ``generate``, ``filter``, ``review-export``."""

from __future__ import annotations

import argparse

from cartomap.cli.options import name_list
from cartomap.tasks import support


def label_word(text: str) -> tuple[str, str]:
    label, sep, word = text.partition("=")
    if not sep or not label.strip() or not word.strip():
        raise argparse.ArgumentTypeError("expected LABEL=Word, e.g. contrastive=However")
    return label.strip(), word.strip()


def cmd_groups(a: argparse.Namespace) -> int:
    """WaNLI stage 1: collect (and with --save, store) a run's automatic groups; embeddings first if missing."""
    from cartomap.runs.progress import Phase
    from cartomap.runs.store import RunStore
    from cartomap.runs.tasks import task
    from cartomap.scores import ambiguity
    from cartomap.training.embeddings import embed_run, load_embeddings
    from cartomap.wanli.exemplars import collect_groups, save_auto_groups

    run = RunStore(a.cache).get(a.run)
    support.GROUPS.require(run.task_kind, location=f"run {run.id}")
    query = a.query if a.query > 0 else None
    settings = {"k": a.k, "quantile": a.quantile, "exclude_genres": list(a.exclude_genres), "query": query}
    if a.ambiguity != ambiguity.VARIABILITY:
        settings["score"] = a.ambiguity
    if not a.save:
        embeddings = load_embeddings(run) or embed_run(run)
        groups = collect_groups(
            run, a.k, a.quantile, a.exclude_genres, query, embeddings=embeddings, score=a.ambiguity
        )
    else:
        with task(run, "auto-groups", phase=Phase.EMBEDDINGS, **settings) as update:
            embeddings = load_embeddings(run) or embed_run(run)
            update(phase=Phase.COLLECTING, progress=0.5)
            groups = collect_groups(
                run, a.k, a.quantile, a.exclude_genres, query, embeddings=embeddings, score=a.ambiguity
            )
            saved = save_auto_groups(run, groups, settings=settings)
            update(groups=saved)
    counts: dict[str, int] = {}
    for g in groups:
        counts[g["label_name"]] = counts.get(g["label_name"], 0) + 1
    print(
        f"{len(groups)} automatic group{'' if len(groups) == 1 else 's'} of run {run.id} (k={a.k}, quantile {a.quantile}, "
        f"query {query or 'all'}, genres left out: {', '.join(a.exclude_genres) or 'none'})"
    )
    print("  per label: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none"))
    for g in groups[: a.show]:
        print(f"  {g['name']}: {' '.join(g['ids'])}")
    print("saved (source auto)" if a.save else "not saved: add --save to store them as groups")
    return 0


def cmd_generate(a: argparse.Namespace) -> int:
    """WaNLI stage 2: generate a batch of new pairs from groups (task "generate-<batch>")."""
    from cartomap.runs.store import RunStore
    from cartomap.wanli.batches import generated_path
    from cartomap.wanli.generation import execute_generation, prepare_generation, resolve_groups
    from cartomap.wanli.generators import GenerationConfig
    from cartomap.wanli.prompts import DEFAULT_INSTRUCTION, PromptTemplate, label_words_for

    run = RunStore(a.cache).get(a.run)
    support.WANLI.require(run.task_kind, location=f"run {run.id}")
    if not a.job:  # the dashboard prepares generation.json itself, then starts `generate --job`
        cfg = GenerationConfig(
            backend=a.backend,
            model=a.model,
            top_p=a.top_p,
            temperature=a.temperature,
            max_new_tokens=a.max_new_tokens,
            n=a.n,
            batch_size=a.batch_size,
            seed=a.seed,
            max_examples=a.max_examples,
            device=a.device,
            base_url=a.base_url,
            api_key_env=a.api_key_env,
        )
        template = PromptTemplate(
            instruction=a.instruction if a.instruction is not None else DEFAULT_INSTRUCTION,
            label_words=label_words_for(run.label_names, dict(a.label_word or [])),
        )
        names = resolve_groups(run, a.groups)
        if a.limit_groups:
            names = names[: a.limit_groups]
        prepare_generation(run, a.batch, names, cfg, template, overwrite=a.overwrite, name=a.batch)

    def progress(done: int, total: int) -> None:
        if not a.quiet:
            print(f"  {done}/{total} prompts", flush=True)

    frame = execute_generation(run, a.batch, progress=progress)
    print(f"batch {a.batch}: {len(frame)} generated pairs in {generated_path(run, a.batch)}")
    return 0


def cmd_filter(a: argparse.Namespace) -> int:
    """WaNLI Stage 3 on a generated batch: heuristics, tidying, estimated max variability (task "filter-<batch>")."""
    from cartomap.runs.store import RunStore
    from cartomap.wanli.filtering import FilterConfig, run_filter

    run = RunStore(a.cache).get(a.run)
    support.WANLI.require(run.task_kind, location=f"run {run.id}")
    cfg = FilterConfig(
        keep_fraction=a.keep_fraction, balance=a.balance, batch_size=a.batch_size, device=a.device
    )
    frame = run_filter(run, a.batch, cfg)
    counts = frame["removed_by"].value_counts().to_dict()
    print(f"filtered batch {a.batch} of run {run.id}: {int(frame['kept'].sum())} of {len(frame)} kept")
    print("  removed: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none"))
    return 0


def cmd_review_export(a: argparse.Namespace) -> int:
    """Aggregate a batch's two reviews per example and write the kept examples (JSONL or CSV)."""
    from cartomap.runs.store import RunStore
    from cartomap.wanli.review import export_reviewed

    run = RunStore(a.cache).get(a.run)
    support.WANLI.require(run.task_kind, location=f"run {run.id}")
    path, rows = export_reviewed(run, a.batch, a.out, format=a.format, seed=a.seed, overwrite=a.overwrite)
    print(f"wrote {rows} reviewed examples to {path}")
    return 0


def _add_groups(sub) -> None:
    """The `groups` command's parser and options."""
    from cartomap.scores import ambiguity

    gr = sub.add_parser("groups", help="WaNLI stage 1: collect a run's automatic groups (seed + neighbours)")
    gr.add_argument("run")
    gr.add_argument("--k", type=int, default=4, help="neighbours per seed (WaNLI: 4)")
    gr.add_argument(
        "--quantile", type=float, default=0.75, help="seeds: above this quantile of --ambiguity, per label"
    )
    gr.add_argument(
        "--ambiguity",
        default=ambiguity.VARIABILITY,
        choices=ambiguity.MAP_SCORES,
        help="the score seeds are picked by (WaNLI's procedure: variability, the default)",
    )
    gr.add_argument(
        "--exclude-genres",
        type=name_list,
        default=("telephone",),
        help="comma-separated genres that are neither seeds nor neighbours ('' for none)",
    )
    gr.add_argument(
        "--query",
        type=int,
        default=15,
        help="nearest examples searched before keeping the seed's label (0: all of that label)",
    )
    gr.add_argument(
        "--save", action="store_true", help="store them as groups (replaces earlier automatic ones)"
    )
    gr.add_argument("--show", type=int, default=10, help="groups listed")
    gr.set_defaults(func=cmd_groups)


def _add_generate(sub) -> None:
    """The `generate` command's parser and options."""
    ge = sub.add_parser(
        "generate", help="WaNLI stage 2: generate new pairs from groups with a language model"
    )
    ge.add_argument("run")
    ge.add_argument("--batch", required=True, help="a short name for the batch (folder under wanli/)")
    ge.add_argument("--groups", default="auto", help="all, auto, or comma-separated group names")
    ge.add_argument("--limit-groups", type=int, default=0, help="only the first N groups (0: all)")
    ge.add_argument("--backend", choices=("local", "openai"), default="local")
    ge.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (bundled SmolLM2-135M-Instruct), a local folder, a hub id, or a server's model",
    )
    ge.add_argument("--n", type=int, default=5, help="samples per prompt (WaNLI: 5)")
    ge.add_argument("--top-p", type=float, default=0.5)
    ge.add_argument("--temperature", type=float, default=1.0)
    ge.add_argument("--max-new-tokens", type=int, default=120)
    ge.add_argument(
        "--batch-size", type=int, default=8, help="prompts per batch (local) or parallel requests"
    )
    ge.add_argument("--seed", type=int, default=0)
    ge.add_argument(
        "--max-examples", type=int, default=5, help="in-context examples per prompt, seed included"
    )
    ge.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    ge.add_argument(
        "--base-url", default="", help="openai backend: default env OPENAI_BASE_URL or api.openai.com"
    )
    ge.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="NAME of the env variable holding the key"
    )
    ge.add_argument("--instruction", default=None, help="the prompt's first line (default: WaNLI's)")
    ge.add_argument(
        "--label-word",
        type=label_word,
        action="append",
        metavar="LABEL=WORD",
        help="separator word of a label (repeatable; WaNLI's words by default)",
    )
    ge.add_argument("--overwrite", action="store_true", help="replace a batch of the same name")
    ge.add_argument("--quiet", action="store_true")
    ge.add_argument("--job", action="store_true", help=argparse.SUPPRESS)  # prepared by the dashboard
    ge.set_defaults(func=cmd_generate)


def _add_filter(sub) -> None:
    """The `filter` command's parser and options."""
    fl = sub.add_parser(
        "filter", help="WaNLI stage 3: filter a generated batch (heuristics, max variability)"
    )
    fl.add_argument("run")
    fl.add_argument("--batch", required=True, help="name of the generated batch (folder under wanli/)")
    fl.add_argument("--keep-fraction", type=float, default=0.5, help="fraction kept by max variability")
    fl.add_argument(
        "--no-balance",
        dest="balance",
        action="store_false",
        help="keep the top fraction overall instead of the same number per intended label",
    )
    fl.add_argument("--batch-size", type=int, default=64)
    fl.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N, mps")
    fl.set_defaults(func=cmd_filter)


def _add_review_export(sub) -> None:
    """The `review-export` command's parser and options."""
    rx = sub.add_parser(
        "review-export", help="WaNLI stage 4: aggregate the reviews of a batch and export them"
    )
    rx.add_argument("run")
    rx.add_argument("--batch", required=True)
    rx.add_argument("--out", required=True, help="final.jsonl or final.csv")
    rx.add_argument("--format", default="auto", choices=("auto", "jsonl", "csv"))
    rx.add_argument("--seed", type=int, default=0, help="seed of the random picks of the aggregation")
    rx.add_argument(
        "--force", "--overwrite", dest="overwrite", action="store_true", help="replace an existing --out file"
    )
    rx.set_defaults(func=cmd_review_export)


def add_commands(sub) -> None:
    """Every command of this module, in the order `cartomap --help` lists them."""
    _add_groups(sub)
    _add_generate(sub)
    _add_filter(sub)
    _add_review_export(sub)
