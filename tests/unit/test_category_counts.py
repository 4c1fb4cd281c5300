"""The category counts' merge (tasks.category_vocab.merge_counts): exact per (feature, value) sums and first
rows, whatever the grouping of the partitions' tables, pandas (a shuffle's output) or Arrow; the shuffle's
key (``with_bucket``) and the vocabularies it gives, the tree's."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import string_hash
from tasks import category_vocab
from tasks.category_vocab import BUCKET, COUNT, FEATURE, FIRST, VALUE, merge_counts, with_bucket
from tests.helpers import artifact_files, run, without_created_at, write_csv

rows = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", "", "ü", "a b", "<UNK>"]),
                          st.integers(1, 2**40), st.integers(0, 10**6)), max_size=30)


def _table(part: list[tuple], as_pandas: bool):
    table = pa.table({FEATURE: pa.array([r[0] for r in part], pa.int32()), VALUE: pa.array([r[1] for r in part], pa.string()),
                      COUNT: pa.array([r[2] for r in part], pa.int64()), FIRST: pa.array([r[3] for r in part], pa.int64())})
    if not as_pandas:
        return table
    return pd.DataFrame({FEATURE: table.column(FEATURE).to_numpy(), COUNT: table.column(COUNT).to_numpy(),
                         VALUE: pd.array(table.column(VALUE), dtype=pd.StringDtype("pyarrow")),
                         FIRST: table.column(FIRST).to_numpy()})


def _as_dict(table: pa.Table) -> dict:
    out = {}
    for f, v, c, first in zip(*(table.column(k).to_pylist() for k in (FEATURE, VALUE, COUNT, FIRST)), strict=True):
        assert (f, v) not in out  # one row per distinct (feature, value)
        out[(f, v)] = (c, first)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, min_size=1, max_size=6), st.integers(2, 4), st.booleans())
def test_merging_in_any_grouping_gives_the_exact_sums_and_first_rows(parts, fan_in, as_pandas):
    counts, firsts = Counter(), {}
    for part in parts:
        for f, v, c, first in part:
            counts[(f, v)] += c
            firsts[(f, v)] = min(firsts.get((f, v), first), first)
    level = [_table(p, as_pandas) for p in parts]
    while len(level) > 1:  # a tree of fan_in-table merges, as a local run does
        level = [merge_counts(level[i:i + fan_in]) for i in range(0, len(level), fan_in)]
    merged = merge_counts(level)
    assert _as_dict(merged) == {k: (counts[k], firsts[k]) for k in counts}
    assert merged.column(COUNT).type == pa.int64() and np.issubdtype(merged.column(FEATURE).to_numpy().dtype, np.integer)


@settings(max_examples=60, deadline=None)
@given(rows, rows)
def test_the_shuffle_key_is_the_values_string_hash_in_every_partition(a, b):
    keyed = [with_bucket(_table(part, as_pandas=True)) for part in (a, b)]
    for part, frame in zip((a, b), keyed, strict=True):
        assert frame.drop(columns=BUCKET).equals(_table(part, as_pandas=True))  # the counts, unchanged
        want = [int(np.uint64(string_hash.reference_hash(r[1])).view(np.int64)) for r in part]
        assert frame[BUCKET].tolist() == want and frame[BUCKET].dtype == np.int64


def test_the_shuffled_vocabularies_are_the_trees(tmp_path, monkeypatch):
    """Seven partitions shuffled to seven reducers (as on a cluster whose counts are large) publish the bytes
    one partition's tree publishes: OOV buckets, a min_frequency and a most_common cut, nulls."""
    rng = np.random.default_rng(8)
    n = 3000
    df = pd.DataFrame({"a": [f"v{int(i)}" for i in rng.zipf(1.3, n) % 500],
                       "b": [f"w{int(i)}" for i in rng.integers(0, 40, n)], "y": rng.choice([0, 1], n)})
    df.loc[::13, "a"] = None
    data = write_csv(df, tmp_path / "data.csv")
    config = {"input_features": [
        {"name": "a", "type": "category", "preprocessing": {"num_oov_buckets": 3, "min_frequency": 2}},
        {"name": "b", "type": "category", "preprocessing": {"most_common": 25}}],
        "output_features": [{"name": "y", "type": "binary"}],
        "preprocessing": {"split": {"type": "random", "probabilities": [0.7, 0.2, 0.1]}}}
    files = {}
    for n_parts, reduce_parts in ((1, 64), (7, 4)):
        monkeypatch.setattr(category_vocab, "LOCAL_REDUCE_PARTS", reduce_parts)  # 7 > 4: the shuffle
        result = run(config, data, tmp_path / f"n{n_parts}", npartitions=n_parts)
        files[n_parts] = without_created_at(artifact_files(result.artifact["artifact_path"]))
    assert files[7] == files[1]


@settings(max_examples=60, deadline=None)
@given(entries=st.dictionaries(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4),
                               st.integers(1, 4), max_size=60),
       tie=st.sampled_from(["value", "first"]))
def test_the_vocabulary_order_is_count_descending_then_the_tie_key_ascending(entries, tie):
    """``Candidates.top``'s order (``base.by_count_then``) is Arrow's two-key sort: count descending, then the value
    (UTF-8 bytes) or, for Ludwig, the first row ascending; few distinct counts, so most rows are ties."""
    from tasks.features.base import by_count_then

    firsts = list(range(len(entries)))  # distinct first rows, as a feature's values have
    np.random.default_rng(len(entries)).shuffle(firsts)
    table = pa.table({"value": pa.array(list(entries), pa.string()),
                      "count": pa.array(list(entries.values()), pa.int64()),
                      "first": pa.array(firsts, pa.int64())})
    arrow = pc.sort_indices(table, sort_keys=[("count", "descending"), (tie, "ascending")]).to_numpy()
    assert by_count_then(table, tie).tolist() == arrow.tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "", "é", "c d", "<UNK>"])), max_size=40))
def test_a_partitions_counts_are_its_values_counted_with_each_missing_one_as_unk(values):
    """``CategoryFeature.add`` (the vocab stage's per-partition count): each distinct value once with its count,
    a value left missing by the preparation counted as ``<UNK>`` (the category's default fill)."""
    from tests.unit.feature_helpers import feature

    f = feature("category")
    assert f.reads_missing_as_fill()
    acc = f.add(f.create(), pd.Series(values, dtype="string"))
    got = list(zip(acc["value"].to_pylist(), acc["count"].to_pylist(), strict=True))
    assert len({v for v, _ in got}) == len(got)
    assert dict(got) == Counter("<UNK>" if v is None else v for v in values)
