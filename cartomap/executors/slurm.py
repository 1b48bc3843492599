"""The SLURM executor: one job per run through submitit, each batch of runs one job array.

Every job runs :func:`cartomap.executors.worker.train_in_worker` on the run's folder in the shared
store, with the partition, GPUs, CPUs, time limit and extra sbatch options of the config. A job
that reaches its time limit or is preempted is requeued by submitit (:class:`TrainJob` is
checkpointable) and resumes its run from the last completed epoch; a job that died another way is
submitted again, ``retries`` times. Cancelling the experiment sets each run's cancel flag (running
jobs stop after their current step) and cancels jobs that are still waiting in the queue.

Where ``srun`` is absent submitit runs the jobs as local processes (its "local" executor): the same
code path, without a cluster; the tests use it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import submitit

from cartomap.config import ExecutorConfig
from cartomap.executors.base import POLL_S, Watch, unfinished
from cartomap.executors.worker import train_in_worker
from cartomap.runs.store import Run


class TrainJob(submitit.helpers.Checkpointable):
    """The callable a job runs; checkpointable, so a timed-out or preempted job is requeued (the run
    itself resumes from its own saved epoch, nothing else to save)."""

    def __call__(self, run_path: str, threads: int, cwd: str | None = None) -> dict:
        return train_in_worker(run_path, threads, cwd)


def cluster_name() -> str:
    """ "slurm" where srun is on the PATH, else "local" (jobs as local processes)."""
    return "slurm" if shutil.which("srun") else "local"


class SlurmExecutor:
    name = "slurm"

    def __init__(self, config: ExecutorConfig, store_root: Path, log_dir: Path):
        self.config, self.root = config, store_root
        self.cluster = cluster_name()
        self.executor = submitit.AutoExecutor(folder=log_dir / "%j", cluster=self.cluster)
        gpus = config.gpus_per_run or 0
        params = dict(
            name="cartomap",
            timeout_min=config.slurm_time_min,
            cpus_per_task=config.cpus_per_run,
            gpus_per_node=gpus,
            slurm_additional_parameters=config.sbatch_options() or None,
            slurm_partition=config.slurm_partition or None,
        )
        self.executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
        where = (
            "SLURM"
            if self.cluster == "slurm"
            else "local processes (no srun here: submitit's local executor)"
        )
        self.describe = f"{where}; {config.cpus_per_run} CPU(s) and {gpus} GPU(s) per run, jobs in {log_dir}"

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
                elif failure is not None and run.state != "done":
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
