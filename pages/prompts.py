"""Prompts page (WaNLI Stages 1-2): groups of in-context examples and the exact prompt each one makes.

Layout only: groups come from ``cartomap.wanli.exemplars`` / ``cartomap.runs.groups``, prompts from
``cartomap.wanli.prompts``; collecting the automatic groups runs as the CLI job ``cartomap groups RUN
--save`` when the run's embeddings are still to be computed. The template (instruction and the
separator word of each label) and the generator live in session state, shared with the Generate
page: ``wanli_instruction``, ``wanli_word_<label>``, ``wanli_max_examples``, ``wanli_backend``,
``wanli_model`` (kept with ``pages.common.kept``, so edits survive reruns and page switches).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from cartomap.analysis.neighbours import DEFAULT_K, SEED_QUANTILE
from cartomap.errors import CartomapError
from cartomap.runs.groups import list_groups
from cartomap.runs.jobs import start_task
from cartomap.runs.store import Run, RunStore
from cartomap.scores import ambiguity
from cartomap.tasks import support
from cartomap.team.roles import Action
from cartomap.training.embeddings import has_embeddings, load_embeddings
from cartomap.wanli import exemplars
from cartomap.wanli.exemplars import (
    AUTO,
    DEFAULT_EXCLUDE,
    DEFAULT_QUERY,
    MAX_EXAMPLES,
    collect_groups,
    group_examples,
    in_context_examples,
    save_auto_groups,
)
from cartomap.wanli.generators import SMOLLM2, load_generator_tokenizer
from cartomap.wanli.prompts import (
    DEFAULT_INSTRUCTION,
    DEFAULT_LABEL_WORDS,
    PromptTemplate,
    build_prompt,
    count_tokens,
)
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
from pages.components import cached
from pages.components.jobs import demo_or_prompt, task_panel

through_app()  # a first visit straight to this page's address: run it through app.py

TASK = "auto-groups"
BACKENDS = ("local", "openai")
MAX_GROUP_OPTIONS = 2_000  # groups offered in the picker (a full-size run has 100k+ automatic ones)


# --------------------------------------------------------------------------- cached loading
@st.cache_resource(max_entries=2, show_spinner="Loading the embeddings…")
def _embeddings(run_path: str, stamp: tuple):
    return load_embeddings(Run(Path(run_path)))


@st.cache_resource(max_entries=2, show_spinner="Loading the examples…")
def _examples(run_path: str, stamp: tuple):
    """The run's examples indexed by id (what group_examples looks rows up in)."""
    examples = Run(Path(run_path)).examples()
    return examples.set_index(examples["id"].astype(str).rename("id"), drop=False)


@st.cache_resource(max_entries=4, show_spinner="Loading the generator's tokenizer…")
def _tokenizer(model: str, cache_root: str):
    return load_generator_tokenizer(model, cache_root)


def word_key(label: str) -> str:
    return f"wanli_word_{label}"


def template_widgets(labels: tuple[str, ...]) -> PromptTemplate | None:
    """The instruction and the separator word of each label (kept in session state); None when incomplete."""
    instruction = st.text_area(
        "Instruction (the prompt's first line)", height=68, **kept("wanli_instruction", DEFAULT_INSTRUCTION)
    )
    cols = st.columns(len(labels))
    words = {}
    for col, label in zip(cols, labels, strict=True):
        default = DEFAULT_LABEL_WORDS.get(label.strip().lower(), "")
        words[label] = col.text_input(
            f"Word for {escape_markdown(label)}", max_chars=40, **kept(word_key(label), default)
        ).strip()
    missing = [label for label, word in words.items() if not word]
    if missing:
        show_error(
            f"no separator word for label{'s' if len(missing) > 1 else ''} {', '.join(missing)}: "
            "give each label a word (WaNLI: Implication, Possibility, Contradiction)"
        )
        return None
    try:
        return PromptTemplate(instruction=instruction, label_words=words)
    except CartomapError as err:
        show_error(err)
        return None


