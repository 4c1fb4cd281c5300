"""Sizes an artifact states are held against its files before anything is allocated by them.

Each case is a crafted artifact (a published one, edited, its manifest re-signed, tests/artifact_crafting.py):
a manifest row count, an ``.npy`` dtype, a Parquet footer, a text feature's ``max_sequence_length`` or an
object on the store larger than listed. Each ends in one ``IntegrityError`` naming the file or the feature;
the calls that would allocate by the lie run in a fresh interpreter (its address space capped, so a
regression fails instead of swapping) whose peak RSS and time are measured. The same store case on a real
S3 endpoint: tests/integration/test_s3_artifact_sizes.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prepflow import Artifact, Preprocessor
from storage import npy
from storage.size_checks import MAX_ROW_ITEMS
from tests.artifact_crafting import CONFIG, copy, edit_json, edit_spec, frame, refused, sign
from tests.conftest import ROOT
from tests.helpers import run, write_csv

PEAK_RSS_MB = 500
SECONDS = 10
BOMB_ROWS = 5_000_000  # a shard of this many rows of one repeated row: ~0.2 MB on disk, ~1 GB decoded


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sizes")
    config = {**CONFIG, "input_features": [*CONFIG["input_features"], {"name": "t", "type": "text"}]}
    df = frame().assign(t=np.resize(["a b c", "hello world", "x"], len(frame())))
    return Path(run(config, write_csv(df, tmp / "data.csv"), tmp).artifact["artifact_path"])


@pytest.fixture
def art(made, tmp_path) -> Path:
    return copy(made, tmp_path)




def measured(code: str, env: dict | None = None) -> tuple[list[str], float, float]:
    """``code`` run in a fresh interpreter (``attempt(label, call)`` prints whether ``call`` was refused): its
    printed lines, the seconds the calls after the imports took, and its peak RSS in MB."""
    script = f"""
