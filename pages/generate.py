"""Generate page (WaNLI Stage 2): sample new pairs from a language model prompted with each group.

Layout only: ``cartomap.wanli.generation.prepare_generation`` checks the choices and writes the
batch's generation.json, then the CLI job ``cartomap generate RUN --batch NAME --job`` generates
it (task ``generate-<batch>``), which this page polls. The template (instruction, label words)
and the generator are shared with the Prompts page through session state (``wanli_*`` keys kept
with ``pages.common.kept``). An API key is never asked for here: the openai backend reads it
from the environment variable named (in the dashboard's environment), and only the name is saved.
"""

from __future__ import annotations

import os

import streamlit as st

from cartomap.errors import CartomapError
from cartomap.runs.groups import list_groups
from cartomap.runs.jobs import start_task
from cartomap.runs.progress import Phase, state_text
from cartomap.runs.state import State
from cartomap.runs.store import Run
from cartomap.tasks import support
from cartomap.team.roles import Action
from cartomap.wanli.batches import batch_info, batch_slug, list_batches, load_generated
from cartomap.wanli.exemplars import AUTO, MAX_EXAMPLES
from cartomap.wanli.generation import prepare_generation, request_stop, task_name
from cartomap.wanli.generators import CREDENTIALS_ENV, SMOLLM2, GenerationConfig, credentials_for
from cartomap.wanli.prompts import DEFAULT_INSTRUCTION, DEFAULT_LABEL_WORDS, PromptTemplate
from pages.common import (
    acting_as,
    applies,
    count,
    current_run,
    escape_markdown,
    get_store,
    kept,
    show_error,
    through_app,
    write_button,
)
from pages.components.jobs import demo_or_prompt, job_panel, task_wording

through_app()  # a first visit straight to this page's address: run it through app.py

BACKENDS = ("local", "openai")
CHOICES = ("All automatic groups", "Chosen groups")
DEFAULTS = GenerationConfig()
VIEW = "wanli_view_batch"


def template_from_state(labels: tuple[str, ...]) -> PromptTemplate:
    """The template edited on the Prompts page (WaNLI's when untouched); an error names labels without a word."""
    ss = st.session_state
    words = {}
    for label in labels:
        word = str(ss.get(f"wanli_word_{label}", DEFAULT_LABEL_WORDS.get(label.strip().lower(), ""))).strip()
        if word:
            words[label] = word
    template = PromptTemplate(instruction=ss.get("wanli_instruction", DEFAULT_INSTRUCTION), label_words=words)
    template.check_labels(labels)
    return template


MAX_GROUP_OPTIONS = 2_000  # automatic groups offered one by one (a full-size run has 100k+)


def group_choice(run: Run) -> list[str]:
    groups = list_groups(run)
    auto = sorted((g for g in groups if g.get("source") == AUTO), key=lambda g: g.get("rank", 0))
    names = [str(g["name"]) for g in auto] + [str(g["name"]) for g in groups if g.get("source") != AUTO]
    if not names:
        st.info(
            "No groups yet: collect the automatic groups on the Prompts page, or save a selection on the "
            "Data map or Neighbours page."
        )
        return []
    default = CHOICES[0] if auto else CHOICES[1]
    choice = st.radio(
        "Groups", CHOICES, horizontal=True, **kept("wanli_gen_choice", default, options=CHOICES)
    )
    if choice == CHOICES[0]:
        chosen = [str(g["name"]) for g in auto]
        if not chosen:
            st.info("No automatic groups: collect them on the Prompts page, or choose groups.")
    else:
        hand = [str(g["name"]) for g in groups if g.get("source") != AUTO]
        offered = hand + [str(g["name"]) for g in auto[:MAX_GROUP_OPTIONS]]
        if len(auto) > MAX_GROUP_OPTIONS:
            st.caption(
                f"Offered: the hand-made groups and the first {MAX_GROUP_OPTIONS:,} of {len(auto):,} automatic "
                "ones; 'all automatic groups' takes every one."
            )
        chosen = st.multiselect("Chosen groups", offered, **kept("wanli_gen_groups", [], options=offered))
    limit = int(
        st.number_input("At most this many groups (0: all)", 0, 100_000, **kept("wanli_gen_limit", 0))
    )
    if limit:
        chosen = chosen[:limit]
    st.caption(f"{count(len(chosen), 'group')}, one prompt each.")
    return chosen


