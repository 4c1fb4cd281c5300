"""Category vocabularies that scale (issue 11): no worker, and no Python dict, holds every distinct value.

The vocab stage hands this module the prepared (delayed) partitions and the category features that
need a vocabulary (``hash_buckets`` features need none). The fit is one Dask graph, computed with
the stage's other per-partition work (each partition is prepared once):

1. per partition, Arrow ``value_counts`` of each feature's fit rows -> a long table
   ``(feature, value, count)``;
2. the counts merged in a tree (``MERGE_FAN_IN`` tables per task: exact sums; each merged table holds
   at most every distinct value once), S = 1 output partition, one reducer: locally up to
   ``LOCAL_REDUCE_PARTS`` partitions (one process, which holds each feature's whole vocabulary in step 4
   anyway), and on a distributed cluster when all partitions' counts take at most ``TREE_MEMORY_SHARE``
   of the smallest worker's memory limit (measured on the workers, which hold the counts meanwhile).
   Otherwise a shuffle by ``value`` (on its string hash: ``with_bucket``) into S output partitions
   (``DataFrame.shuffle``: p2p, disk-backed, or Dask's local disk shuffle). S = the number of input
   partitions, so a reducer holds about what one partition's counts hold and each owns a disjoint set of
   values. At 2M Criteo-like rows (8 partitions) the shuffle cost about as much as the counting itself
   (hashing every value, splitting, spilling), locally and on a 2-worker cluster;
3. per output partition (a reducer): exact sums per ``(feature, value)`` (Arrow's hash ``group_by``), then
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

This is the category type's combiner (``tasks.combine``: ``CategoryFeature.create``/``add``/``merge``/
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
import re
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
from dask import delayed

from storage import string_hash, vocab_store
from tasks import fitted_metadata, frame
from tasks.dask_run import on_cluster
from tasks.features.category import Candidates, CategoryFeature, as_strings, sum_buckets
from tasks.ingest_common import write_ipc

VOCAB_DIR = "vocab"
FEATURE, VALUE, COUNT, FIRST = "feature", "value", "count", "first"
BUCKET = "bucket"  # the shuffle's key: the value's string hash (``with_bucket``)


def counted_features(features: list) -> list[CategoryFeature]:
    """The category features whose vocabulary is fitted here (not the hashed ones)."""
    return [f for f in features if isinstance(f, CategoryFeature) and f.needs_vocabulary]


def _meta() -> pd.DataFrame:
    return pd.DataFrame({FEATURE: np.zeros(0, np.int32), VALUE: pd.array([], dtype=pd.StringDtype("pyarrow")),
                         COUNT: np.zeros(0, np.int64), FIRST: np.zeros(0, np.int64)})


def partition_counts(prepared, features: list[CategoryFeature], fit_on: str) -> pd.DataFrame:
    """``(feature index, value, count, first)`` of every feature's non-null fit values in one partition: each
    feature's combiner ``add(create(), values)``, the values indexed by input row position (``first``: a
    value's first row, for ``symbols: ludwig``)."""
    fit = frame.prepared_fit_rows(prepared, fit_on)
    rows = fit[frame.ROW].to_numpy()
    pieces = []
    for i, f in enumerate(features):
        acc = f.add(f.create(), fit[f.name].set_axis(rows))
        pieces.append(pa.table({FEATURE: pa.array(np.full(acc.num_rows, i, np.int32)), VALUE: acc["value"],
                                COUNT: acc["count"], FIRST: acc["first"]}))
    if not pieces:
        return _meta()
    table = pa.concat_tables(pieces)
    return pd.DataFrame({FEATURE: table.column(FEATURE).to_numpy(),
                         VALUE: pd.array(table.column(VALUE), dtype=pd.StringDtype("pyarrow")),
                         COUNT: table.column(COUNT).to_numpy(), FIRST: table.column(FIRST).to_numpy()})


def _table(counts) -> pa.Table:
    """Counts as an Arrow table (a shuffle's output partition arrives as a pandas frame)."""
    if isinstance(counts, pa.Table):
        return counts
    return pa.table({FEATURE: pa.array(counts[FEATURE].to_numpy(np.int32)), VALUE: as_strings(counts[VALUE]),
                     COUNT: pa.array(counts[COUNT].to_numpy(np.int64)), FIRST: pa.array(counts[FIRST].to_numpy(np.int64))})


