"""The raw gate of a dataset of several files runs file by file (tasks/validate/raw_files.py, issue 39): each
file's partials are a cache entry, so a run after a file was added scans that file's rows only, and the
results are byte for byte those of the whole-table run, whatever the partitions; a suite with an
expectation only GX runs (or uniqueness) keeps the whole-table run."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from expectations import runner
from storage import accumulators
from tests.helpers import run
from tests.unit.dataset.test_incremental_files import CONFIG, counted_fits, day, write_day  # noqa: F401 (a fixture)

KERNEL_SUITE = [  # every expectation on prepflow's kernels, most failing in several files
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "v", "min_value": 0, "max_value": 100}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "note"}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "note", "regex": "^[a-z]+$"}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "c", "value_set": ["a", "b", "c"]}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "note", "min_value": 2, "max_value": 4}},
    {"type": "expect_column_proportion_of_non_null_values_to_be_between", "kwargs": {"column": "x", "min_value": 0.95}},
    {"type": "expect_column_mean_to_be_between", "kwargs": {"column": "x", "min_value": 0, "max_value": 1}},
    {"type": "expect_column_distinct_values_to_contain_set", "kwargs": {"column": "v", "value_set": [1000, 1001, 5000]}},
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1, "max_value": 400}},
    {"type": "expect_column_to_exist", "kwargs": {"column": "c"}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "v", "mostly": 0.5}},
]
GX_SUITE = [{"type": "expect_column_median_to_be_between", "kwargs": {"column": "x", "min_value": 0, "max_value": 9}},
            {"type": "expect_column_values_to_be_between", "kwargs": {"column": "v", "max_value": 500}}]
UNIQUE_SUITE = [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "v"}}]


def gate_day(i: int, n: int = 120) -> pd.DataFrame:
    """``day(i)`` (x, c, y) with ``v``, out of [0, 100] at two rows, and ``note``, null at two rows and
    ``bad!`` at one: failures in every file, at rows that differ from file to file."""
    rng = np.random.default_rng(300 + i)
    df = day(i, n)
    v = rng.integers(0, 100, n).astype(float)
    v[[7 + i, 60 + i]] = 1000 + i
    note = rng.choice(["ok", "fine", "good"], n).astype(object)
    note[[3 + i, 90]] = None
    note[50] = "bad!"
    return df.assign(v=v, note=pd.array(note, dtype="string"))


def suites(tmp_path: Path, **named: list[dict]) -> list[str]:
    paths = []
    for name, expectations in named.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"name": name, "expectations": expectations}))
        paths.append(str(path))
    return paths


def gate_config(raw: list[str]) -> dict:
    return {**CONFIG, "validation": {"raw": raw, "on_failure": "warn", "bounds": {"x": [-2, 3]}}}


def gate_json(result) -> str:
    """The raw gate's results file, as written."""
    stage = next(s for s in result.stages if s.stage == "validate_raw")
    return (Path(stage.path) / "validation.json").read_text()


def file_entries(tmp_path: Path, cache: str = "cache") -> int:
    return len(list((tmp_path / cache / "validate_raw_file").glob("*/_entry.json")))


@pytest.fixture
def scanned(monkeypatch):
    """The input rows each partition of the raw gate holds (``runner._partition``), as ``(first, last)``."""
    seen: list[tuple[int, int]] = []
    real = runner._partition

    def partition(frame, checks, plans, index):
        if len(frame) and "__split__" not in frame.columns:  # not the encoded gate's
            seen.append((int(frame.index.min()), int(frame.index.max())))
        return real(frame, checks, plans, index)

    monkeypatch.setattr(runner, "_partition", partition)
    return seen


@contextlib.contextmanager
def whole_table(monkeypatch):
    """Within it, no suite runs file by file (the path of a dataset of one file)."""
    with monkeypatch.context() as m:
        m.setattr(runner, "portable", lambda *a: False)
        yield


def test_adding_a_file_scans_only_that_file_for_the_raw_gate(tmp_path, scanned, monkeypatch):
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, gate_day(i))
    config = gate_config(suites(tmp_path, kernels=KERNEL_SUITE))
    run(config, folder, tmp_path)
    assert file_entries(tmp_path) == 3

    scanned.clear()
    write_day(folder, 3, gate_day(3))
    grown = run(config, folder, tmp_path)
    assert scanned and all(360 <= first <= last < 480 for first, last in scanned)  # the new file's rows only
    assert sum(last - first + 1 for first, last in scanned) == 120
    assert file_entries(tmp_path) == 4
    with whole_table(monkeypatch):
        cold = run(config, folder, tmp_path, cache="cold", output="out_cold")
    assert file_entries(tmp_path, "cold") == 0
    assert gate_json(grown) == gate_json(cold)


def test_the_new_file_is_the_only_bundle_computed(tmp_path, counted_fits):  # noqa: F811 (the fixture)
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, gate_day(i))
    config = gate_config(suites(tmp_path, kernels=KERNEL_SUITE))
    run(config, folder, tmp_path)
    assert sorted(o for s, o in counted_fits if s == "validate_raw") == [0, 120, 240]
    counted_fits.clear()
    write_day(folder, 3, gate_day(3))
    run(config, folder, tmp_path)
    assert [o for s, o in counted_fits if s == "validate_raw"] == [360]


