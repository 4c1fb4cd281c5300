"""Publish's ``split_binary`` format: the Dask tasks that write NVIDIA's DLRM layout
(``storage.split_binary``) beside the other formats.

Like ``.npy`` columns (``tasks.publish.shards``): the flow process creates each of a split's files
at full size (sparse), one task per encoded part writes that part's rows of every file at their
offset (``write_part``: the part with its ``__row__`` column, ``tasks.publish.rows``), then one
task per file hashes it. The files are made even for
a split without rows, since NVIDIA's loaders open the test mapping's files whatever their size.

A remote output (a store URL: no offset writes) gets one task per file instead (``stream_file``),
on a worker: it streams every encoded part's rows of that file in split order straight to the store
as one object, hashing them as they go. The bytes are a local run's (a file is the concatenation of
its rows, no header); the flow process only gathers the names, sizes and sha256.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from dask import delayed

from storage import split_binary
from storage.fs import open_output
from tasks.publish import shards
from tasks.publish.rows import read_part


def write_part(part: str, first_row: int, targets: dict[str, split_binary.Target], split_name: str) -> int:
    """One encoded part's rows, ``__row__`` included, at row ``first_row`` of every file of its split."""
    return split_binary.write_table(read_part(part), first_row, targets, split_name)


def stream_file(parts: list[str], first_rows: list[int], target: split_binary.Target, split_name: str, url: str,
                rel: str) -> dict[str, dict]:
    """One file of a split as one object at ``url``: every part's rows in split order; its description."""
    with open_output(url) as sink:
        for part, first_row in zip(parts, first_rows, strict=True):
            sink.write(split_binary.target_values(shards.read_columns(part, target.columns), target, split_name,
                                                 first_row))
    return {rel: sink.description()}


def split_tasks(split_name: str, parts: list[Path], folder: Path | str, n_rows: int,
                layout: split_binary.Layout, url: str | None = None) -> tuple[list[dict], list]:
    """A split's prepflow ``source_spec`` chunks and the tasks that write and describe its files;
    with ``url`` (the split's folder on a store) the tasks write the objects there, not in ``folder``."""

    if url is not None:
        sizes = shards.part_sizes(parts) if parts else []
        offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
        kept = [(str(p), offsets[i]) for i, (p, size) in enumerate(zip(parts, sizes, strict=True)) if size]
        tasks = [delayed(stream_file, pure=False)([p for p, _ in kept], [o for _, o in kept], target, split_name,
                                                  f"{url}/{target.file}", f"{split_name}/{target.file}")
                 for target in layout.targets]
        return split_binary.chunks(split_name, layout), tasks
    targets = split_binary.create(folder, layout, n_rows)
    sizes = shards.part_sizes(parts) if parts else []
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    writes = [delayed(write_part, pure=False)(str(part), offsets[i], targets, split_name)
              for i, (part, size) in enumerate(zip(parts, sizes, strict=True)) if size]
    tasks = [delayed(shards.hash_file, pure=False)(path, f"{split_name}/{target.file}", writes)
             for path, target in targets.items()]
    return split_binary.chunks(split_name, layout), tasks