def merge_counts(parts: list) -> pa.Table:
    """Counts of several partitions as one table: per distinct ``(feature, value)`` the exact sum of its
    counts and the min of its first rows (any row order: a reducer's ``Candidates`` order them)."""
    table = pa.concat_tables([_table(p) for p in parts])
    if table.num_rows == 0:
        return table
    merged = table.group_by([FEATURE, VALUE], use_threads=False).aggregate([(COUNT, "sum"), (FIRST, "min")])
    # one chunk per column: group_by's chunks are slices of shared buffers, which Dask's sizeof counts once per
    # chunk (48 chunks of 1.5M rows: 2.4 GB estimated for 50 MB, and a tree's last merge refused as too large)
    return pa.table({FEATURE: merged[FEATURE], VALUE: merged[VALUE], COUNT: merged[f"{COUNT}_sum"],
                     FIRST: merged[f"{FIRST}_min"]}).combine_chunks()


def reduce_partition(counts, features: list[CategoryFeature], folder: str, index: int, merged: bool = False) -> dict:
    """One shuffle output partition (or, locally, every partition's merged counts: ``merged``, one row per
    ``(feature, value)`` already) -> its candidates, written to ``folder`` (Arrow IPC) so that they leave
    the worker's memory; returns the path and, per feature, ``(total, unk, oov, cut)`` and its rows'
    ``(start, length)`` in the file."""

    table = _table(counts) if merged else merge_counts([counts])
    feature_ids = table.column(FEATURE).to_numpy()
    order = np.argsort(feature_ids, kind="stable")  # each feature's rows together
    bounds = np.searchsorted(feature_ids[order], np.arange(len(features) + 1))
    table = table.take(pa.array(order))
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
# shuffled by value (steps 2-3 above; a distributed cluster decides by the counts' size, TREE_MEMORY_SHARE).
LOCAL_REDUCE_PARTS = 64
MERGE_FAN_IN = 8


# On a distributed cluster the counts are merged in the tree when all partitions' counts together take at most
# this share of the smallest worker's memory limit: the tree's last merge holds them (and Arrow's group_by
# about as much again); Dask's own reductions make the same choice (a tree, ``split_out=1``, for small results).
TREE_MEMORY_SHARE = 1 / 8


def _nbytes(counts: pd.DataFrame) -> int:
    return int(counts.memory_usage(index=False, deep=True).sum())


def _same(value):
    return value


def tree_budget(workers: list[dict]) -> int:
    """Bytes of counts the cluster merges in a tree: ``TREE_MEMORY_SHARE`` of the smallest worker memory
    limit (a worker without one: this machine's memory, an assumption that holds on one machine)."""

    import psutil

    limits = [w.get("memory_limit") or psutil.virtual_memory().total for w in workers]
    return int(min(limits, default=0) * TREE_MEMORY_SHARE)


def _probe(partials: list, counts: list) -> tuple[list, list, bool]:
    """On a cluster: the counts of the first partitions (one per worker), computed and held by the workers,
    estimate all partitions' counts (their mean size times the partitions); the tree is chosen when that is
    within ``tree_budget``. The other partitions are not counted yet, so memory stays as bounded as the
    shuffle keeps it. Returns the lists with the probed partitions as (Futures wrapped in) delayed values."""

    from distributed import get_client

    client = get_client()
    workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
    k = min(len(counts), max(1, len(workers)))
    head = partials[:k]  # empty when the stage fits nothing else
    futures = client.compute(head + counts[:k])  # one _partition task per probed partition
    probed_partials, probed_counts = futures[:len(head)], futures[len(head):]
    sizes = client.gather(client.map(_nbytes, probed_counts))
    use_tree = sum(sizes) / k * len(counts) <= tree_budget(workers)
    # a graph built on Futures holds them (one built on persisted Delayed values does not)
    partials = [delayed(_same)(p) for p in probed_partials] + partials[k:]
    counts = (probed_counts if use_tree else [delayed(_same)(c) for c in probed_counts]) + counts[k:]
    return partials, counts, use_tree


