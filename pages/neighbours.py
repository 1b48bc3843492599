"""Neighbours page: a seed example and its nearest same-label neighbours in the task model's [CLS] space.

Layout only: embeddings, neighbours, seeds and projections come from ``cartomap.training.embeddings``,
``cartomap.analysis.neighbours`` and ``cartomap.analysis.projection``; long work (embeddings, UMAP) runs as a CLI
job (``cartomap embed`` / ``cartomap project``) and this page polls its task status.
Session state: ``selected_ids`` (the Data map page's selection, one source of seeds) and ``nb_*``
widget keys (with ``_kept_nb_*`` shadows, so choices survive page switches).

The 2-D view is linked with the Data map: it rings the Data map's selection, and a box, lasso or click
on it (``nb_map``'s selection event, resolved exactly on the server by
``cartomap.analysis.projection.selection_ids``) replaces that same selection (``selected_ids``;
``_nb_event_sig`` is the last event taken, so a stale one is not taken twice); "Show on the data map"
goes there (``pages.common.show_on_map``). It can be coloured by label, region, confidence, each ambiguity
score of the map's second axis and, with votes in the data, the annotators' agreement
(``cartomap.analysis.colourings.for_projection``). Its regions, like the group table's, are the default
rule's (``cartomap.analysis.neighbours.with_default_regions``); the seeds "Most ambiguous per label" are
WaNLI's, by variability whatever the map's axis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from cartomap.analysis import colourings, datamap, projection
from cartomap.analysis.neighbours import DEFAULT_K, labelled_by_name, neighbour_group, seed_examples
from cartomap.analysis.projection import load_projection, points_frame, project_run, projection_figure
from cartomap.errors import CartomapError
from cartomap.runs.groups import count_table_groups, list_groups, save_group
from cartomap.runs.store import Run
from cartomap.tasks import registry as task_kinds
from cartomap.team.roles import Action
from cartomap.training.embeddings import has_embeddings, load_embeddings
from pages.common import (
    SELECTED,
    acting_as,
    count,
    current_run,
    escape_markdown,
    kept,
    new_chart_event,
    show_error,
    show_on_map,
    through_app,
    write_submit,
)
from pages.components.embeddings import offer_embeddings
from pages.components.jobs import demo_or_prompt, start_task_button, task_panel

through_app()  # a first visit straight to this page's address: run it through app.py

MAX_SEED_OPTIONS = 2000
EMBED_KEY = "nb_start_embeddings"
SOURCES = ("Current selection", "A saved group", "Most ambiguous per label")
TEXT_CHARS = 70


# --------------------------------------------------------------------------- cached loading


@st.cache_resource(max_entries=2, show_spinner="Loading the embeddings…")
def _embeddings(run_path: str, stamp: tuple):
    return load_embeddings(Run(Path(run_path)))


@st.cache_resource(max_entries=2, show_spinner="Loading the examples…")
def _points(run_path: str, stamp: tuple) -> pd.DataFrame:
    return points_frame(Run(Path(run_path)))


@st.cache_resource(max_entries=2, show_spinner=False)
def _id_index(run_path: str, stamp: tuple) -> pd.Index:
    """The examples' ids as an index (a lookup of a selection instead of a set of every id per rerun)."""
    return pd.Index(_points(run_path, stamp)["id"].to_numpy(dtype=object))


@st.cache_resource(max_entries=2, show_spinner=False)
def _examples(run_path: str, stamp: tuple) -> pd.DataFrame:
    run = Run(Path(run_path))  # a token run's tags too: its words are the points
    columns = ("id", "label", *run.task_kind.gold_columns, *task_kinds.text_fields(), "genre")
    return run.examples(columns=tuple(dict.fromkeys(columns)))


@st.cache_resource(max_entries=4, show_spinner="Finding the most ambiguous examples…")
def _ambiguous(run_path: str, stamp: tuple, exclude: tuple) -> pd.DataFrame:
    """The WaNLI seeds (per label above its 0.75 quantile of variability): id, label, variability,
    most variable first."""
    points = _points(run_path, stamp)
    metrics = _metrics(run_path, stamp)
    if len(metrics) == len(points) and np.array_equal(
        metrics["id"].astype(str).to_numpy(dtype=object), points["id"].to_numpy(dtype=object)
    ):
        variability = metrics["variability"].to_numpy(dtype=np.float64)
    else:
        variability = (
            metrics.set_index(metrics["id"].astype(str))["variability"].reindex(points["id"]).to_numpy()
        )
    codes = pd.factorize(points["label"])[0]  # integer labels: no sort of 550k strings
    genres = points["genre"].to_numpy() if "genre" in points.columns else None
    rows = seed_examples(
        pd.DataFrame({"label": codes, "variability": variability}),
        exclude_genres=exclude if genres is not None else (),
        genres=genres,
    )
    seeds = pd.DataFrame(
        {
            "id": points["id"].to_numpy()[rows],
            "label": points["label"].to_numpy()[rows],
            "variability": variability[rows],
        }
    )
    return seeds.sort_values("variability", ascending=False, kind="stable").reset_index(drop=True)