def test_file_by_file_gives_the_whole_table_results_whatever_the_partitions(tmp_path, monkeypatch):
    """Failures in every file, unexpected values and their input rows from several files, a user suite on
    kernels (nulls of a string column, an aggregate's column, distinct values) and the
    generated suite: the same results JSON as the whole table's, with 1 to 7 partitions either way."""
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, gate_day(i))
    config = gate_config(suites(tmp_path, kernels=KERNEL_SUITE))
    by_file = {n: gate_json(run(config, folder, tmp_path / f"files-{n}", npartitions=n)) for n in (None, 1, 4)}
    with whole_table(monkeypatch):
        whole = {n: gate_json(run(config, folder, tmp_path / f"whole-{n}", npartitions=n)) for n in (None, 3, 7)}
    assert all(file_entries(tmp_path / f"files-{n}") == 3 for n in by_file)
    assert all(file_entries(tmp_path / f"whole-{n}") == 0 for n in whole)
    assert len(set(by_file.values()) | set(whole.values())) == 1

    data = json.loads(whole[None])
    generated, user = data["suites"]
    bounds = generated["results"][-1]
    assert bounds["expectation_type"] == "expect_column_values_to_be_between" and not bounds["success"]
    results = {(r["expectation_type"], r["kwargs"].get("column")): r for r in user["results"]}
    between = results["expect_column_values_to_be_between", "v"]["result"]
    assert between["partial_unexpected_index_list"] == [7, 60, 128, 181, 249, 302]  # rows of the three files
    assert between["partial_unexpected_list"] == [1000.0, 1000.0, 1001.0, 1001.0, 1002.0, 1002.0]
    nulls = results["expect_column_values_to_not_be_null", "note"]["result"]
    assert nulls["partial_unexpected_index_list"] == [3, 90, 124, 210, 245, 330]
    assert results["expect_column_distinct_values_to_contain_set", "v"]["result"]["partial_missing_list"] == [5000]


def test_a_suite_needing_gx_or_uniqueness_keeps_the_whole_table_run(tmp_path, monkeypatch):
    folder = tmp_path / "days"
    for i in range(3):
        write_day(folder, i, gate_day(i))
    config = gate_config(suites(tmp_path, kernels=KERNEL_SUITE, gx=GX_SUITE, unique=UNIQUE_SUITE))
    by_file_sources, whole_sources = [], []
    real_bundle, real_run = runner.file_bundle, runner.run

    def file_bundle(named, parts, columns):
        by_file_sources.append([Path(src).stem for src, _s in named])
        return real_bundle(named, parts, columns)

    def run_suites(named, *args, **kwargs):
        whole_sources.append([Path(src).stem for src, _s in named])
        return real_run(named, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(runner, "file_bundle", file_bundle)
        m.setattr(runner, "run", run_suites)
        by_file = gate_json(run(config, folder, tmp_path / "files", npartitions=2))
    assert by_file_sources == [["generated:raw", "kernels"]] * 3  # one bundle per file
    assert whole_sources[0] == ["gx", "unique"]  # (then the encoded gate's)
    with whole_table(monkeypatch):
        whole = gate_json(run(config, folder, tmp_path / "whole", npartitions=5))
    assert by_file == whole
    gate = json.loads(whole)
    assert [s["name"] for s in gate["suites"]] == ["prepflow-raw", "kernels", "gx", "unique"]
    assert not gate["suites"][3]["success"]  # v repeats (the out-of-range values, among others)


def test_accumulators_keep_sets_and_pandas_nulls_and_refuse_what_needs_pickle(tmp_path):
    value = {"values": [pd.NA, pd.NaT, float("nan"), None, "a"], "seen": {1, 2.5, "x"}, "pair": (1, 2)}
    accumulators.dump(value, tmp_path / "a")
    back = accumulators.load(tmp_path / "a")
    assert back["values"][0] is pd.NA and back["values"][1] is pd.NaT and np.isnan(back["values"][2])
    assert back["values"][3:] == [None, "a"] and back["seen"] == {1, 2.5, "x"} and back["pair"] == (1, 2)
    with pytest.raises(accumulators.Unstorable, match="Timestamp"):
        accumulators.dump([pd.Timestamp("2024-01-01")], tmp_path / "b")


def test_a_bundle_keeps_evaluation_errors_and_numeric_columns_and_refuses_other_columns(tmp_path):
    from expectations.kernel_base import KernelError

    scanned = [[[KernelError("no good"), pd.Series([1.5, np.nan]), {"rows": 2, "values": [pd.NA]}, None]]]
    accumulators.dump(runner._stored({"parts": [(0, scanned[0], [])], "combined": {}}), tmp_path / "b")
    [[[error, column, rows, nothing]]] = [[[runner._value(t) for t in group] for group in part]
                                          for part in accumulators.load(tmp_path / "b")["parts"]]
    assert isinstance(error, KernelError) and str(error) == "no good" and nothing is None
    assert column.dtype == np.float64 and column.tolist()[0] == 1.5 and rows["values"][0] is pd.NA
    with pytest.raises(accumulators.Unstorable):
        runner._stored({"parts": [(0, [[pd.Series(["a"], dtype="string")]], [])], "combined": {}})


def test_a_bundle_no_entry_can_keep_runs_the_gate_over_the_whole_table(tmp_path, monkeypatch, caplog):
    """A value an entry cannot keep (a timestamp among the first unexpected values, say): the whole-table
    run, the same results, no entry."""
    folder = tmp_path / "days"
    for i in range(2):
        write_day(folder, i, gate_day(i))
    config = gate_config(suites(tmp_path, kernels=KERNEL_SUITE))
    with whole_table(monkeypatch):
        whole = gate_json(run(config, folder, tmp_path / "whole"))

    def unstorable(bundle):
        raise accumulators.Unstorable("cannot store a Timestamp accumulator without pickle")

    monkeypatch.setattr(runner, "_stored", unstorable)
    with caplog.at_level("INFO", logger="prepflow.validate"):
        fallen_back = gate_json(run(config, folder, tmp_path / "files"))
    assert fallen_back == whole and file_entries(tmp_path / "files") == 0
    assert "cannot be cached (cannot store a Timestamp" in caplog.text
