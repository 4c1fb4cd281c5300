"""Re-chunk a stream of Arrow tables into tables of a fixed row count.

Used wherever a file boundary must depend only on row counts, never on how the rows arrived
(CSV blocks at ingest, encode partitions at publish): that is what keeps cache parts and artifact
shards byte-identical for any partitioning.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa


def fixed_blocks(tables: Iterable[pa.Table], block_rows: int, combine: bool = True) -> Iterator[pa.Table]:
    """Tables of exactly ``block_rows`` rows, in order (the last may be shorter); ``combine``: each column
    copied into one chunk (else the pieces are kept as chunks, no copy)."""
    pending: list[pa.Table] = []
    pending_rows = 0
    for table in tables:
        while table.num_rows:
            take = min(block_rows - pending_rows, table.num_rows)
            pending.append(table.slice(0, take))
            pending_rows += take
            table = table.slice(take)
            if pending_rows == block_rows:
                yield _joined(pending, combine)
                pending, pending_rows = [], 0
    if pending_rows:
        yield _joined(pending, combine)


def _joined(tables: list[pa.Table], combine: bool) -> pa.Table:
    table = pa.concat_tables(tables)
    return table.combine_chunks() if combine else table