@st.cache_resource(max_entries=2, show_spinner=False)
def _metrics(run_path: str, stamp: tuple) -> pd.DataFrame | None:
    try:
        return Run(Path(run_path)).metrics()
    except CartomapError:
        return None


@st.cache_resource(max_entries=4, show_spinner="Projecting (PCA)…")
def _pca(run_path: str, stamp: tuple):
    return project_run(Run(Path(run_path)), "pca")


@st.cache_resource(max_entries=4, show_spinner=False)
def _umap(run_path: str, stamp: tuple):
    return load_projection(Run(Path(run_path)), "umap")


@st.cache_data(max_entries=64, show_spinner=False)
def _group(
    run_path: str, stamp: tuple, seed: str, k: int, exclude: tuple, _embeddings, _examples, _metrics
) -> pd.DataFrame:
    return neighbour_group(
        Run(Path(run_path)),
        seed,
        k=k,
        embeddings=_embeddings,
        exclude_genres=exclude,
        examples=_examples,
        metrics=_metrics,
    )


# --------------------------------------------------------------------------- seeds
def _describe(points: pd.DataFrame, index: pd.Index, options: list[str]):
    """format_func for the seed picker: id · label · start of the texts (plain text, never HTML),
    made for the offered ids only."""
    cols = [c for c in task_kinds.text_fields() if c in points.columns]

    def short(s: str) -> str:
        return s if len(s) <= TEXT_CHARS else s[: TEXT_CHARS - 1] + "…"

    positions = index.get_indexer(options)
    known = {i: p for i, p in zip(options, positions.tolist(), strict=True) if p >= 0}
    rows = points.iloc[list(known.values())]
    labels = dict(zip(known, rows["label"].astype(str), strict=True))
    texts = {c: dict(zip(known, rows[c].astype(str), strict=True)) for c in cols}

    def fmt(example_id: str) -> str:
        if example_id not in known:
            return str(example_id)
        return f"{example_id} · {labels[example_id]} · " + " / ".join(
            short(texts[c][example_id]) for c in cols
        )

    return fmt


def _known(ids: list[str], index: pd.Index) -> list[str]:
    """``ids`` that are examples of the run, in their order."""
    if not ids:
        return []
    return [i for i, p in zip(ids, index.get_indexer(ids).tolist(), strict=True) if p >= 0]


def seed_candidates(
    run: Run, points: pd.DataFrame, index: pd.Index, stamp: tuple, exclude: tuple
) -> list[str]:
    """The ids the seed can be picked from, per the chosen source (draws the source's widgets)."""
    selected = [str(i) for i in st.session_state.get(SELECTED) or []]
    default = SOURCES[0] if selected else SOURCES[2]
    source = st.radio("Seeds from", SOURCES, horizontal=True, **kept("nb_source", default, options=SOURCES))
    if source == SOURCES[0]:
        ids = _known(selected, index)
        if not ids:
            st.info("Nothing selected: select examples on the Data map page, or pick another source.")
        else:
            st.caption(f"{count(len(ids), 'example')} selected on the Data map page.")
        return ids
    if source == SOURCES[1]:
        groups = list_groups(run, include_table=False)  # automatic ones: 100k+ on a full-size run
        n_auto = count_table_groups(run)
        if n_auto:
            st.caption(
                f"{count(n_auto, 'automatic group')} {'is' if n_auto == 1 else 'are'} on the Prompts page; "
                "their seeds: 'Most ambiguous'."
            )
        if not groups:
            st.info("No saved groups yet: save one here or on the Data map page.")
            return []
        names = [str(g.get("name")) for g in groups]
        name = st.selectbox("Group", names, **kept("nb_group_pick", names[0], options=names))
        group = groups[names.index(name)]
        ids = _known([str(i) for i in group.get("ids", [])], index)
        st.caption(
            escape_markdown(
                f"Group '{name}': {count(len(ids), 'example')} (source: {group.get('source', '')})."
            )
        )
        return ids
    if _metrics(str(run.path), stamp) is None:
        st.info("This run has no data-map metrics (variability), so no ambiguous seeds: pick another source.")
        return []
    seeds = _ambiguous(str(run.path), stamp, exclude)
    labels = ["all labels", *run.label_names]
    which = st.selectbox("Label", labels, **kept("nb_seed_label", labels[0], options=labels))
    if which != labels[0]:
        seeds = seeds[seeds["label"] == which]
    has_genres = "genre" in points.columns
    note = f"; genres left out: {', '.join(exclude)}" if exclude and has_genres else ""
    st.caption(
        f"{len(seeds):,} seeds: per gold label, the examples above that label's 0.75 quantile of variability "
        f"(WaNLI){note}. Most variable first."
    )
    return seeds["id"].tolist()


