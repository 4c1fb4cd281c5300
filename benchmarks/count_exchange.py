"""The category counts' exchange through files (``tasks.vocab.category.write_buckets``/``read_bucket``): CPU
seconds of the map side (hash, group by reducer, write) and of the reducers' reads, against the first
version's reads (7836aec: one Arrow file per partition as ``write_ipc`` writes it, read whole and sliced per
reducer). Both must give every reducer the same rows.

The counts: ``--partitions`` partitions of ``--rows`` rows, 26 Criteo-like columns (``criteo_like``'s Zipf
generator over its value-space sizes), each counted per partition as the vocab stage does (one row per
distinct value and column). Seeded. Files go to a temporary folder.

    .venv/bin/python benchmarks/count_exchange.py [--partitions 16] [--rows 262144] [--reducers 6,100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from criteo_like import CARDINALITIES, _hex8, _mix32, _zipf_ranks  # noqa: E402
from vocab_order import cpu  # noqa: E402

from tasks.runtime.frame import write_ipc  # noqa: E402
from tasks.vocab.category import bucket_of, read_bucket, write_buckets  # noqa: E402


def partition_counts(rng: np.random.Generator, rows: int) -> pa.Table:
    pieces = []
    for i, card in enumerate(CARDINALITIES):
        values = _hex8(_mix32(_zipf_ranks(rng, rows, card), i))
        vc = pc.value_counts(values)
        n = len(vc)
        pieces.append(pa.table({"feature": pa.array(np.full(n, i, np.int32)), "value": vc.field("values").cast(pa.string()),
                                "count": vc.field("counts").cast(pa.int64()), "first": pa.array(np.zeros(n, np.int64))}))
    return pa.concat_tables(pieces).combine_chunks()


def write_whole(counts: pa.Table, folder: Path, index: int, reducers: int) -> dict:
    """7836aec's map side: the same grouping, written as one ``write_ipc`` file."""
    bucket = bucket_of(counts.column("value").combine_chunks(), reducers)
    order = np.argsort(bucket, kind="stable")
    path = folder / f"whole-{index:05d}.arrow"
    write_ipc(counts.take(pa.array(order)), path)
    return {"path": str(path), "bounds": np.searchsorted(bucket[order], np.arange(reducers + 1)).tolist()}


def read_whole(written: list[dict], bucket: int) -> pa.Table:
    """7836aec's reduce side: every file read whole (memory-mapped) and sliced."""
    b = bucket
    return pa.concat_tables([feather.read_table(w["path"], memory_map=True).slice(w["bounds"][b], w["bounds"][b + 1] -
                                                                                  w["bounds"][b]) for w in written])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--rows", type=int, default=262_144)
    parser.add_argument("--reducers", default="6,100")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(19)
    parts = [partition_counts(rng, args.rows) for _ in range(args.partitions)]
    print(f"{args.partitions} partitions, {sum(p.num_rows for p in parts):,} count rows, "
          f"{sum(p.nbytes for p in parts) / 2**20:.0f} MiB")
    for reducers in (int(r) for r in args.reducers.split(",")):
        times: dict[str, list[float]] = {"map now": [], "map before": [], "reduce reads now": [], "reduce reads before": []}
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                t = cpu()
                now = [write_buckets(p, tmp, i, reducers) for i, p in enumerate(parts)]
                times["map now"].append(cpu() - t)
                t = cpu()
                before = [write_whole(p, folder, i, reducers) for i, p in enumerate(parts)]
                times["map before"].append(cpu() - t)
                t = cpu()
                got_now = [read_bucket(now, j) for j in range(reducers)]
                times["reduce reads now"].append(cpu() - t)
                t = cpu()
                got_before = [read_whole(before, j) for j in range(reducers)]
                times["reduce reads before"].append(cpu() - t)
                assert all(a.equals(b) for a, b in zip(got_now, got_before, strict=True))
        reads = args.partitions * reducers
        print(f"reducers {reducers} ({reads} file reads), CPU s median of {args.repeat}: " + ", ".join(
            f"{k} {statistics.median(v):.3f}" for k, v in times.items()) +
            f"; per read: now {statistics.median(times['reduce reads now']) / reads * 1e6:.0f} µs, before "
            f"{statistics.median(times['reduce reads before']) / reads * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
