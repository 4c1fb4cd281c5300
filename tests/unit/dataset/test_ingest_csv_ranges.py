"""CSV/TSV ingest by byte ranges (tasks/ingest/csv_ranges.py): a range owns the rows that start inside it, row
numbers come from the ranges' row counts, so the cached parts equal the single reader's for any range
size; a quote or a data line break anywhere makes the file one task; errors name the file and range."""

from __future__ import annotations

import gzip
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tasks.config.constants import ROW
from tasks.dataset import csv_dialect
from tasks.dataset import files as dataset_files_mod
from tasks.ingest import csv_ranges as ingest_csv
from tasks.ingest import spec as ingest_spec
from tasks.ingest import stage as ingest
from tasks.ingest.spec import IngestSpec
from tasks.runtime.frame import write_ipc
from tests.helpers import artifact_files, run, without_created_at

SPEC = IngestSpec(columns={"x": "float64", "c": "string"}, format="csv")


def frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=n) * 100, 3)
    x[rng.random(n) < 0.15] = np.nan
    c = rng.choice(["a", "bb", "ccc", "d d", "", "NA"], n).astype(object)
    return pd.DataFrame({"id": np.arange(n), "x": x, "c": c, "w": rng.integers(0, 9, n)})


def text(df: pd.DataFrame, terminator: str = "\n", sep: str = ",", bom: bool = False, trailing: bool = True) -> bytes:
    lines = [sep.join(df.columns)] + [sep.join("" if pd.isna(v) else str(v) for v in row)
                                      for row in df.itertuples(index=False)]
    body = terminator.join(lines) + (terminator if trailing else "")
    return (b"\xef\xbb\xbf" if bom else b"") + body.encode()


def parts_table(out: Path) -> pa.Table:
    return pa.concat_tables(feather.read_table(p) for p in sorted(out.glob("part-*.arrow"))).combine_chunks()


def single(path: str, out: Path, spec: IngestSpec = SPEC) -> pa.Table:
    """The single reader's parts (every file one after the other in this process), as before ranges."""
    import itertools

    files = dataset_files_mod.dataset_files(path)
    ingest_spec.write_parts(itertools.chain.from_iterable(ingest.read_batches(f, spec) for f in files), spec, out, path)
    return parts_table(out)


def ranged(path: str, out: Path, range_bytes: int, spec: IngestSpec = SPEC) -> pa.Table:
    rows = ingest_csv.write_parts(path, spec, out, ingest.read_batches, range_bytes)
    table = parts_table(out)
    assert table.num_rows == rows
    assert not list(out.glob("unit-*"))  # every part renamed into row order
    return table


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 25), terminator=st.sampled_from(["\n", "\r\n", "\r"]), bom=st.booleans(),
       trailing=st.booleans(), range_bytes=st.integers(1, 120), seed=st.integers(0, 9))
def test_any_range_size_gives_the_single_readers_parts(tmp_path_factory, n, terminator, bom, trailing, range_bytes,
                                                       seed):
    tmp = tmp_path_factory.mktemp("r")
    path = tmp / "d.csv"
    path.write_bytes(text(frame(n, seed), terminator, bom=bom, trailing=trailing))
    expected = single(str(path), tmp / "one")
    got = ranged(str(path), tmp / "ranges", range_bytes)
    assert got.equals(expected)
    assert got.column(ROW).to_pylist() == list(range(n))


