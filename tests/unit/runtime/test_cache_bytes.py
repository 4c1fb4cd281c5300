"""The cache's bytes policy (``tasks.runtime.frame.PART_COMPRESSION``): the large Arrow IPC parts (ingest's of
a Parquet input, encode's) are written with it, every reader takes them so, and the artifact's bytes do not
depend on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from storage.artifact import Artifact
from tasks.runtime import frame
from tests.helpers import artifact_files, run, without_created_at

ROWS = 6000
CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.7, 0.2, 0.1]}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 1000, "row_group_rows": 250},
}


def _dataset(path: Path) -> Path:
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"x": np.round(rng.normal(size=ROWS), 2),
                       "c": rng.choice(["alpha", "beta", "gamma", "delta"], size=ROWS),
                       "y": rng.integers(0, 2, size=ROWS).astype(bool)})
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=1500)
    return path


def _parts(cache: Path, stage: str) -> list[Path]:
    return sorted((cache / stage).glob("*/**/part-*.arrow"))


def _uncompressed_bytes(part: Path) -> int:
    """The size of the part's table written as an uncompressed Arrow IPC file."""
    with ipc.open_file(part) as reader:
        table = reader.read_all()
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().size


@pytest.mark.parametrize("stage", ["ingest", "encode"])
def test_compressed_policy_keeps_no_uncompressed_copy(tmp_path, monkeypatch, stage):
    monkeypatch.setattr(frame, "PART_COMPRESSION", "lz4")
    result = run(CONFIG, _dataset(tmp_path / "d.parquet"), tmp_path)
    assert result.artifact is not None
    parts = _parts(tmp_path / "cache", stage)
    assert parts
    stored = sum(p.stat().st_size for p in parts)
    assert stored < 0.8 * sum(_uncompressed_bytes(p) for p in parts)


@pytest.mark.parametrize("npartitions", [1, 3, 7])
def test_artifact_does_not_depend_on_part_compression(tmp_path, monkeypatch, npartitions):
    data = _dataset(tmp_path / "d.parquet")
    monkeypatch.setattr(frame, "PART_COMPRESSION", "lz4")
    compressed = run(CONFIG, data, tmp_path / "a", npartitions)
    monkeypatch.setattr(frame, "PART_COMPRESSION", "uncompressed")
    plain = run(CONFIG, data, tmp_path / "b", npartitions)
    plain_parts = _parts(tmp_path / "b" / "cache", "ingest")
    assert sum(p.stat().st_size for p in plain_parts) == sum(_uncompressed_bytes(p) for p in plain_parts)
    assert compressed.artifact["artifact_id"] == plain.artifact["artifact_id"]
    assert without_created_at(artifact_files(compressed.artifact["artifact_path"])) == \
        without_created_at(artifact_files(plain.artifact["artifact_path"]))


def test_a_changed_fill_value_recomputes_from_fill_missing_on(tmp_path):
    data = _dataset(tmp_path / "d.parquet")
    first = run(CONFIG, data, tmp_path)
    changed = {**CONFIG, "input_features": [
        {"name": "x", "type": "number",
         "preprocessing": {"missing_value_strategy": "fill_with_const", "fill_value": -1.0}},
        CONFIG["input_features"][1]]}
    second = run(changed, data, tmp_path)
    names = [s.stage for s in second.stages]
    first_changed = names.index("fill_missing")
    assert [s.cached for s in second.stages[:first_changed]] == [True] * first_changed
    assert not any(s.cached for s in second.stages[first_changed:] if s.stage in ("fill_missing", "vocab", "encode"))
    assert second.artifact["artifact_id"] != first.artifact["artifact_id"]


def test_parquet_vocabularies_are_linked_into_the_artifact_not_written_again(tmp_path, monkeypatch):
    from tasks.features import category

    monkeypatch.setattr(category, "INLINE_MAX", 2)  # the 4-value vocabulary is stored as a Parquet file
    result = run(CONFIG, _dataset(tmp_path / "d.parquet"), tmp_path)
    published = sorted((Path(result.artifact["artifact_path"]) / "vocab").glob("*.parquet"))
    assert published
    cached = {p.name: p for p in (tmp_path / "cache" / "vocab").glob("*/vocab/*.parquet")}
    for path in published:
        assert path.stat().st_ino == cached[path.name].stat().st_ino
    Artifact.open(result.artifact["artifact_path"], verify=True)  # the manifest's hashes hold
