"""The stage contract for custom stages: the artifact is byte-identical for any partition count, with
raw-phase and filled-phase stages, a fitted stage, ffill on a stage-made feature (carries across
partitions) and a custom feature type; a rerun recomputes nothing."""

from __future__ import annotations

import pytest

from tests.custom_stage_helpers import ensure_example_plugin, frame
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "stages": [{"uses": "haversine", "after": "fill_missing"},
               {"uses": "frequency_encode", "after": "ingest", "params": {"column": "carrier"}},
               {"uses": "tests.custom_stage_helpers:Centered", "after": "haversine"}],
    "input_features": [{"name": "distance", "type": "number", "preprocessing": {"missing_value_strategy": "bfill"}},
                       {"name": "distance_km", "type": "number", "preprocessing": {"missing_value_strategy": "ffill"}},
                       {"name": "distance_centered", "type": "number"},
                       {"name": "carrier_freq", "type": "number", "preprocessing": {"normalization": "minmax"}},
                       {"name": "notes", "type": "hashed_tokens", "preprocessing": {"num_buckets": 256}}],
    "output_features": [{"name": "label", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3},
                      "oversample_minority": 0.9},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 300, "row_group_rows": 64},
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    ensure_example_plugin()
    return write_csv(frame(1500, seed=5), tmp_path_factory.mktemp("data") / "trips.csv")


def test_custom_stage_artifact_is_byte_identical_for_any_partition_count(dataset, tmp_path):
    files = {}
    for n in (1, 3, 7):
        result = run(CONFIG, dataset, tmp_path / str(n), npartitions=n)
        files[n] = without_created_at(artifact_files(result.artifact["artifact_path"]))
    assert files[1] == files[3] == files[7]
    again = run(CONFIG, dataset, tmp_path / "3", npartitions=3)
    assert all(s.cached for s in again.stages)
    assert [s.stage for s in again.stages][5:8] == ["frequency_encode", "haversine", "centered"]
