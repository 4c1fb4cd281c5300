"""Publish's Parquet writer: every column dictionary-encoded (before) against ``publish_shards.dictionary_columns``
(plain ``__row__`` and plain ids whose cardinality does not fit one dictionary page). CPU seconds and bytes of one
row group of a Criteo-shaped encoded table, the two writers alternated.

The table is what encode hands publish for the training split: 13 float32 z-scores of Pareto-distributed
integers (few distinct values), 26 int32 ids drawn from a Zipf law over ``criteo_like.CARDINALITIES`` capped at
``--cap`` (a vocabulary fitted on N rows holds at most ~N/10 ids of a Criteo column; 2.2M at 20M rows),
the label, and ``__row__`` (increasing input rows, ~80 % kept). Seeded.

    .venv/bin/python benchmarks/parquet_dictionary.py [--rows 1048576] [--cap 2200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import resource
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from criteo_like import CARDINALITIES, CATEGORICAL, NUMERIC, _zipf_ranks  # noqa: E402

from tasks.publish import shards as publish_shards  # noqa: E402


def table(rows: int, cap: int, seed: int = 0) -> tuple[pa.Table, dict[str, dict]]:
    rng = np.random.default_rng(seed)
    cols: dict[str, pa.Array] = {}
    specs: dict[str, dict] = {}
    for name in NUMERIC:
        values = np.floor(rng.pareto(1.5, rows) * rng.uniform(1, 500))
        cols[name] = pa.array(((values - values.mean()) / values.std()).astype(np.float32))
        specs[name] = {"dtype": "torch.float32", "shape": []}
    for name, card in zip(CATEGORICAL, CARDINALITIES, strict=True):
        card = min(card, cap)
        cols[name] = pa.array((_zipf_ranks(rng, rows, card) + 1).astype(np.int32))  # id 0: <UNK>
        specs[name] = {"dtype": "torch.int32", "shape": [], "cardinality": card + 1}
    cols["label"] = pa.array(rng.random(rows) < 0.034)
    specs["label"] = {"dtype": "torch.bool", "shape": []}
    cols["__row__"] = pa.array(np.flatnonzero(rng.random(int(rows / 0.75) + 16) < 0.8)[:rows].astype(np.int64))
    specs["__row__"] = {"dtype": "torch.int64", "shape": []}
    return pa.table(cols), specs


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write(t: pa.Table, use_dictionary) -> tuple[float, int]:
    buf = io.BytesIO()
    start = cpu()
    writer = pq.ParquetWriter(buf, t.schema, compression="zstd", use_dictionary=use_dictionary)
    writer.write_table(t, row_group_size=t.num_rows)
    writer.close()
    return cpu() - start, len(buf.getvalue())


def table_arguments(parser: argparse.ArgumentParser, repeat: int) -> None:
    """``--rows`` and ``--cap`` of ``table``, and ``--repeat`` (also parquet_writer_options.py's)."""
    parser.add_argument("--rows", type=int, default=1 << 20)
    parser.add_argument("--cap", type=int, default=2_200_000)
    parser.add_argument("--repeat", type=int, default=repeat)


def main() -> None:
    parser = argparse.ArgumentParser()
    table_arguments(parser, repeat=5)
    args = parser.parse_args()
    t, specs = table(args.rows, args.cap)
    dictionary = publish_shards.dictionary_columns(specs)
    print(f"{t.num_rows} rows; plain: {[c for c in t.column_names if c not in dictionary]}")
    variants = {"every column dictionary (before)": True, "dictionary_columns": dictionary}
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, use in variants.items():
            results[name].append(write(t, use))
    for name, r in results.items():
        times = [x for x, _ in r]
        print(f"{name:34s} CPU s median {statistics.median(times):.3f} (min {min(times):.3f}, max {max(times):.3f})"
              f"  {r[0][1] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
