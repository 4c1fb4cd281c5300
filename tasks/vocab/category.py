"""Category vocabularies that scale: no worker, and no Python dict, holds every distinct value.

The vocab stage hands this module the prepared (delayed) partitions and the category features that
need a vocabulary (``hash_buckets`` features need none). The fit is one Dask graph, computed with
the stage's other per-partition work (each partition is prepared once):

1. per partition, Arrow ``value_counts`` of each feature's fit rows -> a long table
   ``(feature, value, count)``;
2. the counts merged in a tree (``MERGE_FAN_IN`` tables per task: exact sums; each merged table holds
   at most every distinct value once), one reducer: locally up to ``LOCAL_REDUCE_PARTS`` partitions (one
   process, which holds each feature's whole vocabulary in step 4 anyway), and on a distributed cluster
   when all partitions' counts take at most ``TREE_MEMORY_SHARE`` of the smallest worker's memory limit
   (measured on the workers, which hold the counts meanwhile). Otherwise the counts are exchanged through
   the stage's folder (``write_buckets``): each partition's task writes its counts to one Arrow file, one
   record batch per reducer (``bucket_of``: the value's string hash modulo the reducers), and reducer ``j`` reads
   batch ``j`` of every file (memory-mapped); each reducer owns a disjoint set of values. On a cluster
   ``reducer_count`` gives each reducer at most ``REDUCER_MEMORY_SHARE`` of a worker's memory of counts;
   locally there is one reducer per ``MERGE_FAN_IN`` partitions, what one merge of the tree holds.
   Only the files' paths (to one barrier task) and their number (to each reducer) go through Dask (not
   Dask's p2p shuffle: its transfers and event loop, and the import of its DataFrame layer, cost more);
3. per reducer: exact sums per ``(feature, value)`` (Arrow's hash ``group_by``), then
   ``Candidates.reduce``: values under ``min_frequency`` are dropped (counted into their OOV bucket
   when asked), at most the local top ``most_common`` are kept; the survivors are written to an
   Arrow file in the stage's folder, so they leave the worker's memory, and only small totals
   travel back;
4. per feature, one task (``extract_feature``, on a worker of a cluster): that feature's slices of
   every reducer's file, the global order (frequency desc, ties by value asc, or with ``symbols: ludwig``
   by first row, a min over partitions) and the top
   ``most_common``, over Arrow arrays; a vocabulary of more than ``category.INLINE_MAX`` ids is
   written as ``vocab/<feature>.parquet`` (``storage.vocab_store``) by that task. The flow process
   (``extract``) only gathers the features' metadata and names the files: it never holds every
   distinct value (a feature's inline vocabulary, at most ``INLINE_MAX`` ids, is part of its metadata).

This is the category type's combiner (``tasks.runtime.combine``: ``CategoryFeature.create``/``add``/``merge``/
``extract`` over ``(value, count)`` tables) run at scale: step 1 is its per-partition ``create`` + ``add``,
steps 2-3 its ``merge`` (exact sums, each reducer over its own values), step 4 its ``extract``
(``Candidates`` and ``CategoryFeature.vocabulary_metadata``).

Only values that can still enter the vocabulary reach step 4. Every step is exact integer
counting and a total order, so the vocabulary does not depend on the partitioning, S or the
scheduler. The candidate files need a folder the workers and the client share, as the stage cache
already is.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
from dask import delayed

from core.task_fusion import fused
from storage import string_hash, vocab_store
from tasks.config.constants import ROW
from tasks.features.category import Candidates, CategoryFeature, sum_buckets
from tasks.runtime import dask_run, fitted_metadata, frame
from tasks.runtime.dask_run import on_cluster
from tasks.runtime.frame import write_ipc

VOCAB_DIR = "vocab"
FEATURE, VALUE, COUNT, FIRST = "feature", "value", "count", "first"


def counted_features(features: list) -> list[CategoryFeature]:
    """The category features whose vocabulary is fitted here (not the hashed ones)."""
    return [f for f in features if isinstance(f, CategoryFeature) and f.needs_vocabulary]


def _empty_counts() -> pa.Table:
    return pa.table({FEATURE: pa.array([], pa.int32()), VALUE: pa.array([], pa.string()),
                     COUNT: pa.array([], pa.int64()), FIRST: pa.array([], pa.int64())})


def partition_counts(prepared, features: list[CategoryFeature], fit_on: str) -> pa.Table:
    """``(feature index, value, count, first)`` of every feature's non-null fit values in one partition: each
    feature's combiner ``add(create(), values)``, the values indexed by input row position (``first``: a
    value's first row, for ``symbols: ludwig``)."""
    fit = frame.prepared_fit_rows(prepared, fit_on)
    rows = fit[ROW].to_numpy()
    pieces = []
    for i, f in enumerate(features):
        acc = f.add(f.create(), fit[f.name].set_axis(rows))
        pieces.append(pa.table({FEATURE: pa.array(np.full(acc.num_rows, i, np.int32)), VALUE: acc["value"],
                                COUNT: acc["count"], FIRST: acc["first"]}))
    return pa.concat_tables(pieces).combine_chunks() if pieces else _empty_counts()