# --------------------------------------------------------------------------- group table and saving
def save_tools(run: Run, group: pd.DataFrame, seed: str, k: int) -> None:
    ids = group["id"].astype(str).tolist()
    with st.form("nb_group_form", clear_on_submit=False):
        st.markdown("**Save the seed and its neighbours as a group**")
        name = st.text_input(
            "Group name", key="nb_group_name", max_chars=80, placeholder=f"neighbours of {seed}"
        )
        replace = st.checkbox("Replace a group of that name", key="nb_group_replace")
        submitted = write_submit(f"Save {count(len(ids), 'example')}", Action.GROUP)
    if submitted:
        name = name.strip() or f"neighbours of {seed}"
        try:
            save_group(
                run,
                name,
                ids,
                source="neighbours",
                overwrite=replace,
                extra={"seed": seed, "k": k, "order": "increasing similarity, seed last"},
                by=acting_as(),
            )
        except CartomapError as err:
            show_error(err)
        else:
            st.success(escape_markdown(f"Saved group '{name}' ({count(len(ids), 'example')})."))


def show_group(run: Run, group: pd.DataFrame, k: int) -> None:
    found = len(group) - 1
    if found < k:
        st.warning(f"Only {found} other examples share the seed's label here (k = {k}).")
    st.caption(
        "The seed's same-label nearest neighbours by cosine similarity of the task model's final-layer "
        "[CLS] vectors (eval mode, max length 128), ordered by increasing similarity with the seed last: "
        "the order of the examples in a WaNLI prompt."
    )
    st.dataframe(
        labelled_by_name(group),
        key="nb_table",
        hide_index=True,
        height=min(420, 38 + 35 * len(group)),
        column_config={
            "similarity": st.column_config.NumberColumn(format="%.5f"),
            "confidence": st.column_config.NumberColumn(format="%.3f"),
            **{axis: st.column_config.NumberColumn(format="%.3f") for axis in datamap.AXIS_COLUMNS},
        },
    )


# --------------------------------------------------------------------------- the 2-D view
def task_or_button(run: Run, name: str, cli_args: list[str], label: str, button: str) -> None:
    """The background task ``name`` (live while it runs), else a button that starts it."""
    if not task_panel(run, name, label):
        start_task_button(run, name, cli_args, button, key=f"nb_start_{name}")


def umap_note(n: int) -> str:
    """What the UMAP view is made of: fitted on every example, or on a sample with the rest placed."""
    sample = projection.UMAP_FIT_SAMPLE
    if n <= sample:
        return f"UMAP fitted on all {n:,} examples."
    return (
        f"UMAP fitted on a random sample of {sample:,} of the {n:,} examples; the other {n - sample:,} "
        f"are placed at the weighted mean of their {projection.UMAP_N_NEIGHBORS} most similar fitted "
        "examples (as UMAP places new points), so their local layout is approximate."
    )


MAP_CHART = "nb_map"


def take_event(coords: np.ndarray, points: pd.DataFrame) -> None:
    """Turn a new selection event of the 2-D view into the Data map's selection (``selected_ids``) and
    rerun, so the seeds from "Current selection" and the rings follow. An empty event is no deselection
    (the chart is drawn anew when its rings change, which empties its event): "Clear selection" is."""
    event = new_chart_event(MAP_CHART, "_nb_event_sig")
    if event is None:
        return
    sampled = len(points) > projection.MAX_POINTS
    chosen = projection.selection_ids(coords, points["id"], event, sampled=sampled)
    if chosen == [str(i) for i in st.session_state.get(SELECTED) or []]:
        return
    st.session_state[SELECTED] = chosen
    st.session_state.pop("dm_focus", None)
    st.rerun()


def _clear_selection() -> None:
    st.session_state[SELECTED] = []
    st.session_state.pop("dm_focus", None)


def selection_tools(run: Run, selected: list[str]) -> None:
    """The shared selection under the 2-D view: its size, "Show on the data map" and "Clear selection"."""
    left, mid, right = st.columns([3, 1, 1])
    left.caption(
        f"{count(len(selected), 'example')} selected (the Data map page's selection). Drag a box or a lasso "
        "over the view (or click a point) to select examples there instead."
    )
    if mid.button("Show on the data map", key="nb_show_on_map", disabled=not selected):
        show_on_map(run.id, selected)
    right.button("Clear selection", key="nb_clear", on_click=_clear_selection, disabled=not selected)


