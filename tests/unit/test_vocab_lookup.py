"""The lookup of a partition's values in a large (Parquet) vocabulary (storage/vocab_store.py): the scan
(``index_in`` of the vocabulary into the query's values) and the hash index (sorted string hashes,
``searchsorted``, the strings compared) find the same rows, also when vocabulary values share a hash."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import string_hash, vocab_store

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
        index = vocab_store._HashIndex(lookup.values)
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
        index = vocab_store._HashIndex(pa.array(vocab, pa.string()))
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
