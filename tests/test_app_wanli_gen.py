"""The Prompts and Generate pages under streamlit.testing (no browser), on a small synthetic finished run."""

from __future__ import annotations

import os
from pathlib import Path

import patience
import pytest
from test_generation import SECRET, Canned
from test_prompts import make_run

import cartomap.runs.jobs
from cartomap.runs.groups import list_groups, load_group
from cartomap.runs.tasks import task_status
from cartomap.wanli.batches import batch_info
from cartomap.wanli.exemplars import auto_groups, collect_groups, save_auto_groups
from cartomap.wanli.generation import run_generation
from cartomap.wanli.generators import GenerationConfig
from cartomap.wanli.prompts import PromptTemplate, build_prompt

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def env(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARTOMAP_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(ROOT))
    return cache


@pytest.fixture()
def spawned(monkeypatch):
    calls = []
    monkeypatch.setattr(
        cartomap.runs.jobs, "spawn", lambda args, log, cache=None: calls.append(args) or os.getpid()
    )
    return calls


def page(name: str, tiny_lm: str | None = None):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=patience.WAIT_S)
    if tiny_lm is not None:
        at.session_state["wanli_model"] = tiny_lm  # token counts with the tiny LM's (SmolLM2) tokenizer
    return at


def with_groups(cache):
    run = make_run(cache)
    save_auto_groups(run, collect_groups(run, k=3, exclude_genres=("telephone",), query=None))
    return run


def expected_prompt(run, name: str, template: PromptTemplate | None = None) -> str:
    examples = run.examples().set_index("id")
    ids = load_group(run, name)["ids"]
    pairs = [tuple(examples.loc[i, ["premise", "hypothesis"]]) for i in ids]
    label = run.label_names[int(examples.loc[ids[-1], "label"])]
    return build_prompt(pairs, label, template or PromptTemplate())


# --------------------------------------------------------------------------- Prompts page
def test_prompts_page_shows_the_exact_prompt_and_tokens(env, tiny_lm):
    run = with_groups(env)
    at = page("prompts.py", tiny_lm).run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Prompts"]
    first = auto_groups(run)[0]["name"]
    assert at.selectbox(key="_kept_wanli_group").value == first
    (code,) = at.code
    assert code.value == expected_prompt(run, first)
    (metric,) = [m for m in at.metric if m.label == "Prompt tokens"]
    assert int(metric.value.replace(",", "")) > 50

    # editing a label word changes the prompt, and the edit survives a rerun
    at.text_input(key="_kept_wanli_word_entailment").input("Therefore").run()
    assert not at.exception, at.exception
    custom = PromptTemplate(
        label_words={"entailment": "Therefore", "neutral": "Possibility", "contradiction": "Contradiction"}
    )
    assert at.code[0].value == expected_prompt(run, first, custom)
    assert "\nTherefore: " in at.code[0].value
    at.run()
    assert at.session_state["wanli_word_entailment"] == "Therefore"
    assert "\nTherefore: " in at.code[0].value

    # the other group (neutral) keeps its own word
    second = auto_groups(run)[1]["name"]
    at.selectbox(key="_kept_wanli_group").set_value(second).run()
    assert "\nPossibility: " in at.code[0].value and at.code[0].value.endswith("\n\n5.")

    # a label without a word is an error, and no prompt is shown
    at.text_input(key="_kept_wanli_word_neutral").input("").run()
    assert any("no separator word for label neutral" in e.value for e in at.error)
    assert not at.code


def test_prompts_page_collects_groups(env, spawned):
    run = make_run(env)
    at = page("prompts.py").run()
    assert not at.exception, at.exception
    assert any("No groups yet" in i.value for i in at.info)
    at.number_input(key="_kept_wanli_k").set_value(3).run()
    at.number_input(key="_kept_wanli_query").set_value(0).run()
    at.button(key="wanli_collect").click().run()
    assert not at.exception, at.exception
    assert not spawned  # embeddings exist: collected at once
    assert len(auto_groups(run)) == 2 and at.code  # a group is picked and its prompt shown
    assert auto_groups(run)[0]["settings"]["k"] == 3

    # without embeddings the collection is a background job (embeddings first)
    (run.path / "embeddings.npy").unlink()
    at.button(key="wanli_collect").click().run()
    assert not at.exception, at.exception
    assert spawned and spawned[0][:3] == ["groups", run.id, "--save"]
    assert task_status(run, "auto-groups")["state"] == "queued"