def with_bucket(counts: pd.DataFrame) -> pd.DataFrame:
    """The counts with ``BUCKET``, each value's 64-bit ``string_hash`` (as int64), which the shuffle partitions
    on: the same value gets the same bucket in every partition. Dask hashes the column it shuffles on with
    pandas, which hashes a string column as Python objects (~280 ns a value, ~6 % of a 20M-row run's worker
    CPU); an int64 column costs it ~11 ns, the xxh3 hash ~80 ns (benchmarks/RESULTS.md, issue 19 eighth pass)."""
    return counts.assign(**{BUCKET: string_hash.hash_strings(pa.array(counts[VALUE].array)).view(np.int64)})


def _bucket_meta() -> pd.DataFrame:
    return _meta().assign(**{BUCKET: np.zeros(0, np.int64)})


def split_out(npartitions: int) -> int:
    """Shuffle output partitions: as many as input partitions, so that a reducer holds about what one
    partition's counts hold."""
    return max(1, npartitions)


def _partition(prepared, features: list[CategoryFeature], fit_on: str, partial, partial_args: tuple):
    """One task per partition: the stage's other partial (``partial(prepared, *partial_args)``) and the
    counts, so that the prepared frame is freed as soon as this task ends."""
    return partial(prepared, *partial_args) if partial is not None else None, \
        partition_counts(prepared, features, fit_on)


def fit_tasks(prepared: list, features: list[CategoryFeature], fit_on: str, folder: Path, partial=None,
              partial_args: tuple = ()) -> tuple[list, list]:
    """``(partials, reducers)``: per partition, the delayed ``partial(prepared, *partial_args)`` (the
    stage's fit of its other features), and one delayed reducer result per shuffle output partition
    (candidates written under ``folder``, a folder the workers and this process share). Compute both
    lists together: each partition is prepared once and dropped right after its one task."""

    if not features or not prepared:
        return [delayed(partial)(p, *partial_args) for p in prepared] if partial is not None else [], []
    f = frame.shared(features)
    both = [delayed(_partition, nout=2)(p, f, fit_on, partial, partial_args) for p in prepared]
    partials = [b[0] for b in both] if partial is not None else []
    counts = [b[1] for b in both]
    if on_cluster():  # the first partitions counted first, the tree or the shuffle chosen by their size
        partials, counts, use_tree = _probe(partials, counts)
    else:  # Dask's threads, or the synchronous scheduler, in this one process
        use_tree = len(prepared) <= LOCAL_REDUCE_PARTS
    if use_tree:  # the counts merged in a tree, one reducer, no shuffle (whose graph, hashing, disk files and
        # DataFrame import cost more than these counts); the same vocabulary (see above)
        level = counts
        while len(level) > 1:
            level = [delayed(merge_counts)(level[i:i + MERGE_FAN_IN]) for i in range(0, len(level), MERGE_FAN_IN)]
        # one partition's counts are distinct per (feature, value) too (a value_counts per feature)
        return partials, [delayed(reduce_partition)(level[0], f, str(folder), 0, merged=True)]
    import dask.dataframe as dd  # heavy (~0.65 s import): only for the shuffle of many partitions

    ddf = dd.from_delayed(counts, meta=_meta(), verify_meta=False).map_partitions(with_bucket, meta=_bucket_meta())
    # without a Client Dask picks its "disk" shuffle, after importing distributed to look for one
    method = "disk" if frame.local_only() and dask.config.get("dataframe.shuffle.method", None) is None else None
    shuffled = ddf.shuffle(on=BUCKET, npartitions=split_out(len(prepared)), ignore_index=True, shuffle_method=method)
    reducers = [delayed(reduce_partition)(part, f, str(folder), i) for i, part in enumerate(shuffled.to_delayed())]
    return partials, reducers


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
    r = frame.shared(reduced)
    metas = frame.compute([delayed(extract_feature, pure=False)(f, i, r, str(out), partition_rows)
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
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass
    return metadata