# --------------------------------------------------------------------------- automatic groups
def collect_panel(run: Run, examples, n_auto: int) -> None:
    with st.expander("Collect automatic groups (WaNLI Stage 1)", expanded=n_auto == 0):
        st.caption(
            "Seeds: per label, the examples above that label's quantile of the seed score (the most "
            "ambiguous; WaNLI ranks by variability, the default). Each group is a seed and its k nearest "
            "neighbours of the same label in the task model's [CLS] space, by increasing similarity with the "
            "seed last. Collecting again replaces them."
        )
        scores = list(cached.axes(run)) or [ambiguity.VARIABILITY]
        score = st.selectbox(
            "Seeds ranked by",
            scores,
            format_func=lambda name: ambiguity.get(name).label,
            help="WaNLI's procedure ranks seeds by variability; the map's other ambiguity scores agree "
            "across seeds more (docs/stability.md).",
            **kept(
                "wanli_score",
                ambiguity.VARIABILITY if ambiguity.VARIABILITY in scores else scores[0],
                options=scores,
            ),
        )
        c1, c2, c3 = st.columns(3)
        k = c1.number_input("Neighbours k", 1, 20, **kept("wanli_k", DEFAULT_K))
        quantile = c2.number_input(
            f"{ambiguity.get(score).label.capitalize()} quantile",
            0.0,
            0.99,
            step=0.05,
            **kept("wanli_quantile", SEED_QUANTILE),
        )
        query = c3.number_input(
            "Examples searched (0: all of the label)",
            0,
            500,
            help="The reference code searches the 15 nearest (seed included), then keeps the seed's label.",
            **kept("wanli_query", DEFAULT_QUERY),
        )
        exclude: list[str] = []
        if "genre" in examples.columns:
            genres = sorted(set(examples["genre"].astype(str)) - {"", "None", "nan"})
            default = [g for g in genres if g in DEFAULT_EXCLUDE]
            exclude = st.multiselect(
                "Leave out genres", genres, **kept("wanli_exclude", default, options=genres)
            )
        if task_panel(run, TASK, "Collecting groups"):
            return
        if write_button("Collect automatic groups", Action.TASK, key="wanli_collect", type="primary"):
            query_arg = int(query) if int(query) > 0 else None
            if query_arg is not None and query_arg < int(k) + 1:
                show_error(f"search at least k + 1 = {int(k) + 1} examples (or 0 for all)")
                return
            if has_embeddings(run) and len(examples) <= exemplars.COLLECT_IN_PAGE_MAX:
                try:
                    with st.spinner("Collecting…"):
                        groups = collect_groups(
                            run, int(k), float(quantile), tuple(exclude), query_arg, score=score
                        )
                        settings = {
                            "k": int(k),
                            "quantile": float(quantile),
                            "exclude_genres": list(exclude),
                            "query": query_arg,
                        }
                        if score != ambiguity.VARIABILITY:  # as the command line keeps it
                            settings["score"] = score
                        saved = save_auto_groups(run, groups, settings=settings)
                except CartomapError as err:
                    show_error(err)
                    return
                st.session_state["_wanli_collected"] = saved
                st.rerun()
            args = ["groups", run.id, "--save", "--k", str(int(k)), "--quantile", str(float(quantile))]
            args += ["--exclude-genres", ",".join(exclude), "--query", str(int(query)), "--ambiguity", score]
            try:
                start_task(run, TASK, args, get_store(), by=acting_as())
            except (CartomapError, OSError) as err:
                show_error(err)
                return
            st.rerun()
        if not has_embeddings(run):
            st.caption("The run's [CLS] embeddings are computed first (a background job).")


# --------------------------------------------------------------------------- page
def _describe(groups: dict) -> Callable[[str], str]:
    def fmt(name: str) -> str:
        g = groups.get(name, {})
        kind = "auto" if g.get("source") == AUTO else f"hand-made ({g.get('source', '')})"
        return f"{name} · {kind} · {count(len(g.get('ids', [])), 'example')}"

    return fmt