def config_widgets() -> GenerationConfig:
    c1, c2 = st.columns([1, 3])
    backend = c1.radio(
        "Backend", BACKENDS, horizontal=True, **kept("wanli_backend", "local", options=BACKENDS)
    )
    model = c2.text_input(
        "Model",
        help="local: smollm2 (the bundled SmolLM2-135M-Instruct), a model folder or a hub id; "
        "openai: the server's model name",
        **kept("wanli_model", SMOLLM2),
    ).strip()
    base_url, key_env = "", DEFAULTS.api_key_env
    if backend == "openai":
        c1, c2 = st.columns(2)
        base_url = c1.text_input(
            "Base URL",
            placeholder="env OPENAI_BASE_URL, else https://api.openai.com/v1",
            **kept("wanli_base_url", ""),
        ).strip()
        key_env = c2.text_input(
            "API key: name of the environment variable", **kept("wanli_api_key_env", DEFAULTS.api_key_env)
        ).strip()
        present = bool(key_env and os.environ.get(key_env))
        st.caption(
            f"`{escape_markdown(key_env)}` is {'set' if present else 'not set'} in the dashboard's environment. "
            "The key itself is never shown, saved or logged; only the variable's name is."
        )
    cols = st.columns(4)
    n = cols[0].number_input("Samples per prompt (n)", 1, 50, **kept("wanli_n", DEFAULTS.n))
    top_p = cols[1].number_input("top_p", 0.01, 1.0, step=0.05, **kept("wanli_top_p", DEFAULTS.top_p))
    temperature = cols[2].number_input(
        "Temperature", 0.0, 2.0, step=0.1, **kept("wanli_temperature", DEFAULTS.temperature)
    )
    max_new = cols[3].number_input(
        "Max new tokens", 1, 2048, **kept("wanli_max_new_tokens", DEFAULTS.max_new_tokens)
    )
    cols = st.columns(4)
    batch_size = cols[0].number_input(
        "Prompts per batch", 1, 256, **kept("wanli_batch_size", DEFAULTS.batch_size)
    )
    seed = cols[1].number_input("Seed", 0, 2**31 - 1, **kept("wanli_seed", DEFAULTS.seed))
    max_examples = cols[2].number_input(
        "In-context examples", 1, 20, **kept("wanli_max_examples", MAX_EXAMPLES)
    )
    return GenerationConfig(
        backend=backend,
        model=model or SMOLLM2,
        top_p=float(top_p),
        temperature=float(temperature),
        max_new_tokens=int(max_new),
        n=int(n),
        batch_size=int(batch_size),
        seed=int(seed),
        max_examples=int(max_examples),
        base_url=base_url,
        api_key_env=key_env or DEFAULTS.api_key_env,
    )


def start(run: Run, chosen: list[str], labels: tuple[str, ...], cfg: GenerationConfig | None) -> None:
    existing = set(list_batches(run))
    number = len(existing) + 1
    while f"batch-{number}" in existing:  # a name not taken yet
        number += 1
    default_name = f"batch-{number}"
    c1, c2 = st.columns([3, 1])
    name = c1.text_input("Batch name", max_chars=40, **kept("wanli_batch_name", default_name)).strip()
    overwrite = c2.checkbox("Replace a batch of that name", **kept("wanli_overwrite", False))
    if not write_button(
        "Start generating", Action.TASK, key="wanli_start", type="primary", disabled=not chosen or cfg is None
    ):
        return
    try:
        template = template_from_state(labels)
        slug = batch_slug(name or default_name)
        prepare_generation(run, slug, chosen, cfg, template, overwrite=overwrite, name=name or default_name)
        userinfo = credentials_for(cfg.base_url) if cfg.base_url else ""
        start_task(
            run,
            task_name(slug),
            ["generate", run.id, "--batch", slug, "--job", "--quiet"],
            get_store(),
            env={CREDENTIALS_ENV: userinfo} if userinfo else None,  # the job's memory, never a file
            by=acting_as(),
        )
    except (CartomapError, OSError) as err:
        show_error(err)
        return
    st.session_state[VIEW] = slug
    st.session_state[f"_kept_{VIEW}"] = slug
    st.session_state.pop("wanli_batch_name", None)  # the next batch gets a fresh default name
    st.rerun()


