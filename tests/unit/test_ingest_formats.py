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
    from tasks import frame, ingest
    from tasks.config import parse_config
    from tasks.context import RunContext

    ctx = RunContext(parse_config(CONFIG), str(write("csv", tmp_path / "d.csv")), StageCache(tmp_path / "c"))
    result = ingest.run(ctx)
    ddf = frame.read_ingested(ingest.data_dir(result.path), None)
    assert str(ddf["cat"].dtype) in ("string", "str", "large_string[pyarrow]", "string[pyarrow]")
    assert ddf["cat"].compute().array.__class__.__name__ in ("ArrowStringArray", "ArrowStringArrayNumpySemantics",
                                                             "ArrowExtensionArray")
    assert "unused" not in ddf.columns  # only the columns the config names are read


def test_unknown_extension_is_a_clear_error(tmp_path):
    from tasks.errors import DataError

    path = tmp_path / "d.txt"
    path.write_text("a\n1\n")
    with pytest.raises(DataError, match="cannot tell the format"):
        run(CONFIG, path, tmp_path)