import resource, time
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
from core.errors import IntegrityError
from prepflow import Artifact, Preprocessor
import torch  # imported before the clock starts (~3 s), as a training script has it
start = time.perf_counter()
def attempt(label, call):
    try:
        call()
        print(label, "ACCEPTED")
    except IntegrityError as exc:
        print(label, "REFUSED", exc)
{code}
print("SECONDS", time.perf_counter() - start)
# VmHWM: this process's own peak (getrusage's ru_maxrss keeps the forking parent's across exec)
print("RSS_MB", next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    values = dict(line.split(" ", 1) for line in lines if line.startswith(("SECONDS", "RSS_MB")))
    return [line for line in lines if not line.startswith(("SECONDS", "RSS_MB"))], float(values["SECONDS"]), \
        float(values["RSS_MB"])


# ---- row counts ---------------------------------------------------------------------------------------------

def test_a_manifest_row_count_unlike_the_files_is_refused_before_batches_or_len_believe_it(art):
    rows = 2_000_000_000
    edit_json(art, "manifest.json", lambda m: m["rows"].update(train=rows))
    lines, seconds, rss = measured(f"""
art = Artifact.open({str(art)!r}, verify=True)  # every file matches its listing: only the count is a lie
attempt("batches", lambda: next(iter(art.batches("train", batch_size=64))))
attempt("parquet", lambda: next(iter(art.batches("train", batch_size=64, prefer="parquet"))))
attempt("len", lambda: len(art.torch_dataset("train")))
attempt("read_split", lambda: art.read_split("train"))
""")
    assert len(lines) == 4 and all(" REFUSED " in line for line in lines), lines
    assert all(f"manifest {rows}" in line and f"{art}/train/" in line for line in lines), lines
    assert "Age.npy (feature 'Age')" in lines[0] and "part-00000.parquet" in lines[1], lines
    assert seconds < SECONDS and rss < PEAK_RSS_MB, (seconds, rss)


@pytest.mark.parametrize("descr", ["|V0", "<U0"])
def test_an_npy_header_of_a_zero_byte_dtype_is_refused(art, descr):
    path = art / "train" / "Age.npy"
    with open(path, "wb") as fh:  # 10**12 values of no bytes: a file of no data matches any shape
        np.lib.format.write_array_header_1_0(fh, {"descr": descr, "fortran_order": False, "shape": (10**12,)})
    sign(art, "train/Age.npy")
    for mmap_mode in (None, "r"):
        refused(lambda mode=mmap_mode: npy.load(path, mmap_mode=mode, feature="Age"), str(path), "feature 'Age'",
                "0 bytes per value")
    refused(lambda: npy.check_file(path), str(path), "0 bytes per value")
    refused(lambda: Artifact.open(art).batches("train", channels=["numerical"]), "train/Age.npy")


def bomb(shard: Path, rows: int = BOMB_ROWS) -> None:
    """Rewrite ``shard`` as ``rows`` copies of its first row: a genuine Parquet file, tiny on disk."""
    table = pq.read_table(shard)
    block = table.take(pa.array(np.zeros(500_000, dtype=np.int32)))
    with pq.ParquetWriter(shard, table.schema, compression="zstd") as writer:
        for _ in range(rows // len(block)):
            writer.write_table(block)


def test_a_parquet_shard_whose_footer_claims_more_rows_is_refused_before_it_is_decoded(art):
    shard = art / "train" / "part-00000.parquet"
    bomb(shard)
    sign(art, "train/part-00000.parquet")
    assert shard.stat().st_size < 2 << 20
    lines, seconds, rss = measured(f"""
art = Artifact.open({str(art)!r}, verify=True)
attempt("batches", lambda: next(iter(art.batches("train", batch_size=64, prefer="parquet"))))
attempt("len", lambda: len(art.torch_dataset("train", prefer="parquet")))
attempt("read_split", lambda: art.read_split("train"))
""")
    assert len(lines) == 3 and all(" REFUSED " in line for line in lines), lines
    assert all(f"{shard}: the footer declares {BOMB_ROWS} rows" in line for line in lines), lines
    assert seconds < SECONDS and rss < PEAK_RSS_MB, (seconds, rss)


def test_a_streamed_shard_whose_footer_claims_more_rows_is_refused_before_it_is_decoded(art, tmp_path, monkeypatch):
    bomb(art / "train" / "part-00000.parquet", 1_000_000)
    sign(art, "train/part-00000.parquet")
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "cache"))
    url = f"memory://prepflow-sizes-{tmp_path.name}/{art.name}"
    fsspec.filesystem("memory").put(str(art) + "/", url, recursive=True)
    try:
        opened = Artifact.open(url, stream=True, cache_dir=tmp_path / "shards")
        refused(lambda: list(opened.batches("train", batch_size=64)), "train/part-00000.parquet",
                "the footer declares 1000000 rows", "210")
    finally:
        fsspec.filesystem("memory").rm(url, recursive=True)


def test_a_streamed_row_count_unlike_the_shards_is_refused_before_the_order_is_built(art, tmp_path):
    rows = 2_000_000_000  # with shard_rows to match, the shard count agrees: only the footers tell
    edit_json(art, "manifest.json", lambda m: (m["rows"].update(train=rows),
                                               m["config"].setdefault("publish", {}).update(shard_rows=rows)))
    url = f"memory://prepflow-sizes-{tmp_path.name}/{art.name}"
    lines, seconds, rss = measured(f"""
import fsspec
fsspec.filesystem("memory").put({str(art) + "/"!r}, {url!r}, recursive=True)
opened = Artifact.open({url!r}, stream=True, cache_dir={str(tmp_path / "shards")!r})
attempt("batches", lambda: next(iter(opened.batches("train", batch_size=64))))
""", env={"PREPFLOW_ARTIFACT_CACHE": str(tmp_path / "cache")})
    assert len(lines) == 1 and " REFUSED " in lines[0], lines
    assert f"{url}/train/part-00000.parquet: the footer declares 210 rows" in lines[0] and str(rows) in lines[0]
    assert seconds < SECONDS and rss < PEAK_RSS_MB, (seconds, rss)


