"""Plug-ins from other packages (cartomap.plugins): a tiny distribution, written here and put on the path
of a fresh process, adds a task kind and an executor through entry points, with no edit to cartomap.

The distribution is a real one for ``importlib.metadata``: a ``.dist-info`` folder (METADATA and
entry_points.txt, what ``pip install`` leaves) beside its module, on ``PYTHONPATH``. A third entry point
names a module that does not exist: one line names it and its package, and cartomap goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import patience
import pytest

ROOT = Path(__file__).resolve().parents[1]

MODULE = '''
"""cartomap-tinyplug: a headline-topic task kind and a thread-pool executor, as another package ships them."""
from concurrent.futures import ThreadPoolExecutor

from cartomap.executors.local import LocalExecutor
from cartomap.executors.registry import ExecutorEntry
from cartomap.scores.ambiguity import AmbiguityScore
from cartomap.scores.detectors import DYNAMICS, Detector
from cartomap.tasks.base import TaskKind

HEADLINE_TOPIC = TaskKind(
    name="headline-topic",
    description="a news headline and its topic (a plug-in kind)",
    text_fields=("headline",),
    noun="headline",
)


class ThreadsExecutor(LocalExecutor):
    """Each batch's runs on a pool of one thread: what local does, from another thread."""

    name = "threads"

    def train(self, batch, watch):
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(super().train, batch, watch).result()


THREADS = ExecutorEntry(
    name="threads",
    description="one run after another on a worker thread (a plug-in executor)",
    open=lambda config, root, log_dir: ThreadsExecutor(),
)
NOT_A_KIND = 42


def gold_range(probs, labels, logits=None):
    """max - min over the recordings of p(gold): how far an example's belief moved (higher = more)."""
    import numpy as np

    gold = np.take_along_axis(probs, labels[None, :, None], axis=2)[..., 0]
    return gold.max(axis=0) - gold.min(axis=0)


GOLD_RANGE = AmbiguityScore("gold_range", "range of p(gold)", gold_range, on_map=True)


def low_correctness(inputs):
    """1 - correctness: the share of recordings that got the gold label wrong (higher = more suspect)."""
    return 1.0 - inputs.metric("correctness")


