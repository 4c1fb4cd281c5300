"""date: the 9-int layout, format inference, unparseable dates (error naming the row, or the fill)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tests.helpers import run, write_csv
from tests.unit.feature_helpers import feature, fit


def encode_raw(f, values):
    cast = f.cast(pd.Series(values, dtype="string"), np.arange(len(values)))
    return f.encode(cast, fit(f, cast))["f"]


def test_golden_layout():
    f = feature("date")
    out = encode_raw(f, ["2020-01-31 08:15:30", "2024-12-31T23:59:59"])
    assert out.dtype == np.int32 and out.shape == (2, 9)
    # [year, month, day, weekday (Monday 0), yearday, hour, minute, second, second_of_day]
    assert out.tolist() == [[2020, 1, 31, 4, 31, 8, 15, 30, 29730], [2024, 12, 31, 1, 366, 23, 59, 59, 86399]]
    assert [(c.name, c.dtype, c.shape) for c in f.output_columns({})] == [("f", "int32", (9,))]


def test_inferred_formats_per_value():
    f = feature("date")
    cast = f.cast(pd.Series(["01/02/2020", "13/02/2020", "2020-01-02T03:04:05+01:00", "Jan 5, 2021", "20200102",
                             "2020/03/04 10:11", "2020-01-02T03:04:05.999"], dtype="string"), np.arange(7))
    assert cast.tolist() == ["2020-01-02T00:00:00", "2020-02-13T00:00:00", "2020-01-02T02:04:05",
                             "2021-01-05T00:00:00", "2020-01-02T00:00:00", "2020-03-04T10:11:00",
                             "2020-01-02T03:04:05"]


def test_configured_format():
    f = feature("date", datetime_format="%d/%m/%Y")
    assert f.cast(pd.Series(["01/02/2020"], dtype="string"), np.arange(1)).tolist() == ["2020-02-01T00:00:00"]
    with pytest.raises(DataError, match=r"row 0, column 'f': date feature 'f' cannot parse '2020-02-01' .*'%d/%m/%Y'"):
        f.cast(pd.Series(["2020-02-01"], dtype="string"), np.arange(1))
    assert fit(f, pd.Series(["2020-02-01T00:00:00"], dtype="string"))["datetime_format"] == "%d/%m/%Y"


def test_unparseable_is_an_error_naming_the_row_or_the_fill_never_now():
    f = feature("date")
    with pytest.raises(DataError, match=r"row 12, column 'f': date feature 'f' cannot parse 'soon'"):
        f.cast(pd.Series(["2020-01-01", "soon"], dtype="string"), np.array([3, 12]))
    g = feature("date", on_parse_error="fill", missing_value_strategy="fill_with_const", fill_value="1999-12-31")
    cast = g.cast(pd.Series(["2020-01-01", "soon", None], dtype="string"), np.arange(3))
    assert cast.isna().tolist() == [False, True, True]
    assert g.fill_value_from_config("1999-12-31") == "1999-12-31T00:00:00"
    with pytest.raises(DataError, match="fill_value 'later' is not a date"):
        g.fill_value_from_config("later")


def test_pipeline_fills_with_the_mode_and_names_bad_rows(tmp_path):
    df = pd.DataFrame({"d": ["2021-03-04", None, "2021-03-04", "2020-01-01"], "y": [0, 1, 0, 1]})
    config = {"input_features": [{"name": "d", "type": "date"}], "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [1.0, 0.0, 0.0]}}}
    result = run(config, write_csv(df, tmp_path / "a.csv"), tmp_path / "a")
    from storage.artifact import Artifact

    data = Artifact.open(result.artifact["artifact_path"]).read_split("train")
    assert data["d"][:, :3].tolist() == [[2021, 3, 4], [2021, 3, 4], [2021, 3, 4], [2020, 1, 1]]
    df.loc[2, "d"] = "not a date"
    with pytest.raises(DataError, match=r"row 2, column 'd': date feature 'd' cannot parse 'not a date'"):
        run(config, write_csv(df, tmp_path / "b.csv"), tmp_path / "b")


def test_datetime_input_and_raw_values_at_encode():
    f = feature("date")
    stamps = pd.Series(pd.to_datetime(["2020-05-06 07:08:09"]))
    assert f.cast(stamps, np.arange(1)).tolist() == ["2020-05-06T07:08:09"]
    out = f.encode(pd.Series(["05/06/2020"], dtype="string"), {"datetime_format": None})["f"]
    assert out[0, :3].tolist() == [2020, 5, 6]


FORMATS = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%m/%d/%Y %H:%M:%S", "%Y/%m/%d %H:%M:%S", "%d.%m.%Y %H:%M:%S"]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(stamps=st.lists(st.one_of(st.none(), st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2100, 1, 1))),
                       min_size=1, max_size=15),
       fmt=st.sampled_from(FORMATS))
def test_encode_gives_the_calendar_fields_back(stamps, fmt):
    f = feature("date")
    values = [None if s is None else s.strftime(fmt) for s in stamps]
    cast = f.cast(pd.Series(values, dtype="string"), np.arange(len(values)))
    assert cast.isna().tolist() == [s is None for s in stamps]
    present = [s.replace(microsecond=0) for s in stamps if s is not None]
    if not present:
        return
    out = f.encode(cast.dropna(), {"datetime_format": None})["f"]
    want = [[s.year, s.month, s.day, s.weekday(), s.timetuple().tm_yday, s.hour, s.minute, s.second,
             s.hour * 3600 + s.minute * 60 + s.second] for s in present]
    assert out.tolist() == want
