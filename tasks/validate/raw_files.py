"""The raw gate of a dataset of several files (``Ingested.files``), file by file: a run after a file was added
scans that file's rows only.

Each suite that can (``expectations.runner.portable``: the generated suite always; a user suite whose
every expectation runs on a kernel whose partials an entry keeps) is scanned file by file: each file's
partitions as the whole-table run scans them, gathered into one bundle per file, a cache entry
(``<cache>/validate_raw_file/<key>``, ``tasks.runtime.file_fits``) keyed by the file's ingest entry, its row
offset (a bundle holds the input rows of the first unexpected values), the suites' hashes, the table's
columns and the code version. The files' bundles, in file order, give the suite entries the whole table
gives (``runner.run_files``). The other suites (an expectation only GX runs, uniqueness) run over the
whole table, as they do for a dataset of one file; so do all of them, logged, when a bundle holds a value an
entry cannot keep (``Unstorable``): a safeguard, as ingest reads every column as float64 or strings, whose
values, nulls and NaN included, an entry keeps.
"""

from __future__ import annotations

import logging
from typing import Callable

from dask import delayed

from expectations import runner
from storage.accumulators import Unstorable
from storage.hashing import stable_hash
from tasks.config.constants import ROW
from tasks.runtime import file_fits, frame
from tasks.runtime.outputs import Ingested

log = logging.getLogger("prepflow.validate")


def evaluate(ctx, ingest: Ingested, named: list[tuple[str, dict]], dtypes: dict[str, str],
             rows_per_partition: int, view: Callable, whole: Callable) -> tuple[list[dict], int]:
    """The raw gate's suite entries (in ``named`` order) and rows: the suites that can file by file, the
    others by ``whole(suites)`` (the whole-table run). ``view``: a partition of ingested rows -> the gate's
    frame (indexed by input row); ``rows_per_partition``: the rows of a file's partitions."""
    columns = [c for c in frame.column_names(ingest.parts) if c != ROW]
    by_file = [i for i, (_src, s) in enumerate(named) if runner.portable(s, columns, dtypes)]
    out: dict[int, dict] = {}
    if by_file:
        try:
            suites = _by_file(ctx, ingest, [named[i] for i in by_file], columns, rows_per_partition, view)
            out = dict(zip(by_file, suites, strict=True))
        except Unstorable as exc:
            log.info("the raw gate's file bundles cannot be cached (%s): it runs over the whole table", exc)
    rest = [i for i in range(len(named)) if i not in out]
    if rest:
        out.update(zip(rest, whole([named[i] for i in rest]), strict=True))
    return [out[i] for i in range(len(named))], ingest.num_rows


def _by_file(ctx, ingest: Ingested, named: list[tuple[str, dict]], columns: list[str],
             rows_per_partition: int, view: Callable) -> list[dict]:
    read = [*runner.columns_read(named, columns), ROW]

    def fit_file(parts: list[tuple[str, int]], _folder: str):
        rows = sum(frame.ipc_num_rows(path) for path, _offset in parts)
        frames = [delayed(view)(p) for p in frame.partitions(parts, max(1, -(-rows // rows_per_partition)),
                                                             columns=read)] if parts else []
        return runner.file_bundle(named, frames, columns)

    key_slice = {"suites": [[src, stable_hash(s, 64)] for src, s in named], "columns": columns}
    bundles = file_fits.fit_files(ctx, ingest, None, key_slice, fit_file, positions=True)
    return runner.run_files(named, [bundle for bundle, _entry in bundles], columns)