LOW_CORRECTNESS = Detector("low_correctness", low_correctness, DYNAMICS, ("correctness",), title="1 − correctness")
'''

ENTRY_POINTS = """
[cartomap.task_kinds]
headline-topic = cartomap_tinyplug:HEADLINE_TOPIC
wrong-type = cartomap_tinyplug:NOT_A_KIND

[cartomap.ambiguity]
gold_range = cartomap_tinyplug:GOLD_RANGE

[cartomap.detectors]
low_correctness = cartomap_tinyplug:LOW_CORRECTNESS

[cartomap.executors]
threads = cartomap_tinyplug:THREADS
broken = cartomap_tinyplug_missing:THING
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A folder holding the installed distribution cartomap-tinyplug 0.1."""
    site = tmp_path_factory.mktemp("site")
    (site / "cartomap_tinyplug.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    info = site / "cartomap_tinyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cartomap-tinyplug\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    return site


def cartomap(plugin_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "cartomap.cli", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_a_plugin_kind_and_executor_are_offered_and_a_broken_one_is_one_line(plugin_path):
    done = cartomap(plugin_path, "prune", "--help")
    assert done.returncode == 0, done.stderr
    assert "headline-topic" in done.stdout and "threads" in done.stdout
    queue = cartomap(plugin_path, "review-queue", "create", "--help")
    assert "low_correctness" in queue.stdout  # the detectors --detector names, read from the registry
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    broken = next(line for line in lines if "'broken'" in line)
    assert broken.startswith("cartomap: warning: plug-in 'broken' (cartomap.executors = ")
    assert "of cartomap-tinyplug 0.1 could not be loaded: ModuleNotFoundError" in broken
    wrong = next(line for line in lines if "'wrong-type'" in line)
    assert "is a int, not a TaskKind: left out" in wrong


def test_a_plugin_kind_trains_from_the_command_line(plugin_path, tmp_path, tiny_model):
    data = tmp_path / "headlines.jsonl"
    rows = [{"headline": f"team {i} wins the cup", "label": ["sport", "money"][i % 2]} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = cartomap(
        plugin_path, "--cache", str(tmp_path / "cache"), "train", "--data", str(data), "--dev", str(data),
        "--task", "headline-topic", "--text-columns", "headline", "--model", tiny_model, "--epochs", "1",
        "--batch-size", "3", "--max-length", "16", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = cartomap(plugin_path, "--cache", str(tmp_path / "cache"), "runs")
    assert "headline-topic" in shown.stdout or "headline" in shown.stdout
    # the pages: the Data map and Neighbours open on the plug-in kind's run (AppTest, in a process that has it)
    page_check = (
        "import sys; from streamlit.testing.v1 import AppTest; from cartomap.runs.store import RunStore; "
        f"run = RunStore({str(tmp_path / 'cache')!r}).list()[0]; "
        "bad = []\n"
        "for page in ('data_map.py', 'neighbours.py'):\n"
        f"    at = AppTest.from_file({str(ROOT / 'pages')!r} + '/' + page, default_timeout={patience.WAIT_S})\n"
        "    at.query_params['run'] = run.id; at.run(); bad += [e.message for e in at.exception]\n"
        "print(run.task_kind.name, bad)"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)]),
        "CARTOMAP_CACHE": str(tmp_path / "cache"),
    }
    pages = subprocess.run(
        [sys.executable, "-c", page_check], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert pages.returncode == 0, pages.stderr[-2000:]
    assert pages.stdout.strip().splitlines()[-1] == "headline-topic []"


def test_a_config_names_a_plugin_executor_by_its_entry_point(plugin_path):
    code = (
        "from cartomap.config import ExecutorConfig; ExecutorConfig(kind='threads'); "
        "from cartomap.executors.registry import entry; print(entry('threads').description)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "a plug-in executor" in done.stdout


def test_without_the_plugin_its_names_are_unknown():
    from cartomap import plugins
    from cartomap.config import ExecutorConfig
    from cartomap.errors import DataError

    assert "threads" not in plugins.names(plugins.EXECUTORS)
    with pytest.raises(DataError, match="expected one of local, ray, slurm, got 'threads'"):
        ExecutorConfig(kind="threads")
    with pytest.raises(ValueError, match="unknown plug-in group"):
        plugins.names("cartomap.widgets")


def test_names_scans_the_entry_points_once_per_process(plugin_path, monkeypatch):
    """``names`` reads the installed distributions once, as a registry loads its plug-ins once: a
    distribution put on the path while the process runs is not seen (a fresh process sees it)."""
    from cartomap import plugins

    scans = []
    real = plugins.entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda group: scans.append(group) or real(group=group))
    plugins._scan.cache_clear()
    try:
        first = plugins.names(plugins.EXECUTORS)
        monkeypatch.syspath_prepend(str(plugin_path))  # installed meanwhile
        assert plugins.names(plugins.EXECUTORS) == first and "threads" not in first
        assert [ep.name for ep in plugins._entry_points(plugins.EXECUTORS)] == list(first)
        assert scans == [plugins.EXECUTORS]
    finally:
        plugins._scan.cache_clear()  # the next reader scans the path as it is again
    code = "from cartomap import plugins; print(plugins.names(plugins.EXECUTORS))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "threads" in done.stdout, done.stderr


@pytest.mark.slow
def test_a_plugin_kind_passes_the_kind_conformance_test(plugin_path):
    """The conformance test every built-in kind passes, run in a process that has the plug-in."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "headline-topic",
         str(ROOT / "tests" / "test_kind_conformance.py")],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "headline-topic" not in done.stdout.split("passed")[-1]


def test_a_plugin_statistic_reaches_every_map_of_its_units(plugin_path):
    """A statistic of another package with ``on_map``: every metrics file computed from then on carries it,
    and so the score columns every unit's map, colour menu, truth report and export ask for."""
    code = (
        "import numpy as np; from cartomap.scores.metrics import compute_metrics; "
        "from cartomap.scores.columns import score_columns; from cartomap.tasks.units import Unit; "
        "logits = np.array([[[2.0, 0.0]], [[0.0, 2.0]]]); "
        "m = compute_metrics(logits, np.array([0]), ['a']); "
        "print(round(float(m['gold_range'][0]), 4), 'gold_range' in score_columns(Unit.WORD))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.7616", "True"]  # sigmoid(2) - sigmoid(-2) of the gold class


def test_a_plugin_detector_queues_suspects(plugin_path, tmp_path):
    """A detector of another package ranks a run's examples for a review queue like a built-in one: its
    top 3 are the examples of lowest correctness."""
    from curation_fixture import make_run

    run = make_run(tmp_path / "cache", embeddings=False, group=False)
    done = cartomap(
        plugin_path, "--cache", str(tmp_path / "cache"), "review-queue", "create", run.id, "q",
        "--detector", "low_correctness", "--top", "3", "--per-item", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    from cartomap.curation.queue import load_queue

    queue = load_queue(run, "q")
    metrics = run.metrics().set_index(run.metrics()["id"].astype(str))
    expected = sorted(1.0 - metrics["correctness"], reverse=True)[:3]
    assert queue["queued_by"].iloc[0] == "detector:low_correctness"
    assert sorted(queue["score"], reverse=True) == expected  # its top 3 by its own score
    assert [1.0 - metrics.loc[i, "correctness"] for i in queue["id"]] == list(queue["score"])
