"""The SLURM executor: one job per run through submitit, each batch of runs one job array.

Every job runs :func:`cartomap.executors.worker.train_in_worker` on the run's folder in the shared
store, with the partition, GPUs, CPUs, time limit and extra sbatch options of the config. A job
that reaches its time limit or is preempted is requeued by submitit (:class:`TrainJob` is
checkpointable) and resumes its run from the last completed epoch; a job that died another way is
submitted again, ``retries`` times. Cancelling the experiment sets each run's cancel flag (running
jobs stop after their current step) and cancels jobs that are still waiting in the queue.

The job asks for ``--cpus-per-task``, ``--mem`` (``slurm_mem_gb``, 16 GB by default), the time limit,
and GPUs only when ``gpus_per_run`` is given (``--gpus-per-node``): on a GPU partition, give it.
:func:`job_text` is the sbatch file a job gets, written without submitting anything.

Without SLURM (no ``sbatch``/``srun`` on the PATH) the executor refuses to start, unless the config
asks for the local stand-in (``slurm_local``, ``--slurm-local``): submitit's "local" executor runs the
jobs as processes of this machine, the same code path without a cluster (the tests use it).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import submitit

from cartomap.config import ExecutorConfig
from cartomap.errors import CartomapError
from cartomap.executors.base import POLL_S, Watch, unfinished
from cartomap.executors.worker import train_in_worker
from cartomap.runs.state import State
from cartomap.runs.store import Run


class TrainJob(submitit.helpers.Checkpointable):
    """The callable a job runs; checkpointable, so a timed-out or preempted job is requeued (the run
    itself resumes from its own saved epoch, nothing else to save)."""

    def __call__(self, run_path: str, threads: int, cwd: str | None = None) -> dict:
        return train_in_worker(run_path, threads, cwd)


def has_slurm() -> bool:
    """Whether this machine can submit SLURM jobs (``sbatch`` and ``srun`` on the PATH)."""
    return bool(shutil.which("sbatch") and shutil.which("srun"))


def check_slurm(config: ExecutorConfig) -> None:
    """CartomapError, before anything is created, when SLURM is asked for on a machine without it."""
    if not config.slurm_local and not has_slurm():
        raise CartomapError(
            "--executor slurm: no sbatch/srun on the PATH, this is not a SLURM login node. Run it there, "
            "or add --slurm-local to run the jobs as processes of this machine (no cluster)"
        )


def job_parameters(config: ExecutorConfig) -> dict:
    """The sbatch parameters of one job (submitit's names): GPUs only when asked for, memory unless 0."""
    params = dict(
        job_name="cartomap",
        time=config.slurm_time_min,
        cpus_per_task=config.cpus_per_run,
        gpus_per_node=config.gpus_per_run or None,
        mem=f"{config.slurm_mem_gb}GB" if config.slurm_mem_gb else None,
        partition=config.slurm_partition or None,
        additional_parameters=config.sbatch_options() or None,
    )
    return {k: v for k, v in params.items() if v is not None}


def job_text(
    config: ExecutorConfig, log_dir: Path, command: str = "python -u -m submitit.core._submit"
) -> str:
    """The sbatch file a job of ``config`` gets (submitit writes the same text), submitted nowhere."""
    from submitit.slurm.slurm import _make_sbatch_string

    return _make_sbatch_string(command=command, folder=Path(log_dir) / "%j", **job_parameters(config))


class SlurmExecutor:
    name = "slurm"

    def __init__(self, config: ExecutorConfig, store_root: Path, log_dir: Path):
        check_slurm(config)
        self.config, self.root = config, store_root
        self.cluster = "local" if config.slurm_local else "slurm"
        if self.cluster == "slurm":
            self.executor = submitit.SlurmExecutor(folder=log_dir / "%j")
            self.executor.update_parameters(**job_parameters(config))
        else:
            self.executor = submitit.LocalExecutor(folder=log_dir / "%j")
            self.executor.update_parameters(timeout_min=config.slurm_time_min)
        gpus = config.gpus_per_run or 0
        if self.cluster == "slurm":
            memory = f"{config.slurm_mem_gb} GB" if config.slurm_mem_gb else "the partition's default memory"
            where = f"SLURM; {config.cpus_per_run} CPU(s), {gpus} GPU(s) and {memory} per run"
        else:
            where = (
                "SLURM's local stand-in (--slurm-local): the jobs run as local processes of this machine, "
                f"no cluster; {config.cpus_per_run} CPU(s) per run, memory not limited"
            )
        self.describe = f"{where}, jobs in {log_dir}"

    def submit(self, runs: list[tuple[str, Run]]) -> list:
        """One job per run, submitted together as a job array."""
        with self.executor.batch():
            jobs = [
                self.executor.submit(
                    TrainJob(), str(run.path.resolve()), self.config.cpus_per_run, os.getcwd()
                )
                for _, run in runs
            ]
        return jobs

    def train(self, batch: list[tuple[str, Run]], watch: Watch) -> dict[str, str]:
        for _, run in batch:
            run.clear_cancel()
        jobs = dict(zip(self.submit(batch), batch, strict=True))
        watch.echo(f"submitted {len(batch)} job(s) to {self.describe}: {', '.join(j.job_id for j in jobs)}")
        attempts = {run.id: 0 for _, run in batch}
        errors: dict[str, str] = {}
        cancelling = False
        while jobs:
            time.sleep(POLL_S)
            for job, (role, run) in list(jobs.items()):
                if not job.done():
                    continue
                del jobs[job]
                failure = job.exception()
                if unfinished(run) and not watch.cancelled() and attempts[run.id] < self.config.retries:
                    attempts[run.id] += 1
                    watch.echo(f"{role}: job {job.job_id} ended before its run did; submitting it again")
                    (again,) = self.submit([(role, run)])
                    jobs[again] = (role, run)
                elif failure is not None and run.state != State.DONE:
                    errors[run.id] = f"{role}: job {job.job_id}: {last_line(failure)}"
            if watch.cancelled() and not cancelling:
                cancelling = True
                for job, (_, run) in jobs.items():
                    run.request_cancel()
                    if not run.is_locked():
                        job.cancel(check=False)
        return errors

    def close(self) -> None:
        pass


def last_line(err: BaseException) -> str:
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__