def projection_view(run: Run, points: pd.DataFrame, group_ids: list[str], seed: str | None) -> None:
    st.subheader("The whole dataset in 2-D")
    stamp = run.stamp(run.embeddings_path)
    left, right = st.columns(2)
    methods = ["PCA", "UMAP"]
    method = left.radio("Projection", methods, horizontal=True, **kept("nb_proj", "PCA", options=methods))
    colours = list(colourings.for_projection(points))
    default = "region" if "region" in colours else colours[0]
    color_by = right.radio(
        "Colour by", colours, horizontal=True, **kept("nb_color", default, options=colours)
    )
    coords = None
    if method == "UMAP":
        coords = _umap(str(run.path), stamp + run.stamp(run.projection_path("umap")))
        if coords is None:
            st.info(
                "UMAP (15 neighbours, min_dist 0.1, cosine) runs as a background job: a minute or more, "
                "the first time longer. PCA is shown meanwhile; the result is kept with the run."
            )
            task_or_button(
                run, "projection_umap", ["project", run.id, "--method", "umap"], "UMAP", "Compute UMAP"
            )
            method = "PCA"
    if coords is None:
        coords = _pca(str(run.path), stamp)
    if method == "UMAP":
        st.caption(umap_note(len(points)))
    take_event(coords, points)
    index = _id_index(str(run.path), run.stamp(run.examples_path, run.metrics_path()))
    selected = _known([str(i) for i in st.session_state.get(SELECTED) or []], index)
    fig = projection_figure(
        coords,
        points,
        color_by=color_by,
        group_ids=group_ids,
        seed_id=seed,
        title=f"{method} of the [CLS] embeddings",
        highlight_ids=selected,
    )
    st.plotly_chart(
        fig,
        key=MAP_CHART,
        on_select="rerun",
        selection_mode=("points", "box", "lasso"),
        width="stretch",
        config={"displaylogo": False},
    )
    selection_tools(run, selected)


# --------------------------------------------------------------------------- page
def main() -> None:
    st.title("Nearest neighbours")
    run = demo_or_prompt(current_run())  # app.py draws the run picker in the sidebar
    if run is None:
        st.stop()
    emb_stamp = run.stamp(run.embeddings_path, run.embedding_ids_path)
    embeddings = _embeddings(str(run.path), emb_stamp)
    if embeddings is None:  # none, or files that cannot be read: computed (again)
        offer_embeddings(run, key=EMBED_KEY, force=has_embeddings(run))
        st.stop()

    stamp = run.stamp(run.examples_path, run.metrics_path())
    points = _points(str(run.path), stamp)
    index = _id_index(str(run.path), stamp)
    if len(embeddings[0]) != len(points):
        st.warning("The embeddings do not match the run's examples: compute them again.")
        offer_embeddings(run, key=EMBED_KEY, force=True)
        st.stop()

    exclude: tuple = ()
    if "genre" in points.columns:
        genres = sorted(set(pd.unique(points["genre"])) - {"", "None", "nan"})
        default = [g for g in genres if g == "telephone"]
        exclude = tuple(
            st.sidebar.multiselect(
                "Leave out genres",
                genres,
                help="Neither seeds nor neighbours (WaNLI leaves out telephone).",
                **kept("nb_exclude", default, options=genres),
            )
        )

    candidates = seed_candidates(run, points, index, stamp, exclude)
    k = st.slider("Neighbours (k)", 1, 20, **kept("nb_k", DEFAULT_K))
    seed = None
    group = None
    if candidates:
        if len(candidates) > MAX_SEED_OPTIONS:
            st.caption(f"The seed list shows the first {MAX_SEED_OPTIONS:,} of {len(candidates):,}.")
        options = candidates[:MAX_SEED_OPTIONS]
        seed = st.selectbox(
            "Seed",
            options,
            format_func=_describe(points, index, options),
            **kept("nb_seed", options[0], options=options),
        )
        try:
            examples = _examples(str(run.path), stamp)
            metrics = _metrics(str(run.path), stamp)
            group = _group(
                str(run.path), emb_stamp + stamp, seed, int(k), exclude, embeddings, examples, metrics
            )
        except CartomapError as err:
            show_error(err)
    if group is not None:
        show_group(run, group, int(k))
        save_tools(run, group, seed, int(k))
    st.divider()
    projection_view(run, points, [] if group is None else group["id"].tolist(), seed)


main()
