"""encode: every feature of every row -> fixed-dtype columns, written per split.

Each Dask partition is prepared (cast, drop, fill), encoded by its feature types with the fitted
metadata, expanded by the balance multiplicities (training rows only) and written as
``<split>/part-NNNNN.arrow`` (Arrow IPC, one per partition, in row order). Publish re-shards them, so the
artifact does not depend on the partitioning.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from dask import delayed

from core.task_tree import tree
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.custom.prepared import filled_partitions
from tasks.encode import feature_stats
from tasks.runtime import dask_run, frame
from tasks.runtime.frame import to_arrow, write_part
from tasks.runtime.node import FILLED, Node
from tasks.runtime.outputs import Encoded, Fitted, Ingested, MissingStates, Multiplicity, SplitAssignment
from tasks.runtime.statistics import Statistics


def encode_frame(features, metadata: dict, df) -> dict[str, np.ndarray]:
    """Each feature sees its column indexed by input row (``__row__``), so an error can name the row."""
    out: dict[str, np.ndarray] = {}
    rows = df[ROW].to_numpy() if ROW in df else None
    for f in features:
        values = df[f.name] if rows is None else df[f.name].set_axis(rows)
        out.update(f.encode(values, metadata[f.name]))
    return out


def _encode_partition(prepared, index, features, metadata, mult, out_dir):
    df = prepared.frame
    stats = Statistics()
    for name, n in prepared.filled.items():
        stats.counter(f"fill_missing.filled.{name}", n)
    for name, n in prepared.dropped.items():
        stats.counter(f"fill_missing.rows_dropped.{name}", n)
    stats.counter("encode.rows_in", len(df) + sum(prepared.dropped.values()))
    # Encoding is row-wise (the artifact may not depend on the partitioning), so the whole partition is
    # encoded once and each split takes its rows (training rows repeated by their balance multiplicity)
    # from the encoded arrays, which are smaller than the typed frame.
    encoded = encode_frame(features, metadata, df)
    split_of = df[frame.SPLIT].to_numpy()
    input_rows = df[ROW].to_numpy(dtype=np.int64)
    takes = [np.flatnonzero(split_of == split_id) for split_id in range(len(SPLIT_NAMES))]
    if mult is not None and len(takes[0]):
        takes[0] = np.repeat(takes[0], np.asarray(mult[input_rows[takes[0]]], dtype=np.int64))
    published = None if mult is None and sum(map(len, takes)) == len(df) else np.concatenate(takes)
    for stat in feature_stats.published_statistics(features, metadata, df, encoded, published):
        stats.add(stat)  # what the report plots (tasks/encode/feature_stats.py)
    rows_out = {}
    for split_name, take in zip(SPLIT_NAMES, takes, strict=True):
        columns = {name: arr[take] for name, arr in encoded.items()}
        for f in features:
            if hasattr(f, "oov_count") and f.name in columns:  # category: <UNK> and OOV buckets
                oov = f.oov_count(columns[f.name], metadata[f.name])
                if oov is not None:
                    stats.counter(f"encode.oov.{split_name}.{f.name}", oov)
            elif metadata[f.name].get("idx2str") is not None and f.name in columns and columns[f.name].ndim == 1:
                stats.counter(f"encode.oov.{split_name}.{f.name}", int((columns[f.name] == 0).sum()))
        for stat in feature_stats.split_statistics(features, metadata, columns, split_name):
            stats.add(stat)
        table = pa.table({name: to_arrow(arr) for name, arr in columns.items()})
        folder = out_dir / split_name
        folder.mkdir(parents=True, exist_ok=True)
        part = Encoded.part_file(folder, index)
        write_part(table, part)
        np.save(Encoded.rows_file(part), input_rows[take])  # input rows
        rows_out[split_name] = table.num_rows
        stats.counter(f"encode.rows_out.{split_name}", table.num_rows)
    return stats, rows_out


def _with_lookups(metadata: dict, partitions: int) -> dict:
    """The metadata with each file vocabulary's expected lookups (``vocab_store.VocabLookup``: one per partition,
    at most, in a process): an apply of a small file scans its few partitions' values in a large vocabulary rather
    than build that vocabulary's hash index."""
    return {name: {**meta, "lookups": partitions} if isinstance(meta, dict) and "vocab_path" in meta else meta
            for name, meta in metadata.items()}


def _merge_results(*results: tuple[Statistics, dict]) -> tuple[Statistics, dict]:
    """Partitions' ``(statistics, rows per split)`` as one (counters and histograms add)."""
    stats, rows = Statistics(), {}
    for partial, part_rows in results:
        stats = stats.merge(partial)
        rows = {s: rows.get(s, 0) + part_rows.get(s, 0) for s in {*rows, *part_rows}}
    return stats, rows


def config_slice(ctx) -> dict:
    return {"features": ctx.features_slice()}


def compute(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates, balance: Multiplicity,
            fitted: Fitted) -> Statistics:
    assign = split.assignment()
    states = missing.states()
    mult = balance.multiplicity()
    # category columns as ingest stored them, dictionaries: each distinct value counted and looked up once
    parts = frame.partitions(ingest.parts, ctx.npartitions,
                             frame.dictionary_columns(ctx.features, bool(ctx.config.stages)))
    prepared = filled_partitions(parts, ctx.features, assign, states)
    # the metadata with its inline vocabularies, read by one task (on a worker of a cluster): the flow
    # process never parses them (tasks.runtime.fitted_metadata); workers read Parquet vocabularies by path
    md = delayed(Fitted.read_full, pure=True)(str(fitted.path), resolve_files=True)
    md = delayed(_with_lookups, pure=True)(md, len(prepared))  # a few partitions scan large vocabularies
    f, m = dask_run.shared(ctx.features), dask_run.shared(mult)

    tasks = [delayed(_encode_partition)(p, i, f, md, m, out) for i, p in enumerate(prepared)]
    # the partitions' statistics and row counts merged on the workers: this process receives one of each
    stats, counts = dask_run.compute([tree(tasks, _merge_results)])[0] if tasks else (Statistics(), {})
    counts = {s: counts.get(s, 0) for s in SPLIT_NAMES}
    Encoded.write_info(out, counts, len(tasks))
    return stats


NODE = Node("encode", compute, inputs=("ingest", "split", FILLED, "balance", "vocab"), output=Encoded,
            reads=config_slice)
