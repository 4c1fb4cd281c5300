"""Corruption on disk is caught by the recorded sha256, not by a crash in a reader (issue 9).

A cache entry whose file was truncated or edited is reported (a warning naming the entry and the
file) and recomputed; an artifact file edited after publishing makes ``prepflow inspect --verify``
exit non-zero naming the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.cli import main as cli_main
from tests.conftest import EXAMPLE
from tests.helpers import artifact_files

ENV = {"SOURCE_DATE_EPOCH": "1700000000"}


# The runs: the in-process runner of the same stage graph in the fast lane, Prefect's flow on its local
# server in the integration lane.
@pytest.fixture(params=["off", pytest.param("local-server", marks=pytest.mark.integration)])
def prefect(request) -> str:
    return request.param


def _run(cli, tmp: Path, prefect: str, *extra: str):
    return cli("run", EXAMPLE / "config.yaml", "--dataset", EXAMPLE / "titanic.csv", "--output", tmp / "out",
               "--cache-dir", tmp / "cache", "--json", *extra, env={**ENV, "PREPFLOW_PREFECT": prefect})


@pytest.fixture
def published(cli, tmp_path, prefect):
    first = _run(cli, tmp_path, prefect)
    assert first.returncode == 0, first.stderr
    return first.json()


def _entry(cache: Path, stage: str) -> Path:
    (entry,) = [p for p in (cache / stage).iterdir() if not p.name.startswith(".")]
    return entry


def test_corrupt_cache_entries_are_reported_and_recomputed(cli, tmp_path, published, prefect):
    cache = tmp_path / "cache"
    ingest_entry, encode_entry = _entry(cache, "ingest"), _entry(cache, "encode")
    part = ingest_entry / "data" / "part-00000.arrow"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    part.write_bytes(bytes(data))
    encoded = sorted(p for p in encode_entry.rglob("*.arrow"))[0]
    encoded.write_bytes(encoded.read_bytes()[:100])  # truncated

    rerun = _run(cli, tmp_path, prefect, "--always-run-flow")
    assert rerun.returncode == 0, rerun.stderr
    output = rerun.stdout + rerun.stderr
    assert f"cache entry ingest/{ingest_entry.name} is corrupt" in output, output[-3000:]
    assert "data/part-00000.arrow: xxh3_128 differs" in output  # cache entries record XXH3-128
    assert f"cache entry encode/{encode_entry.name} is corrupt" in output
    assert f"{encoded.relative_to(encode_entry).as_posix()}: 100 bytes, expected" in output
    summary = rerun.json()
    cached = {s["name"]: s["cached"] for s in summary["stages"]}
    assert not cached["ingest"] and not cached["encode"]
    assert cached["split"] and cached["vocab"]  # same keys: the entries after a recomputed ingest still hit
    assert summary["artifact_id"] == published["artifact_id"]
    assert part.read_bytes() != bytes(data)  # rewritten from the dataset
    assert not [p for p in cache.rglob(".corrupt-*")] and not [p for p in cache.rglob(".tmp-*")]


def _inspect(capfd, *args) -> tuple[int, str]:
    """``prepflow inspect`` in this process (``flows.cli.main``, the command's code without ~4 s of
    imports per call): exit code and stderr."""
    capfd.readouterr()
    code = cli_main(["inspect", *map(str, args)])
    return code, capfd.readouterr().err


def test_inspect_verify_refuses_an_altered_artifact_file(cli, tmp_path, published, capfd):
    art = Path(published["artifact_path"])
    before = artifact_files(art)
    assert _inspect(capfd, art, "--verify")[0] == 0
    shard = art / "train" / "part-00000.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    code, err = _inspect(capfd, art, "--verify")
    assert code == 1
    assert "train/part-00000.parquet: sha256 differs from the recorded one" in err
    assert "Traceback" not in err
    npy = art / "test" / "Age.npy"
    npy.write_bytes(npy.read_bytes()[:-4])
    code, err = _inspect(capfd, tmp_path / "out", "--verify")  # through LATEST
    assert code == 1 and "test/Age.npy:" in err and "expected" in err
    assert len(before) == len(artifact_files(art))


@pytest.mark.integration  # real processes: prepflow run with its local Prefect server, or SIGKILLed writers
def test_rerun_refuses_to_reuse_an_artifact_whose_bytes_changed_in_place(cli, tmp_path, titanic_config,
                                                                           titanic_csv):
    out, cache = tmp_path / "out", tmp_path / "cache"
    first = cli("run", titanic_config, "--dataset", titanic_csv, "--output", out, "--cache-dir", cache, "--json")
    assert first.returncode == 0, first.stderr
    shard = next((out / first.json()["artifact_id"] / "train").glob("*.npy"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # same size, different bytes
    shard.write_bytes(bytes(data))
    again = cli("run", titanic_config, "--dataset", titanic_csv, "--output", out, "--cache-dir", cache, "--json")
    assert again.returncode == 1
    assert shard.name in again.stderr and "do not match manifest.json" in again.stderr
