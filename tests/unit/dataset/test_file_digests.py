"""File digests (storage.hashing.file_digest) and what storage.cache records and checks with them: cache
entries list XXH3-128, artifacts' manifests sha256, and a listing is checked with the digest it records."""

from __future__ import annotations

import hashlib
import json

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import cache
from storage.hashing import file_digest


@pytest.mark.parametrize("data", [b"", b"x", bytes(range(256)) * 5000])
def test_digests_are_the_libraries_digests_of_the_bytes(tmp_path, data):
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(str(path), "sha256") == hashlib.sha256(data).hexdigest()
    assert file_digest(str(path), "xxh3_128") == xxhash.xxh3_128_hexdigest(data)
    with pytest.raises(ValueError, match="unknown file digest 'md5'"):
        file_digest(str(path), "md5")


def test_cache_entries_record_xxh3_and_catch_a_flipped_byte(tmp_path):
    store = cache.StageCache(tmp_path / "cache")
    with store.writer("ingest", "k1") as folder:
        (folder / "data").mkdir()
        (folder / "data" / "part-00000.arrow").write_bytes(b"a" * 1000)
        (folder / "small.json").write_text("{}")
    entry = store.get("ingest", "k1")
    listed = json.loads((entry / cache.ENTRY_FILE).read_text())["files"]
    assert listed["data/part-00000.arrow"] == {"xxh3_128": xxhash.xxh3_128_hexdigest(b"a" * 1000), "bytes": 1000}
    assert cache.verify_files(entry, listed) == []
    (entry / "data" / "part-00000.arrow").write_bytes(b"a" * 999 + b"b")  # same size, one byte changed
    assert cache.verify_files(entry, listed) == ["data/part-00000.arrow: xxh3_128 differs from the recorded one"]
    assert store.get("ingest", "k1") is None  # moved aside: the stage recomputes it


def test_a_listing_is_checked_with_the_digest_each_file_records(tmp_path):
    (tmp_path / "a").write_bytes(b"alpha")
    (tmp_path / "b").write_bytes(b"beta")
    (tmp_path / "c").write_bytes(b"gamma")
    files = {  # an entry written by an older prepflow (sha256) beside new ones, and one with no digest
        "a": {"sha256": hashlib.sha256(b"alpha").hexdigest(), "bytes": 5},
        "b": {"xxh3_128": xxhash.xxh3_128_hexdigest(b"beta"), "bytes": 4},
        "c": {"bytes": 5},
    }
    assert cache.verify_files(tmp_path, files) == ["c: no digest recorded (expected one of sha256, xxh3_128)"]
    files["a"]["sha256"] = hashlib.sha256(b"alphA").hexdigest()
    files["b"]["xxh3_128"] = xxhash.xxh3_128_hexdigest(b"betA")
    del files["c"]
    assert cache.verify_files(tmp_path, files) == ["a: sha256 differs from the recorded one",
                                                   "b: xxh3_128 differs from the recorded one"]


def test_many_large_files_hash_on_threads_to_the_same_digests(tmp_path):
    paths = []
    for i in range(3):
        path = tmp_path / f"part-{i}.bin"
        path.write_bytes(bytes([i]) * (cache.PARALLEL_HASH_BYTES // 2))
        paths.append(str(path))
    for algorithm in ("sha256", "xxh3_128"):
        assert cache.file_digests(paths, algorithm) == [file_digest(p, algorithm) for p in paths]
    assert cache.describe_files(tmp_path, "sha256")["part-1.bin"] == {
        "sha256": hashlib.sha256(bytes([1]) * (cache.PARALLEL_HASH_BYTES // 2)).hexdigest(),
        "bytes": cache.PARALLEL_HASH_BYTES // 2}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 120))
def test_hashing_tasks_take_consecutive_files_of_at_least_the_target_size(tmp_path_factory, sizes, target):
    folder = tmp_path_factory.mktemp("groups")
    paths = []
    for i, size in enumerate(sizes):
        (folder / f"f{i:02d}").write_bytes(b"x" * size)
        paths.append(str(folder / f"f{i:02d}"))
    groups = cache._size_groups(paths, target)
    assert [p for g in groups for p in g] == paths  # every file once, in order
    assert all(g for g in groups[1:])  # no empty task (the first is empty only without files)
    for g in groups[:-1]:  # each full group reaches the target and would not without its last file
        bytes_ = [sizes[paths.index(p)] for p in g]
        assert sum(bytes_) >= target > sum(bytes_[:-1])
