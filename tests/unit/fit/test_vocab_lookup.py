"""The lookup of a partition's values in a large (Parquet) vocabulary (storage/vocab_store.py): the scan
(``index_in`` of the vocabulary into the query's values) and the hash index (sorted string hashes,
``searchsorted``, the strings compared) find the same rows, also when vocabulary values share a hash; the
index the vocab stage stores beside a large vocabulary is mapped instead of built, refused when damaged,
and changes no published byte."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import IntegrityError
from prepflow import Artifact
from storage import string_hash, vocab_store
from tasks.features import category
from tests.helpers import artifact_files, run, without_created_at, write_csv

WORDS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=5)


def expected(vocab: list[str], first: int, query: list[str]) -> list[int]:
    row = {w: i - first for i, w in enumerate(vocab) if i >= first}
    return [row.get(q, -1) for q in query]


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, unique=True, max_size=60), st.lists(WORDS, unique=True, max_size=30), st.integers(0, 3))
def test_scan_and_hash_index_find_the_same_rows(vocab, query, first):
    lookup = vocab_store.VocabLookup(pa.array(vocab, pa.string()), first=first)
    q = pa.array(query, pa.string())
    want = expected(vocab, first, query)
    if len(lookup) and len(query):
        assert lookup._scan(q).tolist() == want
        index = vocab_store._HashIndex.build(lookup.values)
        assert index.positions(lookup.values, q).tolist() == want
    assert lookup.positions(q).tolist() == want


def _weak_hash(values) -> np.ndarray:
    """Three hash values for every string: most vocabulary values share one."""
    return np.array([len(s.encode()) % 3 for s in pa.array(values).to_pylist()], dtype=np.uint64)


@settings(max_examples=100, deadline=None)
@given(st.lists(WORDS, unique=True, min_size=1, max_size=40), st.lists(WORDS, unique=True, min_size=1, max_size=20))
def test_values_that_share_a_hash_are_told_apart_by_their_strings(vocab, query):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(string_hash, "hash_strings", _weak_hash)
        index = vocab_store._HashIndex.build(pa.array(vocab, pa.string()))
        got = index.positions(pa.array(vocab, pa.string()), pa.array(query, pa.string()))
    assert got.tolist() == expected(vocab, 0, query)


def test_a_query_much_smaller_than_the_vocabulary_takes_the_hash_index():
    rng = np.random.default_rng(3)
    words = [f"w{int(i)}" for i in rng.permutation(5000)]
    lookup = vocab_store.VocabLookup(pa.array(words))
    small = pa.array([f"w{int(i)}" for i in rng.choice(6000, 100, replace=False)])
    assert len(small) * vocab_store.SCAN_RATIO < len(lookup)
    assert lookup.positions(small).tolist() == expected(words, 0, small.to_pylist())
    assert lookup._index is not None  # built once, kept for the next partitions
    large = pa.array([f"w{int(i)}" for i in rng.choice(6000, 1000, replace=False)])
    assert lookup.positions(large).tolist() == expected(words, 0, large.to_pylist())


def test_a_process_expecting_few_lookups_scans_and_builds_no_index(tmp_path):
    """An apply of one small file looks each large vocabulary up once per partition: ``queries`` at most
    ``SCAN_QUERIES`` scans (the same rows) instead of building the index; a stored index is still mapped."""
    rng = np.random.default_rng(4)
    words = [f"w{int(i)}" for i in rng.permutation(5000)]
    small = pa.array([f"w{int(i)}" for i in rng.choice(6000, 100, replace=False)])
    want = expected(words, 0, small.to_pylist())
    few = vocab_store.VocabLookup(pa.array(words), queries=vocab_store.SCAN_QUERIES)
    assert [few.positions(small).tolist() for _ in range(3)] == [want] * 3
    assert few._index is None
    many = vocab_store.VocabLookup(pa.array(words), queries=vocab_store.SCAN_QUERIES + 1)
    assert many.positions(small).tolist() == want and many._index is not None
    stored = vocab_store.write_index(tmp_path / "v.parquet", pa.array(words), 0)
    mapped = vocab_store.VocabLookup(pa.array(words), index_file=stored, queries=1)
    assert mapped.positions(small).tolist() == want and mapped._index is not None


def test_encode_tells_the_lookups_how_many_partitions_look_up():
    from tasks.encode.stage import _with_lookups

    metadata = {"c": {"vocab_path": "/v.parquet", "vocab_size": 9}, "x": {"mean": 0.0}, "__row__": None}
    assert _with_lookups(metadata, 4) == {"c": {"vocab_path": "/v.parquet", "vocab_size": 9, "lookups": 4},
                                          "x": {"mean": 0.0}, "__row__": None}


@settings(max_examples=100, deadline=None)
@given(st.lists(WORDS, unique=True, max_size=60), st.lists(WORDS, unique=True, min_size=1, max_size=30),
       st.integers(0, 3))
def test_a_stored_index_finds_the_rows_the_built_one_finds(tmp_path_factory, vocab, query, first):
    values = pa.array(vocab, pa.string())
    path = tmp_path_factory.mktemp("index") / "v.parquet"
    stored = vocab_store.write_index(path, values, first)
    assert stored == vocab_store.index_path(path, first)
    index = vocab_store._HashIndex.load(stored, max(len(vocab) - first, 0))
    if len(vocab) > first:  # (VocabLookup answers a query of an empty vocabulary itself)
        got = index.positions(values.slice(first), pa.array(query, pa.string()))
        assert got.tolist() == expected(vocab, first, query)


def _words(n: int, seed: int) -> list[str]:
    return [f"w{int(i)}" for i in np.random.default_rng(seed).permutation(n)]


def test_lookup_maps_the_stored_index_instead_of_building_it(tmp_path, monkeypatch):
    words = ["<UNK>", *_words(5000, 4)]
    path = tmp_path / "vocab.parquet"
    ref = vocab_store.write(path, pa.array(words), np.ones(len(words), np.int64))
    vocab_store.write_index(path, pa.array(words), 1)
    monkeypatch.setattr(vocab_store, "_CACHE", {})

    def no_build(values):
        raise AssertionError("the stored index should have been mapped")

    monkeypatch.setattr(vocab_store._HashIndex, "build", staticmethod(no_build))
    lookup = vocab_store.lookup(str(path), ref["sha256"], 1)
    query = pa.array(["w17", "<UNK>", "nope", words[-1], words[1]])
    assert lookup.positions(query).tolist() == expected(words, 1, query.to_pylist())
    assert isinstance(lookup._index.hashes, np.memmap)
    with pytest.raises(AssertionError, match="mapped"):  # another ``first``: no stored index, built
        vocab_store.lookup(str(path), ref["sha256"], 0).positions(query)


def test_a_damaged_index_is_refused_naming_its_file(tmp_path):
    values = pa.array(_words(300, 5))
    stored = vocab_store.write_index(tmp_path / "v.parquet", values, 0)
    with pytest.raises(IntegrityError, match=re.escape(stored.name) + r".*expected \(2, 301\)"):
        vocab_store._HashIndex.load(stored, 301)
    arr = np.load(stored)
    np.save(stored, arr[:, ::-1].copy())  # hashes out of order
    with pytest.raises(IntegrityError, match=re.escape(stored.name) + ": .*damaged"):
        vocab_store._HashIndex.load(stored, 300)
    arr[1, 7] = 300  # a row past the vocabulary
    np.save(stored, arr)
    with pytest.raises(IntegrityError, match="damaged"):
        vocab_store._HashIndex.load(stored, 300)
    stored.write_bytes(b"not an npy file")
    with pytest.raises(IntegrityError, match="unreadable"):
        vocab_store._HashIndex.load(stored, 300)


def test_the_vocab_stage_stores_the_index_of_a_vocabulary_every_partition_is_small_against(tmp_path, monkeypatch):
    """1,000 distinct values in 2,000 rows: in 40 partitions (50 rows each, SCAN_RATIO x 50 < 1,000) the vocab stage
    stores the index and encode maps it; in one partition it stores none. Same published bytes."""
    monkeypatch.setattr(category, "INLINE_MAX", 5)  # a Parquet vocabulary
    rng = np.random.default_rng(6)
    df = pd.DataFrame({"tag": [f"t{int(i)}" for i in rng.permutation(np.arange(2000) % 1000)],
                       "y": rng.choice([0, 1], 2000)})
    data = write_csv(df, tmp_path / "data.csv")
    config = {"input_features": [{"name": "tag", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [0.8, 0.1, 0.1]}}}
    built = []
    original = vocab_store._HashIndex.build.__func__
    monkeypatch.setattr(vocab_store._HashIndex, "build",
                        classmethod(lambda cls, values: built.append(len(values)) or original(cls, values)))
    files = {}
    for n in (40, 1):
        monkeypatch.setattr(vocab_store, "_CACHE", {})
        result = run(config, data, tmp_path / f"n{n}", npartitions=n)
        entry = Path(next(s for s in result.stages if s.stage == "vocab").path)
        indexes = sorted(p.name for p in (entry / "vocab").glob("*.npy"))
        assert indexes == ([vocab_store.index_path(Path("tag.parquet"), 1).name] if n == 40 else []), n
        art = Artifact.open(result.artifact["artifact_path"], verify=True)
        assert not any(name.endswith(".npy") and "hash-index" in name for name in art.manifest["files"])
        files[n] = without_created_at(artifact_files(art.path))
        kept = art.metadata["tag"]["vocab_size"] - 1  # the values of the training rows, less <UNK>
    # once, by the vocab stage (n=40), over the kept values; in 1 partition every query is scanned
    assert built == [kept] and kept > vocab_store.SCAN_RATIO * 50
    assert files[40] == files[1]


@settings(max_examples=15, deadline=None)
@given(exponent=st.floats(1.05, 2.0), values=st.integers(50, 3000), rows=st.integers(20, 400),
       seed=st.integers(0, 2**16))
def test_expected_distinct_is_the_mean_distinct_count_of_random_partitions(exponent, values, rows, seed):
    """``expected_distinct`` against seeded random partitions of a Zipf-like table: within 5 % (and 1 value)
    of the mean distinct count over 200 partitions of ``rows`` rows."""
    rng = np.random.default_rng(seed)
    counts = np.maximum(1, (20_000 / np.arange(1, values + 1) ** exponent).astype(np.int64))
    table = np.repeat(np.arange(values), counts)
    seen = [len(np.unique(rng.choice(table, size=rows, replace=False))) for _ in range(200)]
    assert abs(vocab_store.expected_distinct(counts, rows) - np.mean(seen)) <= max(1.0, 0.05 * np.mean(seen))


def test_the_index_pays_by_expected_distinct_values_not_by_partition_rows():
    """A Zipf vocabulary of 40,000 values over ~1.1M rows, partitions of 25,000 rows: ``SCAN_RATIO`` x 25,000 rows
    exceed the vocabulary, yet a partition holds ~7,200 distinct values, which the index looks up; with
    1,000,000-row partitions (~38,200 distinct values), or a uniform vocabulary (each value 10 times; ~28,500
    distinct values in 50,000 rows), a partition's values are scanned."""
    values, ratio = 40_000, vocab_store.SCAN_RATIO
    zipf = np.maximum(1, (100_000 / np.arange(1, values + 1)).astype(np.int64))
    uniform = np.full(values, 10)
    assert ratio * 25_000 > values  # the bound by partition rows would not store it
    assert ratio * vocab_store.expected_distinct(zipf, 25_000) < values
    assert vocab_store.index_pays(zipf, 0, 25_000)
    assert vocab_store.index_pays(np.concatenate([[10**6], zipf]), 1, 25_000)  # <UNK>'s row is not looked up
    assert ratio * vocab_store.expected_distinct(zipf, 1_000_000) >= values
    assert not vocab_store.index_pays(zipf, 0, 1_000_000)
    assert ratio * vocab_store.expected_distinct(uniform, 50_000) >= values
    assert not vocab_store.index_pays(uniform, 0, 50_000)
    assert vocab_store.index_pays(uniform, 0, 5_000)  # ~4,700 distinct values in 5,000 rows
    assert not vocab_store.index_pays(np.array([5]), 1, 5_000)  # nothing to look up