def test_ranges_are_cut_where_asked_and_meet_at_row_starts(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(text(frame(200)))
    units = ingest_csv.plan([str(path)], SPEC, 500)
    assert len(units) > 3 and not any(u.whole for u in units)
    owned = [ingest_csv.owned_bytes(u) for u in units]
    assert owned[0][0] == path.read_bytes().index(b"\n") + 1  # the header is no range's
    assert all(a[1] == b[0] for a, b in zip(owned[:-1], owned[1:], strict=True))  # no gap, no overlap
    assert owned[-1][1] == path.stat().st_size
    data = path.read_bytes()
    assert all(first == 0 or data[first - 1:first] == b"\n" for first, _, _ in owned)


def test_files_of_a_glob_a_folder_tsv_and_gzip_are_numbered_in_order(tmp_path):
    df = frame(120, 3)
    folder = tmp_path / "days"
    folder.mkdir()
    (folder / "day_0.tsv").write_bytes(text(df.iloc[:50], sep="\t"))
    (folder / "day_1.tsv.gz").write_bytes(gzip.compress(text(df.iloc[50:51], "\r\n", sep="\t")))  # one task
    (folder / "day_2.tsv").write_bytes(text(df.iloc[51:], "\r\n", sep="\t", trailing=False))
    spec = IngestSpec(columns=SPEC.columns, format="tsv")
    expected = single(f"{folder}/day_*", tmp_path / "one", spec)
    assert expected.num_rows == 120
    for range_bytes in (3, 64, 1000):
        assert ranged(f"{folder}/day_*", tmp_path / f"g{range_bytes}", range_bytes, spec).equals(expected)
    assert ranged(str(folder), tmp_path / "folder", 50, spec).equals(expected)
    units = ingest_csv.plan(dataset_files_mod.dataset_files(str(folder)), spec, 50)
    assert [u.whole for u in units if u.file == 1] == [True]


def test_a_url_is_read_by_ranges(tmp_path):
    data = text(frame(80, 4), "\r\n")
    with fsspec.open("memory://bucket/ranges.csv", "wb") as fh:
        fh.write(data)
    (tmp_path / "d.csv").write_bytes(data)
    expected = single(str(tmp_path / "d.csv"), tmp_path / "one")
    units = ingest_csv.plan(["memory://bucket/ranges.csv"], SPEC, 100)
    assert len(units) > 5 and not any(u.whole for u in units)
    assert ranged("memory://bucket/ranges.csv", tmp_path / "url", 100).equals(expected)


def test_a_quoted_newline_past_the_sampled_head_makes_the_file_one_task(tmp_path):
    """The head has no quote, so the file is planned as ranges; the range holding the quote reports it and
    the file is read whole: the quoted newline stays inside its value, no row is split."""
    body = frame(150_000, 5).to_csv(index=False).encode()
    assert len(body) > 2 * csv_dialect.SNIFF_BYTES and b'"' not in body
    path = tmp_path / "d.csv"
    path.write_bytes(body + b'150000,1.5,"two\nlines, quoted",3\n150001,2.5,after,4\n')
    units = ingest_csv.plan([str(path)], SPEC, 256 << 10)
    assert len(units) > 4 and not any(u.whole for u in units)
    got = ranged(str(path), tmp_path / "ranges", 256 << 10)
    assert got.equals(single(str(path), tmp_path / "one"))
    assert got.num_rows == 150_002
    assert got.column("c")[150_000].as_py() == "two\nlines, quoted"


def test_a_quote_in_the_head_or_a_compressed_file_is_planned_as_one_task(tmp_path):
    quoted = tmp_path / "q.csv"
    quoted.write_bytes(b'id,x,c,w\n1,2.0,"a",3\n' + text(frame(100))[9:])
    packed = tmp_path / "p.csv.gz"
    packed.write_bytes(gzip.compress(text(frame(100))))
    for path in (quoted, packed):
        units = ingest_csv.plan([str(path)], SPEC, 16)
        assert [u.whole for u in units] == [True]
        assert ranged(str(path), tmp_path / f"out_{path.name}", 16).equals(single(str(path), tmp_path / f"one_{path.name}"))


def test_quoted_header_names_are_split_a_quoted_newline_in_the_header_is_not(tmp_path):
    body = text(frame(100, 2)).split(b"\n", 1)[1]
    quoted = tmp_path / "q.csv"
    quoted.write_bytes(b'"id","x","c","w"\n' + body)  # as pyarrow's CSV writer writes a header
    assert not any(u.whole for u in ingest_csv.plan([str(quoted)], SPEC, 64))
    assert ranged(str(quoted), tmp_path / "rq", 64).equals(single(str(quoted), tmp_path / "oq"))
    odd = tmp_path / "odd.csv"
    odd.write_bytes(b'"id","x","c","w\nz"\n' + body)  # a newline inside the last header name
    assert [u.whole for u in ingest_csv.plan([str(odd)], SPEC, 64)] == [True]


def test_a_bare_cr_inside_a_range_makes_the_file_one_task(tmp_path):
    data = bytearray(text(frame(100, 6)))
    at = data.index(b"bb", len(data) // 2)
    data[at + 1:at + 1] = b"\r"  # 'b\rb': pandas writes a CR inside an unquoted field unquoted
    path = tmp_path / "d.csv"
    path.write_bytes(bytes(data))
    got = ranged(str(path), tmp_path / "ranges", 40)
    assert got.equals(single(str(path), tmp_path / "one"))
    assert "b\rb" in got.column("c").to_pylist()


def test_a_ragged_row_is_named_by_file_line_and_byte_range(tmp_path):
    data = text(frame(100, 7))
    lines = data.split(b"\n")
    lines[71] += b",9"  # line 72 of the file (the header is line 1)
    path = tmp_path / "d.csv"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match=r"d\.csv: line 72: expected 4 fields, got 5 .*byte range \d+-\d+"):
        ranged(str(path), tmp_path / "out", 64)


def test_a_bad_number_and_an_infinity_are_named_by_the_files_row(tmp_path):
    lines = text(frame(100, 8)).split(b"\n")
    bad = lines.copy()
    bad[40] = b"39,12 kg,a,1"
    path = tmp_path / "bad.csv"
    path.write_bytes(b"\n".join(bad))
    with pytest.raises(DataError, match=r"bad\.csv: line 41, column 'x': expected a number, got '12 kg' "
                                        r"\(byte range \d+-\d+\)"):
        ranged(str(path), tmp_path / "out", 80)
    inf = lines.copy()
    inf[77] = b"76,-inf,a,1"
    path = tmp_path / "inf.csv"
    path.write_bytes(b"\n".join(inf))
    with pytest.raises(DataError, match=r"inf\.csv: row 76, column 'x': got -inf; infinities .*byte range"):
        ranged(str(path), tmp_path / "out2", 80)


def test_header_only_and_rows_longer_than_a_range(tmp_path):
    path = tmp_path / "h.csv"
    path.write_bytes(b"id,x,c,w\n")
    with pytest.raises(DataError, match="no data rows"):
        ranged(str(path), tmp_path / "out", 1)
    long = tmp_path / "long.csv"
    long.write_bytes(b"id,x,c,w\n1,2.5," + b"z" * 500 + b",1\n2,3.5,y,2\n")
    got = ranged(str(long), tmp_path / "long", 7)  # most ranges own no row start
    assert got.column("c").to_pylist() == ["z" * 500, "y"] and got.column(ROW).to_pylist() == [0, 1]


def test_row_numbers_are_written_in_place_and_a_retry_writes_the_same(tmp_path):
    path = tmp_path / "p.arrow"
    table = pa.table({"a": pa.array(["x"] * 150_000), ROW: pa.array(np.zeros(150_000, dtype=np.int64))})
    write_ipc(table, path)
    ingest_csv.number_rows([str(path)], 1000)
    first = path.read_bytes()
    ingest_csv.number_rows([str(path)], 1000)
    assert path.read_bytes() == first
    got = feather.read_table(path)
    assert got.column(ROW).to_pylist() == list(range(1000, 151_000)) and got.column("a").equals(table.column("a"))


CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "w", "type": "category"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 100, "row_group_rows": 32},
}


def test_the_artifact_does_not_depend_on_the_range_size(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    path = tmp_path / "d.csv"
    path.write_bytes(text(frame(400, 9), "\r\n"))
    files = []
    for i, range_bytes in enumerate((1 << 30, 97)):
        monkeypatch.setattr(ingest_csv, "RANGE_BYTES", range_bytes)
        result = run(CONFIG, path, tmp_path / str(i), npartitions=[None, 3][i])
        files.append(artifact_files(result.artifact["artifact_path"]))
    assert without_created_at(files[0]) == without_created_at(files[1])


def test_an_error_of_a_file_read_whole_names_it_as_the_dataset_does(tmp_path, monkeypatch):
    """Tasks read absolute paths (a worker's working folder may differ); messages name the given one."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "day_0.csv").write_bytes(text(frame(30)))
    (tmp_path / "d" / "day_1.csv").write_bytes(b'id,x,c,w\n1,2.5,"q",1\n2,oops,y,2\n')  # a quote: read whole
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"^d/day_1\.csv: row 1 \(line 3\), column 'x': expected a number, got 'oops'"):
        ranged("d/day_*.csv", tmp_path / "out", 16)
