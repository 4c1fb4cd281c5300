"""storage/lookup_hash.py: the vectorized hash is its definition (``reference``, word by word in plain Python)
for any Unicode strings, whatever the Arrow layout (offsets of a slice, large_string, chunks); values that
differ only by trailing NUL bytes or by length get different hashes; a null is refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import lookup_hash

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, max_size=50), st.data())
def test_hashes_are_the_reference_for_any_strings_and_layout(values, data):
    want = [lookup_hash.reference(v) for v in values]
    arr = pa.array(values, pa.string())
    assert lookup_hash.hashes(arr).tolist() == want
    assert lookup_hash.hashes(arr.cast(pa.large_string())).tolist() == want
    assert lookup_hash.hashes(values).tolist() == want  # a sequence of str
    lo = data.draw(st.integers(0, len(values)))
    hi = data.draw(st.integers(lo, len(values)))
    assert lookup_hash.hashes(arr.slice(lo, hi - lo)).tolist() == want[lo:hi]  # the array's offset
    assert lookup_hash.hashes(pa.chunked_array([arr.slice(0, lo), arr.slice(lo)], pa.string())).tolist() == want
    assert lookup_hash.hashes(arr).dtype == np.uint64


def test_the_reference_reads_little_endian_words_and_the_length():
    """Two hand-made cases of the definition: one word, then two (the second with 1 byte)."""
    m, mask = 0x9E3779B97F4A7C15, (1 << 64) - 1

    def fmix(h):
        h ^= h >> 33
        h = h * 0xFF51AFD7ED558CCD & mask
        h ^= h >> 33
        h = h * 0xC4CEB9FE1A85EC53 & mask
        return h ^ (h >> 33)

    seed = int.from_bytes(b"prepflow", "big")
    one = fmix(((8 * m & mask ^ seed) ^ 0x6867666564636261) * m & mask)  # "abcdefgh", little-endian
    assert lookup_hash.reference("abcdefgh") == fmix(one)
    two = fmix(((fmix(((9 * m & mask ^ seed) ^ 0x6867666564636261) * m & mask)) ^ 0x69) * m & mask)
    assert lookup_hash.reference("abcdefghi") == fmix(two)
    assert lookup_hash.reference("") == fmix(seed)


def test_values_that_differ_by_trailing_zeros_or_length_differ():
    values = ["", "\x00", "\x00" * 8, "\x00" * 9, "a", "a\x00", "a" * 8, "a" * 8 + "\x00", "a" * 16, "a" * 17]
    got = lookup_hash.hashes(pa.array(values)).tolist()
    assert len(set(got)) == len(values)


def test_distinct_ids_spread_over_reducers():
    """200,000 distinct 8-hex-digit ids (Criteo's shape): no two share a hash, and 64 reducers get 1/64 each
    within 5 %."""
    ids = [f"{i:08x}" for i in np.random.default_rng(0).choice(2**32, 200_000, replace=False)]
    h = lookup_hash.hashes(pa.array(ids))
    assert len(np.unique(h)) == len(ids)
    per = np.bincount((h % np.uint64(64)).astype(np.int64), minlength=64)
    assert np.abs(per / (len(ids) / 64) - 1).max() < 0.05


def test_a_null_has_no_hash():
    with pytest.raises(ValueError, match="null"):
        lookup_hash.hashes(pa.array(["a", None]))
