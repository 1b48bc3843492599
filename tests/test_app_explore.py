"""The Data map page's saved views, text search, tags and "Compute embeddings", the map above the seeds
block and the paths' default, under streamlit.testing (no browser), on a synthetic finished run."""

from __future__ import annotations

import hashlib
import json

import pytest
from test_app_datamap import ROOT, _app, _table, make_run

from cartomap.analysis import datamap as dm
from cartomap.analysis import epochs, overlay_figures
from cartomap.runs import tags as run_tags
from cartomap.runs import views as run_views
from cartomap.runs.store import Run
from cartomap.team.roles import TEAM_ENV


@pytest.fixture()
def run(tmp_path, monkeypatch) -> Run:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.delenv(TEAM_ENV, raising=False)
    monkeypatch.syspath_prepend(str(ROOT))
    return make_run(cache)


def _rings(at) -> list[str]:
    """The ids ringed on the map (its "selected" trace)."""
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    return [
        str(c[0] if isinstance(c, list) else c)
        for t in spec["data"]
        if str(t.get("name")).startswith("selected")
        for c in t["customdata"]
    ]


def _texts(frame, query: str) -> list[str]:
    """The ids whose premise or hypothesis holds ``query``, case ignored (Python's own search)."""
    hit = frame["premise"].str.lower().str.contains(query.lower(), regex=False) | frame[
        "hypothesis"
    ].str.lower().str.contains(query.lower(), regex=False)
    return frame.loc[hit.to_numpy(dtype=bool), "id"].tolist()


def _search(at, query: str, regex: bool = False):
    at.text_input(key="dm_search_query").input(query)
    box = at.checkbox(key="dm_search_regex")
    (box.check() if regex else box.uncheck())
    at.button(key="dm_search_go").click().run()
    assert not at.exception, at.exception
    return at


# --------------------------------------------------------------------------- search
def test_a_search_selects_its_matches_on_the_map_and_in_the_table(run):
    frame = dm.map_frame(run)
    expected = _texts(frame, "WOMAN")
    assert 3 < len(expected) < 200
    at = _app().run()
    _search(at, "WOMAN")
    assert at.session_state["selected_ids"] == expected  # the shared selection, in map order
    assert sorted(_table(at)["id"]) == sorted(expected)
    assert sorted(_rings(at)) == sorted(expected)  # ringed on the map
    assert any(f"{len(expected)} examples of 400 hold “WOMAN”" in c.value for c in at.caption)

    # a regular expression, case ignored
    regex = r"^a (man|woman)\b"
    expected = [
        i
        for i, p, h in frame[["id", "premise", "hypothesis"]].itertuples(index=False)
        if __import__("re").search(regex, p, flags=2) or __import__("re").search(regex, h, flags=2)
    ]
    _search(at, regex, regex=True)
    assert at.session_state["selected_ids"] == expected and expected

    # a bad one: one line, no traceback, the selection kept
    _search(at, "(unclosed", regex=True)
    assert [e.value for e in at.error] and all("\n" not in e.value for e in at.error)
    assert "not a regular expression" in at.error[0].value
    assert at.session_state["selected_ids"] == expected

    # nothing found: an empty selection, and the page says so
    _search(at, "no such text anywhere")
    assert at.session_state["selected_ids"] == []
    assert any("No example holds “no such text anywhere”" in c.value for c in at.caption)


