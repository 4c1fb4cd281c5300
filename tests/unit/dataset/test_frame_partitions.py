"""``tasks.runtime.frame.partitions``: the ingested parts as delayed frames, re-cut into any number of
row ranges, always the whole table in row order (what every stage's npartitions-independence needs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.config.constants import ROW
from tasks.runtime import frame
from tasks.runtime.frame import write_ipc


def _write_parts(folder, sizes: list[int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for i, n in enumerate(sizes):
        rows = np.arange(start, start + n, dtype=np.int64)
        table = pa.table({"x": pa.array(rows * 0.5), "s": pa.array([f"v{r % 7}" for r in rows], pa.string()),
                          ROW: pa.array(rows)})
        write_ipc(table, folder / f"part-{i:05d}.arrow")
        start += n


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=5), n=st.one_of(st.none(), st.integers(1, 12)))
def test_partitions_cover_every_row_once_in_order(tmp_path_factory, sizes, n):
    import dask

    folder = tmp_path_factory.mktemp("parts")
    _write_parts(folder, sizes)
    parts = dask.compute(*frame.partitions(frame.parts_in(folder), n), scheduler="sync")
    assert len(parts) == (n or len(sizes))
    whole = pd.concat(parts, ignore_index=True)
    assert whole[ROW].tolist() == list(range(sum(sizes)))
    assert whole["x"].tolist() == [r * 0.5 for r in range(sum(sizes))]
    assert all(p.dtypes.to_dict() == parts[0].dtypes.to_dict() for p in parts)  # empty ranges keep the schema
    assert str(parts[0]["s"].dtype) == str(pd.StringDtype("pyarrow"))
    sizes_out = [len(p) for p in parts]
    assert max(sizes_out) - min(sizes_out) <= 1  # near-equal ranges (by default too: ingest's last part is short)
    assert frame.largest_partition_rows(frame.parts_in(folder), sum(sizes), n) == max(sizes_out)  # the vocab stage's bound


def test_column_dtypes_reads_the_schema(tmp_path):
    _write_parts(tmp_path, [3, 2])
    assert frame.column_dtypes(frame.parts_in(tmp_path)) == {"x": "float64", "s": str(pd.StringDtype("pyarrow")), ROW: "int64"}
    assert frame.read_ingested(frame.parts_in(tmp_path), None).compute()[ROW].tolist() == list(range(5))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=40), st.text(max_size=5))
def test_fill_constant_of_an_arrow_string_column_equals_fillna(values, fill):
    col = pd.Series(pd.array(values, dtype=pd.StringDtype("pyarrow")), name="c", index=range(3, 3 + len(values)))
    got = frame.fill_constant(col, fill)
    expected = col.fillna(fill)
    assert got.dtype == expected.dtype and type(got.array) is type(expected.array)
    pd.testing.assert_series_equal(got, expected)


def test_a_parts_row_count_is_read_once_and_a_replaced_part_again(tmp_path, monkeypatch):
    """The stages plan from the same parts' row counts: each file's footer is read once per process, and a
    file renamed over it (a new cache entry) is read again."""
    import os

    import pyarrow.feather as feather

    path = tmp_path / "part-00000.arrow"
    feather.write_feather(pa.table({"a": list(range(5))}), path)
    opened = []
    real = pa.memory_map
    monkeypatch.setattr(pa, "memory_map", lambda p, *a: opened.append(p) or real(p, *a))
    assert [frame.ipc_num_rows(str(path)) for _ in range(3)] == [5, 5, 5]
    assert len(opened) == 1
    feather.write_feather(pa.table({"a": list(range(7))}), tmp_path / "new.arrow")
    os.replace(tmp_path / "new.arrow", path)
    assert frame.ipc_num_rows(str(path)) == 7 and len(opened) == 2
