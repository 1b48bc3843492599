"""How :class:`cartomap.integrations.trainer.DataMapCallback` takes the logits of a ``Trainer``'s training.

The train pass (``mode="train"``): the training DataLoader's fetch adds each item's row index
(:class:`IndexedFetch`), a wrapper around the data collator moves the indices out of the features into the
batch (:class:`IndexCollator`), a forward pre-hook on the model takes them out of the model's inputs again
and a forward hook keeps the logits with them (:class:`LogitsRecording`). The eval pass (``mode="eval"``):
an eval-mode pass over the whole training set, longest rows first, split across processes. Under several
processes the rows are gathered with their indices (:func:`all_gather`) and each example is kept once
(:func:`first_occurrences`). A token run's unit is a word at its first sub-word, a multi-label run's each
label of each example.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cartomap.errors import CartomapError, DataError
from cartomap.integrations.examples import column_names
from cartomap.integrations.unit_rows import as_numpy

#: Key of the row index inside a training item and batch; it never reaches the model.
INDEX_KEY = "cartomap_index"

#: Keys of a batch that are labels, not model inputs (dropped for the eval-mode pass).
LABEL_KEYS = ("labels", "label", "label_ids")


def _dist():
    """torch.distributed when several processes train, else None."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def broadcast(value: Any) -> Any:
    """Rank 0's ``value`` on every process."""
    dist = _dist()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather(value: Any) -> list[Any]:
    """Every process's ``value``, in rank order."""
    dist = _dist()
    if dist is None:
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


class IndexedFetch:
    """A DataLoader dataset's batch fetch (``__getitems__``) that adds each item's row index."""

    def __init__(self, dataset: Any):
        fetch = getattr(dataset, "__getitems__", None)
        self.fetch = fetch.fetch if isinstance(fetch, IndexedFetch) else fetch  # not twice
        self.dataset = dataset

    def plain(self, indices: Sequence[int]) -> list[Any]:
        if self.fetch is not None:
            return list(self.fetch(list(indices)))
        return [self.dataset[i] for i in indices]

    def __call__(self, indices: Sequence[int]) -> list[Any]:
        items = []
        for item, i in zip(self.plain(indices), indices, strict=True):
            if not isinstance(item, Mapping):
                raise DataError(
                    f"training items are {type(item).__name__}, not dicts: the train-pass mode of DataMapCallback "
                    "needs dict items (as a Trainer's datasets have); use mode='eval'"
                )
            item = dict(item)
            item[INDEX_KEY] = int(i)
            items.append(item)
        return items


class IndexCollator:
    """Wraps the training data collator: takes the row indices out of the features, collates the rest
    with the user's collator, and puts them into the batch as a tensor. Checks that the labels of the
    Trainer's items are the labels of the callback's dataset at those rows."""

    def __init__(self, collate, labels: np.ndarray):
        self.collate, self.labels = collate, labels

    def __call__(self, features: list[dict[str, Any]]):
        import torch

        index = [f.pop(INDEX_KEY) for f in features if INDEX_KEY in f]
        if len(index) == len(features):
            self._check_labels(features, index)
        batch = self.collate(features)
        if len(index) == len(features) and isinstance(batch, Mapping):
            batch[INDEX_KEY] = torch.tensor(index, dtype=torch.long)
        return batch

    def _check_labels(self, features, index) -> None:
        key = next((k for k in LABEL_KEYS if k in features[0]), None)
        if key is None:
            return
        expected = self.labels[np.asarray(index)]
        try:
            if expected.ndim == 2:  # multi-label: a multi-hot vector per item
                given = np.stack([np.asarray(as_numpy(f[key]), dtype=np.float64) for f in features]) != 0
                if given.shape != expected.shape:
                    return
                given = given.astype(np.int64)
            else:
                given = np.asarray([int(f[key]) for f in features])
        except (TypeError, ValueError, RuntimeError):
            return  # not class indices (soft labels): nothing to compare
        wrong = np.flatnonzero((given != expected).reshape(len(index), -1).any(axis=1))
        if len(wrong):
            k = wrong[0]
            raise DataError(
                f"row {index[k]} of the Trainer's training set has label {given[k].tolist()}, the callback's "
                f"dataset label {expected[k].tolist()}: give DataMapCallback the dataset the Trainer trains on (same rows, same "
                "order) and label_names in the model's label order",
                field=key,
            )


def _logits_of(output: Any):
    if isinstance(output, Mapping):
        return output["logits"]
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)):
        return output[1] if len(output) > 1 and output[0].dim() == 0 else output[0]
    return output