def main() -> None:
    st.title("Prompts")
    run = demo_or_prompt(current_run())
    if run is None:
        st.stop()
    if "_wanli_collected" in st.session_state:
        st.success(f"Saved {count(st.session_state.pop('_wanli_collected'), 'automatic group')}.")
    examples = _examples(str(run.path), run.stamp(run.examples_path))
    if not applies(run, support.WANLI):
        st.stop()
    groups = list_groups(run)
    auto = [g for g in groups if g.get("source") == AUTO]
    collect_panel(run, examples, len(auto))
    if not groups:
        st.info("No groups yet: collect the automatic ones above, or save a selection on the Data map page.")
        st.stop()

    ordered = sorted(auto, key=lambda g: g.get("rank", 0)) + [g for g in groups if g.get("source") != AUTO]
    by_name = {str(g["name"]): g for g in ordered}
    names = list(by_name)
    kinds = ["Automatic", "Hand-made"]
    kind = st.radio(
        "Groups", kinds, horizontal=True, **kept("wanli_kind", kinds[0] if auto else kinds[1], options=kinds)
    )
    shown = [n for n in names if (by_name[n].get("source") == AUTO) == (kind == kinds[0])]
    if not shown:
        st.info(f"No {kind.lower()} groups.")
        st.stop()
    if len(shown) > MAX_GROUP_OPTIONS:
        st.caption(
            f"The list shows the first {MAX_GROUP_OPTIONS:,} of {len(shown):,} groups "
            "(per label, most variable seed first); generation can use all of them."
        )
        shown = shown[:MAX_GROUP_OPTIONS]
    name = st.selectbox(
        "Group", shown, format_func=_describe(by_name), **kept("wanli_group", shown[0], options=shown)
    )
    group = by_name[name]

    st.subheader("Template")
    template = template_widgets(run.label_names)
    max_examples = int(
        st.number_input(
            "In-context examples per prompt (seed included)",
            1,
            20,
            **kept("wanli_max_examples", MAX_EXAMPLES),
        )
    )
    try:
        embeddings = (
            None
            if group.get("source") == AUTO
            else _embeddings(str(run.path), run.stamp(run.embeddings_path, run.embedding_ids_path))
        )
        frame = group_examples(run, group, embeddings=embeddings, examples=examples)
        rows = in_context_examples(frame, max_examples)
    except CartomapError as err:
        show_error(err)
        st.stop()
    label = str(rows["label_name"].iloc[-1])
    left_out = len(frame) - len(rows)
    if left_out:
        st.caption(
            escape_markdown(
                f"{left_out} of the group's {len(frame)} examples are left out: only the seed's label "
                f"({label}) and the {max_examples} closest to the seed go into the prompt."
            )
        )
    st.dataframe(
        rows[["position", "role", "id", "similarity", "label_name", "premise", "hypothesis"]],
        hide_index=True,
        key="wanli_rows",
        column_config={"similarity": st.column_config.NumberColumn(format="%.4f")},
    )
    if template is None:
        st.stop()

    prompt = build_prompt(list(zip(rows["premise"], rows["hypothesis"], strict=True)), label, template)
    st.subheader(escape_markdown(f"Prompt · intended label {label} · word “{template.word(label)}”"))
    st.code(prompt, language=None, wrap_lines=True)
    token_count(run, prompt)


def token_count(run: Run, prompt: str) -> None:
    c1, c2 = st.columns([1, 3])
    backend = c1.radio(
        "Generator", BACKENDS, horizontal=True, **kept("wanli_backend", "local", options=BACKENDS)
    )
    model = c2.text_input(
        "Model",
        help="smollm2 = the bundled SmolLM2-135M-Instruct; or a local folder / hub id",
        **kept("wanli_model", SMOLLM2),
    ).strip()
    if backend != "local":
        st.caption(f"{len(prompt):,} characters; the token count needs a local tokenizer.")
        return
    try:
        tokenizer = _tokenizer(model or SMOLLM2, str(RunStore.root_of(run)))
    except (CartomapError, OSError, ValueError) as err:
        show_error(f"cannot load the tokenizer of {model!r}: {err}")
        return
    n = count_tokens(prompt, tokenizer)
    st.metric(
        "Prompt tokens",
        f"{n:,}",
        help=f"With {Path(model).name or model}'s tokenizer; {len(prompt):,} characters.",
    )


main()
