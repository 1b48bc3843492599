"""The phases of long work: one type (:class:`cartomap.runs.progress.Phase`) whose values are the strings
status files always held, so old status files read the same and new ones are written the same."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cartomap.runs.progress import Phase, describe_progress, state_text
from cartomap.runs.state import State, StatusFolder

#: The strings status.json files held before the type existed: they must not change.
SAVED = {
    "train": Phase.TRAIN,
    "eval-pass": Phase.EVAL_PASS,
    "dev": Phase.DEV,
    "saving": Phase.SAVING,
    "starting": Phase.STARTING,
    "training": Phase.TRAINING,
    "waiting": Phase.WAITING,
    "training in parallel": Phase.TRAINING_IN_PARALLEL,
    "finalizing": Phase.FINALIZING,
    "loading the model": Phase.LOADING_MODEL,
    "generating": Phase.GENERATING,
    "stopped": Phase.STOPPED,
    "max variability": Phase.MAX_VARIABILITY,
    "heuristics": Phase.HEURISTICS,
    "embeddings": Phase.EMBEDDINGS,
    "collecting": Phase.COLLECTING,
    "fitting": Phase.FITTING,
}


@dataclass
class Folder(StatusFolder):
    path: Path


def test_phases_keep_the_strings_status_files_hold():
    for text, phase in SAVED.items():
        assert Phase(text) is phase and phase == text and str(phase) == text and f"{phase}" == text
        assert json.dumps({"phase": phase}) == json.dumps({"phase": text})
        assert {phase: 1}[text] == 1  # a str's hash
    assert Phase.TEST.of(1, 2) == "test 1/2"
    assert Phase.CHECKPOINT.of(3, 4, "checkpoint-30") == "checkpoint 3/4: checkpoint-30"


def test_a_phase_is_written_as_its_string_and_an_old_status_reads_the_same(tmp_path):
    folder = Folder(tmp_path)
    folder.set_status(state=State.RUNNING, phase=Phase.EVAL_PASS)
    assert json.loads(folder.status_path.read_text(encoding="utf-8"))["phase"] == "eval-pass"
    old = {"state": "running", "phase": "eval-pass"}  # written before the type existed
    assert describe_progress(folder.status())["phase"] == describe_progress(old)["phase"] == Phase.EVAL_PASS
    assert state_text(State.RUNNING, Phase.DEV) == state_text("running", "dev") == "running · dev"
    assert state_text(State.DONE, State.DONE) == "done"
