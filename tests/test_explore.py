"""Saved views, tags and text search of a run's examples (the library and the CLI), on a tiny finished run
of 8 hand-written NLI pairs (tests/curation_fixture.py) and small hand-checkable frames."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from curation_fixture import make_run  # noqa: E402

from cartomap.analysis import search  # noqa: E402
from cartomap.cli import main  # noqa: E402
from cartomap.errors import CartomapError  # noqa: E402
from cartomap.runs import tags, views  # noqa: E402
from cartomap.team.roles import TEAM_ENV, USER_ENV  # noqa: E402


@pytest.fixture()
def run(tmp_path, monkeypatch):
    monkeypatch.delenv(TEAM_ENV, raising=False)
    monkeypatch.delenv(USER_ENV, raising=False)
    return make_run(tmp_path / "cache", embeddings=False, group=False)


# --------------------------------------------------------------------------- search
FRAME = pd.DataFrame(
    {
        "id": ["a", "b", "c", "d", "e"],
        "premise": ["The CAT sat.", "A dog ran (fast).", None, "Élan vital", "cat? no: 42"],
        "hypothesis": pd.Series(["x", "Cats purr", "y", "z", "w"]).astype("category"),
        "gold": ["cat", "cat", "cat", "cat", "cat"],  # not a text field: never searched
    }
)


def test_search_finds_a_substring_in_any_text_field_ignoring_case():
    assert search.search_ids(FRAME, "cat") == ["a", "b", "e"]  # premise, the categorical hypothesis
    assert search.search_ids(FRAME, "(fast)") == ["b"]  # as typed: no pattern
    assert search.search_ids(FRAME, "?") == ["e"]
    assert search.search_ids(FRAME, "élan") == ["d"]  # case ignored beyond ASCII
    assert search.search_ids(FRAME, "nothing like it") == []
    assert search.search_ids(FRAME, "cat", fields=["hypothesis"]) == ["b"]


def test_search_by_regular_expression():
    assert search.search_ids(FRAME, r"^the\s+cat", search.REGEX) == ["a"]
    assert search.search_ids(FRAME, r"\d+$", search.REGEX) == ["e"]
    assert search.search_ids(FRAME, r"cats?\b", search.REGEX) == ["a", "b", "e"]


@pytest.mark.parametrize(
    ("query", "mode", "message"),
    [
        ("(unclosed", search.REGEX, "not a regular expression this search reads (missing )"),
        ("(?<=a)b", search.REGEX, "no look-arounds"),
        ("   ", search.SUBSTRING, "type some text"),
        ("x" * (search.MAX_QUERY + 1), search.SUBSTRING, "at most"),
        ("cat", "glob", "unknown search mode"),
    ],
)
def test_a_query_that_cannot_be_searched_is_one_line(query, mode, message):
    with pytest.raises(CartomapError) as err:
        search.search_ids(FRAME, query, mode)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_token_runs_words_and_sentences_are_searched():
    words = pd.DataFrame(
        {"id": ["s#0", "s#1"], "tokens": ["New", "York"], "context": ["New York", "New York"]}
    )
    assert search.search_ids(words, "york") == ["s#1"]  # the word, not its sentence
    sentences = pd.DataFrame({"id": ["s", "t"], "tokens": [["New", "York"], ["Paris"]]})
    assert search.search_ids(sentences, "w y") == ["s"]  # a sentence's words joined by spaces
    with pytest.raises(CartomapError, match="no text to search"):
        search.search_ids(pd.DataFrame({"id": ["a"], "gold": ["x"]}), "x")


def test_search_on_a_large_frame_is_vectorised():
    """200k pairs: the answer equals Python's own search (speed is measured in bench/, not here)."""
    rng = np.random.default_rng(0)
    words = np.asarray(["alpha", "beta", "Gamma", "delta", "epsilon"], dtype=object)
    premise = [" ".join(rng.choice(words, 3)) for _ in range(200_000)]
    frame = pd.DataFrame({"id": [str(i) for i in range(len(premise))], "premise": premise, "hypothesis": "x"})
    expected = [str(i) for i, p in enumerate(premise) if "gamma delta" in p.lower()]
    assert search.search_ids(frame, "GAMMA delta") == expected


# --------------------------------------------------------------------------- views
SETTINGS = {"labels": ["neutral"], "conf": (0.1, 0.9), "color": "region", "facet": False, "burn_out": 2}


