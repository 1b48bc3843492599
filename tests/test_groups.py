"""Group names: slugs that never collide, names in any script, groups saved by older versions."""

from __future__ import annotations

import pytest

from cartomap.config import DataConfig, RunConfig, TrainConfig
from cartomap.data.loading import load_dataset
from cartomap.errors import CartomapError
from cartomap.io import atomic_write_json
from cartomap.runs.groups import (
    delete_group,
    group_path,
    list_groups,
    load_group,
    save_group,
    save_group_table,
)
from cartomap.runs.store import RunStore


@pytest.fixture()
def run(tmp_path):
    data = load_dataset(DataConfig(path="demo:dev"))
    config = RunConfig(data=DataConfig(path="demo:dev"), dev=None, train=TrainConfig(epochs=1))
    return RunStore(tmp_path / "cache").create(config, data, None)


@pytest.fixture()
def ids(run):
    return run.examples(columns=["id"])["id"].astype(str).tolist()


def test_names_that_read_the_same_once_slugged_keep_their_own_files(run, ids):
    names = ["a/b", "a?b", "a b", "a-b", "a_b"]
    for n, name in enumerate(names):
        save_group(run, name, ids[n : n + 2])
    assert len({group_path(run, name) for name in names}) == len(names)
    for n, name in enumerate(names):
        group = load_group(run, name)
        assert group["name"] == name and group["ids"] == ids[n : n + 2]
    assert sorted(g["name"] for g in list_groups(run)) == sorted(names)
    with pytest.raises(CartomapError, match="exists already"):
        save_group(run, "a?b", ids[:1])
    delete_group(run, "a/b")
    assert sorted(g["name"] for g in list_groups(run)) == sorted(set(names) - {"a/b"})
    assert load_group(run, "a?b")["ids"] == ids[1:3]


def test_a_hand_made_group_does_not_shadow_an_automatic_one(run, ids):
    save_group(run, "auto-neutral-a?b", ids[:1])  # hand-made, slugged like the automatic name below
    base = {"source": "auto", "note": "", "created_at": 0.0}
    save_group_table(
        run,
        [
            {**base, "name": "auto-neutral-a/b", "ids": ids[2:4]},
            {**base, "name": "auto-neutral-a_b", "ids": ids[4:6]},
        ],
    )
    assert load_group(run, "auto-neutral-a/b")["ids"] == ids[2:4]
    assert load_group(run, "auto-neutral-a_b")["ids"] == ids[4:6]
    assert load_group(run, "auto-neutral-a?b")["ids"] == ids[:1]
    delete_group(run, "auto-neutral-a/b")
    assert load_group(run, "auto-neutral-a?b")["ids"] == ids[:1]  # the hand-made one stays


def test_names_in_any_script_are_accepted(run, ids):
    for name in ("中文", "données", "Ελληνικά 2"):
        save_group(run, name, ids[:2])
        assert load_group(run, name)["name"] == name
    assert group_path(run, "中文").name == "中文.json"
    for bad in ("", "  ", "???", "../.."):
        with pytest.raises(CartomapError, match="no letters or digits"):
            save_group(run, bad, ids[:2])


def test_long_names_do_not_collide(run, ids):
    a, b = "x" * 100 + "a", "x" * 100 + "b"
    save_group(run, a, ids[:1])
    save_group(run, b, ids[1:2])
    assert load_group(run, a)["ids"] == ids[:1] and load_group(run, b)["ids"] == ids[1:2]
    assert all(len(group_path(run, n).stem) <= 80 for n in (a, b))


def test_groups_saved_under_the_old_slug_are_found_and_replaced(run, ids):
    old = run.groups_dir / "my-group.json"  # how "my group" was saved before slugs had a hash
    atomic_write_json(old, {"name": "my group", "ids": ids[:2], "source": "data map", "created_at": 1.0})
    assert load_group(run, "my group")["ids"] == ids[:2]
    with pytest.raises(CartomapError, match="exists already"):
        save_group(run, "my group", ids[2:4])
    save_group(run, "my group", ids[2:4], overwrite=True)
    assert not old.exists()
    assert [g["ids"] for g in list_groups(run)] == [ids[2:4]]
    assert load_group(run, "my group")["ids"] == ids[2:4]
    with pytest.raises(CartomapError, match="no group named"):
        load_group(run, "my-group")  # the old file's slug is not a name of its own


def test_an_old_file_is_not_taken_for_the_name_of_its_slug(run, ids):
    atomic_write_json(
        run.groups_dir / "my-group.json", {"name": "my group", "ids": ids[:2], "created_at": 1.0}
    )
    with pytest.raises(CartomapError, match="no group named"):
        load_group(run, "my-group")
    with pytest.raises(CartomapError, match="clashes"):
        save_group(run, "my-group", ids[2:4], overwrite=True)
    assert load_group(run, "my group")["ids"] == ids[:2]


def test_a_damaged_group_file_hides_no_other_group_and_is_named(run, ids):
    """A hand-edited or cut-short group file: the other groups still list, the damaged one is named, and
    opening it by name is one clear error (issue 40: one bad file never hides the good ones)."""
    from cartomap.runs.groups import damaged_groups, group_path, list_groups, load_group, save_group

    save_group(run, "good", ids[:2])
    save_group(run, "bad", ids[2:4])
    group_path(run, "bad").write_text('{"name": "bad", "ids": [', encoding="utf-8")
    (run.groups_dir / "other.json").write_text("[[[[[[" * 10_000, encoding="utf-8")
    assert [g["name"] for g in list_groups(run, include_table=False)] == ["good"]
    assert {p.name for p in damaged_groups(run)} == {group_path(run, "bad").name, "other.json"}
    with pytest.raises(CartomapError, match="the group 'bad' is damaged"):
        load_group(run, "bad")
    from cartomap.runs.repair import repair_run

    said = repair_run(run).remaining
    assert any("other.json: a damaged group file" in line for line in said), said
