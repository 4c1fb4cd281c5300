"""The vocabulary's global order (``Candidates.top``: count descending, equal counts by value ascending) over a
Criteo-like column: Arrow's two-key ``sort_indices`` (the first version), Arrow's one-key string sort then a stable
sort of the counts (2026-11-27 to 11-28), and ``features.base.by_count_then`` (the values of at most 8 bytes sorted
as integers, ``short_string_order``, then the counts). CPU seconds, alternated; all must give the same order.

The column: ``--rows`` draws from a Zipf law over ``--card`` values (``criteo_like``'s generator: 8-hex-digit
strings), counted; the distinct values are the vocabulary (most of them seen once or twice, so most rows tie on
their count). Seeded.

    .venv/bin/python benchmarks/vocab_order.py [--rows 16000000] [--card 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from criteo_like import _hex8, _mix32, _zipf_ranks  # noqa: E402

from tasks.features.base import by_count_then  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=16_000_000)
    parser.add_argument("--card", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    counts = np.bincount(_zipf_ranks(rng, args.rows, args.card), minlength=args.card)
    seen = np.flatnonzero(counts)
    order = rng.permutation(len(seen))  # the reducers' files hold values in no particular order
    table = pa.table({"value": _hex8(_mix32(seen[order].astype(np.uint32), 0x9E3779B9)),
                      "count": pa.array(counts[seen][order].astype(np.int64))})
    print(f"{table.num_rows} distinct values from {args.rows} rows; {int((table['count'].to_numpy() <= 2).sum())} "
          "seen once or twice")
    times: dict[str, list[float]] = {"Arrow two-key sort_indices": [], "Arrow string sort, then counts": [],
                                     "by_count_then": []}
    for _ in range(args.repeat):
        start = cpu()
        arrow = pc.sort_indices(table, sort_keys=[("count", "descending"), ("value", "ascending")]).to_numpy()
        times["Arrow two-key sort_indices"].append(cpu() - start)
        start = cpu()
        by_value = pc.sort_indices(table.column("value")).to_numpy()
        strings = by_value[np.argsort(-table.column("count").to_numpy()[by_value], kind="stable")]
        times["Arrow string sort, then counts"].append(cpu() - start)
        start = cpu()
        ours = by_count_then(table, "value")
        times["by_count_then"].append(cpu() - start)
        assert np.array_equal(arrow, ours) and np.array_equal(strings, ours), "the orders differ"
    for name, t in times.items():
        print(f"{name:38s} CPU s median {statistics.median(t):.3f} (min {min(t):.3f}, max {max(t):.3f})")


if __name__ == "__main__":
    main()