def _feature_runs(parts: list[pa.Table]) -> dict[int, list[pa.RecordBatch]]:
    """Each feature's rows of ``parts``, as slices of their record batches. A batch whose feature ids are in
    order (each partition's counts, a merge's output, an exchange batch) is only sliced; another is sorted by
    feature first."""
    runs: dict[int, list[pa.RecordBatch]] = {}
    for part in parts:
        for batch in part.to_batches():
            ids = batch.column(FEATURE).to_numpy()
            if len(ids) > 1 and (ids[1:] < ids[:-1]).any():
                order = np.argsort(ids, kind="stable")
                batch, ids = batch.take(pa.array(order)), ids[order]
            bounds = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                if b > a:
                    runs.setdefault(int(ids[a]), []).append(batch.slice(a, b - a))
    return runs


# A feature's values of more text than this are merged by Arrow's hash group_by, which works chunk by chunk: one
# string array's offsets end at 2 GiB
DICTIONARY_MERGE_BYTES = (1 << 31) - (1 << 26)


def merge_counts(parts: list[pa.Table]) -> pa.Table:
    """Counts of several partitions as one table: per distinct ``(feature, value)`` the exact sum of its
    counts and the min of its first rows, the features in ascending order (the values in any order: a
    reducer's ``Candidates`` order them). Grouped feature by feature on the value alone (``_merge_feature``):
    Arrow's hash ``group_by`` on the two keys (it encodes each row's composite key) costs more CPU
    (``benchmarks/count_merge.py``)."""
    pieces = []
    for feature, batches in sorted(_feature_runs(parts).items()):
        values, counts, first = _merge_feature(pa.Table.from_batches(batches))
        pieces.append(pa.table({FEATURE: pa.array(np.full(len(values), feature, np.int32)), VALUE: values,
                                COUNT: counts, FIRST: first}))
    # one chunk per column: group_by's chunks are slices of shared buffers, which Dask's sizeof counts once per
    # chunk (a table of many chunks is estimated at many times its size, and a tree's last merge refused as too
    # large)
    return pa.concat_tables(pieces).combine_chunks() if pieces else _empty_counts()


def _merge_feature(rows: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
    """One feature's ``(value, count, first)`` rows merged per distinct value: the values dictionary-encoded
    (one hash of each row's value), the counts summed by ``bincount`` of the codes (float64 weights: exact below
    2^53 rows) and the first rows' min by ``minimum.at``: less CPU than Arrow's hash ``group_by``
    (``benchmarks/count_merge.py``); the group_by, which reads chunk by chunk, for a feature of more than
    ``DICTIONARY_MERGE_BYTES`` of text."""
    column = rows.column(VALUE)
    if column.nbytes > DICTIONARY_MERGE_BYTES:
        merged = rows.group_by(VALUE, use_threads=False).aggregate([(COUNT, "sum"), (FIRST, "min")])
        return merged[VALUE].combine_chunks(), merged[f"{COUNT}_sum"].combine_chunks(), \
            merged[f"{FIRST}_min"].combine_chunks()
    encoded = pc.dictionary_encode(column.combine_chunks())
    codes, size = encoded.indices.to_numpy(), len(encoded.dictionary)
    counts = np.bincount(codes, weights=rows.column(COUNT).to_numpy(), minlength=size).astype(np.int64)
    first = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, codes, rows.column(FIRST).to_numpy())
    return encoded.dictionary, pa.array(counts), pa.array(first)


