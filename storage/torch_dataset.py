"""A map-style ``torch.utils.data.Dataset`` over one published split (``Artifact.torch_dataset``).

It reads what ``storage.loader`` reads (``SplitColumns``, ``plan_channels``, ``gather``): the same
channels and tensors as ``Artifact.batches``, for code that wants a torch ``Dataset``/``DataLoader``.
This module imports torch at its top; ``storage.artifact`` imports it on the first ``torch_dataset``.

Resuming under a ``DataLoader``. ``ArtifactDataset.dataloader(...)`` is a ``torch.utils.data.DataLoader``
(worker processes, ``prefetch_factor``, ``pin_memory``: its keyword arguments) over ``OrderSampler``, the
batches of ``Artifact.batches`` in the same order (``storage.order``), with ``state_dict`` /
``load_state_dict`` in the same format. The batches it hands to the consumer are counted in the main
process, after the workers: what they had prefetched is not counted, so a resumed job starts at the
batch after the last one the killed job was handed, whatever ``num_workers``. The sampler alone
(``OrderSampler``, under a plain ``DataLoader``) counts what it handed to the workers, which runs ahead
of the consumer: its position is exact only with ``num_workers=0``.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch.utils.data

from storage.loader import SplitColumns, as_index, first_row, gather, plan_channels
from storage.order import Order, resume_point, state_dict


class ArtifactDataset(torch.utils.data.Dataset):
    """A map-style torch ``Dataset`` over one split.

    ``ds[i]`` is one row (``dict[channel -> tensor]`` without the batch dimension); ``ds[rows]``
    with a sequence, array or slice of positions is a whole batch gathered in one go. For batched
    reads through a ``DataLoader``, let the sampler yield index lists and turn off auto-batching::

        DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 4096, drop_last=False), batch_size=None)

    or take ``ds.dataloader(batch_size=4096, num_workers=2)``: the loader's order, ranks and resume.
    """

    def __init__(self, columns: SplitColumns, feature_spec: dict, channels: list[str] | None = None,
                 artifact_id: str | None = None, shard_rows: int | None = None):
        self.columns = columns
        self.plans = plan_channels(feature_spec, channels)
        self._len = columns.num_rows()
        self.artifact_id = artifact_id
        self.split = columns.split
        self.shard_rows = shard_rows

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, item):
        if isinstance(item, (int, np.integer)):
            i = int(item)
            if not -self._len <= i < self._len:
                raise IndexError(f"row {i} out of range for a split of {self._len} rows")
            i %= self._len
            batch = gather(self.columns, self.plans, slice(i, i + 1))
            return first_row(batch)
        if isinstance(item, slice):
            start, stop, step = item.indices(self._len)
            rows = np.arange(start, stop, step, dtype=np.int64)
        else:
            rows = np.asarray(item, dtype=np.int64).reshape(-1)
            if rows.size and (rows.min() < -self._len or rows.max() >= self._len):
                raise IndexError(f"row positions out of range for a split of {self._len} rows")
            rows = np.where(rows < 0, rows + self._len, rows)
        return gather(self.columns, self.plans, as_index(rows))

    def order(self, batch_size: int = 4096, shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1,
              drop_last: bool = False, shuffle_block: int = 1, shuffle_window: int | None = None) -> Order:
        return Order(self._len, batch_size, shuffle, seed, rank, world_size, drop_last, shuffle_block, shuffle_window,
                     self.shard_rows if shuffle_window is not None else None)

    def dataloader(self, batch_size: int = 4096, shuffle: bool = True, seed: int = 0, rank: int = 0,
                   world_size: int = 1, drop_last: bool = False, shuffle_block: int = 1,
                   shuffle_window: int | None = None, epoch: int = 0, **dataloader_kwargs) -> "ResumableDataLoader":
        """A ``DataLoader`` over this dataset in ``Artifact.batches``'s order, with ``state_dict`` /
        ``load_state_dict`` (see the module docstring); ``dataloader_kwargs`` go to ``DataLoader``."""
        order = self.order(batch_size, shuffle, seed, rank, world_size, drop_last, shuffle_block, shuffle_window)
        return ResumableDataLoader(self, OrderSampler(order, epoch), **dataloader_kwargs)


class OrderSampler(torch.utils.data.Sampler):
    """Batches of row positions (int64 arrays) in an ``Order``, from batch ``start`` of ``epoch``; for a
    ``DataLoader(ds, sampler=..., batch_size=None)``. ``len()`` is the whole epoch's batch count."""

    def __init__(self, order: Order, epoch: int = 0):
        self.order = order
        self.epoch = int(epoch)
        self.start = 0

    def __len__(self) -> int:
        return self.order.num_batches

    def __iter__(self) -> Iterator[np.ndarray]:
        rows = self.order.rows(self.epoch)
        bounds = self.order.bounds(len(rows)).tolist()
        for i in range(self.start, len(bounds) - 1):
            part = rows[bounds[i]:bounds[i + 1]]
            yield np.sort(part) if self.order.shuffle else part


class ResumableDataLoader:
    """A ``torch.utils.data.DataLoader`` over an ``ArtifactDataset`` and an ``OrderSampler`` that counts the
    batches handed to its consumer: ``state_dict`` / ``load_state_dict`` as ``storage.loader.BatchLoader``'s
    (the same format: a state moves between the two), ``set_epoch``, ``len()`` (batches per epoch)."""

    def __init__(self, dataset: ArtifactDataset, sampler: OrderSampler, **dataloader_kwargs):
        self.dataset, self.sampler = dataset, sampler
        self.loader = torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=None, **dataloader_kwargs)
        self._done = 0
        self._resume = False

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        if int(epoch) != self.sampler.epoch:
            self.sampler.epoch, self._done, self._resume = int(epoch), 0, False

    def __len__(self) -> int:
        return self.sampler.order.num_batches

    def state_dict(self) -> dict:
        return state_dict(self.sampler.order, self.dataset.artifact_id, self.dataset.split, self.sampler.epoch,
                          self._done)

    def load_state_dict(self, state: dict) -> None:
        self.sampler.epoch, self._done = resume_point(state, self.sampler.order, self.dataset.artifact_id,
                                                      self.dataset.split)
        self._resume = True

    def __iter__(self) -> Iterator[dict]:
        start = self._done if self._resume else 0
        self._done, self._resume, self.sampler.start = start, False, start
        try:
            for batch in self.loader:
                self._done += 1  # counted when handed over, after the workers
                yield batch
        finally:
            self.sampler.start = 0
