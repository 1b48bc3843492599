"""The Compare page under streamlit.testing (no browser), on synthetic finished runs and experiments
(built by tests/test_compare.py's helpers: logits written directly, no training)."""

from __future__ import annotations

from pathlib import Path

import patience
import pytest
from test_compare import make_combination, make_curriculum, make_runs

from cartomap.analysis import compare as cmp

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "pages" / "compare.py"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One store with four runs (a, b, c, d), a finished curriculum and a finished combination experiment."""
    cache = tmp_path_factory.mktemp("app-cmp") / "cache"
    runs = make_runs(cache)
    exp, _ = make_curriculum(cache)
    combination, _ = make_combination(cache)
    return {"path": cache, "runs": runs, "curriculum": exp, "combination": combination}


@pytest.fixture()
def env(cache, monkeypatch):
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache["path"]))
    monkeypatch.syspath_prepend(str(ROOT))  # `from pages.common import ...`, as under `streamlit run app.py`
    return cache


def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(PAGE), default_timeout=patience.WAIT_S)


def _frames(at, column: str):
    return [d.value for d in at.dataframe if column in d.value.columns]


def _charts(at) -> list[str]:
    """The keys of the plotly charts drawn (the element id ends with the key)."""
    return [c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")]


def test_nothing_chosen(env):
    at = _app().run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Compare"]
    assert any("Pick runs" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_two_runs(env):
    a, b = env["runs"]["a"], env["runs"]["b"]
    at = _app().run()
    at.multiselect(key="_kept_cmp_runs").set_value([a.id, b.id]).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="_kept_cmp_test").value == "test"
    # the score table holds the library's scores
    table = _frames(at, "macro_f1")[0].set_index("id")
    expected = cmp.comparison_table([a, b], "test").set_index("id")
    for rid in (a.id, b.id):
        assert table.loc[rid, "macro_f1"] == pytest.approx(expected.loc[rid, "macro_f1"])
        assert table.loc[rid, "accuracy"] == pytest.approx(expected.loc[rid, "accuracy"])
    # learning curves and per-class F1 (no data map: these runs recorded no dynamics)
    assert _charts(at) == ["cmp_curves", "cmp_class_f1"]
    # the per-example difference: counts and the table of the discordant examples
    diff = cmp.example_diff(a, b, "test")
    counts = cmp.outcome_counts(diff)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {k: f"{v:,}" for k, v in counts.items()}
    shown = _frames(at, "outcome")[0]
    assert len(shown) == counts["only A right"] + counts["only B right"]
    assert {"premise", "hypothesis", "gold", "pred_a", "pred_b"} <= set(shown.columns)
    # every outcome shown when asked
    at.multiselect(key="_kept_cmp_outcomes").set_value(list(counts)).run()
    assert len(_frames(at, "outcome")[0]) == 60
    # the dev set instead of the test set
    at.radio(key="_kept_cmp_source").set_value("dev set").run()
    assert not at.exception, at.exception
    assert len(_frames(at, "outcome")[0]) == 40
    # a curve of another metric
    at.radio(key="_kept_cmp_metric").set_value("train loss").run()
    assert not at.exception, at.exception


def test_missing_test_set_and_maps(env):
    a, d = env["runs"]["a"], env["runs"]["d"]
    at = _app()
    at.session_state["cmp_runs"] = [a.id, d.id]
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="_kept_cmp_test").options == ["test", "other"]
    table = _frames(at, "macro_f1")[0].set_index("id")
    assert table["accuracy"].isna().tolist() == [False, True]
    assert table.loc[a.id, "accuracy"] == pytest.approx(cmp.comparison_table([a], "test")["accuracy"][0])
    assert any("No scores on this test set" in c.value for c in at.caption)
    # d recorded dynamics: its data map is drawn next to the curves and bars
    assert _charts(at) == ["cmp_curves", "cmp_class_f1", f"cmp_map_{d.id}"]
    # no shared test set, but a shared dev set: the diff runs on it
    assert at.radio(key="_kept_cmp_source").options == ["dev set"]
    diff = cmp.dev_diff(a, d)
    counts = cmp.outcome_counts(diff)
    assert {m.label: m.value for m in at.metric} == {k: f"{v:,}" for k, v in counts.items()}
    # the other test set: a has no scores, d has
    at.selectbox(key="_kept_cmp_test").set_value("other").run()
    table = _frames(at, "macro_f1")[0].set_index("id")
    assert table["accuracy"].isna().tolist() == [True, False]


@pytest.mark.parametrize("stored", ["label", "too many"])
def test_kept_maps_choice_is_bounded(env, stored):
    """A stored choice of maps that the widget cannot take (a single label, a string that Streamlit would
    read as one option per character; more labels than ``max_selections``) is cut to a valid one."""
    from pages.compare import MAX_MAPS

    a, d = env["runs"]["a"], env["runs"]["d"]
    label = cmp.run_label(d)
    at = _app()
    at.session_state["cmp_runs"] = [a.id, d.id]
    at.session_state["cmp_maps"] = label if stored == "label" else [label] * (MAX_MAPS + 2)
    at.run()
    assert not at.exception, at.exception
    assert at.multiselect(key="_kept_cmp_maps").value == [label]
    assert _charts(at)[-1] == f"cmp_map_{d.id}"


def test_curriculum_experiment(env):
    exp = env["curriculum"]
    at = _app()
    at.session_state["cmp_exps"] = [exp.id]
    at.run()
    assert not at.exception, at.exception
    table = _frames(at, "macro_f1")[0]
    assert len(table) == 5 and "tiny curricula: cart-stra++@seed1" in set(table["run"])
    assert any(s.value == "tiny curricula" for s in at.subheader)
    significance = _frames(at, "p_value")[0]
    assert significance["test"].tolist() == ["Cochran's Q", "Cochran's Q (pair)", "Mann-Whitney U"]
    best = _frames(at, "method")[0]
    assert sorted(best["run_id"]) == sorted(exp.result("best")["run_id"])
    # the data-map baseline of the experiment has its map
    datamap_run = exp.run_ids()["datamap"]
    assert _charts(at) == ["cmp_curves", "cmp_class_f1", f"cmp_map_{datamap_run}"]
    # best on validation per method: two runs left, no baseline
    at.toggle(key="_kept_cmp_best").set_value(True).run()
    assert not at.exception, at.exception
    table = _frames(at, "macro_f1")[0]
    assert sorted(table["id"]) == sorted(exp.result("best")["run_id"])


def test_combination_experiment(env):
    exp = env["combination"]
    at = _app()
    at.session_state["cmp_exps"] = [exp.id]
    at.run()
    assert not at.exception, at.exception
    table3 = _frames(at, "train_set")[0]
    assert table3["train_set"].tolist() == ["A", "A + B"]
    assert table3["other"].tolist() == pytest.approx(exp.result("table3")["other"].tolist())
    # the two runs evaluated on two test sets: the picker offers both
    assert at.selectbox(key="_kept_cmp_test").options == ["test", "other"]


def test_missing_cells_are_shown_as_a_dash(env):
    at = _app()
    at.session_state["cmp_exps"] = [env["curriculum"].id]
    at.run()
    assert not at.exception, at.exception
    significance = _frames(at, "p_value")[0]
    mann_whitney = significance[significance["test"] == "Mann-Whitney U"].iloc[0]
    assert mann_whitney["df"] == "–"  # a U test has no degrees of freedom: not "None"
    assert significance[significance["test"] == "Cochran's Q"].iloc[0]["df"] == "1"
    assert not significance.isna().any().any()


def test_the_f1_chart_has_a_legend_and_names_the_runs_without_scores(env):
    """One series per scored run, always with a legend (plotly hides a lone one); a run without the
    test set is named under the chart instead of silently missing."""
    import json

    a, d = env["runs"]["a"], env["runs"]["d"]
    at = _app()
    at.session_state["cmp_runs"] = [a.id, d.id]
    at.run()
    assert not at.exception, at.exception
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("cmp_class_f1")]
    figure = json.loads(chart.proto.spec)
    assert figure["layout"]["showlegend"] is True
    assert [t["name"] for t in figure["data"]] == [cmp.run_label(a)]
    assert any(c.value.startswith("No per-class scores on this test set for: D") for c in at.caption)
    curves = json.loads(
        next(c for c in at.get("plotly_chart") if c.proto.id.endswith("cmp_curves")).proto.spec
    )
    assert curves["layout"]["showlegend"] is True


def test_tables_show_a_dash_for_missing_values_in_formatted_columns(env):
    import numpy as np
    import pandas as pd

    from pages.common import for_display

    table = pd.DataFrame({"test": ["Q", "U"], "statistic": [15.38461, np.nan], "n": [60, 4]})
    shown = for_display(table, formats={"statistic": "%.4f"})
    assert shown["statistic"].tolist() == ["15.3846", "–"] and shown["n"].tolist() == [60, 4]
    assert (
        "None"
        not in cmp.bold_best(cmp.comparison_table([env["runs"]["a"], env["runs"]["d"]], "test")).to_string()
    )
