"""The raw gate reads only the columns whose values its expectations read (``expectations.runner.columns_read``,
``tasks.validate.views.raw_view``): existence checks read names and row counts lengths, so the default suite
reads the label alone; a suite with an expectation only GX runs reads every column."""

from __future__ import annotations

import dask
import pandas as pd
import pytest

from expectations import runner
from tasks.validate import views
from tests.helpers import run, write_csv


def test_the_raw_gate_reads_only_the_columns_its_expectations_read():
    generated = {"name": "prepflow-raw", "meta": {"generated_by": "prepflow"}, "expectations": [
        {"type": "expect_column_to_exist", "kwargs": {"column": "a"}, "meta": {"generated_by": "prepflow"}},
        {"type": "expect_column_proportion_of_non_null_values_to_be_between",
         "kwargs": {"column": "y", "min_value": 0, "strict_min": True}, "meta": {"generated_by": "prepflow"}}]}
    user = {"name": "mine", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "b"}},
                                             {"type": "expect_table_row_count_to_be_between",
                                              "kwargs": {"min_value": 1}}]}
    columns = ["a", "b", "c", "y"]
    assert runner.columns_read([("generated:raw", generated)], columns) == ["y"]
    assert runner.columns_read([("generated:raw", generated), ("mine.json", user)], columns) == ["b", "y"]
    gx_only = {"name": "gx", "expectations": [{"type": "expect_column_pair_values_to_be_equal",
                                               "kwargs": {"column_A": "a", "column_B": "c"}}]}
    assert runner.columns_read([("generated:raw", generated), ("gx.json", gx_only)], columns) is None


@pytest.mark.parametrize("read", [["y"], None])
def test_the_raw_view_holds_only_the_columns_read(tmp_path, read):
    table = pd.DataFrame({"c": ["a", "b", None, "a"], "x": [1.0, 2.0, 3.0, None], "y": [0, 1, 1, 0]})
    result = run({"input_features": [{"name": "c", "type": "category"}, {"name": "x", "type": "number"}],
                  "output_features": [{"name": "y", "type": "binary"}]}, write_csv(table, tmp_path / "d.csv"), tmp_path)
    ingest = next(s for s in result.stages if s.stage == "ingest")
    parts, columns, rows = views.raw_view(ingest.path, 2, read=lambda cols: read)
    frames = dask.compute(*parts, scheduler="sync")
    assert columns == ["c", "x", "y"] and rows == 4  # what existence checks see: every column
    whole = pd.concat(frames)
    assert list(whole.columns) == (read or columns) and whole.index.tolist() == [0, 1, 2, 3]
    assert whole["y"].tolist() == ["0", "1", "1", "0"]  # (a binary column is read as strings)
