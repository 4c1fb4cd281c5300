"""The two ways ``VocabLookup.positions`` finds a partition's distinct category values in a vocabulary, per column
of a Criteo-shaped Parquet file (``criteo_like.py`` writes one): the scan (``VocabLookup._scan``: pyarrow's
``index_in`` of every vocabulary value into a hash table of the query's) and the hash index (``_HashIndex``:
the query's hashes binary-searched in the vocabulary's sorted ones), built once per process.

For each category column with at least ``--min-vocab`` distinct values, the vocabulary is the column's distinct
values (sorted: any order gives the same costs) and a query is one row group's distinct values, as a
partition's dictionary is in encode. Prints, per column and round, the vocabulary's size over the query's
(``V / Q``), the CPU milliseconds per partition of each path, the index's build, and which path
``SCAN_RATIO`` picks. Both paths must give the same positions.

    .venv/bin/python benchmarks/lookup_paths.py /tmp/crit20m/criteo_like_20000000_rg262144.parquet \
        [--partitions 40] [--repeat 2] [--min-vocab 20000]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage.vocab_store import SCAN_RATIO, VocabLookup, _HashIndex  # noqa: E402


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--partitions", type=int, default=8, help="row groups to look up (one query each)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--min-vocab", type=int, default=20_000)
    args = parser.parse_args()
    source = pq.ParquetFile(args.data)
    columns = [name for name in source.schema_arrow.names if name.startswith("C")]
    for round_ in range(args.repeat):
        for name in columns:
            counts = pc.value_counts(source.read([name]).column(0).combine_chunks()).field("values")
            vocab = counts.filter(counts.is_valid())
            if len(vocab) < args.min_vocab:
                continue
            vocab = pc.take(vocab, pc.sort_indices(vocab))
            groups = range(min(args.partitions, source.num_row_groups))
            queries = [pc.dictionary_encode(source.read_row_group(i, [name]).column(0).combine_chunks()).dictionary
                       for i in groups]
            lookup = VocabLookup(vocab)
            start = cpu()
            scanned = [lookup._scan(q) for q in queries]
            scan = cpu() - start
            start = cpu()
            index = _HashIndex.build(lookup.values)
            build = cpu() - start
            start = cpu()
            found = [index.positions(lookup.values, q) for q in queries]
            search = cpu() - start
            if not all(np.array_equal(a, b) for a, b in zip(scanned, found, strict=True)):
                raise SystemExit(f"{name}: the scan and the index disagree")
            q = float(np.mean([len(x) for x in queries]))
            print(json.dumps({"round": round_, "column": name, "vocab": len(vocab), "query": round(q),
                              "v_over_q": round(len(vocab) / q, 1), "partitions": len(queries),
                              "scan_ms": round(1000 * scan / len(queries), 1),
                              "index_ms": round(1000 * search / len(queries), 1), "build_ms": round(1000 * build),
                              "picked": "scan" if q * SCAN_RATIO >= len(vocab) else "index"}), flush=True)


if __name__ == "__main__":
    main()
