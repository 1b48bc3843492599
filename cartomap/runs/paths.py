"""Where each file of a run folder lives: :class:`RunPaths`, the paths part of :class:`cartomap.runs.store.Run`.

The names are :mod:`cartomap.runs.layout`'s (printed in docs/architecture.md); this mixin joins them to the
run's folder (``self.path``) and reads nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from cartomap.config import MAIN_METRICS, Source
from cartomap.runs import layout
from cartomap.runs.tasks import Task


class RunPaths:
    """The path of every file and folder of a run (``self.path``), by :mod:`cartomap.runs.layout`'s names."""

    path: Path

    @property
    def config_path(self) -> Path:
        return self.path / layout.CONFIG

    @property
    def examples_path(self) -> Path:
        return self.path / layout.EXAMPLES

    @property
    def examples_arrow_path(self) -> Path:
        return self.path / layout.EXAMPLES_ARROW

    @property
    def dev_examples_path(self) -> Path:
        return self.path / layout.DEV_EXAMPLES

    def test_examples_path(self, k: int) -> Path:
        return self.path / layout.TEST_EXAMPLES.format(k=k)

    def dynamics_dir(self, source: str = Source.TRAIN) -> Path:
        return self.path / layout.DYNAMICS / source

    def epoch_path(self, source: str, epoch: int) -> Path:
        """Logits of 0-based ``epoch`` of ``source`` (train, eval, dev, test_<k>)."""
        return self.dynamics_dir(source) / layout.EPOCH_FILE.format(epoch=epoch)

    @property
    def history_path(self) -> Path:
        return self.path / layout.HISTORY

    @property
    def steps_path(self) -> Path:
        """The training loss every k steps (:mod:`cartomap.runs.steps`)."""
        return self.path / layout.STEPS

    def metrics_path(self, source: str = MAIN_METRICS) -> Path:
        """Data-map metrics of ``source``: the first recorded source has the plain name."""
        if source == MAIN_METRICS:
            return self.path / layout.METRICS
        return self.path / layout.METRICS_OF_SOURCE.format(source=source)

    def example_metrics_path(self, source: str = MAIN_METRICS) -> Path:
        """A multi-label run's combined map of ``source`` (one row per example,
        :func:`cartomap.scores.label_examples.example_metrics`): the first recorded source has the plain name."""
        if source == MAIN_METRICS:
            return self.path / layout.EXAMPLE_METRICS
        return self.path / layout.EXAMPLE_METRICS_OF_SOURCE.format(source=source)

    @property
    def plan_path(self) -> Path:
        return self.path / layout.PLAN

    @property
    def job_config_path(self) -> Path:
        return self.path / layout.JOB_CONFIG

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / layout.CHECKPOINTS

    def checkpoint_dir(self, epoch: int) -> Path:
        """End-of-epoch weights of 1-based ``epoch``."""
        return self.checkpoints_dir / layout.CHECKPOINT.format(epoch=epoch)

    @property
    def state_dir(self) -> Path:
        """Resume point: ``epoch_<e>/`` of the last completed epoch and ``latest.json``."""
        return self.path / layout.STATE

    def state_epoch_dir(self, epoch: int) -> Path:
        return self.state_dir / layout.STATE_EPOCH.format(epoch=epoch)

    @property
    def state_latest_path(self) -> Path:
        return self.state_dir / layout.STATE_LATEST

    @property
    def embeddings_path(self) -> Path:
        return self.path / layout.EMBEDDINGS

    @property
    def embedding_ids_path(self) -> Path:
        return self.path / layout.EMBEDDING_IDS

    def projection_path(self, method: str) -> Path:
        return self.path / layout.PROJECTION.format(method=method)

    @property
    def similarity_path(self) -> Path:
        return self.path / layout.SIMILARITY

    @property
    def groups_dir(self) -> Path:
        return self.path / layout.GROUPS

    @property
    def views_dir(self) -> Path:
        """The folder of the run's saved views of the Data map (``cartomap.runs.views``)."""
        return self.path / layout.VIEWS

    @property
    def tags_path(self) -> Path:
        """The run's tags of examples (``cartomap.runs.tags``)."""
        return self.path / layout.TAGS_DB

    @property
    def wanli_dir(self) -> Path:
        return self.path / layout.WANLI

    @property
    def review_dir(self) -> Path:
        """The folder of the run's review queues (``review/<queue>/``)."""
        return self.path / layout.REVIEW

    def review_queue_dir(self, queue: str) -> Path:
        return self.review_dir / queue

    def corrected_path(self, queue: str) -> Path:
        """The training set as corrected by review queue ``queue`` (``run:RUN:corrected/<queue>``)."""
        return self.review_queue_dir(queue) / layout.CORRECTED

    @staticmethod
    def stamp(*paths: Path) -> tuple[int | None, ...]:
        """Modification times (ns) of ``paths``, None for a missing one: the cache key of a view that
        reads them, so a rewritten file is read again."""
        out = []
        for path in paths:
            try:
                out.append(os.stat(path).st_mtime_ns)
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def task(self, name: str) -> Task:
        """Background task ``name`` of this run (its status, lock and log under ``tasks/``)."""
        return Task(self.path, name)
