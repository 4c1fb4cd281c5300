"""Joining encode partitions against a large (Parquet) category vocabulary: CPU seconds per column.

Builds a vocabulary of ``--vocab`` distinct hex strings and ``--rows`` query rows drawn from twice as
many values (half of them unseen) with a Zipf law of exponent ``--zipf``, cut into ``--partitions``
partitions (the pipeline's default is one per 256k rows). Each pass does what
``CategoryFeature._encode_with_file`` does for one column: builds the lookup once, then per partition
``pc.dictionary_encode`` and ``VocabLookup.positions`` of the distinct values. Also timed:
``pc.index_in(rows, value_set=vocabulary)`` per partition (the vocabulary's hash table rebuilt each
time). ``--code DIR`` imports ``storage.vocab_store`` from another checkout (e.g. a ``git worktree``
of an older commit) to compare implementations; both must give the same positions.

Usage: ``.venv/bin/python benchmarks/vocab_lookup.py [--vocab 1000000] [--rows 2048000] [--partitions 8]
[--zipf 1.1] [--repeat 5] [--code DIR]``
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import statistics
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_vocab_store(code: str | None):
    if code is None:
        from storage import vocab_store

        return vocab_store
    sys.path.insert(0, str(Path(code).resolve()))  # its own storage package (and what it imports)
    spec = importlib.util.spec_from_file_location("other_vocab_store", Path(code) / "storage" / "vocab_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=2_048_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--code", default=None, help="import storage.vocab_store from this checkout")
    args = parser.parse_args()
    store = load_vocab_store(args.code)
    rng = np.random.default_rng(0)
    vocab = pa.array([format(int(x), "x") for x in rng.permutation(2 * args.vocab)[:args.vocab] + 10**8])
    pool = pa.array([format(int(x), "x") for x in rng.permutation(2 * args.vocab) + 10**8])
    rows = pool.take(pa.array(np.minimum(rng.zipf(args.zipf, args.rows), 2 * args.vocab) - 1))
    size = args.rows // args.partitions
    parts = [rows.slice(i * size, size if i < args.partitions - 1 else None) for i in range(args.partitions)]

    def join() -> np.ndarray:
        lookup = store.VocabLookup(vocab)
        out = []
        for part in parts:
            encoded = pc.dictionary_encode(part)
            out.append(lookup.positions(encoded.dictionary)[encoded.indices.to_numpy()])
        return np.concatenate(out)

    def index_in_rows() -> np.ndarray:
        return np.concatenate([pc.index_in(p, value_set=vocab).fill_null(-1).to_numpy() for p in parts])

    times: dict[str, list[float]] = {"VocabLookup": [], "index_in per partition": []}
    for r in range(args.repeat):
        for name, fn in (("VocabLookup", join), ("index_in per partition", index_in_rows)):
            start = cpu()
            out = fn()
            times[name].append(cpu() - start)
            if r == 0:
                if name == "VocabLookup":
                    reference = out
                elif not np.array_equal(out, reference):
                    raise SystemExit(f"{name} gives other positions than VocabLookup")
    print(f"{store.__file__}: vocabulary {args.vocab}, {args.rows} rows in {args.partitions} partitions "
          f"({len(pc.unique(rows))} distinct, zipf {args.zipf})")
    for name, ts in times.items():
        print(f"  {name}: CPU s median {statistics.median(ts):.3f} min {min(ts):.3f} max {max(ts):.3f}")


if __name__ == "__main__":
    main()