# --------------------------------------------------------------------------- progress and results
def _progress(task, status: dict) -> None:
    done, total = status.get("done") or 0, status.get("total") or 0
    fraction = min(max(float(status.get("progress") or 0.0), 0.0), 1.0)
    text = state_text(status.get("state"), status.get("phase", Phase.STARTING))
    if total:
        text += f" · {done:,} / {total:,} prompts · {status.get('generated', 0):,} pairs parsed"
        text += f" · {status.get('unparsable', 0):,} dropped"
    st.progress(fraction, text=text)


def results(run: Run) -> None:
    batches = list_batches(run)
    if not batches:
        return
    st.divider()
    st.subheader("Generated batches")
    batch = st.selectbox("Batch", batches, **kept(VIEW, batches[0], options=batches))
    try:
        info = batch_info(run, batch)
    except (CartomapError, OSError, ValueError) as err:
        show_error(err)
        return
    cfg = info.get("config", {})
    st.caption(
        escape_markdown(
            f"{count(info.get('prompts', 0), 'prompt')} from {count(len(info.get('groups', [])), 'group')} · "
            f"{cfg.get('backend')} {cfg.get('model')} · n {cfg.get('n')} · top_p {cfg.get('top_p')} · "
            f"temperature {cfg.get('temperature')} · max {cfg.get('max_new_tokens')} new tokens"
        )
    )
    state = job_panel(
        run.task(task_name(batch)),
        task_wording("Generation"),
        _progress,
        key="wanli_",
        cancel=lambda: request_stop(run, batch),
        cancel_label="Stop after the current prompts",
    )
    if state not in (State.DONE, None):
        return
    try:
        frame = load_generated(run, batch)
    except CartomapError as err:
        show_error(err)
        return
    stats = info.get("stats") or {}
    if stats.get("stopped"):
        st.warning(
            f"Stopped early: {stats.get('prompts_done', 0):,} of {stats.get('prompts', 0):,} prompts done."
        )
    cols = st.columns(4)
    cols[0].metric("Completions", f"{stats.get('completions', 0):,}")
    cols[1].metric("Parsed pairs", f"{stats.get('parsed', len(frame)):,}")
    cols[2].metric("Unparsable", f"{stats.get('unparsable', 0):,}")
    cols[3].metric("Seconds", f"{stats.get('seconds', 0):,}")
    labels = sorted(frame["intended_label"].unique().tolist()) if len(frame) else []
    shown = st.multiselect("Intended labels", labels, **kept("wanli_view_labels", labels, options=labels))
    view = frame[frame["intended_label"].isin(shown)] if labels else frame
    st.dataframe(
        view[["gen_id", "group", "intended_label", "premise", "hypothesis", "raw", "seed_id"]],
        hide_index=True,
        key="wanli_generated",
    )


def main() -> None:
    st.title("Generate")
    run = demo_or_prompt(current_run())
    if run is None:
        st.stop()
    if not applies(run, support.WANLI):
        st.stop()
    st.caption(
        "WaNLI Stage 2: each group's prompt (see the Prompts page, where the instruction and the label "
        "words are edited) is sampled n times; completions that do not parse as "
        "“premise / Word: hypothesis” are dropped. Defaults are the paper's: top_p 0.5, temperature 1, "
        "120 new tokens, 5 samples, stop at a blank line."
    )
    labels = run.label_names
    try:
        template = template_from_state(labels)
        words = ", ".join(f"{label} → {template.word(label)}" for label in labels)
        st.caption(f"Label words: {escape_markdown(words)}")
    except CartomapError as err:
        show_error(err)
    chosen = group_choice(run)
    cfg = None
    try:
        cfg = config_widgets()
    except CartomapError as err:
        show_error(err)
    start(run, chosen, labels, cfg)
    results(run)


main()