def reduce_partition(counts: pa.Table, features: list[CategoryFeature], folder: str, index: int,
                     merged: bool = False) -> dict:
    """One reducer's counts (or the tree's merged counts: ``merged``, one row per ``(feature, value)``
    already) -> its candidates, written to ``folder`` (Arrow IPC) so that they leave
    the worker's memory; returns the path and, per feature, ``(total, unk, oov, cut)`` and its rows'
    ``(start, length)`` in the file."""

    table = counts if merged else merge_counts([counts])
    feature_ids = table.column(FEATURE).to_numpy()
    if (feature_ids[1:] < feature_ids[:-1]).any():  # merge_counts and one partition's counts are in order
        order = np.argsort(feature_ids, kind="stable")  # each feature's rows together
        table, feature_ids = table.take(pa.array(order)), feature_ids[order]
    bounds = np.searchsorted(feature_ids, np.arange(len(features) + 1))
    pieces, stats, slices, start = [], {}, {}, 0
    for i, f in enumerate(features):
        rows = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        cand = Candidates.reduce(rows.column(VALUE).combine_chunks(), rows.column(COUNT).to_numpy(), f.options,
                                 ordered=False, first=rows.column(FIRST).to_numpy())
        stats[i] = (cand.total, cand.unk, cand.oov, cand.cut)
        slices[i] = (start, len(cand.values))  # feature i's rows of the file
        start += len(cand.values)
        pieces.append(pa.table({FEATURE: pa.array(np.full(len(cand.values), i, np.int32)), VALUE: cand.values,
                                COUNT: pa.array(cand.counts, pa.int64()), FIRST: pa.array(cand.first, pa.int64())}))
    path = Path(folder) / f"candidates-{index:05d}.arrow"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_ipc(pa.concat_tables(pieces), path)
    return {"path": str(path), "stats": stats, "slices": slices}


# Up to this many partitions (~16M rows of ingest's parts) a local run merges the counts in a tree; more are
# exchanged by value through files (steps 2-3 above; a distributed cluster decides by the counts' size,
# TREE_MEMORY_SHARE).
LOCAL_REDUCE_PARTS = 64
MERGE_FAN_IN = 8


# On a distributed cluster the counts are merged in the tree when all partitions' counts together take at most
# this share of the smallest worker's memory limit: the tree's last merge holds them (and Arrow's group_by
# about as much again); Dask's own reductions make the same choice (a tree, ``split_out=1``, for small results).
TREE_MEMORY_SHARE = 1 / 8
# Otherwise each reducer of the exchange gets at most this share of it: a reducer holds its counts several times
# over (the mapped batches, group_by's keys and output, the feature order's copy, the candidates), so 1/32 keeps
# it well inside the worker (tests/integration/test_category_scale.py runs small workers that a larger share kills).
REDUCER_MEMORY_SHARE = 1 / 32


def _nbytes(counts: pa.Table) -> int:
    return int(counts.nbytes)


def _same(value):
    return value


def memory_budget(workers: list[dict], share: float) -> int:
    """``share`` of the smallest worker memory limit in bytes (a worker without one: this machine's memory, an
    assumption that holds on one machine)."""

    import psutil

    limits = [w.get("memory_limit") or psutil.virtual_memory().total for w in workers]
    return int(min(limits, default=0) * share)


def _probe(partials: list, counts: list) -> tuple[list, list, int]:
    """On a cluster: the counts of the first partitions (one per worker), computed and held by the workers,
    estimate all partitions' counts (their mean size times the partitions), and ``reducer_count`` sizes the
    reduction by it (1: the tree). The other partitions are not counted yet, so memory stays as bounded as
    the exchange keeps it. Returns the lists with the probed partitions as (Futures wrapped in) delayed
    values, and the reducers."""

    from distributed import get_client

    client = get_client()
    workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
    k = min(len(counts), max(1, len(workers)))
    head = partials[:k]  # empty when the stage fits nothing else
    with fused():  # one _partition task per probed partition, its read and preparation inside (core.task_fusion)
        futures = client.compute(head + counts[:k])
    probed_partials, probed_counts = futures[:len(head)], futures[len(head):]
    sizes = client.gather(client.map(_nbytes, probed_counts))
    reducers = reducer_count(int(sum(sizes) / k * len(counts)), memory_budget(workers, TREE_MEMORY_SHARE),
                             memory_budget(workers, REDUCER_MEMORY_SHARE), len(counts))
    # a graph built on Futures holds them (one built on persisted Delayed values does not)
    partials = [delayed(_same)(p) for p in probed_partials] + partials[k:]
    counts = (probed_counts if reducers == 1 else [delayed(_same)(c) for c in probed_counts]) + counts[k:]
    return partials, counts, reducers


