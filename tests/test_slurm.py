"""The SLURM executor without a cluster: an error unless the local stand-in is asked for by name
(``--slurm-local``), the stand-in's refusals, and the job text a real cluster gets (a fixture, and a
fake ``sbatch``/``srun`` on the PATH that record what they were given)."""

from __future__ import annotations

import contextlib
import io
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from cartomap import cli
from cartomap.config import ExecutorConfig
from cartomap.errors import CartomapError, DataError
from cartomap.executors import registry
from cartomap.executors.slurm import SlurmExecutor, job_text

FIXTURES = Path(__file__).parent / "fixtures"
PRUNE = ["prune", "--test", "demo:dev", "--folds", "2", "--epochs", "1"]


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def no_slurm(tmp_path, monkeypatch):
    """A PATH without sbatch and srun (python itself is already running)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture()
def fake_slurm(tmp_path, monkeypatch) -> Path:
    """``sbatch`` and ``srun`` scripts first on the PATH: sbatch keeps a copy of the job file it is
    given and answers as SLURM does; srun answers --version. Returns the folder of the copies."""
    bin_dir, record = tmp_path / "bin", tmp_path / "submitted"
    bin_dir.mkdir()
    record.mkdir()
    scripts = {
        "sbatch": f'#!/bin/sh\necho "$@" >> {record}/args\ncp "$1" {record}/job.sh\necho "Submitted batch job 4242"\n',
        "srun": "#!/bin/sh\necho 'slurm 23.02.0'\n",
    }
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


def test_slurm_without_slurm_is_an_error_before_anything_is_created(no_slurm, tmp_path):
    cache = tmp_path / "cache"
    code, out, err = run_cli("--cache", str(cache), *PRUNE, "--executor", "slurm", "--partition", "gpu")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1
    assert "no sbatch/srun on the PATH" in err and "--slurm-local" in err
    assert not cache.exists()
    with pytest.raises(CartomapError, match="not a SLURM login node"):
        registry.check_available(ExecutorConfig(kind="slurm"))


def test_the_local_stand_in_is_asked_for_by_name_and_refuses_what_it_would_ignore(no_slurm, tmp_path):
    cache = tmp_path / "cache"
    for extra, what in (
        (("--partition", "gpu"), "a partition"),
        (("--sbatch", "account=nlp"), "sbatch options"),
        (("--gpus-per-run", "1"), "GPUs"),
    ):
        code, _, err = run_cli("--cache", str(cache), *PRUNE, "--executor", "slurm", "--slurm-local", *extra)
        assert code == 2 and err.startswith("cartomap: error: --slurm-local:") and what in err, err
    assert not cache.exists()
    with pytest.raises(DataError, match="slurm executor only"):
        ExecutorConfig(kind="ray", slurm_local=True)
    config = ExecutorConfig(kind="slurm", slurm_local=True)
    registry.check_available(config)  # the stand-in needs no SLURM
    executor = SlurmExecutor(config, tmp_path, tmp_path / "jobs")
    assert executor.cluster == "local" and "local stand-in (--slurm-local)" in executor.describe


def test_the_job_text_asks_for_memory_and_no_gpus_unless_given():
    log_dir = Path("/shared/cache/experiments/EXP/jobs")
    config = ExecutorConfig(kind="slurm", slurm_partition="gpu", slurm_options=("account=nlp",))
    assert job_text(config, log_dir) == (FIXTURES / "slurm_job.sbatch").read_text()
    text = job_text(config, log_dir)
    assert "#SBATCH --mem=16GB" in text and "gpus" not in text
    with_gpus = job_text(ExecutorConfig(kind="slurm", gpus_per_run=2, slurm_mem_gb=0), log_dir)
    assert "#SBATCH --gpus-per-node=2" in with_gpus and "--mem" not in with_gpus


def test_a_fake_sbatch_receives_the_job_array(fake_slurm, tmp_path):
    config = ExecutorConfig(
        kind="slurm", slurm_partition="gpu", slurm_options=("account=nlp",), slurm_mem_gb=32, cpus_per_run=4
    )
    code, _, err = run_cli("--cache", str(tmp_path / "c"), "experiment", "run", "nothing-here")
    assert code == 2  # no such experiment; the fake cluster itself passes the check:
    registry.check_available(config)
    executor = SlurmExecutor(config, tmp_path, tmp_path / "jobs")
    assert executor.cluster == "slurm" and executor.describe.startswith("SLURM; 4 CPU(s), 0 GPU(s) and 32 GB")
    runs = [
        ("fold_0", SimpleNamespace(path=tmp_path / "runs" / "a")),
        ("fold_1", SimpleNamespace(path=tmp_path / "runs" / "b")),
    ]
    jobs = executor.submit(runs)
    assert [j.job_id for j in jobs] == ["4242_0", "4242_1"]
    submitted = (fake_slurm / "job.sh").read_text()
    for line in (
        "--array=0-1%2",
        "--mem=32GB",
        "--partition=gpu",
        "--account=nlp",
        "--cpus-per-task=4",
        "--time=240",
    ):
        assert f"#SBATCH {line}" in submitted, line
    assert "gpus" not in submitted
    # the parameters are job_text's (the array's log names aside)
    expected = [
        line for line in job_text(config, tmp_path / "jobs").splitlines() if line.startswith("#SBATCH")
    ]
    assert [line.replace("%j", "%A_%a") for line in expected if "--output" in line or "--error" in line] == [
        line for line in submitted.splitlines() if line.startswith(("#SBATCH --output", "#SBATCH --error"))
    ]
    assert {line for line in expected if "%j_" not in line} <= set(submitted.splitlines())
