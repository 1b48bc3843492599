"""Nothing is tied to the development machine: defaults are bundled data, never a folder beside the
checkout (``../shared``) or an absolute path of one machine."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import patience

ROOT = Path(__file__).resolve().parents[1]


def test_make_scale_data_runs_from_a_plain_clone(tmp_path):
    """A copy of the script and the bundled demo data, with no ``../shared`` beside it, run from
    another folder: the default source is the demo, and a tiny set is written."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "make_scale_data.py", clone / "scripts")
    shutil.copytree(ROOT / "cartomap" / "data" / "demo", clone / "cartomap" / "data" / "demo")
    assert not (clone.parent / "shared").exists()
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    proc = patience.run(  # as long as it makes progress
        [sys.executable, str(clone / "scripts" / "make_scale_data.py"), "--examples", "5000", "--out", "out"],
        watch=[cwd],
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_parquet(cwd / "out" / "nli_5000.parquet")
    assert len(frame) == 5000 and not frame.duplicated(["premise", "hypothesis"]).any()
    assert set(frame["label"]) == {"entailment", "neutral", "contradiction"}
    assert (cwd / "out" / "nli_5000.jsonl.gz").exists()
    bad = patience.run(
        [
            sys.executable,
            str(clone / "scripts" / "make_scale_data.py"),
            "--examples",
            "10",
            "--source",
            "nowhere",
        ],
        cwd=cwd,
    )
    assert bad.returncode != 0 and "--source nowhere: no such file or folder" in bad.stderr


def test_no_default_names_a_machines_folder():
    from cartomap.experiments.noise_benchmark import DEFAULT_DATA, NoiseBenchmarkConfig

    assert DEFAULT_DATA == "demo:train" and NoiseBenchmarkConfig().data == "demo:train"
    pattern = re.compile(r"""["'](/work/|/home/|\.\./shared)""")
    for folder in ("cartomap", "pages", "bench", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            if (
                path.name == "make_demo_data.py"
            ):  # builds the bundled demo from a shared/data folder, by design
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                assert not pattern.search(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
