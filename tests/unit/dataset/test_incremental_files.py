"""A dataset of several files is ingested file by file (tasks/ingest/files.py): adding, inserting or
changing a file reads only that file, and the artifact is the one a cold run on the same files publishes;
a file whose columns differ from the first file's is one error naming it, or with ``schema_drift: allow``
its missing column is read as nulls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import DataError
from prepflow import Artifact
from tasks.dataset import fingerprint as dataset_fingerprint
from tasks.ingest import files as ingest_files
from tests.helpers import artifact_files, names_passed, run, without_created_at

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 100, "row_group_rows": 32},
}


def day(i: int, n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(100 + i)
    x = rng.normal(i, 1, n)
    x[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame({"x": x, "c": rng.choice(["a", "b", "c", f"d{i}"], n), "y": rng.choice(["yes", "no"], n)})


def write_day(folder: Path, i: int, df: pd.DataFrame | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"day_{i:02d}.parquet"
    pq.write_table(pa.Table.from_pandas(day(i) if df is None else df, preserve_index=False), path, row_group_size=50)
    return path


@pytest.fixture
def counted_reads(monkeypatch):
    """The files each run reads (every file read goes through ``_write_file``)."""
    from tasks.ingest import stage as ingest_stage

    return names_passed(monkeypatch, ingest_stage, "_write_file")


def test_adding_inserting_and_changing_a_file_reads_only_that_file(tmp_path, counted_reads, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    folder = tmp_path / "days"
    for i in (0, 1, 3):
        write_day(folder, i)
    run(CONFIG, folder, tmp_path)
    assert counted_reads == ["day_00.parquet", "day_01.parquet", "day_03.parquet"]

    counted_reads.clear()
    write_day(folder, 4)  # appended
    grown = run(CONFIG, folder, tmp_path)
    assert counted_reads == ["day_04.parquet"]
    assert grown.summary()["files"] == {"total": 4, "new": 1}

    counted_reads.clear()
    write_day(folder, 2)  # inserted in name order: the later files' rows move, nothing of them is read again
    inserted = run(CONFIG, folder, tmp_path)
    assert counted_reads == ["day_02.parquet"]

    cold = run(CONFIG, folder, tmp_path / "cold")  # a new cache: every file read
    assert inserted.artifact["artifact_id"] == cold.artifact["artifact_id"]
    assert without_created_at(artifact_files(inserted.artifact["artifact_path"])) == \
        without_created_at(artifact_files(cold.artifact["artifact_path"]))
    art = Artifact.open(cold.artifact["artifact_path"])
    names = [f["name"] for f in art.manifest["dataset_files"]]
    assert names == [f"day_{i:02d}.parquet" for i in range(5)]
    fps = {n: fp for n, _p, fp in dataset_fingerprint.files(str(folder))}
    assert {f["name"]: f["fingerprint"] for f in art.manifest["dataset_files"]} == fps
    assert sum(f["rows"] for f in art.manifest["dataset_files"]) == 5 * 120
    # every published row points back to its row of the files concatenated in name order
    rows = np.concatenate([np.asarray(art.read_split(s)["__row__"]) for s in art.splits])
    assert sorted(rows.tolist()) == sorted(set(rows.tolist())) and rows.max() < 5 * 120

    counted_reads.clear()
    write_day(folder, 1, day(1).assign(x=lambda d: d["x"] + 1))  # changed bytes: read again, alone
    run(CONFIG, folder, tmp_path)
    assert counted_reads == ["day_01.parquet"]


def test_one_cold_reader_and_file_by_file_number_rows_the_same(tmp_path):
    """The published rows and their ``__row__`` are the concatenated files' rows, as one file's would be."""
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i)
    whole = pd.concat([day(i) for i in range(3)], ignore_index=True)
    one = tmp_path / "one.parquet"
    pq.write_table(pa.Table.from_pandas(whole, preserve_index=False), one)
    config = {**CONFIG, "preprocessing": {"split": {"type": "random", "probabilities": [1.0, 0.0, 0.0]}}}
    a = Artifact.open(run(config, folder, tmp_path / "a").artifact["artifact_path"]).read_split("train")
    b = Artifact.open(run(config, one, tmp_path / "b").artifact["artifact_path"]).read_split("train")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_a_file_without_a_column_is_named_before_any_file_is_read(tmp_path, counted_reads):
    folder = tmp_path / "days"
    write_day(folder, 0)
    write_day(folder, 1, day(1).drop(columns=["c"]))
    with pytest.raises(DataError, match=r"^day_01\.parquet: has no column 'c' as in day_00\.parquet"):
        run(CONFIG, folder, tmp_path)
    assert counted_reads == []
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_schema_drift_allowed_reads_a_missing_column_as_nulls_and_records_it(tmp_path):
    folder = tmp_path / "days"
    write_day(folder, 0)
    write_day(folder, 1, day(1).drop(columns=["c"]))
    config = {**CONFIG, "preprocessing": {**CONFIG["preprocessing"], "schema_drift": "allow"}}
    result = run(config, folder, tmp_path)
    ingested = next(s for s in result.stages if s.stage == "ingest")
    assert ingested.schema_drift == [{"file": "day_01.parquet", "column": "c", "change": "missing"}]
    art = Artifact.open(result.artifact["artifact_path"])
    assert art.manifest["statistics"]["ingest.schema_drift.c"]["count"] == 1
    data = {s: art.read_split(s) for s in art.splits}
    c = np.concatenate([data[s]["c"] for s in data])
    rows = np.concatenate([data[s]["__row__"] for s in data])
    assert (c[rows >= 120] == 0).all()  # the second file's rows: missing, filled with <UNK> (id 0)


def test_a_hit_whose_file_entries_are_gone_is_recomputed(tmp_path):
    folder = tmp_path / "days"
    for i in range(2):
        write_day(folder, i)
    first = run(CONFIG, folder, tmp_path)
    shutil.rmtree(tmp_path / "cache" / "ingest_file")
    again = run(CONFIG, folder, tmp_path)
    assert again.artifact["artifact_id"] == first.artifact["artifact_id"]
    ingested = next(s for s in again.stages if s.stage == "ingest")
    assert not ingested.cached and all(Path(p).is_file() for p, _o in ingested.parts)
    info = json.loads((Path(ingested.path) / "ingest.json").read_text())
    assert info["read"] == 2 and ingest_files.entries_intact(ingested_cache(tmp_path), info["files"])


def ingested_cache(tmp_path):
    from storage.cache import StageCache

    return StageCache(tmp_path / "cache")


STABLE = {**CONFIG, "input_features": [
    {"name": "x", "type": "number"},  # fill_with_mean: the fill taken in extract
    {"name": "c", "type": "category"},
    {"name": "t", "type": "text", "preprocessing": {"max_sequence_length": 4}},
    {"name": "s", "type": "set"},
    {"name": "b", "type": "number", "preprocessing": {"normalization": "minmax",
                                                       "missing_value_strategy": "fill_with_const", "fill_value": 3}},
], "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3, "exact": False}}}


def rich_day(i: int, n: int = 150) -> pd.DataFrame:
    rng = np.random.default_rng(200 + i)
    df = day(i, n)
    words = np.array(["red", "blue", "fast", "slow", f"w{i}"])
    df["t"] = [" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(n)]
    df["s"] = [" ".join(sorted(set(rng.choice(words, rng.integers(1, 3))))) for _ in range(n)]
    df["b"] = np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n))
    return df


@pytest.fixture
def counted_fits(monkeypatch):
    """The files each fit stage (and the raw gate) fits (``tasks.runtime.file_fits.fit_files`` calls ``fit_file`` per
    file)."""
    from tasks.runtime import file_fits

    fitted: list[tuple[str, int]] = []
    real = file_fits.fit_files

    def fit_files(ctx, ingest, assign, key_slice, fit_file, **kwargs):
        stage = file_fits.entries()[0].removesuffix("_file")  # the node whose per-file entries these are

        def counting(parts, folder):
            fitted.append((stage, parts[0][1]))  # (stage, the file's row offset)
            return fit_file(parts, folder)
        return real(ctx, ingest, assign, key_slice, counting, **kwargs)

    monkeypatch.setattr(file_fits, "fit_files", fit_files)
    return fitted


def test_with_a_stable_split_a_new_file_is_the_only_one_fitted(tmp_path, counted_reads, counted_fits, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, rich_day(i))
    run(STABLE, folder, tmp_path)
    stages = ("fill_missing", "validate_raw", "vocab")  # validate_raw: the raw gate's bundles (tasks.validate.raw_files)
    assert sorted(counted_fits) == sorted((s, o) for s in stages for o in (0, 150, 300))

    counted_fits.clear()
    write_day(folder, 3, rich_day(3))
    grown = run(STABLE, folder, tmp_path)
    assert sorted(counted_fits) == [(s, 450) for s in stages]  # the earlier files' fits reused
    cold = run(STABLE, folder, tmp_path / "cold")
    assert without_created_at(artifact_files(grown.artifact["artifact_path"])) == \
        without_created_at(artifact_files(cold.artifact["artifact_path"]))


def test_fitting_file_by_file_gives_the_fit_of_all_rows_at_once(tmp_path, monkeypatch):
    """The per-file fits merged give the metadata of one fit over every row (the path a dataset of one file,
    custom stages or ffill take), for exact and stable splits, any partitioning."""
    from tasks.runtime import file_fits

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, rich_day(i))
    for exact in (True, False):
        config = {**STABLE, "preprocessing": {"split": {**STABLE["preprocessing"]["split"], "exact": exact}}}
        by_file = run(config, folder, tmp_path / f"files-{exact}", npartitions=2)
        with monkeypatch.context() as m:
            m.setattr(file_fits, "applicable", lambda *a: False)
            at_once = run(config, folder, tmp_path / f"once-{exact}", npartitions=5)
        assert without_created_at(artifact_files(by_file.artifact["artifact_path"])) == \
            without_created_at(artifact_files(at_once.artifact["artifact_path"]))


def test_an_untyped_feature_is_profiled_file_by_file(tmp_path, counted_fits):
    config = {**CONFIG, "input_features": [*CONFIG["input_features"], {"name": "u", "column": "c"}]}
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i)
    run(config, folder, tmp_path)
    assert sorted(o for s, o in counted_fits if s == "infer_types") == [0, 120, 240]
    counted_fits.clear()
    write_day(folder, 3)
    grown = run(config, folder, tmp_path)
    assert [o for s, o in counted_fits if s == "infer_types"] == [360]  # the new file's profile only
    types = next(s for s in grown.stages if s.stage == "infer_types").types()
    one = tmp_path / "one.parquet"  # the same rows as one file: profiled at once
    pq.write_table(pa.Table.from_pandas(pd.concat([day(i) for i in range(4)], ignore_index=True),
                                        preserve_index=False), one)
    at_once = run(config, one, tmp_path / "once")
    assert next(s for s in at_once.stages if s.stage == "infer_types").types() == types
    assert types["u"]["type"] == "category"


def _entries(cache: Path) -> dict[str, float]:
    """Every file of the per-file ingest entries, with its modification time."""
    return {str(p.relative_to(cache)): p.stat().st_mtime_ns for p in sorted((cache / "ingest_file").rglob("*"))
            if p.is_file()}


def _published(out: Path) -> list[str]:
    return sorted(p.parent.name for p in out.glob("*/manifest.json"))


def test_a_truncated_new_file_is_named_nothing_is_published_and_the_other_entries_stay(tmp_path):
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i)
    run(CONFIG, folder, tmp_path)
    before, published = _entries(tmp_path / "cache"), _published(tmp_path / "out")
    whole = write_day(tmp_path / "spare", 3).read_bytes()
    (folder / "day_03.parquet").write_bytes(whole[: len(whole) // 2])  # a copy cut short
    with pytest.raises(DataError, match=r"day_03\.parquet"):
        run(CONFIG, folder, tmp_path)
    assert _entries(tmp_path / "cache") == before
    assert _published(tmp_path / "out") == published


def test_a_file_gone_between_planning_and_reading_is_named_and_the_other_entries_stay(tmp_path, monkeypatch):
    from tasks.ingest import stage as ingest_stage

    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i)
    run(CONFIG, folder, tmp_path)
    before, published = _entries(tmp_path / "cache"), _published(tmp_path / "out")
    write_day(folder, 3)
    real = ingest_stage._write_file

    def vanish_first(path, spec, out):  # the folder was listed and fingerprinted; the file goes before its read
        Path(path).unlink()
        return real(path, spec, out)

    monkeypatch.setattr(ingest_stage, "_write_file", vanish_first)
    with pytest.raises(DataError, match=r"day_03\.parquet"):
        run(CONFIG, folder, tmp_path)
    assert _entries(tmp_path / "cache") == before
    assert _published(tmp_path / "out") == published