def _labels_of(batch: Mapping[str, Any]):
    """The aligned sub-word labels of a collated batch (None when it has none), on the CPU."""
    labels = batch.get("labels") if isinstance(batch, Mapping) else None
    return labels.detach().cpu() if hasattr(labels, "detach") else labels


def first_occurrences(parts: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows of every process (``{"rows", "logits", "step", "last"}`` each) -> (rows, logits, bad, dropped):
    each row once, first in (step, rank, position) order; the rows seen again outside a process's
    last step (``bad``); and how many repeats in the last steps were dropped (a distributed sampler
    repeats the first rows of the epoch to even out the processes' last batches)."""
    rows = np.concatenate([p["rows"] for p in parts])
    logits = np.concatenate([p["logits"] for p in parts])
    step = np.concatenate([p["step"] for p in parts])
    rank = np.concatenate([np.full(len(p["rows"]), r) for r, p in enumerate(parts)])
    last = np.concatenate([p["step"] == p["last"] for p in parts])
    order = np.lexsort((np.arange(len(rows)), rank, step))
    rows, logits, last = rows[order], logits[order], last[order]
    unique, first = np.unique(rows, return_index=True)
    repeated = np.ones(len(rows), dtype=bool)
    repeated[first] = False
    bad = rows[repeated & ~last]
    return unique, logits[first], bad, int(repeated.sum()) - len(bad)


# --------------------------------------------------------------------------- the recording
class LogitsRecording:
    """The recording half of :class:`cartomap.integrations.trainer.DataMapCallback`: the train-pass hooks
    and plumbing, the eval-mode pass and the gathering of every process's rows. It reads the callback's
    units (``ids``, ``rows``, ``labels``, ``counts``, ``n_labels``, ``n_classes``, ``layout``, ``words``,
    ``multilabel``), its processes (``rank``, ``world``), ``epoch``, ``collate``, ``fetch`` and
    ``loader_dataset``, all set when training begins."""

    def _install(self, model, train_dataloader) -> None:
        """The train-pass plumbing: indexed fetch, index collator, hooks on the model."""
        try:
            self.loader_dataset.__getitems__ = self.fetch
        except AttributeError as err:
            raise DataError(
                f"cannot add row indices to a {type(self.loader_dataset).__name__}: use mode='eval'"
            ) from err
        if isinstance(self.collate, IndexCollator):
            self.collate = self.collate.collate
        # accelerate's prepared loader iterates the DataLoader it wraps: the collator goes there
        loader = getattr(train_dataloader, "base_dataloader", train_dataloader)
        expected = self.examples.task_kind.label_rows(self.labels, len(self.rows))  # a label unit's: [N, L]
        loader.collate_fn = IndexCollator(self.collate, expected)
        self._steps: list[tuple[Any, Any]] = []
        self._pending = None
        self._hooks = [
            model.register_forward_pre_hook(self._pre_hook, with_kwargs=True, prepend=True),
            model.register_forward_hook(self._hook),
        ]
        self._model, self._loader = model, loader

    def _pre_hook(self, module, args, kwargs):
        index = kwargs.pop(INDEX_KEY, None)
        self._pending = index if index is not None and module.training else None
        self._pending_labels = kwargs.get("labels") if self.words else None
        return args, kwargs

    def _hook(self, module, args, output):
        if self._pending is not None:
            logits = _logits_of(output).detach().float()
            if self.multilabel:  # each label of each example a unit (0, z), on the device
                self._steps.append(self._label_units(self._pending.detach(), logits))
            elif self.words:  # every word at its first sub-word (on the CPU: one synchronisation a step)
                import torch

                rows, values = self.layout.batch_rows(
                    self._pending.cpu().numpy(),
                    logits.cpu(),
                    self._pending_labels.detach().cpu() if self._pending_labels is not None else None,
                    self.epoch,
                )
                self._steps.append((torch.as_tensor(rows), torch.as_tensor(values)))
            else:
                self._steps.append((self._pending.detach(), logits))
            self._pending = None

    def _label_units(self, index, logits):
        """(unit rows [B * L], rows (0, z) [B * L, 2]) of a multi-label batch: example row i's logit z of
        label j as unit i * L + j (:func:`cartomap.integrations.unit_rows.label_unit_rows`, in torch)."""
        import torch

        if logits.dim() != 2 or logits.shape[-1] != self.n_labels:
            raise DataError(
                f"logits of shape {tuple(logits.shape)}; a multi-label model's are [batch, {self.n_labels}] "
                "(one logit per label)",
                field="logits",
            )
        labels = torch.arange(self.n_labels, device=index.device)
        rows = (index.reshape(-1, 1) * self.n_labels + labels).reshape(-1)
        z = logits.reshape(-1)
        return rows, torch.stack((torch.zeros_like(z), z), dim=-1)

    def _gathered_train(self) -> np.ndarray:
        """This epoch's train-pass logits [N, C] from every process, each example once (module docstring)."""
        import torch

        if self._steps:
            rows = torch.cat([s[0].reshape(-1) for s in self._steps]).cpu().numpy()
            values = torch.cat([s[1] for s in self._steps]).cpu().numpy()
            sizes = [len(s[0].reshape(-1)) for s in self._steps]
        else:
            rows, values, sizes = np.zeros(0, np.int64), np.zeros((0, self.n_classes), np.float32), []
        step = np.repeat(np.arange(len(sizes)), sizes)
        part = {"rows": rows, "logits": values, "step": step, "last": len(sizes) - 1}
        unique, logits, repeated, dropped = first_occurrences(all_gather(part))
        if dropped and self.rank == 0:
            self.run.log(f"epoch {self.epoch + 1}: dropped {dropped} repeated row(s) of the last batches")
        if len(repeated):
            raise DataError(
                f"epoch {self.epoch + 1}: example {self.ids[int(repeated[0])]!r} was trained twice in one epoch "
                "(a sampler that repeats examples?); the training-pass mode records each example once per "
                "epoch: use mode='eval'",
                field="ids",
            )
        if len(unique) != len(self.ids):
            seen = np.zeros(len(self.ids), dtype=bool)
            seen[unique] = True
            missing = [self.ids[k] for k in np.flatnonzero(~seen)[:5]]
            raise DataError(
                f"epoch {self.epoch + 1}: the training pass saw {len(unique)} of {len(self.ids)} examples; "
                f"missing e.g. {missing} (a sampler that skips examples, or dataloader_drop_last?)",
                field="ids",
            )
        if logits.shape[1] != self.n_classes:
            raise DataError(f"the model has {logits.shape[1]} outputs, the dataset {self.n_classes} classes")
        out = np.empty((len(self.ids), self.n_classes), dtype=np.float32)
        out[unique] = logits
        return out

    def _eval_pass(self, model, args) -> np.ndarray:
        """Eval-mode logits [N, C] of every training example (split across processes, gathered)."""
        import torch

        order = self._eval_order()
        mine = order[self.rank :: self.world]
        size = max(1, args.per_device_eval_batch_size)
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        rows, values = [], []
        try:
            with torch.no_grad():
                for start in range(0, len(mine), size):
                    batch_rows = mine[start : start + size].tolist()
                    batch = self.collate(self.fetch.plain(batch_rows))
                    inputs = {
                        k: v.to(device) if hasattr(v, "to") else v
                        for k, v in batch.items()
                        if k not in LABEL_KEYS and k != INDEX_KEY
                    }
                    logits = _logits_of(model(**inputs)).float().cpu().numpy()
                    # an example's row, every word at its first sub-word, each label as a unit (0, z)
                    unit_rows, logits = self.layout.batch_rows(
                        batch_rows, logits, _labels_of(batch), self.epoch
                    )
                    rows.extend(unit_rows.tolist())
                    values.append(logits)
        finally:
            model.train(was_training)
        local = {
            "rows": np.asarray(rows, dtype=np.int64),
            "logits": np.concatenate(values) if values else np.zeros((0, self.n_classes), np.float32),
        }
        out = np.empty((len(self.ids), self.n_classes), dtype=np.float32)
        for part in all_gather(local):
            out[part["rows"]] = part["logits"]
        return out

    def _eval_order(self) -> np.ndarray:
        """Rows longest first (less padding), when the items have input_ids; else in order."""
        cached = getattr(self, "_order", None)
        if cached is not None:
            return cached
        n = len(self.rows)
        lengths = None
        try:
            if "input_ids" in column_names(self.loader_dataset):
                lengths = np.array([len(x) for x in self.loader_dataset["input_ids"]])
        except (CartomapError, TypeError, KeyError):
            lengths = None
        self._order = np.argsort(-lengths, kind="stable") if lengths is not None else np.arange(n)
        return self._order

    def _remove_hooks(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        loader = getattr(self, "_loader", None)
        if loader is not None and isinstance(loader.collate_fn, IndexCollator):
            loader.collate_fn = loader.collate_fn.collate
        dataset = getattr(self, "loader_dataset", None)
        if dataset is not None and isinstance(
            getattr(dataset, "__dict__", {}).get("__getitems__"), IndexedFetch
        ):
            del dataset.__dict__["__getitems__"]