def test_a_view_is_saved_listed_loaded_and_deleted(run):
    saved = views.save_view(run, "odd neutrals", SETTINGS, ["n1", "n0", "n1"], focus="n1", by="alice")
    assert saved["selection"] == ["n1", "n0"] and saved["saved_by"] == "alice"
    path = views.view_path(run, "odd neutrals")
    assert path.parent == run.views_dir and json.loads(path.read_text())["name"] == "odd neutrals"
    view = views.load_view(run, "  odd   neutrals ")  # whitespace as typed
    assert view["settings"] == {**SETTINGS, "conf": [0.1, 0.9]} and view["focus"] == "n1"
    views.save_view(run, "second", {}, [])
    assert [v["name"] for v in views.list_views(run)] == ["second", "odd neutrals"]  # newest first
    assert "2 selected, focus n1" in views.describe(view) and "by alice" in views.describe(view)
    with pytest.raises(CartomapError, match="exists already"):
        views.save_view(run, "odd neutrals", {}, [])
    views.save_view(run, "odd neutrals", {"color": "label"}, ["e0"], overwrite=True)
    assert views.load_view(run, "odd neutrals")["selection"] == ["e0"]
    views.delete_view(run, "odd neutrals")
    assert [v["name"] for v in views.list_views(run)] == ["second"]
    with pytest.raises(CartomapError, match="no saved view named 'odd neutrals'; its views: second"):
        views.load_view(run, "odd neutrals")


def test_view_names_and_settings_are_checked(run):
    for name, message in (("", "needs a name"), ("!!!", "no letters or digits"), ("x" * 81, "at most 80")):
        with pytest.raises(CartomapError, match=message):
            views.save_view(run, name, {}, [])
    for settings, message in (
        ({"x": {"nested": 1}}, "'x': a plain value expected"),
        ({"x": [1, [2]]}, "'x': a list of plain values"),
        ({"x": float("nan")}, "'x': a plain value"),
        ({3: 1}, "needs a name"),
    ):
        with pytest.raises(CartomapError, match=message):
            views.save_view(run, "v", settings, [])
    assert not run.views_dir.exists()  # nothing half-written
    # names that read the same once made file-safe keep their own files
    views.save_view(run, "a/b", {}, ["e0"])
    views.save_view(run, "a?b", {}, ["e1"])
    assert views.load_view(run, "a/b")["selection"] == ["e0"] and views.load_view(run, "a?b")[
        "selection"
    ] == ["e1"]


def test_a_damaged_view_file_is_listed_with_its_problem_not_dropped(run):
    views.save_view(run, "good", {}, [])
    (run.views_dir / "broken.json").write_text("{not json", encoding="utf-8")
    listed = {v["name"]: v for v in views.list_views(run)}
    assert set(listed) == {"good", "broken"} and "cannot be read" in listed["broken"]["problem"]


# --------------------------------------------------------------------------- tags
def test_tags_are_added_and_removed_with_who_and_when(run):
    assert tags.tags_of(run).empty and not run.tags_path.exists()  # reading creates nothing
    assert tags.add_tag(run, "typo", ["e0", "n1"], by="alice") == 2
    assert tags.add_tag(run, "typo", ["n1", "c0"], by="bob") == 1  # n1 had it: alice keeps it
    assert tags.add_tag(run, " needs  check ", ["n1"]) == 1
    table = tags.tags_of(run)
    assert list(table.columns) == tags.TAG_COLUMNS
    assert table[["id", "tag"]].values.tolist() == [
        ["n1", "needs check"],
        ["c0", "typo"],
        ["e0", "typo"],
        ["n1", "typo"],
    ]
    by = table.set_index(["id", "tag"])["tagged_by"]
    assert (
        by[("n1", "typo")] == "alice" and by[("c0", "typo")] == "bob" and pd.isna(by[("n1", "needs check")])
    )
    counts = tags.tag_counts(run).set_index("tag")["examples"].to_dict()
    assert counts == {"typo": 3, "needs check": 1}
    assert sorted(tags.ids_with(table, ["typo"])) == ["c0", "e0", "n1"]
    assert tags.tag_column(["n1", "e1", "c0"], table).tolist() == ["needs check, typo", "", "typo"]
    assert tags.remove_tag(run, "typo", ["n1", "e1"], by="carol") == 1
    assert tags.remove_tag(run, "typo", by="carol") == 2  # off every example
    assert tags.tag_counts(run)["tag"].tolist() == ["needs check"]
    events = tags.history(run)
    assert events[["action", "tag", "examples", "done_by"]].fillna("-").values.tolist() == [
        ["add", "typo", 2, "alice"],
        ["add", "typo", 1, "bob"],
        ["add", "needs check", 1, "-"],
        ["remove", "typo", 1, "carol"],
        ["remove", "typo", 2, "carol"],
    ]


def test_tags_are_checked_before_anything_is_written(run):
    for tag, message in (
        ("", "needs a name"),
        ("a,b", "no commas"),
        ("x" * 41, "at most 40"),
        ("a\x1bb", "control"),
    ):
        with pytest.raises(CartomapError, match=message):
            tags.add_tag(run, tag, ["e0"])
    with pytest.raises(CartomapError, match="1 ids are not examples of run .*'zz'"):
        tags.add_tag(run, "typo", ["e0", "zz"])
    with pytest.raises(CartomapError, match="select some first"):
        tags.add_tag(run, "typo", [])
    assert tags.tags_of(run).empty


def test_a_table_gets_its_examples_tags_as_a_column(run):
    table = pd.DataFrame({"id": ["e0", "n1"], "gold": ["entailment", "neutral"]})
    assert tags.with_tags(table, tags.tags_of(run)) is table  # no tags: no empty column
    tags.add_tag(run, "dup", ["n1"])
    out = tags.with_tags(table, tags.tags_of(run))
    assert out[tags.TAGS_COLUMN].tolist() == ["", "dup"] and tags.TAGS_COLUMN not in table.columns


