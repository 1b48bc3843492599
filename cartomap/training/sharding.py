"""Several training processes (torchrun, ``accelerate launch``): every batch split, every example recorded once.

Under a multi-process launch every process iterates the same global batches (the sampler is seeded
from ``(seed, epoch)``), and process ``p`` of ``n`` takes the rows ``p, p + n, p + 2n, ...`` of each
(:func:`shard`). A batch whose size is not a multiple of ``n`` is evened out with *padding rows*:
copies of the batch's first row, marked with index -1. Every process must run the same number of
steps with at least one row (they average gradients together), so padding rows go through the
forward pass, but they carry zero loss weight and are never recorded.

So ``batch_size`` is the global batch whatever the number of processes, and the loss of process
``p`` is ``sum of its real rows' losses * n / global batch size``: averaged over the processes (as
DDP does) that is the mean loss over the global batch, the single-process loss. A run's config means
the same training on one process or eight, which its id (a hash of the config) promises.

Why not accelerate's own sharding (``BatchSamplerShard``): it yields only full batches while it
iterates and evens out the *last* batch by repeating examples from the start of the epoch. With
length-grouped batches in a shuffled order the short batch is not the last one, and its examples
are silently dropped (97 examples, batches of 16, two processes: 96 recorded); when it is the last,
the repeated examples would be recorded twice with logits of a later step. :func:`record_once`
guards the recorder against both: it keeps each example's first logits of an epoch by id and
:func:`check_complete` names the examples an epoch missed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cartomap.config import Source
from cartomap.errors import RunError

PAD = -1  # the index of a padding row in a batch: never recorded, zero loss weight


def pad_key(row: int, global_size: int) -> tuple[int, int]:
    """The sampler key of a padding row copying ``row``: the row as ``-1 - row`` (always negative)."""
    return (-1 - row, global_size)


def shard(batch: list[int], num_processes: int, process_index: int) -> list[tuple[int, int]]:
    """Process ``process_index``'s rows of a global ``batch``: every ``num_processes``-th row, padded
    to ``ceil(len(batch) / num_processes)`` rows with copies of the batch's first row (marked padding).

    Each key is ``(row, global batch size)``; a padding row's is :func:`pad_key`."""
    size = len(batch)
    per_process = -(-size // num_processes)
    rows = [(row, size) for row in batch[process_index::num_processes]]
    rows += [pad_key(batch[0], size)] * (per_process - len(rows))
    return rows


class ShardedBatches:
    """This process's share of every batch of a batch sampler (see :func:`shard`); ``set_epoch`` is passed on."""

    def __init__(self, batches, num_processes: int, process_index: int):
        self.batches, self.num_processes, self.process_index = batches, num_processes, process_index

    def set_epoch(self, epoch: int) -> None:
        self.batches.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            yield shard(list(batch), self.num_processes, self.process_index)


class ShardedRows:
    """A dataset read by :func:`shard`'s keys: the item of the row, its ``index`` -1 for padding rows,
    and ``global_size``, the size of the global batch it belongs to."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple[int, int]) -> dict[str, Any]:
        row, global_size = key
        item = dict(self.dataset[row if row >= 0 else -1 - row])
        if row < 0:
            item["index"] = PAD
        item["global_size"] = global_size
        return item


class ShardedCollate:
    """The collate function of the rows, plus ``global_size`` (one int for the whole batch)."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, items: list[dict[str, Any]]):
        batch = self.collate(items)
        batch["global_size"] = int(items[0]["global_size"])
        return batch


def make_loader(dataset, batches, collate, num_processes: int, process_index: int):
    """A DataLoader over ``batches``: as is with one process, else this process's shards of them."""
    from torch.utils.data import DataLoader

    if num_processes == 1:
        return DataLoader(dataset, batch_sampler=batches, collate_fn=collate)
    sharded = ShardedBatches(batches, num_processes, process_index)
    return DataLoader(ShardedRows(dataset), batch_sampler=sharded, collate_fn=ShardedCollate(collate))


def training_loss(logits, labels, index, global_size: int | None, num_processes: int):
    """The loss this process backpropagates.

    One process: the mean cross-entropy of the batch. ``n`` processes: ``sum over real rows (index >= 0)
    of cross-entropy * n / global_size``, so the average over the processes (DDP's gradient averaging)
    is the mean over the global batch. Padding rows weigh 0."""
    import torch.nn.functional as F

    if num_processes == 1:
        return F.cross_entropy(logits.float(), labels)
    losses = F.cross_entropy(logits.float(), labels, reduction="none")
    real = (index >= 0).to(losses.dtype)
    return (losses * real).sum() * (num_processes / global_size)


def record_once(target: np.ndarray, seen: np.ndarray, index: np.ndarray, values: np.ndarray) -> int:
    """Write ``values`` into ``target[index]`` for rows not ``seen`` yet this epoch (first occurrence wins,
    also within one call); padding rows (index < 0) are skipped. Returns how many rows were written."""
    index = np.asarray(index)
    keep = index >= 0
    index, values = index[keep], values[keep]
    _, first = np.unique(index, return_index=True)
    first = np.sort(first)
    index, values = index[first], values[first]
    fresh = ~seen[index]
    target[index[fresh]] = values[fresh]
    seen[index[fresh]] = True
    return int(fresh.sum())


def check_complete(seen: np.ndarray, ids: list[str], epoch: int, source: str = Source.TRAIN) -> None:
    """RunError naming the examples an epoch did not record (every example is recorded every epoch)."""
    missing = np.flatnonzero(~seen)
    if len(missing):
        shown = ", ".join(repr(ids[i]) for i in missing[:5])
        raise RunError(
            f"epoch {epoch + 1} recorded {len(seen) - len(missing)} of {len(seen)} examples of {source}; "
            f"missing e.g. id {shown}"
        )


def any_process(accelerator, flag: bool) -> bool:
    """Whether ``flag`` is true on any process (a collective: every process must call it)."""
    if accelerator.num_processes == 1:
        return flag
    import torch

    value = torch.tensor([1.0 if flag else 0.0], device=accelerator.device)
    return bool(accelerator.reduce(value, reduction="sum").item() > 0)


def sum_over_processes(accelerator, *values: float) -> list[float]:
    """``values`` summed over the processes (a collective; as is with one process)."""
    if accelerator.num_processes == 1:
        return list(values)
    import torch

    tensor = torch.tensor(values, dtype=torch.float64, device=accelerator.device)
    return accelerator.reduce(tensor, reduction="sum").tolist()