def reducer_count(estimate: int, tree: int, per_reducer: int, npartitions: int) -> int:
    """Reducers for counts of ``estimate`` bytes in all: 1 (the tree) when they fit ``tree`` bytes (the tree's
    last merge holds them all); otherwise enough that each reducer of the exchange holds at most
    ``per_reducer`` bytes, and at most one per partition. Not one per partition always: each reducer reads a
    batch of every partition's file, N x R reads, ~2.8e8 at Criteo 1TB's ~16,800 partitions with R = N,
    ~2.3e7 with the ~1,350 reducers of 250 MB that 8 GB workers and ~20 MB of counts per partition give
    (**derived**)."""
    if estimate <= tree:
        return 1
    return max(1, min(npartitions, -(-estimate // max(per_reducer, 1))))


def bucket_of(values: pa.Array, reducers: int) -> np.ndarray:
    """Each value's reducer: its 64-bit ``string_hash`` modulo ``reducers``, the same in every partition (which
    reducer merges a value never changes the vocabulary: its order is global)."""
    return string_hash.buckets(string_hash.hash_strings(values), reducers)


def exchange_path(folder: str, index: int) -> Path:
    """Where ``write_buckets`` writes partition ``index``'s counts."""
    return Path(folder) / f"counts-{index:05d}.arrow"


def write_buckets(counts: pa.Table, folder: str, index: int, reducers: int) -> str:
    """The exchange's map side: one partition's counts written to ``exchange_path(folder, index)``, one Arrow
    record batch per reducer (``bucket_of``; rows in their order within a bucket, empty batches included);
    returns the path. The file is written under a temporary name and renamed, so a reducer never reads a
    partial one (a retried task writes the same bytes)."""

    bucket = bucket_of(counts.column(VALUE).combine_chunks(), reducers)
    # NumPy's stable sort of 16-bit integers is a radix sort, much faster than sorting int64
    order = np.argsort(bucket.astype(np.uint16) if reducers <= 1 << 16 else bucket, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(bucket, minlength=reducers))])
    grouped = counts.take(pa.array(order))  # one batch to slice per reducer (an empty table has no chunk)
    whole = pa.RecordBatch.from_arrays([c.combine_chunks() for c in grouped.columns], schema=grouped.schema)
    path = exchange_path(folder, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, whole.schema) as writer:
        for j in range(reducers):
            writer.write_batch(whole.slice(bounds[j], bounds[j + 1] - bounds[j]))
    tmp.replace(path)
    return str(path)


def read_bucket(paths: list[str | Path], bucket: int) -> pa.Table:
    """The exchange's reduce side: record batch ``bucket`` of every partition's file (memory-mapped), in
    partition order. One batch per reducer: reading each file whole to slice it costs more CPU the more reducers
    there are (``benchmarks/count_exchange.py``), as every read parses all of the file's batches."""
    batches = [pa.ipc.open_file(pa.memory_map(str(p))).get_batch(bucket) for p in paths]
    batches = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(batches) if batches else _empty_counts()


def _all_written(paths: list[str]) -> int:
    """The exchange's barrier: the number of partition files, once every one is written. The reducers depend
    on it alone, so that each gets one small value (not every map task's result: N x R edges in the graph)."""
    return len(paths)


def _reduce_bucket(written: int, bucket: int, features: list[CategoryFeature], folder: str) -> dict:
    paths = [exchange_path(folder, i) for i in range(written)]
    return reduce_partition(read_bucket(paths, bucket), features, folder, bucket)


def _partition(prepared, features: list[CategoryFeature], fit_on: str, partial, *partial_args):
    """One task per partition: the stage's other partial (``partial(prepared, *partial_args)``) and the
    counts, so that the prepared frame is freed as soon as this task ends."""
    return partial(prepared, *partial_args) if partial is not None else None, \
        partition_counts(prepared, features, fit_on)


def fit_tasks(prepared: list, features: list[CategoryFeature], fit_on: str, folder: Path, partial=None,
              partial_args: tuple = ()) -> tuple[list, list]:
    """``(partials, reducers)``: per partition, the delayed ``partial(prepared, *partial_args)`` (the
    stage's fit of its other features), and one delayed result per reducer (candidates written under
    ``folder``, a folder the workers and this process share). Compute both
    lists together: each partition is prepared once and dropped right after its one task."""

    if not features or not prepared:
        return [delayed(partial)(p, *partial_args) for p in prepared] if partial is not None else [], []
    f = dask_run.shared(features)
    # partial_args positionally: a tuple holding a delayed value is rebuilt as a task in every call
    both = [delayed(_partition, nout=2)(p, f, fit_on, partial, *partial_args) for p in prepared]
    partials = [b[0] for b in both] if partial is not None else []
    counts = [b[1] for b in both]
    if on_cluster():  # the first partitions counted first, the tree or the exchange chosen by their size
        partials, counts, reducers = _probe(partials, counts)
    else:  # Dask's threads, or the synchronous scheduler, in this one process
        reducers = 1 if len(prepared) <= LOCAL_REDUCE_PARTS else -(-len(prepared) // MERGE_FAN_IN)
    if reducers == 1:  # the counts merged in a tree, one reducer, no exchange (whose hashing and files cost more
        # than these counts); the same vocabulary (see above)
        level = counts
        while len(level) > 1:
            level = [delayed(merge_counts)(level[i:i + MERGE_FAN_IN]) for i in range(0, len(level), MERGE_FAN_IN)]
        # one partition's counts are distinct per (feature, value) too (a value_counts per feature)
        return partials, [delayed(reduce_partition)(level[0], f, str(folder), 0, merged=True)]
    # the counts exchanged through files in ``folder`` (see the module's doc); only paths and their number travel
    written = delayed(_all_written)([delayed(write_buckets)(c, str(folder), i, reducers) for i, c in enumerate(counts)])
    return partials, [delayed(_reduce_bucket)(written, j, f, str(folder)) for j in range(reducers)]


def file_name(feature: str, taken: set[str]) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", feature).strip("._") or "feature"
    if slug != feature or slug.lower() in taken:
        slug = f"{slug}-{hashlib.sha256(feature.encode()).hexdigest()[:8]}"
    taken.add(slug.lower())
    return f"{VOCAB_DIR}/{slug}.parquet"


def _empty_candidates() -> pa.Table:
    return pa.table({VALUE: pa.array([], pa.string()), COUNT: pa.array([], pa.int64()), FIRST: pa.array([], pa.int64())})


def extract_feature(f: CategoryFeature, index: int, reduced: list[dict], out: str,
                    partition_rows: int | None = None) -> dict:
    """One feature's metadata from its slices of the reducers' candidate files (a Dask task): the global
    order and top ``most_common``; a large vocabulary is written to ``out/vocab/.feature-<index>.parquet``
    (``extract`` gives it its name), with its hash index (``vocab_store.write_index``) when encoding
    partitions of ``partition_rows`` rows is expected to look values up in it (``vocab_store.index_pays``)."""


    tables = []
    for r in reduced:
        start, length = r["slices"][index]
        if length:
            tables.append(feather.read_table(r["path"], columns=[VALUE, COUNT, FIRST], memory_map=True)
                          .slice(start, length))
    stats = [r["stats"][index] for r in reduced]
    cand = Candidates.top(pa.concat_tables(tables) if tables else _empty_candidates(),
                          sum(s[0] for s in stats), sum(s[1] for s in stats),
                          sum_buckets([s[2] for s in stats], f.options.num_oov_buckets), f.options,
                          cut=any(s[3] for s in stats))

    def store(values, counts):
        rel = f"{VOCAB_DIR}/.feature-{index:05d}.parquet"
        stored = vocab_store.write(Path(out) / rel, values, counts)
        first = f.vocab_file_first()
        if partition_rows is not None and vocab_store.index_pays(counts, first, partition_rows):
            vocab_store.write_index(Path(out) / rel, values, first)
        return {"path": rel, **stored}

    return fitted_metadata.pack(f.vocabulary_metadata(cand, store))  # the flow writes it without parsing it


def extract(features: list[CategoryFeature], reduced: list[dict], out: Path,
            partition_rows: int | None = None) -> dict[str, dict]:
    """Feature name -> metadata, one ``extract_feature`` task per feature; large vocabularies go to
    ``out/vocab/`` (named here, in feature order), with their hash index where encoding partitions of
    ``partition_rows`` rows looks values up in it. The candidate files are deleted afterwards."""

    if not features:
        return {}
    r = dask_run.shared(reduced)
    metas = dask_run.compute([delayed(extract_feature, pure=False)(f, i, r, str(out), partition_rows)
                           for i, f in enumerate(features)])
    taken: set[str] = set()
    metadata = {}
    for f, meta in zip(features, metas, strict=True):
        if "vocab_file" in meta:  # the file's name: a slug of the feature's, unique (in feature order)
            rel = file_name(f.name, taken)
            written = out / meta["vocab_file"]["path"]
            written.replace(out / rel)
            index = vocab_store.index_path(written, f.vocab_file_first())
            if index.is_file():  # its hash index goes along
                index.replace(vocab_store.index_path(out / rel, f.vocab_file_first()))
            meta["vocab_file"] = {**meta["vocab_file"], "path": rel}
        metadata[f.name] = meta
    for r in reduced:
        Path(r["path"]).unlink(missing_ok=True)
    for folder in {Path(r["path"]).parent for r in reduced}:
        for written in [*folder.glob("counts-*.arrow"), *folder.glob(".counts-*.tmp")]:  # the exchange's files
            written.unlink()  # (``write_buckets``; a temporary one if a task died while writing it)
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass
    return metadata
