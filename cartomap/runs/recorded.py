"""A run's recorded dynamics and the metrics computed from them: :class:`RunRecords`, the dynamics and
metrics part of :class:`cartomap.runs.store.Run`.

The dynamics are one Parquet file per recorded epoch and source (``dynamics/<source>/epoch_E.parquet``:
an id and the logits of each unit); the metrics files are computed from them once (by training, the
importer or :meth:`RunRecords.recompute_metrics` when one is damaged or older than a score), keyed as the
task kind's units are (:func:`cartomap.runs.units.keyed_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from cartomap.config import MAIN_METRICS, Source
from cartomap.errors import RunError
from cartomap.io import atomic_save, atomic_write_parquet
from cartomap.runs.tables import logits_table, one_line, read_columns
from cartomap.runs.units import keyed_metrics
from cartomap.scores import ambiguity

#: Metric columns added after runs were made (the map's ambiguity axes): a metrics file without them is
#: computed again from the run's dynamics when they are asked for (:meth:`RunRecords.metrics`).
AXIS_SCORES = tuple(c for c in ambiguity.MAP_SCORES if c != ambiguity.VARIABILITY)


class RunRecords:
    """Reading and writing a run's dynamics and metrics (mixed into :class:`cartomap.runs.store.Run`, whose
    paths, config, examples and lock it uses)."""

    def example_metrics(self, source: str = MAIN_METRICS) -> pd.DataFrame:
        """A multi-label run's combined map of ``source`` (:meth:`example_metrics_path`); RunError when the
        run has none (another task kind, or training has not finished)."""
        path = self.example_metrics_path(source)
        if not path.exists():
            raise RunError(
                f"run {self.id} has no combined per-example map (a multi-label run writes it when training ends)"
            )
        return self._read_copy(path)

    def has_metrics(self, source: str = MAIN_METRICS) -> bool:
        return self.metrics_path(source).exists()

    def metrics(self, source: str = MAIN_METRICS, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The data-map metrics of ``source``; ``columns`` reads only those of them the file has. A
        metrics file that cannot be read (damaged by hand, a disk fault) is recomputed from the recorded
        dynamics and written again; RunError when neither can be read."""
        path = self.metrics_path(source)
        if not path.exists():
            raise RunError(f"run {self.id} has no {source} metrics yet (state: {self.state})")
        try:
            frame = read_columns(path, columns)
        except Exception as err:  # pyarrow raises many kinds for a damaged file
            problem = f"{path.name} cannot be read ({one_line(err)})"
        else:
            lacking = [c for c in (columns or AXIS_SCORES) if c in AXIS_SCORES and c not in frame.columns]
            if not lacking:
                return frame
            # written before these ambiguity scores existed: computed again from the dynamics once (kept
            # when the store is writable); a run whose dynamics cannot rebuild them keeps its file as is
            try:
                frame = self.recompute_metrics(source, reason=f"{path.name} has no {', '.join(lacking)}")
            except RunError:
                return frame
            return frame if columns is None else frame[[c for c in columns if c in frame.columns]]
        frame = self.recompute_metrics(source, reason=problem)
        return frame if columns is None else frame[[c for c in columns if c in frame.columns]]

    def recorded_source(self, source: str = MAIN_METRICS) -> str:
        """The dynamics behind metrics file ``source``: the plain metrics file holds the first source the
        run recorded ("eval" for a run that recorded only the eval-mode pass), the others their own."""
        if source != MAIN_METRICS:
            return source
        return self.config.train.record.map_source

    def metrics_source(self, recording: str | None) -> str:
        """The metrics file key (:meth:`metrics`) of the map drawn from ``recording`` ("train": the training
        pass, "eval": the eval-mode pass; None: the run's first recorded one, its main metrics file).
        RunError naming what the run recorded when it did not record that."""
        if recording is None:
            return MAIN_METRICS
        record = self.config.train.record
        recorded = record.sources
        if recording not in recorded:
            what = " and ".join(recorded) or "nothing"
            raise RunError(f"run {self.id} recorded {what} (record={record}), not the {recording} pass")
        return MAIN_METRICS if recording == recorded[0] else recording  # the first: the main file

    def view_label(self, source: str = MAIN_METRICS) -> str:
        """The recordings behind metrics file ``source``, in words (:meth:`TrainConfig.view_label`)."""
        return self.config.train.view_label(self.recorded_source(source))

    def recompute_metrics(
        self, source: str = MAIN_METRICS, *, reason: str = "", write: bool = True
    ) -> pd.DataFrame:
        """Compute metrics file ``source`` again from the recorded dynamics (every completed epoch) and,
        with ``write`` and no process training the run, save it. RunError, naming ``reason`` and what
        else is wrong, when the dynamics cannot rebuild it."""
        from cartomap.scores.metrics import compute_metrics

        try:
            recorded = self.recorded_source(source)
            ids, logits = self.dynamics(recorded)
            labels = self.unit_labels(recorded)[1]
            burn_in = self.config.train.map_burn_in(recorded, self.dynamics_epochs(recorded))  # skip_epochs
            frame = compute_metrics(logits, labels, ids, regions=self.region_rule(), burn_in=burn_in)
            frame = keyed_metrics(self.task_kind, frame, ids, self.example_ids(), self.label_names)[0]
        except Exception as err:
            because = f"{reason}, and " if reason else ""
            raise RunError(
                f"run {self.id} is damaged: {because}its dynamics cannot rebuild the metrics "
                f"({one_line(err)}){self.REMEDY}"
            ) from None
        if write and not self.is_locked():
            try:
                atomic_write_parquet(self.metrics_path(source), frame)
            except OSError:  # a read-only store: the metrics are used, not kept
                return frame
            self.log(
                f"recomputed {self.metrics_path(source).name} from the dynamics"
                + (f": {reason}" if reason else "")
            )
        return frame

    def example_ids(self) -> list[str]:
        """The ids of the training examples, in examples.parquet order."""
        return self.examples(columns=["id"])["id"].astype(str).tolist()

    def save_metrics(self, name: str, frame: pd.DataFrame, per_example: pd.DataFrame | None = None) -> None:
        """Write metrics file ``name`` (:meth:`metrics_path`) and, for a kind whose units are not examples'
        own, its per-example map (:meth:`example_metrics_path`, the second item of :func:`keyed_metrics`)
        first, so that a reader never finds the units' file newer than the map made of them."""
        if per_example is not None:
            atomic_write_parquet(self.example_metrics_path(name), per_example)
        atomic_write_parquet(self.metrics_path(name), frame)

    def dynamics_epochs(self, source: str = Source.TRAIN) -> list[int]:
        folder = self.dynamics_dir(source)
        if not folder.exists():
            return []
        return sorted(int(p.stem.split("_")[1]) for p in folder.glob("epoch_*.parquet"))

    def dynamics(self, source: str = Source.TRAIN) -> tuple[list[str], np.ndarray]:
        """Unit ids (examples.parquet order; a token run's words ``<id>#<k>``, :meth:`TaskKind.units`) and
        logits [E, N, C] for the completed epochs."""
        ids = self.unit_labels(source, labels=False)[0]
        epochs = self.dynamics_epochs(source)
        if not epochs:
            raise RunError(f"run {self.id} has no recorded {source} dynamics")
        arrays = [self.read_epoch(source, e, ids) for e in epochs]
        return ids, np.stack(arrays)

    def unit_labels(self, source: str = "train", labels: bool = True) -> tuple[list[str], np.ndarray | None]:
        """(unit ids, gold label of each unit as int64) of ``source``'s examples in their order: one per
        example, one per word of a token run (ids ``<id>#<k>``), or one per label of every example of a
        multi-label run (ids ``<id>#<j>``, 1 = present); labels None when not asked for."""
        kind = self.task_kind
        if source not in ("dev",) and not source.startswith("test_"):
            frame = self.examples(columns=kind.gold_columns if labels else kind.unit_id_columns)
        else:
            frame = self._source_frame(source)
        if not labels:
            return kind.unit_ids(frame, self.label_names)[0], None
        unit_ids, unit_labels, _ = kind.units(frame, self.label_names)
        return unit_ids, unit_labels

    def _source_frame(self, source: str) -> pd.DataFrame:
        if source == "dev":
            frame = self.dev_examples()
            if frame is None:
                raise RunError(f"run {self.id} has no dev set")
            return frame
        return self.test_examples(int(source.split("_", 1)[1]))

    def read_epoch(self, source: str, epoch: int, ids: list[str]) -> np.ndarray:
        path = self.epoch_path(source, epoch)
        try:
            frame = pd.read_parquet(path)
        except FileNotFoundError:
            raise
        except Exception as err:  # pyarrow raises many kinds for a damaged file
            raise RunError(
                f"run {self.id}: {path.relative_to(self.path)} cannot be read ({one_line(err)})"
            ) from None
        frame = frame.set_index("id").reindex(ids)
        if frame.isna().any().any():
            raise RunError(f"run {self.id}: epoch {epoch} of {source} dynamics is missing examples")
        return frame.to_numpy(dtype=np.float32)

    def write_epoch(self, source: str, epoch: int, ids, logits: np.ndarray) -> Path:
        """Write :func:`logits_table` as Parquet without dictionary encoding (unique ids and float logits
        gain nothing from it: a third of the CPU time and a smaller file at 550k rows). ``ids`` may be
        an Arrow string array (:func:`arrow_ids`), made once for every epoch: converting 550k Python
        strings costs more than writing the file."""
        import pyarrow.parquet as pq

        table = logits_table(ids, logits)
        return atomic_save(
            self.epoch_path(source, epoch), lambda p: pq.write_table(table, p, use_dictionary=False)
        )
