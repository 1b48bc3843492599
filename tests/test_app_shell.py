"""The dashboard shell: app.py's navigation, and pages/common.py (run picker, progress, demo prompt)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import patience
from streamlit.testing.v1 import AppTest
from test_app_train import make_run

from cartomap.config import DEMO_TRAIN_CONFIG
from cartomap.runs.store import RunStore

REPO = Path(__file__).resolve().parent.parent
PAGES = (
    "train.py",
    "data_map.py",
    "neighbours.py",
    "prompts.py",
    "generate.py",
    "filter.py",
    "review.py",
    "pruning.py",
    "review_suspects.py",
    "artifacts.py",
    "compare.py",
    "experiments.py",
)


def app() -> AppTest:
    missing = [p for p in PAGES if not (REPO / "pages" / p).exists()]
    assert not missing, f"pages declared in app.py are missing: {missing}"
    return AppTest.from_file(str(REPO / "app.py"), default_timeout=patience.WAIT_S)


def script(body: str) -> AppTest:
    """A small app around pages.common, for testing the shared helpers alone."""
    code = (
        "import streamlit as st\nfrom pages.common import *\nfrom pages.components.jobs import *\n"
        + textwrap.dedent(body)
    )
    return AppTest.from_string(code, default_timeout=patience.WAIT_S)


def texts(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown] + [t.value for t in at.text]


# --------------------------------------------------------------------------- app.py
def test_fresh_install_opens_on_data_map_and_trains_the_demo_in_one_click(root, spawned):
    at = app().run()
    assert not at.exception
    assert any("No runs yet" in c.value for c in at.sidebar.caption)
    button = at.button(key="train_demo")
    assert button.label == "Train the demo"
    button.click().run()
    assert not at.exception
    (run,) = RunStore(root).list()
    assert run.config.name == "demo" and run.config.data.path == "demo:train"
    assert (
        run.config.train == DEMO_TRAIN_CONFIG
    )  # the demo's own training (3 epochs at 1e-4), not the form's defaults
    assert spawned and spawned[0][:3] == ["train", "--run", run.id]
    assert at.session_state["run_id"] == run.id
    assert at.query_params["run"] == run.id
    assert at.get("progress"), "the page follows the demo's training"


def test_fresh_install_trains_the_ner_demo_beside_the_nli_demo(root, spawned):
    """ "Train the NER demo" beside "Train the demo": the bundled WikiGold run (token classification) starts
    and the page follows it, the run `cartomap demo --task token` trains (one id)."""
    from cartomap.config import DEMO_NER_TRAIN_CONFIG, demo_run_config
    from cartomap.training.prepare import prepare_run

    at = app().run()
    assert not at.exception
    assert at.button(key="train_demo").label == "Train the demo"  # both offered
    button = at.button(key="train_ner_demo")
    assert button.label == "Train the NER demo"
    button.click().run()
    assert not at.exception
    (run,) = RunStore(root).list()
    assert run.task_kind.name == "token" and run.config.data.path == "demo:ner_train"
    assert run.config.dev.path == "demo:ner_dev" and run.config.train == DEMO_NER_TRAIN_CONFIG
    assert run.info["n_train"] == 1454 and len(run.dev_examples()) == 242
    assert run.label_names == ("B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER", "O")
    assert run.examples()["id"].iloc[0].startswith("wikigold-")  # the sentences' own ids
    assert spawned and spawned[0][:3] == ["train", "--run", run.id]
    assert at.session_state["run_id"] == run.id and at.query_params["run"] == run.id
    assert at.get("progress"), "the page follows the NER demo's training"
    assert prepare_run(demo_run_config("token"), RunStore(root)).id == run.id


def test_every_page_renders(root):
    make_run(root, "failed", error="RuntimeError: boom")
    at = app().run()
    assert not at.exception
    for page in PAGES:
        at.switch_page(f"pages/{page}").run()
        assert not at.exception, page


# --------------------------------------------------------------------------- the run picker
PICKER = """
run = sidebar_run_picker()
st.text(f"picked {run.id if run else None}")
"""


def test_a_deep_link_as_the_servers_first_visit_goes_through_app_py(root):
    """/data_map?run=ID before anyone opened /: Streamlit's legacy pages/ mode would run the page
    alone (every file of pages/ listed as a page, no run picker); it is handed to app.py."""
    a = make_run(root, "done", seed=1, name="alpha")
    make_run(root, "done", seed=2, name="beta")
    at = app()
    at.switch_page("pages/data_map.py")  # the first script run of the session, on that page
    at.query_params["run"] = a.id
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Data map"]
    (picker,) = at.sidebar.selectbox
    assert picker.label == "Run" and picker.value == a.id
    assert at.session_state["run_id"] == a.id and at.query_params["run"] == a.id


LAUNCHER_CHECK = """
import sys
sys.path.insert(0, {root!r})
import dashboard
from streamlit.runtime.pages_manager import PagesManager
print(dashboard.without_legacy_pages())
PagesManager({app!r})  # what the server's first session makes
print(PagesManager.uses_pages_directory, dashboard.without_legacy_pages())
"""


def test_the_launcher_turns_streamlits_legacy_pages_mode_off():
    """`cartomap dashboard` serves app.py through dashboard.py, which tells Streamlit before the first
    session that the pages/ folder is not a legacy multipage app (else a first visit to /data_map runs
    the page alone); once decided it leaves the setting alone."""
    code = LAUNCHER_CHECK.format(root=str(REPO), app=str(REPO / "app.py"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False"]


WARM_UP_CHECK = """
import os, sys
sys.path.insert(0, {root!r})
import dashboard
os.environ["CARTOMAP_WARM_UP"] = "0"
print(dashboard.warm_up({cache!r}))
os.environ["CARTOMAP_WARM_UP"] = "1"
dashboard.warm_up({cache!r}).join()
print("pages.common" in sys.modules, "plotly.graph_objects" in sys.modules)
from cartomap.analysis import datamap
from cartomap.analysis import map_points
reads, hovers = [], []
read, hover = datamap.map_frame, map_points.hover_text
datamap.map_frame = lambda *a, **k: reads.append(1) or read(*a, **k)
map_points.hover_text = lambda *a, **k: hovers.append(1) or hover(*a, **k)
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({page!r}, default_timeout={timeout}).run()
assert not at.exception, at.exception
print(len(reads), len(hovers), len(at.get("plotly_chart")))
"""


def test_the_launchers_warm_up_reads_the_default_runs_map_for_the_first_page(tmp_path):
    """The warm-up thread imports the page's modules and reads the map frame of the run the picker opens by
    default into the cache the Data map page reads, and draws its figure once: the page's first run reads
    no frame of its own and makes no hover text (the drawn sample's is kept with the frame).
    ``CARTOMAP_WARM_UP=0`` starts no thread."""
    from test_app_datamap import make_run as make_map_run

    cache = tmp_path / "cache"
    make_map_run(cache)
    code = WARM_UP_CHECK.format(
        root=str(REPO), cache=str(cache), page=str(REPO / "pages" / "data_map.py"), timeout=patience.WAIT_S
    )
    env = dict(os.environ, CARTOMAP_CACHE=str(cache))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["None", "True", "True", "0", "0", "1"]  # no frame read, no hover text made
    # Streamlit's "missing ScriptRunContext" is not logged for the warm-up thread (it is for others)
    assert "Thread 'cartomap-warm-up': missing ScriptRunContext" not in out.stderr
    assert "cartomap warm-up:" in out.stderr


def test_cartomap_dashboard_starts_streamlit_through_the_launcher(tmp_path, monkeypatch):
    from cartomap.cli import main

    started = []
    monkeypatch.setattr("os.execvpe", lambda path, cmd, env: started.append((cmd, env)))
    main(["--cache", str(tmp_path), "dashboard", "--port", "8765", "--headless"])
    ((cmd, env),) = started
    assert cmd[:2] == [sys.executable, str(REPO / "dashboard.py")]
    assert (
        cmd[cmd.index("--server.port") + 1] == "8765"
        and cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    )
    assert env["CARTOMAP_CACHE"] == str(tmp_path.resolve())


def test_every_page_hands_a_first_visit_to_app_py():
    for page in PAGES:
        assert "\nthrough_app()" in (REPO / "pages" / page).read_text(), (
            f"pages/{page} does not call through_app()"
        )


def test_sidebar_picker_lists_runs_and_defaults_to_newest_done(root):
    done = make_run(root, "done", seed=1, name="first")
    newest = make_run(root, "failed", seed=2)
    at = script(PICKER).run()
    assert not at.exception
    picker = at.sidebar.selectbox[0]
    assert picker.options == [
        f"{newest.id} · failed · demo:dev · {newest.summary()['created']}",
        f"first ({done.id}) · done · demo:dev · {done.summary()['created']}",
    ]
    assert f"picked {done.id}" in texts(at)
    assert at.session_state["run_id"] == done.id
    assert at.query_params["run"] == done.id
    picker.set_value(newest.id).run()
    assert f"picked {newest.id}" in texts(at)
    assert at.session_state["run_id"] == newest.id and at.query_params["run"] == newest.id


def test_query_param_selects_a_run_by_prefix_or_name(root):
    a = make_run(root, "done", seed=1, name="alpha")
    b = make_run(root, "done", seed=2, name="beta")
    at = script(PICKER)
    at.query_params["run"] = a.id[:6]
    at.run()
    assert f"picked {a.id}" in texts(at)
    at.query_params["run"] = "beta"
    at.run()
    assert f"picked {b.id}" in texts(at)
    at.query_params["run"] = "nope"
    at.run()
    assert f"picked {b.id}" in texts(at)
    assert any("no run 'nope'" in w.value for w in at.sidebar.warning)


START = """
run = sidebar_run_picker()
st.text(f"picked {run.id if run else None}")
if st.button("Start", key="start"):  # as the Train page does after starting a run
    select_run(st.session_state["new_run"])
    st.rerun()
"""


def test_the_picker_follows_the_run_just_started_not_a_late_copy_of_the_old_address(root):
    """After starting a new run from the page showing a cancelled one, a rerun that still carries the
    old address (sent by the browser, or by the cancelled run's live panel polling, before the new address
    reached it) kept the new selection only until that rerun: the page then showed the cancelled run."""
    cancelled = make_run(root, "cancelled", seed=1, name="stopped")
    new = make_run(root, "queued", seed=2, name="new")
    other = make_run(root, "done", seed=3, name="other")
    at = script(START)
    at.session_state["new_run"] = new.id
    at.query_params["run"] = cancelled.id
    at.run()
    assert f"picked {cancelled.id}" in texts(at)
    at.button(key="start").click().run()
    assert f"picked {new.id}" in texts(at) and at.query_params["run"] == new.id
    at.query_params["run"] = cancelled.id  # the late copy of the address the session left
    at.run()
    assert f"picked {new.id}" in texts(at) and at.session_state["run_id"] == new.id
    assert at.query_params["run"] == new.id  # the address follows the selection again
    at.query_params["run"] = other.id  # another address is a request for that run, as always
    at.run()
    assert f"picked {other.id}" in texts(at)


def test_picker_without_runs_and_current_run_without_picker(root):
    at = script(PICKER).run()
    assert "picked None" in texts(at)
    run = make_run(root, "queued")
    at = script("st.text(f'current {current_run().id}')").run()
    assert f"current {run.id}" in texts(at)


# --------------------------------------------------------------------------- demo_or_prompt and progress
PROMPT = """
run = demo_or_prompt(current_run())
st.text(f"ready {run.id if run else None}")
"""


def test_demo_or_prompt_returns_a_done_run(root):
    run = make_run(root, "done")
    at = script(PROMPT).run()
    assert f"ready {run.id}" in texts(at)
    assert not at.button


def test_demo_or_prompt_shows_progress_of_a_training_run(root):
    run = make_run(
        root,
        "running",
        epoch=2,
        epochs=2,
        step=4,
        steps_per_epoch=13,
        global_step=17,
        total_steps=26,
        loss=0.75,
        dev_accuracy=0.6125,
        eta_s=12,
    )
    lock = run.acquire_lock()
    try:
        at = script(PROMPT).run()
        assert not at.exception and "ready None" in texts(at)
        metrics = {m.label: m.value for m in at.metric}
        assert metrics == {
            "Epoch": "2/2",
            "Step": "4/13",
            "Loss": "0.7500",
            "Dev accuracy": "61.3%",
            "Time left": "12 s",
        }
        assert at.get("progress")[0].proto.value == 65  # 17 of 26 steps
        assert at.button(key=f"cancel_{run.id}")
    finally:
        lock.close()


def test_demo_or_prompt_explains_a_failed_run_and_offers_resume(root, spawned):
    run = make_run(root, "failed", error="RunError: could not load a classifier")
    at = script(PROMPT).run()
    assert any("Training failed" in e.value for e in at.error)
    assert any("could not load a classifier" in c.value for c in at.code)
    at.button(key=f"resume_{run.id}").click().run()
    assert not at.exception and spawned


def test_a_job_that_died_before_starting_is_reported(root):
    run = make_run(root, "queued", pid=2**22 + 54321)  # no such process
    (run.path / "job.log").write_text("Traceback ...\nImportError: no module named torch\n")
    at = script(PROMPT).run()
    assert any("exited before training started" in w.value for w in at.warning)
    assert any("ImportError" in c.value for c in at.code)
    assert at.button(key=f"resume_{run.id}")


def test_picker_keeps_the_choice_when_the_runs_state_changes(root):
    """Select widgets send back their formatted label; a label with the state in it changes."""
    chosen = make_run(root, "running", seed=1)
    make_run(root, "done", seed=2)
    at = script(PICKER).run()
    at.sidebar.selectbox[0].set_value(chosen.id).run()
    assert f"picked {chosen.id}" in texts(at)
    chosen.set_status(state="cancelled")  # its label changes
    at.run()
    at.run()
    assert f"picked {chosen.id}" in texts(at)
    assert at.session_state["run_id"] == chosen.id and at.query_params["run"] == chosen.id


LIVE_PANEL = """
run = sidebar_run_picker()
n = st.session_state.get("n", 0)
st.session_state["n"] = n + 1
from pages.components.jobs import TRAINING, _live
drawn = "queued" if n == 0 else run_state(run)  # the first page was drawn while the job was queued
_live(run, TRAINING, lambda job, status: st.text(f"panel {status['state']}"), drawn)
"""


def test_the_job_panel_reruns_the_app_when_the_job_starts_so_the_sidebar_agrees(root):
    """The page was drawn while the run was queued; the panel's poll sees it running: the whole app
    runs again, so the sidebar's picker says "running" as the panel does (not "queued" until the end)."""
    run = make_run(root, "running", epoch=1, epochs=2, global_step=1, total_steps=26)
    lock = run.acquire_lock()
    try:
        at = script(LIVE_PANEL).run()
        assert not at.exception, at.exception
        assert at.session_state["n"] == 2  # the app ran again after the poll
        assert "panel running" in texts(at)
        (picker,) = at.sidebar.selectbox
        assert " · running · " in picker.options[0]
    finally:
        lock.close()


def test_page_addresses_follow_their_titles():
    """Each page's address is its title's words (the sidebar's names), and the address a page had by its
    script's name still leads to it (a browser test follows them: test_browser.py)."""
    from pages.components import navigation

    assert [script.removeprefix("pages/") for script, _, _ in navigation.PAGES] == list(PAGES)
    addresses = {title: navigation.address(title) for _, title, _ in navigation.PAGES}
    assert addresses["Prune labels"] == "prune_labels" and addresses["Data map"] == "data_map"
    assert addresses["Curricula & combinations"] == "curricula_combinations"
    assert len(set(addresses.values())) == len(addresses)
    assert navigation.moved_addresses() == {
        "pruning": "prune_labels",
        "experiments": "curricula_combinations",
    }