# ---- row shapes ---------------------------------------------------------------------------------------------

def long_text(art: Path, length: int) -> None:
    edit_json(art, "training_set_metadata.json", lambda m: m["t"].update(max_sequence_length=length))
    edit_spec(art, lambda spec: spec["feature_spec"]["t"].update(shape=[length]))


def test_a_max_sequence_length_over_the_ceiling_is_refused_before_transform_allocates(art):
    long_text(art, 10**9)
    lines, seconds, rss = measured(f"""
from pathlib import Path
row = [{{"Age": 1.0, "c": "a", "s": "a b", "t": "a b", "y": 1}}]
attempt("load", lambda: Preprocessor.load({str(art)!r}).transform(row))
attempt("json", lambda: Preprocessor.from_json(Path({str(art)!r}) / "training_set_metadata.json", ["y"]).transform(row))
""")
    assert len(lines) == 2 and all(" REFUSED " in line for line in lines), lines
    assert all("training_set_metadata.json: feature 't': max_sequence_length is 1000000000" in line
               and str(MAX_ROW_ITEMS) in line for line in lines), lines
    assert seconds < SECONDS and rss < PEAK_RSS_MB, (seconds, rss)


def test_a_max_sequence_length_unlike_the_published_columns_is_refused(art):
    long_text(art, 4096)  # under the ceiling, metadata and spec agreeing: the files' own shapes say otherwise
    refused(lambda: Preprocessor.load(art), f"{art}/", "part-00000.parquet: column 't' has rows of shape [3]",
            "feature_spec.yaml [4096]")


def test_any_encoded_column_over_the_ceiling_is_refused_when_the_preprocessor_is_built(art):
    def wide(metadata):  # a multi-hot set column as wide as its vocab_size, no stored vocabulary to compare
        for key in ("idx2str", "str2idx", "str2freq"):
            metadata["s"].pop(key, None)
        metadata["s"]["vocab_size"] = MAX_ROW_ITEMS + 1
    edit_json(art, "training_set_metadata.json", wide)
    refused(lambda: Preprocessor.from_json(art / "training_set_metadata.json", ["y"]),
            "training_set_metadata.json: feature 's': column 's'", f"[{MAX_ROW_ITEMS + 1}]", str(MAX_ROW_ITEMS))


def test_a_channel_row_over_the_ceiling_is_refused_before_a_batch_is_allocated(art):
    def huge(spec):  # a lazy-media-like item shape nothing on disk holds
        spec["feature_spec"]["t"]["shape"] = [MAX_ROW_ITEMS + 1]
    edit_spec(art, huge)
    refused(lambda: Artifact.open(art).batches("train"), "feature_spec.yaml: column 't'", str(MAX_ROW_ITEMS))


# ---- the store -------------------------------------------------------------------------------------------------

def test_an_object_larger_than_its_listed_size_is_refused_after_reading_at_most_that(art, tmp_path, monkeypatch):
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "cache"))
    url = f"memory://prepflow-sizes-{tmp_path.name}/{art.name}"
    fs = fsspec.filesystem("memory")
    fs.put(str(art) + "/", url, recursive=True)
    listed = json.loads((art / "manifest.json").read_text())["files"]["train/Age.npy"]["bytes"]
    fs.pipe_file(f"{url}/train/Age.npy", b"\0" * (listed * 1000))
    reads = []
    real_open = type(fs)._open

    def counted(self, path, mode="rb", **kwargs):
        handle = real_open(self, path, mode, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: reads.append((path, n)) or real_read(n)
        return handle

    monkeypatch.setattr(type(fs), "_open", counted)
    try:
        refused(lambda: Artifact.open(url), f"{url}/train/Age.npy", f"{listed * 1000} bytes on the store",
                f"lists {listed}")
        assert all(n != -1 and n <= listed + 1 for path, n in reads if path.endswith("train/Age.npy")), reads
        assert not (tmp_path / "cache" / art.name).exists()
    finally:
        fs.rm(url, recursive=True)
