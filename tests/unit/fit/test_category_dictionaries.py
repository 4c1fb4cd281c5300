"""Category strings stored as Arrow dictionaries by ingest (``tasks.ingest.spec.category_columns``) and kept
so by the vocab and encode stages (``tasks.runtime.frame.dictionary_columns``): each distinct value is counted and
looked up once per partition. The artifact must be byte for byte the one plain strings give, whatever the
ingest path, the partitioning and the vocabulary options; every other reader sees plain strings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.config.constants import ROW
from tasks.config.loader import parse_config
from tasks.features import category, category_ids
from tasks.features.category import CategoryFeature
from tasks.features.category_counts import value_counts
from tasks.ingest import csv_ranges as ingest_csv
from tasks.ingest import spec as ingest_spec
from tasks.ingest import stage as ingest_mod
from tasks.ingest.common import DICTIONARY, dictionary_encoded, normalize_batch
from tasks.runtime import frame
from tasks.runtime.context import RunContext
from tasks.runtime.frame import write_ipc
from tests.helpers import artifact_files, run, without_created_at, write_csv


def _table(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    c = rng.choice([f"v{i}" for i in range(30)] + ["<UNK>"], n).astype(object)
    c[rng.random(n) < 0.15] = None
    d = rng.choice(["p", "q", "r"], n).astype(object)
    return pd.DataFrame({"c": c, "d": d, "x": rng.normal(size=n), "y": rng.choice([0, 1], n)})


def _config(preprocessing: dict) -> dict:
    return {"input_features": [{"name": "c", "type": "category", "preprocessing": preprocessing},
                               {"name": "d", "type": "category"},
                               {"name": "x", "type": "number"}],
            "output_features": [{"name": "y", "type": "binary"}]}


def _ingested_types(result) -> dict[str, pa.DataType]:
    """The column types of the first part ingest wrote."""
    ingest = next(s for s in result.stages if s.stage == "ingest")
    part = ingest.parts[0][0]
    with pa.ipc.open_file(str(part)) as reader:
        return dict(zip(reader.schema.names, reader.schema.types, strict=True))


@pytest.mark.parametrize("fmt", ["csv", "csv-ranges", "parquet"])
@pytest.mark.parametrize("npartitions", [None, 3])
@pytest.mark.parametrize("preprocessing", [{}, {"num_oov_buckets": 2}, {"hash_buckets": 7}, {"most_common": 5},
                                           {"min_frequency": 15, "num_oov_buckets": 1},
                                           {"inline_max": 3}])
def test_kept_dictionaries_give_the_artifact_of_plain_strings(tmp_path, monkeypatch, fmt, npartitions, preprocessing):
    if "inline_max" in preprocessing:  # vocabularies in Parquet files, looked up through vocab_store
        monkeypatch.setattr(category, "INLINE_MAX", preprocessing["inline_max"])
        preprocessing = {}
    table = _table()
    if fmt.startswith("csv"):
        data = write_csv(table, tmp_path / "data.csv")
        if fmt == "csv-ranges":  # byte ranges read by several tasks, each writing its own parts
            monkeypatch.setattr(ingest_csv, "RANGE_BYTES", 2000)
    else:  # small row groups: each part is several groups, so the reader's dictionaries are merged per part
        data = tmp_path / "data.parquet"
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), data, row_group_size=40)
    monkeypatch.setattr(ingest_mod, "PART_ROWS", 120)  # several parts, each with its own dictionary
    monkeypatch.setattr(ingest_spec, "PART_ROWS", 120)
    kept = run(_config(preprocessing), data, tmp_path / "kept", npartitions=npartitions)
    assert _ingested_types(kept)["c"] == DICTIONARY and _ingested_types(kept)["x"] == pa.float64()

    with monkeypatch.context() as m:  # stored as dictionaries, decoded for every stage
        m.setattr(frame, "dictionary_columns", lambda *a, **k: ())
        decoded = run(_config(preprocessing), data, tmp_path / "decoded", npartitions=npartitions)
    with monkeypatch.context() as m:  # stored and read as plain strings (before dictionaries)
        m.setattr(ingest_spec, "category_columns", lambda *a, **k: ())
        plain = run(_config(preprocessing), data, tmp_path / "plain", npartitions=npartitions)
    assert _ingested_types(plain)["c"] == pa.string()

    files = without_created_at(artifact_files(kept.artifact["artifact_path"]))
    assert files == without_created_at(artifact_files(decoded.artifact["artifact_path"]))
    assert files == without_created_at(artifact_files(plain.artifact["artifact_path"]))


def test_only_columns_that_only_unk_filled_category_inputs_read_are_stored_as_dictionaries():
    config = parse_config({
        "input_features": [{"name": "c", "type": "category"}, {"name": "t", "type": "text"},
                           {"name": "u", "column": "t", "type": "category"},
                           {"name": "e", "type": "category", "preprocessing": {"encoded": True, "cardinality": 5}},
                           {"name": "l", "type": "category", "preprocessing": {"symbols": "ludwig"}},
                           {"name": "k", "type": "category", "preprocessing": {"fill_value": "zz"}},
                           {"name": "x", "type": "number"}],
        "output_features": [{"name": "y", "type": "category"}]})
    ctx = RunContext(config, "unused", None)
    columns = {f.column: f.read_as() for f in ctx.features}
    # t is also read by a text feature, e is pre-encoded ids, l ranks Ludwig's way, k fills another value,
    # x is a number, y an output (its missing rows are dropped): all read as strings, as before
    assert ingest_spec.category_columns(ctx.features, columns) == ("c",)
    assert ingest_spec.category_columns(ctx.features, columns, custom_stages=True) == ()
    assert frame.dictionary_columns(ctx.features, custom_stages=False) == ("c",)
    assert frame.dictionary_columns(ctx.features, custom_stages=True) == ()


def test_every_other_reader_gets_plain_strings(tmp_path):
    spec = ingest_spec.IngestSpec(columns={"c": "string", "s": "string"}, format="csv", dictionary=("c",))
    for i, values in enumerate([["a", None, "b", "a"], ["b", "c", None, "c"]]):
        table = dictionary_encoded(normalize_batch(pa.table({"c": values, "s": values}), spec), spec)
        assert table.schema.field("c").type == DICTIONARY and table.schema.field("s").type == pa.string()
        write_ipc(table.append_column(ROW, pa.array(np.arange(4 * i, 4 * i + 4))), tmp_path / f"part-{i:05d}.arrow")
    import dask

    for n in (None, 1, 3):  # one partition per part, and ranges across the two parts' dictionaries
        plain = pd.concat(dask.compute(*frame.partitions(frame.parts_in(tmp_path), n), scheduler="sync"), ignore_index=True)
        assert str(plain["c"].dtype) == str(pd.StringDtype("pyarrow")) == str(plain["s"].dtype)
        assert plain["c"].tolist() == plain["s"].tolist()
        kept = pd.concat(dask.compute(*frame.partitions(frame.parts_in(tmp_path), n, ("c",)), scheduler="sync"),
                         ignore_index=True)
        assert pa.types.is_dictionary(kept["c"].dtype.pyarrow_dtype)
        assert kept["c"].astype("string").tolist() == plain["s"].tolist()
    assert frame.column_dtypes(frame.parts_in(tmp_path))["c"] == "string"  # what the raw gate's generator sees


values_st = st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "<UNK>", "ü", "", "long value"])), max_size=40)


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(values_st, min_size=1, max_size=4))
def test_a_dictionary_is_counted_as_its_strings(chunks):
    strings = pd.Series(pd.array([v for c in chunks for v in c], dtype=pd.StringDtype("pyarrow")))
    arrays = [pa.array(c, pa.string()).dictionary_encode() for c in chunks]
    kept = pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array(arrays, type=DICTIONARY)))
    got, want = value_counts(kept), value_counts(strings)
    assert dict(zip(got[0].to_pylist(), got[1].tolist(), strict=True)) == \
        dict(zip(want[0].to_pylist(), want[1].tolist(), strict=True))
    assert got[2] == want[2] == strings.isna().sum()


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(values_st, min_size=1, max_size=3),
       metadata=st.sampled_from([{"idx2str": ["<UNK>", "a", "ü"]},
                                 {"idx2str": ["<UNK>", "__oov_0", "__oov_1", "b", ""], "num_oov_buckets": 2},
                                 {"hash_buckets": 5}]))
def test_a_dictionary_encodes_to_the_ids_of_its_strings(chunks, metadata):
    f = CategoryFeature("c", "c", category.CategoryPreprocessing(), False)
    metadata = {**metadata, "vocab_size": len(metadata.get("idx2str", [])) or 6}
    strings = pd.Series(pd.array([v for c in chunks for v in c], dtype=pd.StringDtype("pyarrow")))
    arrays = [pa.array(c, pa.string()).dictionary_encode() for c in chunks]
    kept = pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array(arrays, type=DICTIONARY)))
    assert f.encode(kept, metadata)["c"].tolist() == f.encode(strings, metadata)["c"].tolist()


@settings(max_examples=200, deadline=None)
@given(codes=st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=40), start=st.integers(0, 5),
       index_type=st.sampled_from([pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8()]),
       missing=st.integers(0, 3))
def test_ids_by_code_takes_each_codes_id_and_missing_for_a_null(codes, start, index_type, missing):
    """The codes' buffer is read directly (a sliced array's offset, any index width); a null's slot, whose
    value Arrow leaves undefined, gives ``missing``."""
    ids_of = np.arange(100, 110, dtype=np.int32)
    dtype = np.dtype(index_type.to_pandas_dtype())
    garbage = np.iinfo(dtype).max  # what a null's slot holds here: no code of ids_of
    raw = np.array([garbage if c is None else c for c in codes], dtype)
    arr = pa.array(raw, type=index_type, mask=np.array([c is None for c in codes], bool))
    assert arr.to_pylist() == codes
    arr = arr.slice(min(start, len(codes)))
    expected = [missing if c is None else int(ids_of[c]) for c in arr.to_pylist()]
    got = category_ids.ids_by_code(ids_of, arr, missing)
    assert got.dtype == np.int32 and got.tolist() == expected
