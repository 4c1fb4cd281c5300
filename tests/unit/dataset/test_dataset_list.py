"""A dataset given as a list of files (issue 39: "a folder, glob or list of files"): the files are numbered in
name order whatever the list's order, named relative to the deepest folder holding them all, so a list and a
folder of the same files publish the same artifact; each file keeps its own cache entries; a bad list is one
error naming the entry (tasks/dataset/files.py ``as_dataset``)."""

from __future__ import annotations

import json

import pytest

import prepflow
from core.errors import ConfigError, DataError
from prepflow import Artifact
from tasks.dataset import fingerprint as dataset_fingerprint
from tasks.dataset.files import as_dataset, base_of, dataset_files, label
from tests.cli_inprocess import runner
from tests.helpers import artifact_files, names_passed, without_created_at
from tests.unit.dataset.test_incremental_files import CONFIG, write_day


@pytest.fixture
def counted_reads(monkeypatch):
    from tasks.ingest import stage as ingest_stage

    return names_passed(monkeypatch, ingest_stage, "_write_file")


@pytest.fixture
def prepflow_cli(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


@pytest.fixture
def days(tmp_path):
    folder = tmp_path / "days"
    return [write_day(folder, i) for i in range(4)]


def test_a_list_in_any_order_publishes_the_folders_artifact(tmp_path, days, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    shuffled = [str(days[i]) for i in (2, 0, 3, 1)]
    listed = prepflow.run(CONFIG, shuffled, tmp_path / "out-list", cache_dir=tmp_path / "cache-list")
    folder = prepflow.run(CONFIG, str(days[0].parent), tmp_path / "out-folder", cache_dir=tmp_path / "cache-folder")
    assert listed["artifact_id"] == folder["artifact_id"]
    assert without_created_at(artifact_files(listed["artifact_path"])) == \
        without_created_at(artifact_files(folder["artifact_path"]))
    names = [f["name"] for f in Artifact.open(listed["artifact_path"]).manifest["dataset_files"]]
    assert names == [p.name for p in days]


def test_a_grown_list_reads_only_the_added_file(tmp_path, days, counted_reads):
    cache = tmp_path / "cache"
    prepflow.run(CONFIG, [str(p) for p in days[:3]], tmp_path / "out", cache_dir=cache)
    assert counted_reads == [p.name for p in days[:3]]
    counted_reads.clear()
    grown = prepflow.run(CONFIG, [str(p) for p in days], tmp_path / "out", cache_dir=cache)
    assert counted_reads == [days[3].name]
    assert grown["files"] == {"total": 4, "new": 1}


def test_a_list_of_files_in_several_folders_is_named_below_their_common_folder(tmp_path):
    a, b = write_day(tmp_path / "data" / "east", 0), write_day(tmp_path / "data" / "west", 1)
    assert base_of([str(b), str(a)]) == str(tmp_path / "data")
    assert [n for n, _p, _fp in dataset_fingerprint.files([str(b), str(a)])] == \
        ["east/day_00.parquet", "west/day_01.parquet"]
    assert dataset_files([str(b), str(a)]) == [str(a), str(b)]


def test_one_listed_file_is_that_file(tmp_path, days):
    assert as_dataset([days[0]]) == str(days[0])
    assert as_dataset([days[0].parent]) == str(days[0].parent)  # one entry is what it names, as on the CLI
    assert as_dataset((str(days[0]), str(days[1]))) == [str(days[0]), str(days[1])]


@pytest.mark.parametrize("entries, named", [
    ([], "the list of files is empty"),
    (["{day0}", "{day0}"], "day_00.parquet: listed twice in the dataset (entries 0 and 1)"),
    (["{day0}", "{folder}"], "days: a list of files names files"),
    (["{day0}", "{folder}/day_*.parquet"], "day_*.parquet: a list of files names files"),
    (["{day0}", "s3://bucket/day_01.parquet"], "the listed files mix local and s3 files"),
    (["{day0}", 3], "entry 1 of the list is 3; expected a file path or URL"),
])
def test_a_bad_list_is_one_line_naming_the_entry(days, entries, named):
    given = [e.format(day0=days[0], folder=days[0].parent) if isinstance(e, str) else e for e in entries]
    with pytest.raises(ConfigError) as exc:
        as_dataset(given)
    assert named in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_listed_file_stops_the_run_naming_it_and_publishes_nothing(tmp_path, days):
    gone = days[0].parent / "day_09.parquet"
    with pytest.raises(DataError, match="day_09.parquet: dataset file not found"):
        prepflow.run(CONFIG, [str(days[0]), str(gone)], tmp_path / "out", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_command_line_takes_several_files_after_dataset(tmp_path, days, prepflow_cli):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(CONFIG))
    result = prepflow_cli("run", config, "--dataset", days[1], days[0], "--output", tmp_path / "out",
                          "--cache-dir", tmp_path / "cache", "--json")
    code, out, err = result.code, result.out, result.err
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["files"] == {"total": 2, "new": 2}
    names = [f["name"] for f in Artifact.open(summary["artifact_path"]).manifest["dataset_files"]]
    assert names == [days[0].name, days[1].name]

    result = prepflow_cli("run", config, "--dataset", days[0], days[0], "--output", tmp_path / "o2")
    code, err = result.code, result.err
    assert code == 2 and err.count("\n") == 1 and "listed twice in the dataset" in err


def test_infer_and_validate_take_a_list(tmp_path, days):
    from flows.infer import infer_dataset
    from flows.validation import validate_dataset

    listed = [str(p) for p in days[:2]]
    inferred, rows = infer_dataset(listed)
    assert rows == 240 and [i.name for i in inferred] == ["x", "c", "y"]
    config = tmp_path / "c.json"
    config.write_text(json.dumps(CONFIG))
    report = validate_dataset(listed, [str(config)], cache_dir=str(tmp_path / "cache"))
    assert report["success"] and report["dataset"] == listed
    assert label(listed) == f"{listed[0]} (and 1 more listed file)"
