"""The Review suspects page's form that makes a review queue: from a detector's top k (in a region of the
map, on its axis), a saved group or a pruning experiment's suspects."""

from __future__ import annotations

import streamlit as st

from cartomap.curation import levels, queue, sources
from cartomap.curation.store import MAX_GUIDELINES
from cartomap.errors import CartomapError
from cartomap.experiments.pruning import pruning_of_run, suspects_of
from cartomap.experiments.seeds import other_seeds
from cartomap.experiments.truth import detector_extras, input_commands
from cartomap.runs.groups import list_groups
from cartomap.runs.store import Run
from cartomap.scores import aggregate, detectors
from cartomap.scores.metrics import DEFAULT_AXIS, REGIONS
from cartomap.tasks.units import Unit
from cartomap.team.roles import Action
from pages.common import (
    acting_as,
    escape_markdown,
    flash,
    get_experiments,
    get_store,
    kept,
    show_error,
    write_button,
)
from pages.components import cached, map_filters

#: The page's picked queue (a new queue is picked once made).
QUEUE = "rs_queue"
SOURCES = ("Detector top k", "Saved group", "Pruning suspects")


ANY_REGION = "any region"


def region_filter(run: Run):
    """(region or None, RegionRule): "Only the examples in a region" of the run's map, ranked on the
    ambiguity axis picked beside it (e.g. the most suspect of the ambiguous examples)."""
    options = [ANY_REGION, *REGIONS]
    left, right = st.columns(2)
    region = left.selectbox(
        "Only the examples in a region",
        options,
        help="Of the examples the source gives, keep those in this region of the run's data map.",
        **kept("rs_region", ANY_REGION, options=options),
    )
    if region == ANY_REGION:
        return None, None
    axes = list(cached.axes(run))
    axis = right.selectbox(
        "Regions drawn on",
        axes,
        format_func=map_filters.axis_label,
        **kept("rs_region_axis", DEFAULT_AXIS if DEFAULT_AXIS in axes else axes[0], options=axes),
    )
    return region, run.region_rule(axis=axis)  # the run's kind's method (a token run's by threshold)


def level_picker(run: Run) -> tuple[str, str]:
    """(level, sentence score): what a token run's queue holds, word by word, by sentence (scored by an
    aggregation of its words' scores) or by entity span; ``word`` for a run of other examples."""
    if not run.task_kind.unit.sentences:
        return levels.WORD, "min"
    left, right = st.columns(2)
    level = left.radio(
        "Review by",
        levels.LEVELS,
        horizontal=True,
        help="word: each word's tag; sentence: one place per sentence, its tags fixed on one card; span: "
        "each gold or predicted entity span, scored by its worst word, fixed on its sentence's card",
        **kept("rs_level", levels.WORD, options=levels.LEVELS),
    )
    method = "min"
    if level == levels.SENTENCE:
        methods = list(aggregate.names(Unit.WORD))
        method = right.selectbox(
            "Sentence score",
            methods,
            help="how its words' scores make the sentence's: min, its worst word's",
            **kept("rs_sentence_score", "min", options=methods),
        )
    return level, method


def out_of_fold_hint(run: Run, offered: list[str]) -> None:
    """Which detectors of out-of-fold probabilities the run cannot feed yet (cleanlab's among them), and the
    command that makes their inputs; nothing when it has them all."""
    lacking = detectors.unavailable(sources.detector_inputs(run, with_dynamics=False))
    waiting = [n for n, kinds in lacking.items() if detectors.OOF in kinds and n not in offered]
    if waiting:
        st.caption(
            f"Need out-of-fold probabilities (k fold models that never saw the {run.task_kind.noun}): "
            f"{', '.join(waiting)}; made by `{input_commands(run)[detectors.OOF]}` or the Prune labels page."
        )


def new_queue_form(run: Run, first: bool) -> None:
    """The form of a new queue, behind a toggle (on while the run has no queue): the experiments and
    detectors it offers are looked up only while it is open."""
    if not st.toggle("Make a new review queue", **kept("rs_new", first)):
        return
    with st.container(border=True):
        source = st.radio("Examples to review", SOURCES, horizontal=True, **kept("rs_source", SOURCES[0]))
        left, right = st.columns(2)
        oof = seeds = folds = None
        prunings = []
        if source == SOURCES[0]:
            oof, seeds, folds, _ = detector_extras(run, get_store().root)
            names = sources.available_detectors(run, oof, seeds, folds)
            if not names:
                st.info("This run has nothing a detector can score (no dynamics or metrics).")
                return
            detector = left.selectbox(
                "Detector",
                names,
                format_func=detectors.title,
                **kept("rs_detector", names[0], options=names),
            )
            top = right.number_input("Top k", min_value=1, max_value=100_000, step=10, **kept("rs_top", 50))
            default = f"{detector}-top{int(top)}"
            out_of_fold_hint(run, names)
        elif source == SOURCES[1]:
            groups = [g["name"] for g in list_groups(run, include_table=False)]
            if not groups:
                st.info("This run has no saved groups: save a lasso selection on the Data map page.")
                return
            group = left.selectbox("Group", groups, **kept("rs_group", groups[0], options=groups))
            default = f"group-{group}"
        else:
            prunings = pruning_of_run(run, get_experiments(), get_store())
            ids = [e.id for e in prunings]
            if not ids:
                st.info(
                    "No finished pruning experiment was trained on this run's examples (Prune labels page)."
                )
                return
            exp_id = left.selectbox("Pruning experiment", ids, **kept("rs_pruning", ids[0], options=ids))
            default = f"pruning-{exp_id}"
        region, rule = region_filter(run)
        level, method = level_picker(run)
        default = default if level == levels.WORD else f"{default}-by-{level}"
        name = st.text_input("Queue name", value=default, max_chars=80, key=f"rs_new_name_{default}")
        per_item = st.number_input(
            "Annotators per example (k)", min_value=1, max_value=20, **kept("rs_per_item", 2)
        )
        guidelines = st.text_area(
            "Guidelines for the annotators (optional)",
            max_chars=MAX_GUIDELINES,
            placeholder="e.g. Relabel only when the right class is clear; remove pairs that make no sense.",
            help="Shown with every example of the queue; whoever makes the queue can edit them later.",
            **kept("rs_new_guidelines", ""),
        )
        if write_button("Create the queue", Action.QUEUE, key="rs_create", type="primary"):
            try:
                if source == SOURCES[0]:
                    cand = levels.from_detector_by(
                        run,
                        detector,
                        int(top),
                        level,
                        method,
                        oof_logits=oof,
                        seeds=seeds,
                        folds=folds,
                        region=region,
                        rule=rule,
                    )
                else:
                    if source == SOURCES[1]:
                        cand = sources.from_group(run, group)
                    else:
                        exp = next(e for e in prunings if e.id == exp_id)
                        cand = sources.from_suspects(run, suspects_of(exp, run, get_store()), exp.id)
                    if region is not None:
                        cand = sources.in_region(run, cand, region, rule)
                    cand = levels.regroup(run, cand, level, method)
                others = other_seeds(run, get_store())
                items = queue.create_queue(
                    run,
                    name,
                    cand,
                    per_item=int(per_item),
                    seed_runs=others,
                    by=acting_as(),
                    guidelines=guidelines,
                )
            except (CartomapError, OSError) as err:
                show_error(err)
                return
            st.session_state[QUEUE] = queue.check_name(name)
            st.session_state["rs_new"] = False
            st.session_state["rs_new_guidelines"] = ""
            flash("success", escape_markdown(f"Queue {name}: {len(items):,} examples to review."))
            st.rerun()
