"""Per-frame memos of the Data map (a selection's positions, a figure's summaries of every row): the
same answers as computing afresh, never another frame's."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd

from cartomap.analysis import datamap


def frame(n: int = 10, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"e{i}" for i in range(start, start + n)], "x": np.arange(n, dtype=float)})


def test_frame_memo_computes_once_per_frame_and_not_for_another():
    calls = []
    a, b = frame(), frame()

    def compute(f):
        calls.append(1)
        return float(f["x"].sum())

    assert datamap.frame_memo(a, "sum", lambda: compute(a)) == 45.0
    assert datamap.frame_memo(a, "sum", lambda: compute(a)) == 45.0
    assert len(calls) == 1
    b["x"] = b["x"] * 2
    assert datamap.frame_memo(b, "sum", lambda: compute(b)) == 90.0  # another frame: computed for it
    assert datamap.frame_memo(a, "other", lambda: compute(a)) == 45.0  # another name: computed
    assert len(calls) == 3


def test_frame_memo_forgets_a_frame_that_is_gone():
    a = frame()
    datamap.frame_memo(a, "sum", lambda: 1)
    del a
    gc.collect()
    c = frame()  # may reuse the address of the frame that is gone
    assert datamap.frame_memo(c, "sum", lambda: 2) == 2


def test_positions_of_answers_each_selection_by_its_content():
    f = frame(100)
    first = datamap.positions_of(f, ["e5", "e1", "nope", "e99"])
    assert first.tolist() == [5, 1, 99]
    assert datamap.positions_of(f, ["e5", "e1", "nope", "e99"]).tolist() == [5, 1, 99]  # from the memo
    assert datamap.positions_of(f, ["e1", "e5"]).tolist() == [1, 5]  # another selection
    g = frame(100, start=50)  # other ids: not the first frame's answer
    assert datamap.positions_of(g, ["e5", "e1", "nope", "e99"]).tolist() == [49]


def test_unique_ids_keeps_first_occurrences_and_follows_changes():
    ids = ["b", "a", "b", 3, "c"]
    assert datamap.unique_ids(ids).tolist() == ["b", "a", "3", "c"]
    assert datamap.unique_ids(ids).tolist() == ["b", "a", "3", "c"]  # the kept answer
    ids.append("d")  # the same list, changed: not the kept answer
    assert datamap.unique_ids(ids).tolist() == ["b", "a", "3", "c", "d"]
    assert datamap.unique_ids(np.asarray(["x", "x"], dtype=object)).tolist() == ["x"]
    assert datamap.unique_ids([]).tolist() == []
