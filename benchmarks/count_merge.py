"""The category counts' merge (``tasks.vocab.category.merge_counts``): CPU seconds of one merge of several
partitions' counts, each feature's rows dictionary-encoded and summed by ``bincount`` (this code) against Arrow's
hash ``group_by`` on the value feature by feature (the code before 2026-11-29, reproduced here as
``group_by_merge``) and on the two keys ``(feature, value)`` (before 2026-11-28, ``two_key_merge``). All must
give the same rows.

The counts: ``--partitions`` partitions of ``--rows`` rows, 26 Criteo-like columns (``count_exchange``'s
generator: ``criteo_like``'s Zipf law over its value-space sizes, one row per distinct value and column).
Seeded. The merges alternate, ``--repeat`` rounds.

    .venv/bin/python benchmarks/count_merge.py [--partitions 8] [--rows 262144] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from count_exchange import partition_counts  # noqa: E402
from vocab_order import cpu  # noqa: E402

from tasks.vocab.category import COUNT, FEATURE, FIRST, VALUE, _feature_runs, merge_counts  # noqa: E402


def two_key_merge(parts: list[pa.Table]) -> pa.Table:
    """The previous merge: one hash group_by on (feature, value)."""
    merged = pa.concat_tables(parts).group_by([FEATURE, VALUE], use_threads=False).aggregate(
        [(COUNT, "sum"), (FIRST, "min")])
    return pa.table({FEATURE: merged[FEATURE], VALUE: merged[VALUE], COUNT: merged[f"{COUNT}_sum"],
                     FIRST: merged[f"{FIRST}_min"]}).combine_chunks()


def group_by_merge(parts: list[pa.Table]) -> pa.Table:
    """The previous merge: Arrow's hash group_by on the value, feature by feature."""
    pieces = []
    for feature, batches in sorted(_feature_runs(parts).items()):
        merged = pa.Table.from_batches(batches).group_by(VALUE, use_threads=False).aggregate(
            [(COUNT, "sum"), (FIRST, "min")])
        pieces.append(pa.table({FEATURE: pa.array(np.full(merged.num_rows, feature, np.int32)),
                                VALUE: merged[VALUE], COUNT: merged[f"{COUNT}_sum"], FIRST: merged[f"{FIRST}_min"]}))
    return pa.concat_tables(pieces).combine_chunks()


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(FEATURE, "ascending"), (VALUE, "ascending")])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1 << 18)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    parts = [partition_counts(rng, args.rows) for _ in range(args.partitions)]
    print(f"{args.partitions} partitions of {args.rows} rows: {sum(p.num_rows for p in parts)} count rows")
    want = _sorted(merge_counts(parts))
    assert want.equals(_sorted(two_key_merge(parts))) and want.equals(_sorted(group_by_merge(parts)))
    merges = (("two keys", two_key_merge), ("group_by per feature", group_by_merge), ("bincount per feature", merge_counts))
    times: dict[str, list[float]] = {name: [] for name, _merge in merges}
    for _ in range(args.repeat):
        for name, merge in merges:
            start = cpu()
            merge(parts)
            times[name].append(cpu() - start)
    for name, t in times.items():
        print(f"{name:20s} CPU s median {statistics.median(t):.3f} (min {min(t):.3f}, max {max(t):.3f})")


if __name__ == "__main__":
    main()