def test_prompts_page_ranks_seeds_by_the_score_picked(env, spawned):
    """WaNLI ranks seeds by variability (the default); another ambiguity score of the run is one pick away,
    its seeds the top quantile of that score, and kept with the groups' settings and the job's command."""
    import pandas as pd

    from cartomap.io import atomic_write_parquet
    from cartomap.wanli.exemplars import collect_groups

    run = make_run(env)
    metrics = pd.read_parquet(run.metrics_path())  # mean entropy ranks rows 1 and 7 first (variability: 0, 6)
    metrics["mean_entropy"] = [0.1, 0.9, 0.2, 0.3, 0.1, 0.1, 0.1, 0.8, 0.2, 0.1, 0.2, 0.1]
    atomic_write_parquet(run.metrics_path(), metrics)
    at = page("prompts.py").run()
    picker = at.selectbox(key="_kept_wanli_score")
    assert picker.value == "variability" and picker.options == ["variability", "mean entropy"]
    picker.set_value("mean_entropy").run()
    assert any(n.label == "Mean entropy quantile" for n in at.number_input)
    at.number_input(key="_kept_wanli_query").set_value(0).run()
    at.button(key="wanli_collect").click().run()
    assert not at.exception, at.exception
    saved = auto_groups(run)
    assert saved[0]["settings"]["score"] == "mean_entropy"
    expected = collect_groups(run, score="mean_entropy", query=None)
    assert [g["seed"] for g in saved] == [g["seed"] for g in expected]
    assert [g["seed"] for g in expected] != [g["seed"] for g in collect_groups(run, query=None)]
    (run.path / "embeddings.npy").unlink()  # the job's command carries the score
    at.button(key="wanli_collect").click().run()
    assert spawned and spawned[0][spawned[0].index("--ambiguity") + 1] == "mean_entropy"


def test_prompts_page_collects_groups_of_a_big_run_as_a_job(env, spawned, monkeypatch):
    """The search is quadratic: above COLLECT_IN_PAGE_MAX examples the page never collects while the
    user waits, it starts the background job even though the embeddings exist."""
    import cartomap.wanli.exemplars

    run = make_run(env)
    monkeypatch.setattr(cartomap.wanli.exemplars, "COLLECT_IN_PAGE_MAX", len(run.examples()) - 1)
    at = page("prompts.py").run()
    at.button(key="wanli_collect").click().run()
    assert not at.exception, at.exception
    assert spawned and spawned[0][:3] == ["groups", run.id, "--save"]
    assert auto_groups(run) == []


# --------------------------------------------------------------------------- Generate page
def test_generate_page_starts_a_job_with_the_edited_template(env, spawned):
    run = with_groups(env)
    at = page("generate.py")
    at.session_state["wanli_word_entailment"] = "Therefore"  # as edited on the Prompts page
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Generate"]
    assert at.radio(key="_kept_wanli_gen_choice").value == "All automatic groups"
    at.number_input(key="_kept_wanli_n").set_value(2).run()
    at.text_input(key="_kept_wanli_batch_name").input("Try One").run()
    at.button(key="wanli_start").click().run()
    assert not at.exception, at.exception
    assert spawned == [["generate", run.id, "--batch", "try-one", "--job", "--quiet"]]
    info = batch_info(run, "try-one")
    assert info["groups"] == [g["name"] for g in auto_groups(run)]
    assert (
        info["config"]["n"] == 2 and info["config"]["top_p"] == 0.5 and info["config"]["model"] == "smollm2"
    )
    assert info["template"]["label_words"]["entailment"] == "Therefore"
    assert task_status(run, "generate-try-one")["state"] == "queued"
    assert at.session_state["wanli_view_batch"] == "try-one"
    assert at.text_input(key="_kept_wanli_batch_name").value == "batch-2"  # not the name just taken


def test_generate_page_browses_a_finished_batch(env):
    run = with_groups(env)
    names = [g["name"] for g in auto_groups(run)]
    answers = [" A.\nImplication: B.", "junk", " C.\nPossibility: D.", " E.\nPossibility: F."]
    run_generation(run, "done-batch", names, GenerationConfig(n=2), generator=Canned(answers))
    at = page("generate.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="_kept_wanli_view_batch").value == "done-batch"
    tables = [d.value for d in at.dataframe if "raw" in d.value.columns]
    assert len(tables) == 1 and tables[0]["premise"].tolist() == ["A.", "C.", "E."]
    assert set(tables[0].columns) >= {"group", "intended_label", "raw"}
    assert {m.label: m.value for m in at.metric}["Unparsable"] == "1"


def test_generate_page_openai_never_shows_the_key(env, spawned, monkeypatch):
    monkeypatch.setenv("CARTOMAP_TEST_KEY", SECRET)
    run = with_groups(env)
    at = page("generate.py").run()
    at.radio(key="_kept_wanli_backend").set_value("openai").run()
    at.text_input(key="_kept_wanli_api_key_env").input("CARTOMAP_TEST_KEY").run()
    assert not at.exception, at.exception
    assert any("`CARTOMAP\\_TEST\\_KEY` is set" in c.value for c in at.caption)
    at.button(key="wanli_start").click().run()
    assert not at.exception, at.exception
    shown = " ".join(str(getattr(e, "value", "")) for e in at.main)
    assert SECRET not in shown
    for path in run.path.rglob("*.json"):
        assert SECRET not in path.read_text(encoding="utf-8")
    assert batch_info(run, spawned[0][3])["config"]["api_key_env"] == "CARTOMAP_TEST_KEY"
    assert list_groups(run)
