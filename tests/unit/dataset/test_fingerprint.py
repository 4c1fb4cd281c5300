"""The dataset fingerprint (tasks/dataset/fingerprint.py): a file of one block is its sha256, a larger file the sha256
of its blocks' digests, each block hashed by a Dask task."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tasks.dataset import fingerprint
from tasks.dataset import fingerprint as dataset_fingerprint


def reference(data: bytes, block: int) -> str:
    """The definition in the module's doc, computed with hashlib alone."""
    if len(data) <= block:
        return hashlib.sha256(data).hexdigest()
    digests = b"".join(hashlib.sha256(data[i:i + block]).digest() for i in range(0, len(data), block))
    return hashlib.sha256(fingerprint.BLOCK_TAG + digests).hexdigest()


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=3000), block=st.sampled_from([1, 7, 64, 1000, 4096]))
def test_a_file_is_hashed_by_the_definition(tmp_path_factory, data, block):
    path = tmp_path_factory.mktemp("fp") / "d.bin"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fingerprint, "BLOCK", block)
        assert fingerprint.needs_tasks(str(path)) == (len(data) > block)
        assert dataset_fingerprint.fingerprint(str(path)) == reference(data, block)


def test_a_one_byte_edit_in_any_block_changes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(fingerprint, "BLOCK", 100)
    data = bytes(range(256)) * 2  # 6 blocks, the last one short
    path = tmp_path / "d.bin"
    path.write_bytes(data)
    seen = {fingerprint.fingerprint(str(path))}
    for offset in (0, 99, 100, 250, len(data) - 1):
        edited = bytearray(data)
        edited[offset] ^= 1
        path.write_bytes(bytes(edited))
        seen.add(fingerprint.fingerprint(str(path)))
    assert len(seen) == 6


def test_a_folder_hashes_its_files_the_same_way_at_any_block_size(tmp_path, monkeypatch):
    """A folder's fingerprint names each file's fingerprint: a file's bytes hashed alone or in a folder agree."""
    folder = tmp_path / "days"
    folder.mkdir()
    for i, size in enumerate([10, 500, 1234]):
        (folder / f"day_{i}.csv").write_bytes(bytes((i + j) % 251 for j in range(size)))
    monkeypatch.setattr(fingerprint, "BLOCK", 64)
    whole = fingerprint.fingerprint(str(folder))
    assert fingerprint.fingerprint(f"{folder}/day_*.csv") == whole
    one = tmp_path / "one"
    one.mkdir()
    (one / "day_2.csv").write_bytes((folder / "day_2.csv").read_bytes())
    assert fingerprint.fingerprint(f"{one}/day_2.csv") == reference((folder / "day_2.csv").read_bytes(), 64)
    monkeypatch.setattr(fingerprint, "BLOCK", 1 << 20)
    assert fingerprint.fingerprint(str(folder)) != whole  # the block size is part of the definition


def test_a_file_that_shrinks_while_it_is_hashed_is_named(tmp_path, monkeypatch):
    path = tmp_path / "d.bin"
    path.write_bytes(b"x" * 300)
    monkeypatch.setattr(fingerprint, "BLOCK", 100)
    monkeypatch.setattr(fingerprint, "size_of", lambda p: 400)  # the size read before the file was cut
    with pytest.raises(DataError, match=r"d\.bin: the file ended at byte 300, before byte 400"):
        fingerprint.fingerprint(str(path))


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match=r"nope\.csv: dataset file not found"):
        fingerprint.fingerprint(str(tmp_path / "nope.csv"))
