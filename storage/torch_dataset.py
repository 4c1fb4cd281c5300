"""A map-style ``torch.utils.data.Dataset`` over one published split (``Artifact.torch_dataset``).

It reads what ``storage.loader`` reads (``SplitColumns``, ``plan_channels``, ``gather``): the same
channels and tensors as ``Artifact.batches``, for code that wants a torch ``Dataset``/``DataLoader``.
This module imports torch at its top; ``storage.artifact`` imports it on the first ``torch_dataset``.
"""

from __future__ import annotations

import numpy as np
import torch.utils.data

from storage.loader import SplitColumns, as_index, first_row, gather, plan_channels


class ArtifactDataset(torch.utils.data.Dataset):
    """A map-style torch ``Dataset`` over one split.

    ``ds[i]`` is one row (``dict[channel -> tensor]`` without the batch dimension); ``ds[rows]``
    with a sequence, array or slice of positions is a whole batch gathered in one go. For batched
    reads through a ``DataLoader``, let the sampler yield index lists and turn off auto-batching::

        DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), 4096, drop_last=False), batch_size=None)
    """

    def __init__(self, columns: SplitColumns, feature_spec: dict, channels: list[str] | None = None):
        self.columns = columns
        self.plans = plan_channels(feature_spec, channels)
        self._len = columns.num_rows()

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
