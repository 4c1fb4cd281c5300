"""Partition-parallel Parquet ingest (tasks/ingest/parquet.py): a file, a folder or a glob of files is read
by row-group tasks; row numbers come from row counts, so the artifact does not depend on how the rows
are cut into files and row groups; bad files get one error naming the file (and row group)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tasks.config.constants import ROW
from tasks.dataset import files as dataset_files_mod
from tasks.dataset import fingerprint as dataset_fingerprint
from tasks.ingest import parquet as ingest_parts
from tasks.ingest.common import first_infinity
from tasks.ingest.spec import IngestSpec
from tests.helpers import artifact_files, run, without_created_at

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 100, "row_group_rows": 32},
}
SPEC = IngestSpec(columns={"x": "float64", "c": "string", "y": "string"}, format="parquet")


def frame(n: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    x = rng.normal(size=n)
    x[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame({"x": x, "c": rng.choice(["a", "b", "c", "d"], n), "y": rng.choice(["yes", "no"], n)})


def write_files(df: pd.DataFrame, folder: Path, cuts: list[int], row_group: int) -> Path:
    """``df`` cut at ``cuts`` into day_0.parquet, day_1.parquet, ... with row groups of ``row_group`` rows."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *cuts, len(df)]
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        pq.write_table(pa.Table.from_pandas(df.iloc[a:b], preserve_index=False), folder / f"day_{i}.parquet",
                       row_group_size=row_group)
    return folder


def ingested(dataset: str, part_rows: int, out: Path) -> pa.Table:
    ingest_parts.write_parts(dataset, SPEC, out, part_rows)
    return pa.concat_tables(feather.read_table(p) for p in sorted(out.glob("part-*.arrow")))


@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(1, 299), max_size=4, unique=True), row_group=st.integers(1, 120),
       part_rows=st.integers(1, 400))
def test_rows_are_numbered_across_files_for_any_cut(tmp_path_factory, cuts, row_group, part_rows):
    df = frame(300)
    tmp = tmp_path_factory.mktemp("parts")
    table = ingested(str(write_files(df, tmp / "in", sorted(cuts), row_group) / "day_*.parquet"), part_rows,
                     tmp / "out")
    assert table.column(ROW).to_pylist() == list(range(300))
    assert table.drop_columns([ROW]).to_pandas().equals(df[["x", "c", "y"]])


def test_a_glob_a_folder_and_one_file_publish_the_same_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    df = frame()
    one = write_files(df, tmp_path / "one", [], 500) / "day_0.parquet"
    many = write_files(df, tmp_path / "many", [70, 71, 300], 33)
    results = [run(CONFIG, one, tmp_path / "a", npartitions=1),
               run(CONFIG, Path(f"{many}/day_*.parquet"), tmp_path / "b", npartitions=3),
               run(CONFIG, many, tmp_path / "c", npartitions=5)]
    files = [artifact_files(r.artifact["artifact_path"]) for r in results]
    # the fingerprint (and so the artifact id in the manifest/feature spec) names the files; the data may not
    data = [{k: v for k, v in f.items() if k.endswith((".parquet", ".npy", ".json")) and k != "manifest.json"}
            for f in files]
    assert data[0] == data[1] == data[2]
    assert results[1].artifact["artifact_id"] == results[2].artifact["artifact_id"]  # same files, same names
    assert without_created_at(files[1]) == without_created_at(files[2])


def test_folder_fingerprint_follows_names_and_bytes(tmp_path):
    folder = write_files(frame(), tmp_path / "d", [100], 50)
    fp = dataset_fingerprint.fingerprint(str(folder))
    assert dataset_fingerprint.fingerprint(f"{folder}/day_*.parquet") == fp
    moved = shutil.copytree(folder, tmp_path / "elsewhere")
    assert dataset_fingerprint.fingerprint(str(moved)) == fp
    data = bytearray((moved / "day_1.parquet").read_bytes())
    data[10] ^= 1
    (moved / "day_1.parquet").write_bytes(bytes(data))
    assert dataset_fingerprint.fingerprint(str(moved)) != fp


def test_a_file_with_another_schema_is_named_and_nothing_is_published(tmp_path):
    folder = write_files(frame(), tmp_path / "d", [100, 200], 50)
    pq.write_table(pa.table({"x": pa.array(["1"] * 10), "c": ["a"] * 10, "y": ["no"] * 10}),
                   folder / "day_1.parquet")
    with pytest.raises(DataError, match=r"day_1\.parquet: column 'x' is string, not double as in day_0\.parquet"):
        run(CONFIG, Path(f"{folder}/day_*.parquet"), tmp_path)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_truncated_file_is_named(tmp_path):
    folder = write_files(frame(), tmp_path / "d", [100, 200], 50)
    data = (folder / "day_2.parquet").read_bytes()
    (folder / "day_2.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"day_2\.parquet: not a readable Parquet file \(truncated"):
        run(CONFIG, folder, tmp_path)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_unreadable_row_group_is_named(tmp_path):
    folder = write_files(frame(), tmp_path / "d", [], 100)
    path = folder / "day_0.parquet"
    meta = pq.ParquetFile(path).metadata
    column = meta.row_group(3).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(path.read_bytes())
    data[start:start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"day_0\.parquet: row group .*3.*: cannot read"):
        ingest_parts.write_parts(str(path), SPEC, tmp_path / "out", 100)


def test_files_of_different_formats_in_a_folder_are_refused(tmp_path):
    folder = write_files(frame(), tmp_path / "d", [], 100)
    frame(5).to_csv(folder / "extra.csv", index=False)
    with pytest.raises(DataError, match="different formats"):
        run(CONFIG, folder, tmp_path)


def test_relative_paths_are_read_by_tasks_from_another_working_folder(tmp_path, monkeypatch):
    """Workers of a cluster have their own working folder: tasks get absolute paths, messages the given ones."""
    import os

    write_files(frame(), tmp_path / "d", [100], 50)
    monkeypatch.chdir(tmp_path)
    units = ingest_parts.plan(dataset_files_mod.dataset_files("d/day_*.parquet"), SPEC, 1000)
    assert [u.path for u in units] == ["d/day_0.parquet", "d/day_1.parquet"]
    assert all(os.path.isabs(u.source) for u in units)
    monkeypatch.chdir("/")
    assert ingest_parts.read_unit(units[1], SPEC).num_rows == 400


FLOATS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(FLOATS, max_size=30), st.lists(FLOATS, max_size=30), st.integers(0, 3))
def test_first_infinity_is_the_first_infinite_value_in_column_order_nulls_and_nans_skipped(x, z, cut):
    """What ingest's infinity check reports (tasks/ingest/common.py ``first_infinity``): the first infinity
    of the first number column (spec order) that has one, its row counted from the table's start, across
    chunks; None where there is none."""
    n = min(len(x), len(z))
    x, z = x[:n], z[:n]
    cut = min(cut, n)
    chunked = {name: pa.chunked_array([pa.array(v[:cut], pa.float64()), pa.array(v[cut:], pa.float64())])
               for name, v in (("x", x), ("z", z))}
    table = pa.table({**chunked, "c": pa.array(["a"] * n)})
    spec = IngestSpec(columns={"z": "float64", "c": "string", "x": "float64"}, format="parquet")
    expected = next(((i, name, v[i]) for name, v in (("z", z), ("x", x))
                     for i in range(n) if v[i] is not None and v[i] in (float("inf"), float("-inf"))), None)
    assert first_infinity(table, spec) == expected