# --------------------------------------------------------------------------- tags
def test_tags_from_the_selection_and_the_example_panel_filtered_and_listed(run):
    frame = dm.map_frame(run)
    picked = frame["id"].iloc[:6].tolist()
    at = _app()
    at.session_state["selected_ids"] = picked
    at.run()
    at.text_input(key="dm_tag_selection_name").input("check again")
    at.button(key="dm_tag_selection_add").click().run()
    assert not at.exception, at.exception
    table = run_tags.tags_of(run)
    assert sorted(table["id"]) == sorted(picked) and set(table["tag"]) == {"check again"}
    assert any("Tagged 6 examples 'check again'" in s.value for s in at.success)
    shown = _table(at)
    assert shown[run_tags.TAGS_COLUMN].tolist() == ["check again"] * 6
    assert list(shown.columns).index(run_tags.TAGS_COLUMN) == 5  # beside where the example sits

    # the focused example (a row clicked) gets its own tag
    key = "dm_table_" + hashlib.sha1("\n".join(shown["id"]).encode("utf-8")).hexdigest()[:10]
    at.session_state[key] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    focus = shown["id"].iloc[2]
    assert "tags: check again" in [t.value for t in at.text]
    at.text_input(key="dm_tag_focus_name").input("typo")
    at.button(key="dm_tag_focus_add").click().run()
    assert not at.exception, at.exception
    assert run_tags.tags_of(run, "typo")["id"].tolist() == [focus]
    assert "tags: check again, typo" in [t.value for t in at.text]

    # the sidebar's filter: only the examples with the tags chosen
    at.session_state["selected_ids"] = frame["id"].tolist()
    at.run()
    at.multiselect(key="_kept_dm_tags").set_value(["typo"]).run()
    assert not at.exception, at.exception
    assert _table(at)["id"].tolist() == [focus]
    assert any("400 examples · 1 match the filters" in c.value for c in at.caption)
    at.multiselect(key="_kept_dm_tags").set_value(["check again", "typo"]).run()
    assert sorted(_table(at)["id"]) == sorted(picked)
    at.button(key="dm_reset").click().run()  # "Reset filters" clears it too
    assert len(_table(at)) == 400

    # untag the selection
    at.session_state["selected_ids"] = picked[:2]
    at.run()
    at.text_input(key="dm_tag_selection_name").input("check again")
    at.button(key="dm_tag_selection_remove").click().run()
    assert sorted(run_tags.tags_of(run, "check again")["id"]) == sorted(picked[2:])
    # a bad tag: one line, nothing written
    at.text_input(key="dm_tag_selection_name").input("a, b")
    at.button(key="dm_tag_selection_add").click().run()
    assert any("no commas" in e.value for e in at.error) and "a, b" not in set(run_tags.tags_of(run)["tag"])
    # a tag too long is refused in words, never cut short by the browser (no max_chars on the field)
    assert at.text_input(key="dm_tag_selection_name").proto.max_chars == 0
    at.text_input(key="dm_tag_selection_name").input("x" * 200)
    at.button(key="dm_tag_selection_add").click().run()
    assert any(f"at most {run_tags.MAX_TAG} characters (200 given)" in e.value for e in at.error)
    assert not any(t.startswith("x") for t in run_tags.tags_of(run)["tag"])


def test_downloads_carry_the_tags(run):
    from cartomap.analysis.tables import to_csv_bytes, to_jsonl_bytes
    from pages.components import selection

    frame = dm.map_frame(run)
    run_tags.add_tag(run, "dup", frame["id"].iloc[:2].tolist(), by="alice")
    table = selection.download_table(run, frame, frame["id"].iloc[:3].tolist())
    csv = to_csv_bytes(table).decode("utf-8").splitlines()
    assert csv[0].split(",")[-1] == run_tags.TAGS_COLUMN and csv[1].endswith(",dup") and csv[3].endswith(",")
    rows = [json.loads(line) for line in to_jsonl_bytes(table).decode("utf-8").splitlines()]
    assert [r[run_tags.TAGS_COLUMN] for r in rows] == ["dup", "dup", ""]


