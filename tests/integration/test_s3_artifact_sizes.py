"""An object on a real S3 endpoint (moto's server, tests/integration/test_s3_artifact.py) larger than its
manifest lists: a download (``Artifact.open``) and a streamed read (``stream=True``) stop at the listed size
and refuse it by name, in a fresh interpreter whose peak RSS and time are measured (the memory:// case:
tests/unit/artifact/test_artifact_sizes.py)."""

from __future__ import annotations

import json

import pytest

from tests.artifact_crafting import copy, publish
from tests.integration.test_s3_artifact import BUCKET, in_env, s3_env  # noqa: F401  (the fixtures)
from tests.integration.test_s3_artifact_safety import cached, s3, upload
from tests.unit.artifact.test_artifact_sizes import PEAK_RSS_MB, SECONDS, measured

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("in_env")]

LARGE = 150_000_000  # bytes of the object put in place of a shard of a few kB


def test_an_s3_object_larger_than_listed_is_refused_without_downloading_it(tmp_path):
    art = copy(publish(tmp_path / "made"), tmp_path)
    rel = "train/part-00000.parquet"
    listed = json.loads((art / "manifest.json").read_text())["files"][rel]["bytes"]
    url = f"s3://{BUCKET}/sizes/{tmp_path.name}/{art.name}"
    upload(art, url)
    s3().pipe_file(f"{url}/{rel}", b"\0" * LARGE)
    s3().invalidate_cache()
    lines, seconds, rss = measured(f"""
attempt("open", lambda: Artifact.open({url!r}))
attempt("stream", lambda: next(iter(Artifact.open({url!r}, stream=True, cache_dir={str(tmp_path / 'shards')!r})
                                    .batches("train", batch_size=64))))
""")  # the endpoint, credentials and artifact cache: in_env's environment
    assert len(lines) == 2 and all(" REFUSED " in line for line in lines), lines
    assert all(f"{url}/{rel}: " in line and f"lists {listed}" in line for line in lines), lines
    assert f"{LARGE} bytes on the store" in lines[0], lines
    assert seconds < SECONDS and rss < PEAK_RSS_MB, (seconds, rss)
    assert art.name not in cached(tmp_path)  # no download renamed into the cache (streamed/ holds the description)
    shards = tmp_path / "shards"
    assert not shards.exists() or all(p.stat().st_size <= listed for p in shards.iterdir())
