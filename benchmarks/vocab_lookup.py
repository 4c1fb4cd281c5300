"""Joining encode partitions against a large (Parquet) category vocabulary: CPU seconds per column.

Builds a vocabulary of ``--vocab`` distinct hex strings and ``--rows`` query rows drawn from twice as
many values (half of them unseen) with a Zipf law of exponent ``--zipf``, cut into ``--partitions``
partitions (the pipeline's default is one per 256k rows). Each pass does what
``CategoryFeature._encode_with_file`` does for one column: builds the lookup once, then per partition
``pc.dictionary_encode`` and ``VocabLookup.positions`` of the distinct values. Also timed:
``pc.index_in(rows, value_set=vocabulary)`` per partition (the vocabulary's hash table rebuilt each
time). ``--stored-index``: also the lookup with the hash index the vocab stage stores beside a large
vocabulary (``vocab_store.write_index``, written once and timed apart) memory-mapped instead of built, as
each worker process does. ``--code DIR`` imports ``storage.vocab_store`` from another checkout (e.g. a ``git worktree``
of an older commit) to compare implementations; both must give the same positions.

Usage: ``.venv/bin/python benchmarks/vocab_lookup.py [--vocab 1000000] [--rows 2048000] [--partitions 8]
[--zipf 1.1] [--repeat 5] [--stored-index] [--code DIR]``
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
    parser.add_argument("--stored-index", action="store_true", help="also time a lookup that maps a stored index")
    args = parser.parse_args()
    store = load_vocab_store(args.code)
    rng = np.random.default_rng(0)
    vocab = pa.array([format(int(x), "x") for x in rng.permutation(2 * args.vocab)[:args.vocab] + 10**8])
    pool = pa.array([format(int(x), "x") for x in rng.permutation(2 * args.vocab) + 10**8])
    rows = pool.take(pa.array(np.minimum(rng.zipf(args.zipf, args.rows), 2 * args.vocab) - 1))
    size = args.rows // args.partitions
    parts = [rows.slice(i * size, size if i < args.partitions - 1 else None) for i in range(args.partitions)]

    index_file = None
    if args.stored_index:
        import tempfile

        folder = tempfile.TemporaryDirectory()
        start = cpu()
        index_file = store.write_index(Path(folder.name) / "vocab.parquet", vocab, 0)
        print(f"write_index (once per column, in the vocab stage): {cpu() - start:.3f} CPU s, "
              f"{index_file.stat().st_size / 2**20:.0f} MiB")

    def join(index=None) -> np.ndarray:
        lookup = store.VocabLookup(vocab) if index is None else store.VocabLookup(vocab, 0, index)
        out = []
        for part in parts:
            encoded = pc.dictionary_encode(part)
            out.append(lookup.positions(encoded.dictionary)[encoded.indices.to_numpy()])
        return np.concatenate(out)

    def index_in_rows() -> np.ndarray:
        return np.concatenate([pc.index_in(p, value_set=vocab).fill_null(-1).to_numpy() for p in parts])

    variants = [("VocabLookup", join), ("index_in per partition", index_in_rows)]
    if index_file is not None:
        variants.insert(1, ("VocabLookup, stored index mapped", lambda: join(index_file)))
    times: dict[str, list[float]] = {name: [] for name, _fn in variants}
    for r in range(args.repeat):
        for name, fn in variants:
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