def test_an_index_another_hash_built_is_never_read(tmp_path, monkeypatch):
    """A cache entry of an earlier version holds its index under that version's name (``hash-index-<first>.npy``,
    or ``hash-index-<first>.words64-fmix64-v1.npy`` with another hash's values). ``lookup`` reads neither (the
    vocab stage's code version may not cover the hash, two imports away): it builds its own index and finds
    every value."""
    words = ["<UNK>", *_words(5000, 8)]
    path = tmp_path / "vocab.parquet"
    ref = vocab_store.write(path, pa.array(words), np.ones(len(words), np.int64))
    with pytest.MonkeyPatch.context() as mp:  # indexes as earlier versions built them, with another hash
        mp.setattr(string_hash, "hash_strings", _weak_hash)
        for name in ("vocab.parquet.hash-index-1.npy", "vocab.parquet.hash-index-1.words64-fmix64-v1.npy"):
            vocab_store._HashIndex.build(pa.array(words[1:])).save(tmp_path / name)
    assert not vocab_store.index_path(path, 1).exists()
    monkeypatch.setattr(vocab_store, "_CACHE", {})
    lookup = vocab_store.lookup(str(path), ref["sha256"], 1)
    query = pa.array(["w17", "<UNK>", "nope", words[-1], words[1]])
    assert lookup.positions(query).tolist() == expected(words, 1, query.to_pylist())
    assert not isinstance(lookup._index.hashes, np.memmap)  # built, not mapped