def test_people_tagging_at_once_lose_nothing(run):
    ids = run.examples(columns=["id"])["id"].tolist()
    errors = []

    def tag(k):
        try:
            for i in ids:
                tags.add_tag(run, f"t{k}", [i], by=f"p{k}", known=ids)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=tag, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert tags.tag_counts(run).set_index("tag")["examples"].to_dict() == {
        f"t{k}": len(ids) for k in range(4)
    }


def test_a_read_only_tag_store_is_one_line(run, monkeypatch):
    tags.add_tag(run, "typo", ["e0"])
    import sqlite3

    def locked(self, body):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(tags.TagStore, "write", locked)
    with pytest.raises(
        CartomapError, match="read-only: tags can be read here, not changed .no tag was changed."
    ):
        tags.add_tag(run, "typo", ["e1"])


# --------------------------------------------------------------------------- the command line
def cli(run, *args):
    return main(["--cache", str(run.path.parents[1]), *args])


def test_views_on_the_command_line(run, capsys):
    assert cli(run, "views", "list", run.id) == 0
    assert "has no saved views" in capsys.readouterr().out
    views.save_view(run, "mine", SETTINGS, ["n1", "n0"], focus="n1", by="alice")
    assert cli(run, "views", "list", run.id) == 0
    assert capsys.readouterr().out.startswith("mine: 5 settings, 2 selected, focus n1, saved ")
    assert cli(run, "views", "show", run.id, "mine", "--ids") == 0
    out = capsys.readouterr().out.splitlines()
    assert '  labels = ["neutral"]' in out and "  conf = [0.1, 0.9]" in out
    assert f"  address: ?run={run.id}&view=mine (the Data map page restores it)" in out
    assert out[-2:] == ["n1", "n0"]
    assert cli(run, "views", "show", run.id, "other") == 2
    assert (
        capsys.readouterr().err
        == f"cartomap: error: run {run.id} has no saved view named 'other'; its views: mine\n"
    )
    assert cli(run, "views", "delete", run.id, "mine") == 0
    assert views.list_views(run) == []


def test_tags_on_the_command_line_and_in_the_export(run, tmp_path, capsys):
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("e0\nn1\n\n", encoding="utf-8")
    assert cli(run, "tags", "add", run.id, "typo", "--ids", str(ids_file), "--id", "c0") == 0
    assert capsys.readouterr().out == f"tagged 3 examples of run {run.id} 'typo'\n"
    assert cli(run, "tags", "add", run.id, "typo", "--id", "c0", "--id", "c1") == 0
    assert "tagged 1 examples of run" in (out := capsys.readouterr().out) and "(1 had it already)" in out
    assert cli(run, "tags", "add", run.id, "typo", "--id", "nope") == 2
    assert "1 ids are not examples" in capsys.readouterr().err
    assert cli(run, "tags", "list", run.id) == 0
    assert "typo         4" in capsys.readouterr().out
    assert cli(run, "tags", "show", run.id, "typo") == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].split() == ["id", "tagged_by", "tagged_at"] and len(shown) == 5

    out = tmp_path / "export"
    assert cli(run, "export", run.id, "--out", str(out)) == 0
    assert "tags.parquet: 4 tags of 4 examples (typo)" in capsys.readouterr().out
    exported = pd.read_parquet(out / "tags.parquet")
    assert sorted(exported["id"]) == ["c0", "c1", "e0", "n1"] and list(exported.columns) == tags.TAG_COLUMNS
    assert cli(run, "export", run.id, "--out", str(out)) == 2  # nothing replaced without --force

    assert cli(run, "tags", "remove", run.id, "typo") == 2
    assert "--all" in capsys.readouterr().err
    assert cli(run, "tags", "remove", run.id, "typo", "--id", "e0") == 0
    assert cli(run, "tags", "remove", run.id, "typo", "--all") == 0
    assert "off 3 examples" in capsys.readouterr().out.splitlines()[-1]


def test_team_roles_refuse_tagging_and_deleting_views(run, capsys, monkeypatch):
    (run.path.parents[1] / "team.toml").write_text(
        '[users]\n"alice" = "owner"\n"carol" = "viewer"\n', encoding="utf-8"
    )
    views.save_view(run, "mine", {}, [])
    monkeypatch.setenv(USER_ENV, "carol")
    assert cli(run, "tags", "add", run.id, "typo", "--id", "e0") == 2
    assert "carol (viewer) may not tag examples" in capsys.readouterr().err
    assert cli(run, "views", "delete", run.id, "mine") == 2
    assert "may not save or delete views" in capsys.readouterr().err
    assert cli(run, "tags", "list", run.id) == 0 and cli(run, "views", "list", run.id) == 0  # reading is fine
    monkeypatch.setenv(USER_ENV, "alice")
    assert cli(run, "tags", "add", run.id, "typo", "--id", "e0") == 0
    assert tags.tags_of(run)["tagged_by"].tolist() == ["alice"]
