"""Publish's ``split_binary`` format: the Dask tasks that write NVIDIA's DLRM layout
(``storage.split_binary``) beside the other formats.

Like ``.npy`` columns (``tasks.publish_shards``): the flow process creates each of a split's files
at full size (sparse), one task per encoded part writes that part's rows of every file at their
offset (``write_part``: the part with its ``__row__`` column, ``tasks.published_rows``), then one
task per file hashes it. The files are made even for
a split without rows, since NVIDIA's loaders open the test mapping's files whatever their size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from dask import delayed

from storage import split_binary
from tasks import publish_shards as shards
from tasks.published_rows import read_part


def write_part(part: str, first_row: int, targets: dict[str, split_binary.Target], split_name: str) -> int:
    """One encoded part's rows, ``__row__`` included, at row ``first_row`` of every file of its split."""
    return split_binary.write_table(read_part(part), first_row, targets, split_name)


def split_tasks(split_name: str, parts: list[Path], folder: Path, n_rows: int,
                layout: split_binary.Layout) -> tuple[list[dict], list]:
    """A split's prepflow ``source_spec`` chunks and the tasks that write and describe its files."""

    targets = split_binary.create(folder, layout, n_rows)
    sizes = shards.part_sizes(parts) if parts else []
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    writes = [delayed(write_part, pure=False)(str(part), offsets[i], targets, split_name)
              for i, (part, size) in enumerate(zip(parts, sizes, strict=True)) if size]
    tasks = [delayed(shards.hash_file, pure=False)(path, f"{split_name}/{target.file}", writes)
             for path, target in targets.items()]
    return split_binary.chunks(split_name, layout), tasks
