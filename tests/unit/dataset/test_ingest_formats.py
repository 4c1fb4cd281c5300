"""Every input format (and fsspec URLs) gives the same encoded data."""

from __future__ import annotations

import json

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from storage.artifact import Artifact
from tests.helpers import run

CONFIG = {
    "input_features": [{"name": "num", "type": "number"}, {"name": "cat", "type": "category"},
                       {"name": "flag", "type": "binary"}],
    "output_features": [{"name": "y", "type": "category"}],
}
DF = pd.DataFrame({"num": [1.5, None, 3.0, 4.25, 5.0, 6.0], "cat": ["a", "b", None, "a", "c", "a"],
                   "flag": [True, False, True, None, False, True], "y": ["p", "q", "p", "p", "q", "p"],
                   "unused": [1, 2, 3, 4, 5, 6]})


def write(fmt: str, path):
    if fmt == "csv":
        DF.to_csv(path, index=False)
    elif fmt == "tsv":
        DF.to_csv(path, index=False, sep="\t")
    elif fmt == "json":
        path.write_text(json.dumps(json.loads(DF.to_json(orient="records"))))
    elif fmt == "jsonl":
        DF.to_json(path, orient="records", lines=True)
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(DF, preserve_index=False), path)
    elif fmt == "feather":
        feather.write_feather(pa.Table.from_pandas(DF, preserve_index=False), path)
    return path


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    result = run(CONFIG, write("csv", tmp / "d.csv"), tmp)
    art = Artifact.open(result.artifact["artifact_path"])
    return {s: art.read_split(s) for s in art.splits}


def same(art: Artifact, expected: dict) -> None:
    for split, data in expected.items():
        got = art.read_split(split)
        assert got.keys() == data.keys()
        for k in data:
            np.testing.assert_array_equal(got[k], data[k])


@pytest.mark.parametrize("fmt", ["tsv", "json", "jsonl", "parquet", "feather"])
def test_formats_give_the_same_encoding(tmp_path, fmt, expected):
    result = run(CONFIG, write(fmt, tmp_path / f"d.{fmt}"), tmp_path)
    same(Artifact.open(result.artifact["artifact_path"]), expected)


def test_fsspec_urls(tmp_path, expected):
    path = write("csv", tmp_path / "d.csv")
    result = run(CONFIG, f"file://{path}", tmp_path / "a")
    same(Artifact.open(result.artifact["artifact_path"]), expected)
    with fsspec.open("memory://bucket/d.csv", "wb") as fh:
        fh.write(path.read_bytes())
    result = run(CONFIG, "memory://bucket/d.csv", tmp_path / "b")
    same(Artifact.open(result.artifact["artifact_path"]), expected)


def test_strings_are_read_as_arrow_strings(tmp_path):
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.graph import execute
    from tasks.ingest import stage as ingest
    from tasks.runtime import frame
    from tasks.runtime.context import RunContext

    ctx = RunContext(parse_config(CONFIG), str(write("csv", tmp_path / "d.csv")), StageCache(tmp_path / "c"))
    result = execute(ingest.NODE, ctx, [])
    ddf = frame.read_ingested(result.parts, None)
    assert str(ddf["cat"].dtype) in ("string", "str", "large_string[pyarrow]", "string[pyarrow]")
    assert ddf["cat"].compute().array.__class__.__name__ in ("ArrowStringArray", "ArrowStringArrayNumpySemantics",
                                                             "ArrowExtensionArray")
    assert "unused" not in ddf.columns  # only the columns the config names are read


def test_unknown_extension_is_a_clear_error(tmp_path):
    from core.errors import DataError

    path = tmp_path / "d.txt"
    path.write_text("a\n1\n")
    with pytest.raises(DataError, match="cannot tell the format"):
        run(CONFIG, path, tmp_path)


def _ingest_parts(path, out, spec) -> dict[str, pa.Table]:
    from tasks.ingest import spec as ingest_spec
    from tasks.ingest import stage as ingest

    ingest_spec.write_parts(ingest.read_batches(str(path), spec), spec, out, str(path))
    return {p.name: feather.read_table(p) for p in sorted(out.glob("part-*.arrow"))}


def test_whole_and_streamed_csv_reads_write_the_same_parts(tmp_path, monkeypatch):
    """Small local CSVs are parsed whole (every core), others streamed in blocks: the same cached parts (the
    same values, rows and part boundaries; a part cut from one block may keep a longer string buffer)."""
    from tasks.ingest import spec as ingest_spec
    from tasks.ingest import stage as ingest

    rng = np.random.default_rng(0)
    n = 5000
    df = pd.DataFrame({"num": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)),
                       "cat": rng.choice(["a", "b", 'say "hi"', "two\nlines", None], size=n)})
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    spec = ingest_spec.IngestSpec(columns={"num": "float64", "cat": "string"}, format="csv")
    monkeypatch.setattr(ingest_spec, "PART_ROWS", 1200)  # parts cross the streamed reader's blocks
    whole = _ingest_parts(path, tmp_path / "whole", spec)
    monkeypatch.setattr(ingest, "WHOLE_READ_BYTES", 0)
    streamed = []
    real_open = ingest.pacsv.open_csv
    monkeypatch.setattr(ingest.pacsv, "open_csv", lambda *a, **k: streamed.append(1) or real_open(
        *a, **{**k, "read_options": ingest.pacsv.ReadOptions(block_size=16 << 10)}))
    again = _ingest_parts(path, tmp_path / "streamed", spec)
    assert streamed and len(whole) == 5 and again.keys() == whole.keys()
    for name, table in whole.items():
        assert table.equals(again[name]) and table.num_rows == again[name].num_rows


@pytest.mark.parametrize("whole_read_bytes", [0, 1 << 30])
def test_a_bad_number_is_located_by_either_csv_read(tmp_path, monkeypatch, whole_read_bytes):
    from core.errors import DataError
    from tasks.ingest import spec as ingest_spec
    from tasks.ingest import stage as ingest

    monkeypatch.setattr(ingest, "WHOLE_READ_BYTES", whole_read_bytes)
    path = tmp_path / "d.csv"
    path.write_text("num,cat\n" + "".join(f"{i},x\n" for i in range(300)) + "12 kg,y\n")
    spec = ingest_spec.IngestSpec(columns={"num": "float64", "cat": "string"}, format="csv")
    with pytest.raises(DataError, match=r"line 302.*num.*12 kg"):
        _ingest_parts(path, tmp_path / "out", spec)