def test_a_viewer_cannot_tag_or_save_views(run, monkeypatch):
    (run.path.parents[1] / "team.toml").write_text(
        '[users]\n"alice" = "owner"\n"carol" = "viewer"\n', encoding="utf-8"
    )
    from cartomap.team import access as ac

    for name in (ac.AUTH_ENV, ac.HEADER_ENV, ac.PROXY_ENV, ac.OPEN_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CARTOMAP_USER", "carol")  # the person at this machine, a viewer
    at = _app()
    at.session_state["selected_ids"] = dm.map_frame(run)["id"].iloc[:3].tolist()
    at.run()
    assert not at.exception, at.exception
    for key in ("dm_tag_selection_add", "dm_tag_selection_remove"):
        assert at.button(key=key).disabled
    save = next(b for b in at.button if b.label.startswith("Save this view"))
    assert save.disabled
    captions = " ".join(c.value for c in at.caption)
    assert "may not tag examples" in captions and "may not save or delete views" in captions


def test_an_annotator_tags_and_saves_views_and_a_tag_keeps_its_tagger_without_a_team(run, monkeypatch):
    """Flagging an example for later is part of reviewing: an annotator may (team.roles.ROLE_ACTIONS).
    Without a team file the tag keeps the person at this machine, not nobody."""
    from cartomap.runs import views as run_views
    from cartomap.team import access as ac

    for name in (ac.AUTH_ENV, ac.HEADER_ENV, ac.PROXY_ENV, ac.OPEN_ENV):
        monkeypatch.delenv(name, raising=False)
    team = run.path.parents[1] / "team.toml"
    team.write_text(
        '[users]\n"alice" = "owner"\n"bob" = { role = "annotator", queues = ["q"] }\n', encoding="utf-8"
    )
    monkeypatch.setenv("CARTOMAP_USER", "bob")
    ids = dm.map_frame(run)["id"].iloc[:3].tolist()
    at = _app()
    at.session_state["selected_ids"] = ids
    at.run()
    at.text_input(key="dm_tag_selection_name").input("later")
    at.button(key="dm_tag_selection_add").click().run()
    assert not at.exception, at.exception
    assert set(run_tags.tags_of(run, "later")["tagged_by"]) == {"bob"}
    at.text_input(key="dm_view_name").input("bob's view")
    next(b for b in at.button if b.label.startswith("Save this view")).click().run()
    assert not at.exception, at.exception
    assert [v.get("saved_by") for v in run_views.list_views(run)] == ["bob"]
    team.unlink()  # one person, no team: the tag keeps who is at this machine
    monkeypatch.setenv("CARTOMAP_USER", "zed")
    at = _app()
    at.session_state["selected_ids"] = ids[:1]
    at.run()
    at.text_input(key="dm_tag_selection_name").input("solo")
    at.button(key="dm_tag_selection_add").click().run()
    assert run_tags.tags_of(run, "solo")["tagged_by"].tolist() == ["zed"]


# --------------------------------------------------------------------------- saved views
def test_a_saved_view_restores_the_map_and_selection_by_button_and_address(run):
    frame = dm.map_frame(run)
    picked = frame[frame["gold"] == "neutral"]["id"].iloc[:5].tolist()
    at = _app()
    at.session_state["selected_ids"] = picked
    at.session_state["dm_focus"] = picked[1]
    at.run()
    at.multiselect(key="_kept_dm_labels").set_value(["neutral"]).run()
    at.slider(key="_kept_dm_conf").set_value((0.2, 1.0)).run()
    at.selectbox(key="_kept_dm_color").set_value("region").run()
    at.slider(key=f"_kept_dm_burn_out_{run.id}").set_value(2).run()
    at.checkbox(key="_kept_dm_facet").check().run()
    at.text_input(key="dm_view_name").input("neutral doubts")
    next(b for b in at.button if b.label.startswith("Save this view (5 examples selected)")).click().run()
    assert not at.exception, at.exception
    view = run_views.load_view(run, "neutral doubts")
    assert view["selection"] == picked and view["focus"] == picked[1]
    settings = view["settings"]
    assert (
        settings["labels"] == ["neutral"] and settings["conf"] == [0.2, 1.0] and settings["color"] == "region"
    )
    assert settings["burn_out"] == 2 and settings["facet"] is True
    assert at.query_params["view"] == "neutral doubts"

    # everything changed, then the view restored by its button
    at.button(key="dm_reset").click().run()
    at.session_state["selected_ids"] = []
    at.run()
    assert at.multiselect(key="_kept_dm_labels").value != ["neutral"]
    at.button(key="dm_view_restore").click().run()
    assert not at.exception, at.exception
    _same_as_saved(at, run, picked)

    # a new session with the address of the view: the same map and selection
    fresh = _app()
    fresh.query_params["run"] = run.id
    fresh.query_params["view"] = "neutral doubts"
    fresh.run()
    assert not fresh.exception, fresh.exception
    _same_as_saved(fresh, run, picked)
    assert any("The view 'neutral doubts'" in c.value for c in fresh.caption)

    # a view the run does not have: one line, the address's parameter dropped
    other = _app()
    other.query_params["view"] = "nope"
    other.run()
    assert not other.exception, other.exception
    assert any("has no saved view named 'nope'; its views: neutral doubts" in e.value for e in other.error)
    assert "view" not in other.query_params

    # deleted from the sidebar
    at.button(key="dm_view_delete").click().run()
    assert run_views.list_views(run) == []


def _same_as_saved(at, run, picked) -> None:
    assert at.multiselect(key="_kept_dm_labels").value == ["neutral"]
    assert tuple(at.slider(key="_kept_dm_conf").value) == (0.2, 1.0)
    assert at.selectbox(key="_kept_dm_color").value == "region"
    assert at.slider(key=f"_kept_dm_burn_out_{run.id}").value == 2
    assert at.checkbox(key="_kept_dm_facet").value is True
    assert at.session_state["selected_ids"] == picked and at.session_state["dm_focus"] == picked[1]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["meta"]["color_by"] == "region"
    ringed = {
        str(c[0] if isinstance(c, list) else c)
        for t in spec["data"]
        if str(t.get("name")).startswith("selected")
        for c in t.get("customdata", [])
    }
    listed = set(_table(at)["id"])  # the selection under the filters (confidence from 0.2 on)
    assert ringed == listed and 0 < len(listed) <= len(picked) and listed <= set(picked)


# --------------------------------------------------------------------------- embeddings, seeds, paths
def test_the_focused_example_offers_embeddings_when_its_neighbours_are_missing(run, spawned, monkeypatch):
    frame = dm.map_frame(run)
    at = _app()
    at.session_state["selected_ids"] = frame["id"].iloc[:1].tolist()
    at.run()
    assert not at.exception, at.exception
    # this synthetic run has no model weights: it says why none can be computed
    assert any("No embeddings can be computed here" in w.value for w in at.warning)
    monkeypatch.setattr("pages.components.embeddings.embedding_problem", lambda run: None)
    at.run()
    assert any("need the run's embeddings" in c.value for c in at.caption)
    at.button(key="dm_embed").click().run()
    assert not at.exception, at.exception
    assert spawned == [["embed", run.id, "--quiet"]]
    assert run.task("embeddings").status()["state"] == "queued"
    assert not [b for b in at.button if b.label == "Compute embeddings"]  # its panel follows it instead


def _main_order(at) -> list:
    """The main area's elements in the order drawn (depth first, by position)."""

    def walk(node):
        children = getattr(node, "children", None)
        if children is None:
            yield node
            return
        for k in sorted(children):
            yield from walk(children[k])

    return list(walk(at.main))


def test_the_map_comes_before_the_seeds_block(root, spawned):
    from test_app_datamap import make_seed_runs

    make_seed_runs(root, seeds=(42,))
    at = _app().run()
    assert not at.exception, at.exception
    order = _main_order(at)
    chart = next(k for k, e in enumerate(order) if getattr(e, "type", "") == "plotly_chart")
    stability = next(k for k, e in enumerate(order) if "Spearman" in str(getattr(e, "value", "")))
    assert chart < stability
    assert [e for e in at.expander if e.label == "Seeds: how stable is this map?"]


def test_a_selection_draws_ten_paths_by_default_and_more_on_request(run):
    ids = run.examples()["id"].astype(str).tolist()
    at = _app()
    at.session_state["selected_ids"] = ids[:120]
    at.run()
    assert not at.exception, at.exception
    name = overlay_figures.TRAJECTORY_TRACE
    traces = [
        t
        for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
        if t.get("name") == f"{name} ({epochs.DEFAULT_TRAJECTORIES})"
    ]
    assert traces and epochs.DEFAULT_TRAJECTORIES == 10
    assert any("10 of 120 drawn" in c.label for c in at.checkbox)
    at.number_input(key="_kept_dm_paths_drawn").set_value(30).run()
    assert not at.exception, at.exception
    assert any("30 of 120 drawn" in c.label for c in at.checkbox)
    names = {t.get("name") for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    assert f"{name} (30)" in names
    assert at.number_input(key="_kept_dm_paths_drawn").max == epochs.MAX_TRAJECTORIES
    # fewer selected than the default: no control, every path
    at.session_state["selected_ids"] = ids[:4]
    at.run()
    assert not [n for n in at.number_input if n.key == "_kept_dm_paths_drawn"]
    assert any(c.label.endswith("(4 examples)") for c in at.checkbox)


def test_a_damaged_view_is_named_and_deletable_and_a_full_disk_is_one_message(run, monkeypatch):
    """A hand-edited view (its date in words) breaks nothing on the page: the good view is offered, the
    damaged one named with a button that deletes it; saving on a full disk is one error message."""
    import errno
    import os

    import cartomap.io

    run_views.save_view(run, "good", {}, [])
    run_views.save_view(run, "edited", {}, [])
    path = run_views.view_path(run, "edited")
    path.write_text(json.dumps({**json.loads(path.read_text()), "created_at": "yesterday"}))
    at = _app()
    at.run()
    assert not at.exception, at.exception
    assert any("field 'created\\_at'" in c.value and "edited.json" in c.value for c in at.caption)
    assert at.selectbox(key="dm_view_pick").options == ["good"]
    at.button(key="dm_view_delete_damaged_edited").click().run()
    assert not at.exception, at.exception
    assert not path.exists() and [v["name"] for v in run_views.list_views(run)] == ["good"]

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cartomap.io, "atomic_write_bytes", full)
    at.text_input(key="dm_view_name").input("later")
    next(b for b in at.button if b.label.startswith("Save this view")).click().run()
    assert not at.exception, at.exception
    assert any("the disk is full: free some space and save again" in e.value for e in at.error)
