"""Pipeline statistics: merging is associative and commutative (hypothesis), JSON round-trips,
and the helpers feature types call (sequence lengths, decode failures) merge across partitions."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.runtime.statistics import (
    LENGTH_BUCKETS,
    Counter,
    Histogram,
    Statistics,
    decode_failures,
    sequence_lengths,
    summary_rows,
)

STARTS = {"encode.length.text": [1.0, 4.0, 16.0], "balance.hist": [-1.0, 0.0, 2.5]}
COUNTERS = ["ingest.rows_out", "fill_missing.filled.age", "encode.oov.train.sex"]


@st.composite
def statistics(draw) -> Statistics:
    items = []
    for name in draw(st.lists(st.sampled_from(COUNTERS), unique=True)):
        items.append(Counter(name, draw(st.integers(0, 10**12))))
    for name in draw(st.lists(st.sampled_from(sorted(STARTS)), unique=True)):
        counts = draw(st.lists(st.integers(0, 10**9), min_size=len(STARTS[name]) + 1,
                               max_size=len(STARTS[name]) + 1))
        items.append(Histogram(name, STARTS[name], counts))
    return Statistics(items)


def j(stats: Statistics) -> str:
    return json.dumps(stats.to_json(), sort_keys=True)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(statistics(), statistics(), statistics())
def test_merge_is_associative(a, b, c):
    assert j(a.merge(b).merge(c)) == j(a.merge(b.merge(c)))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(statistics(), statistics())
def test_merge_is_commutative(a, b):
    assert j(a.merge(b)) == j(b.merge(a))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(statistics(), statistics())
def test_merge_leaves_its_inputs_alone_and_round_trips_through_json(a, b):
    before_a, before_b = j(a), j(b)
    merged = a.merge(b)
    assert (j(a), j(b)) == (before_a, before_b)
    assert j(Statistics.from_json(json.loads(j(merged)))) == j(merged)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 10_000), max_size=200), st.integers(1, 199))
def test_sequence_lengths_do_not_depend_on_partitioning(lengths, cut):
    whole = sequence_lengths("encode", "review", np.array(lengths, dtype=np.int64), max_length=64)
    parts = sequence_lengths("encode", "review", np.array(lengths[:cut], dtype=np.int64), max_length=64).merge(
        sequence_lengths("encode", "review", np.array(lengths[cut:], dtype=np.int64), max_length=64))
    assert j(whole) == j(parts)
    assert parts.to_json()["encode.truncated.review"]["count"] == sum(1 for n in lengths if n > 64)
    assert sum(parts.to_json()["encode.length.review"]["counts"]) == len(lengths)


def test_histograms_with_different_buckets_do_not_merge():
    a = Statistics([Histogram("x.h", [1, 2])])
    b = Statistics([Histogram("x.h", [1, 3])])
    try:
        a.merge(b)
    except TypeError as exc:
        assert "x.h" in str(exc)
    else:
        raise AssertionError("merged histograms with different buckets")


def test_decode_failures_and_summary_rows():
    stats = decode_failures("media_cache", "photo", 3).merge(decode_failures("media_cache", "photo", 2))
    stats = stats.merge(Statistics([Counter("encode.oov.train.sex", 5), Counter("encode.rows_out.train", 200)]))
    stats = stats.merge(sequence_lengths("encode", "t", np.array([0, 3, 3, 9000])))
    rows = dict(summary_rows(stats.to_json()))
    assert rows["media_cache.decode_failures.photo"] == "5"
    assert rows["encode.oov.train.sex"] == "5 (2.50% of 200 rows)"
    assert rows["encode.length.t"] == "4 values; <1: 1, [2,4): 2, >=8192: 1"
    assert LENGTH_BUCKETS[-1] == 8192


def _searchsorted_counts(starts, x):
    return np.bincount(np.searchsorted(np.asarray(starts), x, side="right"), minlength=len(starts) + 1)


def test_bucket_counts_equal_a_binary_search_at_every_edge():
    """The arithmetic fast path for equally spaced starts must count exactly like searchsorted: values on,
    just below and just above every start, far outside, NaN, infinities, tiny and huge ranges."""
    from tasks.encode.feature_stats import id_starts, range_starts
    from tasks.runtime.statistics import bucket_counts

    rng = np.random.default_rng(7)
    for starts in (range_starts(-3.7, 12.1), range_starts(0, 1), range_starts(1e-300, 2e-300),
                   range_starts(-1e300, 1e300), range_starts(0.1, 0.1 + 1e-12), range_starts(5, 5), id_starts(4000),
                   id_starts(3), [1.0, 2.0, 4.0, 8.0], list(LENGTH_BUCKETS)):
        s = np.asarray(starts)
        span = (s[-1] - s[0]) or 1.0
        x = np.concatenate([rng.uniform(s[0] - span, s[-1] + span, 20000), s, np.nextafter(s, -np.inf),
                            np.nextafter(s, np.inf), [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308],
                            np.round(rng.uniform(s[0], s[-1], 5000), 1), np.full(3000, np.nan),
                            rng.integers(-3, len(s) + 3, 9000).astype(np.float64)])
        # (the tiled one spans several of bucket_counts' blocks)
        for values in (rng.permutation(x), x[:900], np.full(5000, s[-1]), rng.permutation(np.tile(x, 4))):
            assert np.array_equal(bucket_counts(s, values), _searchsorted_counts(s, values)), starts[:3]
            hist = Histogram("h", starts)
            hist.add_array(values)
            assert hist.counts == _searchsorted_counts(s, values).tolist()
