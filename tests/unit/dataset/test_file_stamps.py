"""A folder's file fingerprints remembered across runs (tasks/dataset/file_stamps.py): a run after a file was
added hashes only that file; a rewrite, even one that restores the size and modification time, is hashed
again (and its earlier record dropped); a file changed in the last seconds and a damaged record are never
trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tasks.dataset import file_stamps, fingerprint
from tasks.dataset.file_stamps import FileStamps
from tests.helpers import names_passed


@pytest.fixture
def hashed(monkeypatch):
    """The files whose bytes are hashed, one entry per block (every read goes through ``hash_block``)."""
    return names_passed(monkeypatch, fingerprint, "hash_block")


def new_process(monkeypatch):
    """What a new ``prepflow run`` process starts with: no fingerprint known in memory."""
    monkeypatch.setattr(fingerprint, "_KNOWN", {})


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def test_a_run_after_a_file_was_added_hashes_only_that_file(tmp_path, hashed, monkeypatch):
    monkeypatch.setattr(file_stamps, "SETTLE_NS", 0)
    monkeypatch.setattr(fingerprint, "BLOCK", 100)  # two blocks per file
    folder, stamps = tmp_path / "days", FileStamps(tmp_path / "cache")
    for i in range(3):
        write(folder, f"day_{i}.csv", bytes([i]) * 150)
    new_process(monkeypatch)
    first = fingerprint.fingerprint(str(folder), stamps)
    assert sorted(set(hashed)) == ["day_0.csv", "day_1.csv", "day_2.csv"] and len(hashed) == 6

    hashed.clear()
    new_process(monkeypatch)
    assert fingerprint.fingerprint(str(folder), stamps) == first
    assert hashed == []

    write(folder, "day_3.csv", b"x" * 150)
    new_process(monkeypatch)
    grown = fingerprint.fingerprint(str(folder), stamps)
    assert hashed == ["day_3.csv", "day_3.csv"]
    new_process(monkeypatch)
    assert grown == fingerprint.fingerprint(str(folder))  # what hashing every byte gives


def test_a_rewrite_that_keeps_the_size_and_modification_time_is_hashed_again(tmp_path, hashed, monkeypatch):
    monkeypatch.setattr(file_stamps, "SETTLE_NS", 0)
    folder, stamps = tmp_path / "days", FileStamps(tmp_path / "cache")
    path = write(folder, "day_0.csv", b"a,b\n1,2\n")
    write(folder, "day_1.csv", b"a,b\n3,4\n")
    before = fingerprint.fingerprint(str(folder), stamps)
    times = os.stat(path)
    path.write_bytes(b"a,b\n9,9\n")  # the same size
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))  # and the same modification time (cp -p)
    hashed.clear()
    new_process(monkeypatch)
    after = fingerprint.fingerprint(str(folder), stamps)
    assert hashed == ["day_0.csv"]  # its change time moved
    assert after != before
    assert len(list(stamps.folder.glob("*.json"))) == 2  # one record per file: day_0's first version forgotten
    hashed.clear()
    new_process(monkeypatch)
    assert fingerprint.fingerprint(str(folder), stamps) == after and hashed == []  # the new version remembered


def test_a_file_changed_in_the_last_seconds_is_hashed_and_not_remembered(tmp_path, hashed, monkeypatch):
    folder, stamps = tmp_path / "days", FileStamps(tmp_path / "cache")
    write(folder, "day_0.csv", b"a\n1\n")
    write(folder, "day_1.csv", b"a\n2\n")
    new_process(monkeypatch)
    fingerprint.fingerprint(str(folder), stamps)
    assert not stamps.folder.exists() or not list(stamps.folder.iterdir())
    hashed.clear()
    new_process(monkeypatch)
    fingerprint.fingerprint(str(folder), stamps)
    assert sorted(hashed) == ["day_0.csv", "day_1.csv"]


@pytest.mark.parametrize("damage", ["not json", '{"stamp": [], "fingerprint": "00"}', "[1, 2]",
                                    "wrong digest"])
def test_a_damaged_or_foreign_record_is_ignored(tmp_path, hashed, monkeypatch, damage):
    monkeypatch.setattr(file_stamps, "SETTLE_NS", 0)
    folder, stamps = tmp_path / "days", FileStamps(tmp_path / "cache")
    write(folder, "day_0.csv", b"a\n1\n")
    write(folder, "day_1.csv", b"a\n2\n")
    right = fingerprint.fingerprint(str(folder), stamps)
    for record in stamps.folder.iterdir():
        if damage == "wrong digest":  # a record of this stamp whose fingerprint is not a digest
            stored = json.loads(record.read_text())
            record.write_text(json.dumps({**stored, "fingerprint": "../../etc"}))
        else:
            record.write_text(damage)
    hashed.clear()
    new_process(monkeypatch)
    assert fingerprint.fingerprint(str(folder), stamps) == right
    assert sorted(hashed) == ["day_0.csv", "day_1.csv"]


def test_a_run_after_a_file_was_added_hashes_only_that_file_in_the_cli_check_and_in_ingest(tmp_path, hashed,
                                                                                             monkeypatch):
    """Two runs on a growing folder with one stage cache: the second run's ingest, and the CLI's check for a
    published artifact (``flows.cli._fingerprint``), read the bytes of the added file only."""
    import argparse

    import pandas as pd

    from flows.cli import _fingerprint
    from tests.helpers import run

    monkeypatch.setattr(file_stamps, "SETTLE_NS", 0)
    monkeypatch.setenv("PREPFLOW_PREFECT", "off")
    config = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}
    folder = tmp_path / "days"
    for i in range(2):
        folder.mkdir(exist_ok=True)
        pd.DataFrame({"x": [i, i + 1.0, 2.0, 3.0], "y": [0, 1, 0, 1]}).to_csv(folder / f"day_{i}.csv", index=False)
    new_process(monkeypatch)
    run(config, folder, tmp_path)
    assert sorted(set(hashed)) == ["day_0.csv", "day_1.csv"]
    pd.DataFrame({"x": [5.0, 6.0, 7.0, 8.0], "y": [1, 0, 1, 0]}).to_csv(folder / "day_2.csv", index=False)
    hashed.clear()
    new_process(monkeypatch)
    args = argparse.Namespace(dataset=str(folder), cache_dir=str(tmp_path / "cache"), dask_address=None)
    checked = _fingerprint(args)
    grown = run(config, folder, tmp_path)
    assert hashed == ["day_2.csv"]
    assert grown.summary()["files"] == {"total": 3, "new": 1}
    new_process(monkeypatch)
    assert checked == fingerprint.fingerprint(str(folder))
