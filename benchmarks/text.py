"""Text benchmark (issue 3): vectorized tokenize + encode vs a plain Python loop.

Generates ``--rows`` short texts (default 1,000,000; 8-16 words, ~12 on average) from a seeded
synthetic vocabulary of ``--vocab`` words drawn with a Zipf(1.3) distribution; the first word is
capitalized and every text ends with a period, so lower-casing and punctuation splitting matter.

Timed, on the same pandas string Series the encode stage hands a feature (``--chunk`` rows at a
time, as Dask partitions would be; fit = the feature's combiner: ``create`` + ``add`` per chunk, ``merge``, ``extract``):

* ``text`` (output_mode int, Ludwig defaults: space_punct tokenizer, lowercase): fit; encode word
  ids only; encode word + char ids (both published columns);
* the same with ``tokenizer: space``;
* ``text`` with ``output_mode: tfidf``, ``ngrams: 2``, ``max_tokens: 2000``: fit; encode;
* a plain Python loop per row: ``[vocab.get(w, 1) for w in s.split()]`` (no padding, no lower-casing).

    python benchmarks/text.py [--rows 1000000] [--chunk 100000] [--vocab 50000]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from core import combiner
from tasks.features.text import TextFeature, TextPreprocessing


def generate(rows: int, vocab_size: int, seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 10, vocab_size)
    chars = letters[rng.integers(0, 26, int(lengths.sum()))]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    words = pa.StringArray.from_buffers(vocab_size, pa.py_buffer(offsets), pa.py_buffer("".join(chars).encode()))
    words = pc.unique(words)  # distinct words
    per_row = rng.integers(8, 17, rows)
    ranks = np.minimum(rng.zipf(1.3, int(per_row.sum())), len(words)) - 1
    flat = words.take(pa.array(ranks))
    lists = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)), flat)
    text = pc.binary_join(lists, " ")
    text = pc.binary_join_element_wise(pc.utf8_capitalize(text), ".", "")
    return pd.Series(text.to_pandas(), dtype="string")


def chunks(series: pd.Series, size: int) -> list[pd.Series]:
    return [series.iloc[i: i + size].reset_index(drop=True) for i in range(0, len(series), size)]


def timed(label: str, rows: int, fn, results: list) -> object:
    """Run ``fn`` once; print wall seconds, rows/s and the process's CPU seconds (user + sys)."""
    cpu, start = time.process_time(), time.perf_counter()
    out = fn()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    results.append((label, seconds, rows / seconds))
    print(f"{label:62s} {seconds:7.2f} s {rows / seconds:11,.0f} rows/s  (cpu {cpu:6.2f} s)", flush=True)
    return out


def fit(feature, parts: list[pd.Series]) -> dict:
    return combiner.fit_batches(feature.fit_combiner({}), parts)


def encode_all(feature, meta: dict, parts: list[pd.Series]) -> None:
    for p in parts:  # results are dropped, as the encode stage writes each partition out
        feature.encode(p, meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--vocab", type=int, default=50_000)
    args = parser.parse_args()

    start = time.perf_counter()
    series = generate(args.rows, args.vocab)
    parts = chunks(series, args.chunk)
    words_per_row = pc.mean(pc.list_value_length(pc.utf8_split_whitespace(pa.array(series.iloc[:10000])))).as_py()
    print(f"generated {args.rows:,} texts ({words_per_row:.1f} words/row on average) in "
          f"{time.perf_counter() - start:.1f} s; chunks of {args.chunk:,} rows; e.g. {series.iloc[0]!r}")
    n = args.rows
    results: list = []

    for tokenizer in ("space_punct", "space"):
        feature = TextFeature("t", "t", TextPreprocessing(tokenizer=tokenizer))
        meta = timed(f"text ({tokenizer}): fit", n, lambda f=feature: fit(f, parts), results)
        space_meta = meta

        def words_only(f=feature, m=meta):
            for p in parts:
                tokens = f.tokens(p)
                f.pad_ids(f.token_ids(tokens, m), tokens.offsets, m["max_sequence_length"])

        timed(f"text ({tokenizer}): encode word ids (n x {meta['max_sequence_length']})", n, words_only, results)
        timed(f"text ({tokenizer}): encode word + char ids (n x {meta['max_sequence_length']}, "
              f"n x {meta['char_max_sequence_length']})", n,
              lambda f=feature, m=meta: encode_all(f, m, parts), results)

    tfidf = TextFeature("t", "t", TextPreprocessing(output_mode="tfidf", ngrams=2, max_tokens=2000))
    meta = timed("tfidf ngrams=2 max_tokens=2000: fit", n, lambda: fit(tfidf, parts), results)
    gigabytes = n * meta["vocab_size"] * 4 / 1e9
    timed(f"tfidf ngrams=2: encode (n x {meta['vocab_size']} float32, {gigabytes:.1f} GB)", n,
          lambda: encode_all(tfidf, meta, parts), results)

    vocab = {t: i for i, t in enumerate(space_meta["idx2str"])}  # the same vocabulary as text (space)
    texts = series.tolist()

    def python_loop():
        get = vocab.get
        return [[get(w, 1) for w in s.split()] for s in texts]

    timed("plain Python loop: str.split + dict lookup", n, python_loop, results)
    rate = {label.split(" (n x")[0]: r for label, _s, r in results}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"(load average at the end: {load} on {os.cpu_count()} cores)")
    print(f"word ids, vectorized (space) / plain Python loop: "
          f"{rate['text (space): encode word ids'] / rate['plain Python loop: str.split + dict lookup']:.1f}x")


if __name__ == "__main__":
    main()
