"""The category counts' merge (tasks.vocab.category.merge_counts): exact per (feature, value) sums and first
rows, whatever the grouping of the partitions' tables; the exchange through files (``write_buckets``,
``read_bucket``) and the vocabularies it gives, the tree's."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import string_hash
from tasks.vocab import category as category_vocab
from tasks.vocab.category import COUNT, FEATURE, FIRST, VALUE, merge_counts, read_bucket, write_buckets
from tests.helpers import artifact_files, run, without_created_at, write_csv

rows = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", "", "ü", "a b", "<UNK>"]),
                          st.integers(1, 2**40), st.integers(0, 10**6)), max_size=30)


def _table(part: list[tuple]) -> pa.Table:
    return pa.table({FEATURE: pa.array([r[0] for r in part], pa.int32()), VALUE: pa.array([r[1] for r in part], pa.string()),
                     COUNT: pa.array([r[2] for r in part], pa.int64()), FIRST: pa.array([r[3] for r in part], pa.int64())})


def _as_dict(table: pa.Table) -> dict:
    out = {}
    for f, v, c, first in zip(*(table.column(k).to_pylist() for k in (FEATURE, VALUE, COUNT, FIRST)), strict=True):
        assert (f, v) not in out  # one row per distinct (feature, value)
        out[(f, v)] = (c, first)
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(rows, min_size=1, max_size=6), st.integers(2, 4), st.booleans())
def test_merging_in_any_grouping_gives_the_exact_sums_and_first_rows(parts, fan_in, by_group_by):
    """Either merge of a feature's rows (``_merge_feature``): the codes' bincount, or Arrow's group_by (a feature
    of more than ``DICTIONARY_MERGE_BYTES`` of text; here every feature)."""
    with pytest.MonkeyPatch.context() as mp:
        if by_group_by:
            mp.setattr(category_vocab, "DICTIONARY_MERGE_BYTES", -1)
        _check_merges(parts, fan_in)


def _check_merges(parts, fan_in):
    counts, firsts = Counter(), {}
    for part in parts:
        for f, v, c, first in part:
            counts[(f, v)] += c
            firsts[(f, v)] = min(firsts.get((f, v), first), first)
    level = [_table(p) for p in parts]
    while len(level) > 1:  # a tree of fan_in-table merges, as a local run does
        level = [merge_counts(level[i:i + fan_in]) for i in range(0, len(level), fan_in)]
    merged = merge_counts(level)
    assert _as_dict(merged) == {k: (counts[k], firsts[k]) for k in counts}
    assert merged.column(COUNT).type == pa.int64() and np.issubdtype(merged.column(FEATURE).to_numpy().dtype, np.integer)


@settings(max_examples=40, deadline=None)
@given(st.lists(rows, min_size=1, max_size=4), st.integers(1, 5))
def test_the_exchange_gives_each_reducer_every_row_of_its_values_and_only_those(tmp_path_factory, parts, reducers):
    """Each partition's rows written by ``write_buckets`` and read back by ``read_bucket``: every row reaches
    exactly one reducer, unchanged and in partition order, and a value's reducer is its string hash modulo
    the reducers in every partition (``string_hash``)."""
    folder = tmp_path_factory.mktemp("exchange")
    written = [write_buckets(_table(p), str(folder), i, reducers) for i, p in enumerate(parts)]
    assert not list(folder.glob(".*"))  # no temporary file left
    got = []
    for j in range(reducers):
        bucket = read_bucket(written, j)
        rows_j = list(zip(*(bucket.column(k).to_pylist() for k in (FEATURE, VALUE, COUNT, FIRST)), strict=True))
        assert all(string_hash.reference_hash(r[1]) % reducers == j for r in rows_j)
        got.append(rows_j)
    # each reducer's rows: the partitions' rows of its values, partition by partition, each partition's in order
    want = [[r for p in parts for r in p if string_hash.reference_hash(r[1]) % reducers == j] for j in range(reducers)]
    assert got == want


def test_the_exchanged_vocabularies_are_the_trees(tmp_path, monkeypatch):
    """Seven partitions exchanged through files to four reducers (as on a cluster whose counts are large)
    publish the bytes one partition's tree publishes: OOV buckets, a min_frequency and a most_common cut,
    nulls."""
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
        monkeypatch.setattr(category_vocab, "LOCAL_REDUCE_PARTS", reduce_parts)  # 7 > 4: the exchange
        monkeypatch.setattr(category_vocab, "MERGE_FAN_IN", 2)  # its 7 partitions to 4 reducers
        written: list[int] = []

        def counted(counts, folder, index, reducers, written=written):
            path = write_buckets(counts, folder, index, reducers)
            written.append(pa.ipc.open_file(path).num_record_batches)
            return path

        monkeypatch.setattr(category_vocab, "write_buckets", counted)
        result = run(config, data, tmp_path / f"n{n_parts}", npartitions=n_parts)
        assert written == ([4] * 7 if n_parts == 7 else [])  # 7 partitions' files of 4 reducers' batches
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


def test_the_exchanges_files_are_removed_once_the_vocabularies_are_extracted(tmp_path, monkeypatch):
    """Each reducer depends on the exchange's barrier alone, and after ``extract`` nothing of the exchange is
    left in the stage's folder: the partitions' files, the reducers' candidates, and a temporary file a map
    task that died while writing would leave."""
    from dask import delayed

    from tasks.config.loader import parse_config
    from tasks.features import build_all
    from tasks.runtime.frame import Prepared

    config = {"input_features": [{"name": "c", "type": "category"}], "output_features": [{"name": "y", "type": "binary"}]}
    features = category_vocab.counted_features(build_all(parse_config(config)))
    frames = [pd.DataFrame({"c": pd.array([f"v{(i * 7 + j) % 11}" for j in range(50)], dtype=pd.StringDtype("pyarrow")),
                            "__row__": np.arange(i * 50, (i + 1) * 50)}) for i in range(5)]
    prepared = [delayed(Prepared)(f) for f in frames]
    monkeypatch.setattr(category_vocab, "LOCAL_REDUCE_PARTS", 2)  # 5 > 2: the exchange
    monkeypatch.setattr(category_vocab, "MERGE_FAN_IN", 2)  # 3 reducers
    folder = tmp_path / "out" / "_candidates"
    _, reducers = category_vocab.fit_tasks(prepared, features, "all", folder)
    # each reducer takes one small value from the map side (the barrier's count of files), not every map
    # task's result: at Criteo's scale N x R inputs would be ~2e7 edges
    from dask.core import get_dependencies
    for r in reducers:
        graph = dict(r.__dask_graph__())
        mapped = [k for k in get_dependencies(graph, r.key) if "write_buckets" in str(k) or "_all_written" in str(k)]
        assert len(mapped) == 1 and "_all_written" in str(mapped[0])
    reduced = [r.compute(scheduler="sync") for r in reducers]
    assert len(reduced) == 3 and len(list(folder.glob("counts-*.arrow"))) == 5
    (folder / ".counts-00001.999.tmp").write_bytes(b"partial")
    meta = category_vocab.extract(features, reduced, tmp_path / "out")["c"]
    assert meta["vocab_size"] == 1 + 11 and not folder.exists()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(["a", "b", "\x00", "\x7f", "é", "ÿ", "€"]), max_size=4), max_size=40),
       st.integers(0, 3), st.booleans())
def test_short_strings_sort_as_integers_in_arrows_string_order(values, cut, equal_lengths):
    """``short_string_order`` (values of at most 8 UTF-8 bytes): the order of Arrow's ``sort_indices`` (bytes compared
    as unsigned, a value before its extensions, NUL bytes included), on a sliced array too; longer values: None."""
    from tasks.features.base import short_string_order

    if equal_lengths:  # every value the same byte length: the one-block path
        values = [v.encode()[:2].ljust(2, b"z").decode("utf-8", "ignore").ljust(2, "z") for v in values]
        values = [v for v in values if len(v.encode()) == 2]
    arr = pa.array(["pad"] * cut + values, pa.string()).slice(cut)  # an offset into the buffers
    got = short_string_order(arr)
    if any(len(v.encode()) > 8 for v in values):
        assert got is None
    else:
        assert got.tolist() == pc.sort_indices(arr).to_numpy().tolist()
    assert short_string_order(pa.array(["123456789", "a"], pa.string())) is None
