import pandas as pd
import pytest

from tasks.runtime import progress
from tests.helpers import run, write_csv


@pytest.fixture(scope="module")
def task_events(tmp_path_factory) -> list[tuple[str, int, int]]:
    """(stage, done, total) reports of one 4-partition run."""
    tmp = tmp_path_factory.mktemp("progress")
    events: list[tuple[str, int, int]] = []
    progress.set_reporter(lambda stage, done, total: events.append((stage, done, total)))
    try:
        df = pd.DataFrame({"x": range(100), "c": ["a", "b"] * 50})
        run({"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}]},
            write_csv(df, tmp / "d.csv"), tmp, npartitions=4)
    finally:
        progress.set_reporter(None)
    return events


def test_long_stages_report_dask_task_progress(task_events):
    stages = {e[0] for e in task_events}
    assert {"fill_missing", "vocab", "encode"} <= stages
    for name in ("fill_missing", "vocab", "encode"):
        last = [e for e in task_events if e[0] == name][-1]
        assert last[1] == last[2] > 0  # finished: done == total


def test_ingest_reports_its_dask_tasks(task_events):
    ingest = [e for e in task_events if e[0] == "ingest"]
    assert ingest and ingest[-1][1] == ingest[-1][2] > 0


def test_every_cached_stage_says_when_it_starts_and_ends(tmp_path):
    """run_cached's start/end events: in order, once each, with the rows the stage's counters give, and
    cached: yes for every stage of the second run of the same inputs."""
    df = pd.DataFrame({"x": range(40), "c": ["a", "b"] * 20, "y": [0, 1] * 20})
    config = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
              "output_features": [{"name": "y", "type": "binary"}]}
    data = write_csv(df, tmp_path / "d.csv")
    runs = []
    for _ in range(2):
        events = []
        progress.set_stage_listener(lambda event, stage, info, seen=events: seen.append((event, stage, info)))
        try:
            run(config, data, tmp_path)
        finally:
            progress.set_stage_listener(None)
        runs.append(events)
    first, second = runs
    started = [s for e, s, _ in first if e == "start"]
    ended = [s for e, s, _ in first if e == "end"]
    assert started == ended  # each stage ends before the next starts
    assert len(set(started)) == len(started)
    assert {"ingest", "split", "fill_missing", "vocab", "encode"} <= set(started)
    assert [e for e, _s, _i in first] == ["start", "end"] * len(started)
    info = {s: i for e, s, i in first if e == "end"}
    assert info["ingest"]["rows"] == 40 and info["ingest"]["cached"] is False
    assert info["encode"]["rows"] == 40
    assert all(i["seconds"] >= 0 for i in info.values())
    assert [s for e, s, _ in second if e == "end"] == ended
    assert all(i["cached"] for e, _s, i in second if e == "end")


def test_rows_of_reads_the_stage_counters():
    def c(n):
        return {"kind": "counter", "count": n}

    assert progress.rows_of("ingest", {"ingest.rows_out": c(7), "ingest.rows_in": c(9)}) == 7
    assert progress.rows_of("encode", {"encode.rows_out.train": c(3), "encode.rows_out.test": c(2)}) == 5
    assert progress.rows_of("split", {"split.rows.train": c(3), "split.rows.test": c(1),
                                      "split.rows_not_sampled": c(4)}) == 4
    assert progress.rows_of("validate_raw", {"validate_raw.rows_in": c(11)}) == 11
    assert progress.rows_of("vocab", {"vocab.tokens": c(11)}) is None
    assert progress.rows_of("vocab", {}) is None
