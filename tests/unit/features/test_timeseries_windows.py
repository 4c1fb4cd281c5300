"""Timeseries forecasting (Ludwig's window_size/horizon): the windows against a pandas ``shift`` reference of
Ludwig's definition, for every missing-value strategy; the same windows for any partitioning; Ludwig's
forecasting example run unchanged through the pipeline, byte-identical for 1, 3 and 7 partitions; bad
values and options named."""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from tasks.config.constants import ROW
from tasks.config.loader import parse_config
from tasks.features import build_all
from tasks.runtime import frame, timeseries_windows
from tasks.runtime.frame import write_ipc
from tasks.serving.preprocessor import Preprocessor
from tests.helpers import artifact_files, run, without_created_at, write_csv

FORECASTING = Path(__file__).resolve().parents[2] / "data" / "ludwig_configs" / "forecasting.yaml"


def reference(values: list, window_size: int, horizon: int, strategy: str, fill: float | None,
              padding: float) -> dict[int, list[float] | None]:
    """Ludwig's definition, written with pandas: the missing values handled on the column, then one
    ``shift`` per offset from ``window_size - 1`` down to ``-horizon`` (0 excluded for a horizon), NaN ->
    padding. Row -> window (None: the row is dropped)."""
    col = pd.Series(values, dtype="float64")
    if strategy == "drop_row":
        col = col.dropna()
    elif strategy == "ffill":
        col = col.ffill().bfill()
    elif strategy == "bfill":
        col = col.bfill().ffill()
    else:
        col = col.fillna(np.nan if fill is None else fill)
    col = col.reset_index()  # the shifts run over the kept rows, in row order
    shifts = range(window_size - 1, -(horizon + 1), -1) if window_size else range(-1, -(horizon + 1), -1)
    table = pd.concat([col[0].shift(k) for k in shifts], axis=1).fillna(padding)
    out: dict[int, list[float] | None] = {i: None for i in range(len(values))}
    for row, window in zip(col["index"], table.to_numpy().tolist(), strict=True):
        out[int(row)] = window
    return out


def windowed_feature(window_size: int = 0, horizon: int = 0, output: bool = False, **options):
    key = {"horizon": horizon} if output else {"window_size": window_size}
    ts = {"name": "t", "type": "timeseries", "preprocessing": {**key, **options}}
    other = {"name": "o", "type": "number", "column": "t"}
    config = {"input_features": [other], "output_features": [ts]} if output else \
        {"input_features": [ts], "output_features": [other]}
    return next(f for f in build_all(parse_config(config)) if f.name == "t")


def parsed(strings: pd.Series) -> list:
    return [None if pd.isna(s) else [float(x) for x in s.split()] for s in strings]


def state_of(strategy: str, fill) -> dict:
    return {"missing_value_strategy": strategy, "computed_fill_value": fill}


values_st = st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False, width=64)), max_size=25)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(values=values_st, size=st.integers(1, 6), output=st.booleans(),
       strategy=st.sampled_from(["fill_with_const", "ffill", "bfill", "drop_row"]),
       fill=st.one_of(st.just(""), st.floats(-5, 5, allow_nan=False)), padding=st.sampled_from([0.0, 7.5]))
def test_windows_equal_the_shift_reference(values, size, output, strategy, fill, padding):
    f = windowed_feature(horizon=size, output=True, padding_value=padding) if output else \
        windowed_feature(window_size=size, padding_value=padding)
    rows = np.arange(len(values), dtype=np.int64)
    x = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    missing = np.array([v is None for v in values], dtype=bool)
    w = timeseries_windows.build(f, rows, x, missing, state_of(strategy, fill))
    got = parsed(timeseries_windows.window_strings(w, rows))
    want = reference(values, 0 if output else size, size if output else 0, strategy,
                     None if fill == "" else fill, padding)
    assert got == [want[i] for i in range(len(values))]
    assert all(len(g) == size for g in got if g is not None)


def test_golden_window_and_horizon():
    values = [1.0, None, 3.0, 4.0, 5.0]
    rows = np.arange(5)
    x = np.array([1, np.nan, 3, 4, 5], dtype=float)
    missing = np.isnan(x)
    window = timeseries_windows.build(windowed_feature(window_size=3), rows, x, missing, state_of("fill_with_const", ""))
    assert parsed(timeseries_windows.window_strings(window, rows)) == [
        [0, 0, 1], [0, 1, 0], [1, 0, 3], [0, 3, 4], [3, 4, 5]]
    assert reference(values, 3, 0, "fill_with_const", None, 0.0)[2] == [1, 0, 3]
    ahead = timeseries_windows.build(windowed_feature(horizon=2, output=True), rows, x, missing, state_of("drop_row", None))
    assert parsed(timeseries_windows.window_strings(ahead, rows)) == [[3, 4], None, [4, 5], [5, 0], [0, 0]]
    comma = timeseries_windows.build(windowed_feature(window_size=2, tokenizer="comma"), rows, x, missing,
                                     state_of("ffill", None))
    assert timeseries_windows.window_strings(comma, rows).tolist()[:3] == ["0, 1", "1, 1", "1, 3"]


def _ingested(folder: Path, values: list, sizes: list[int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for i, n in enumerate(sizes):
        chunk = values[start:start + n]
        table = pa.table({"t": pa.array([None if v is None else repr(v) for v in chunk], pa.string()),
                          ROW: pa.array(np.arange(start, start + n, dtype=np.int64))})
        write_ipc(table, folder / f"part-{i:05d}.arrow")
        start += n


@pytest.mark.parametrize("output", [False, True])
def test_windows_cross_partitions_the_same_for_any_partitioning(tmp_path, output):
    rng = np.random.default_rng(3)
    values = [None if rng.random() < 0.2 else float(np.round(rng.normal(), 3)) for _ in range(31)]
    _ingested(tmp_path, values, [13, 11, 7])
    f = windowed_feature(horizon=4, output=True) if output else windowed_feature(window_size=5)
    states = {f.name: state_of(f.missing_strategy, None if f.missing_strategy == "drop_row" else "")}
    features = [f]
    got = {}
    for n in (1, 3, 7):
        parts, changed = timeseries_windows.add_windows(frame.partitions(frame.parts_in(tmp_path), n), features, states)
        assert changed[0].column == "__window__t" and f.column == "t"
        whole = pd.concat(dask.compute(*parts, scheduler="sync"), ignore_index=True)
        assert whole[ROW].tolist() == list(range(31))
        got[n] = whole["__window__t"].tolist()
    assert got[1] == got[3] == got[7]
    want = reference(values, 0 if output else 5, 4 if output else 0, f.missing_strategy, None, 0.0)
    assert parsed(pd.Series(got[3])) == [want[i] for i in range(31)]


def test_no_windowed_feature_leaves_the_parts_alone():
    features = build_all(parse_config({"input_features": [{"name": "t", "type": "timeseries"}]}))
    parts = [object()]
    assert timeseries_windows.add_windows(parts, features, {}) == (parts, features)


def _table(n: int, missing: tuple[int, ...] = ()) -> pd.DataFrame:
    values = np.round(280 + np.sin(np.arange(n) / 3) * 5, 2).astype(object)
    values[list(missing)] = None
    return pd.DataFrame({"datetime": pd.date_range("2012-10-01", periods=n, freq="h").astype(str),
                         "Seattle": values})


def _forecast(tmp_path: Path, npartitions: int) -> tuple[pd.DataFrame, Artifact]:
    df = _table(40, missing=(0, 9, 10, 39))
    data = write_csv(df, tmp_path / "temperature.csv")
    config = yaml.safe_load(FORECASTING.read_text())  # Ludwig's example, unchanged
    result = run(config, data, tmp_path / f"n{npartitions}", npartitions=npartitions)
    return df, Artifact.open(result.artifact["artifact_path"])


def test_ludwigs_forecasting_example_runs_unchanged(tmp_path):
    df, art = _forecast(tmp_path, 3)
    meta = art.metadata
    assert meta["Seattle"]["max_timeseries_length"] == 10 and meta["Seattle_next"]["max_timeseries_length"] == 2
    assert (meta["Seattle"]["preprocessing"]["window_size"], meta["Seattle"]["preprocessing"]["horizon"]) == (10, 0)
    assert (meta["Seattle_next"]["preprocessing"]["window_size"],
            meta["Seattle_next"]["preprocessing"]["horizon"]) == (0, 2)
    values = [None if pd.isna(v) else float(v) for v in df["Seattle"]]
    # Ludwig fills the one Seattle column with the input's fill_with_const '' first, so the output's drop_row
    # finds nothing missing: no row is dropped and both windows hold padding where a value is missing
    inputs = reference(values, 10, 0, "fill_with_const", None, 0.0)
    outputs = reference(values, 0, 2, "fill_with_const", None, 0.0)
    seen = []
    for split in art.splits:
        got = art.read_split(split)
        seen += got[ROW].tolist()
        for row, window, ahead in zip(got[ROW], got["Seattle"], got["Seattle_next"], strict=True):
            assert window.dtype == np.float32
            assert window.tolist() == np.float32(inputs[int(row)]).tolist()
            assert ahead.tolist() == np.float32(outputs[int(row)]).tolist()
    assert sorted(seen) == list(range(40))
    assert all(art.num_rows(s) for s in art.splits)  # windows cross the datetime split's boundaries


@pytest.mark.integration  # three pipeline runs (~4 s)
def test_the_forecasting_artifact_is_byte_identical_for_1_3_and_7_partitions(tmp_path):
    files = {n: without_created_at(artifact_files(_forecast(tmp_path, n)[1].path)) for n in (1, 3, 7)}
    assert files[1] == files[3] == files[7]


def test_an_output_alone_drops_its_missing_rows_and_its_windows_skip_them(tmp_path):
    df = _table(12, missing=(3,))
    data = write_csv(df, tmp_path / "t.csv")
    config = {"input_features": [{"name": "hour", "type": "category", "column": "datetime"}],
              "output_features": [{"name": "ahead", "type": "timeseries", "column": "Seattle",
                                   "preprocessing": {"horizon": 3}}]}
    art = Artifact.open(run(config, data, tmp_path).artifact["artifact_path"])
    values = [None if pd.isna(v) else float(v) for v in df["Seattle"]]
    want = reference(values, 0, 3, "drop_row", None, 0.0)
    got = {int(r): w.tolist() for s in art.splits for r, w in zip(art.read_split(s)[ROW], art.read_split(s)["ahead"],
                                                                  strict=True)}
    assert set(got) == set(range(12)) - {3}
    assert got == {r: np.float32(want[r]).tolist() for r in got}


@pytest.mark.parametrize(("value", "message"), [
    ("1 2", r"row 2, column 'Seattle': timeseries feature 'Seattle' with window_size expects one number per row, "
            r"got '1 2'"),
    ("abc", r"row 2, column 'Seattle': timeseries feature 'Seattle' expects finite numbers"),
])
def test_a_bad_value_names_its_row_and_nothing_is_published(tmp_path, value, message):
    df = _table(6)
    df.loc[2, "Seattle"] = value
    data = write_csv(df, tmp_path / "t.csv")
    config = {"input_features": [{"name": "Seattle", "type": "timeseries", "preprocessing": {"window_size": 3}}],
              "output_features": [{"name": "y", "type": "category", "column": "datetime"}]}
    with pytest.raises(DataError, match=message):
        run(config, data, tmp_path)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("manifest.json"))


def _features(**sections) -> dict:
    config = {"input_features": [{"name": "x", "type": "timeseries"}],
              "output_features": [{"name": "y", "type": "timeseries", "column": "x"}]}
    config.update(sections)
    return {f.name: f for f in parse_config(config).features}


@pytest.mark.parametrize(("config", "error"), [
    ({"input_features": [{"name": "x", "type": "timeseries", "preprocessing": {"window_size": -1}}]},
     r"^config: input_features\[0\]\.preprocessing\.window_size: Input should be greater than or equal to 0"),
    ({"input_features": [{"name": "x", "type": "timeseries", "preprocessing": {"horizon": 2}}]},
     r"^config: input_features\[0\]\.preprocessing\.horizon: horizon is an output feature's option \(got 2\); "
     r"a timeseries input feature forecasts with window_size$"),
    ({"input_features": [{"name": "x", "type": "number"}],
      "output_features": [{"name": "y", "type": "timeseries", "preprocessing": {"window_size": 5}}]},
     r"^config: output_features\[0\]\.preprocessing\.window_size: window_size is an input feature's option"),
    ({"input_features": [{"name": "x", "type": "timeseries", "preprocessing": {"window_size": "ten"}}]},
     r"input_features\[0\]\.preprocessing\.window_size: Input should be a valid integer"),
    ({"input_features": [{"name": "x", "type": "timeseries", "preprocessing": {"window_size": 3,
                                                                              "fill_value": "1 2"}}]},
     r"input_features\[0\]\.preprocessing\.horizon: with window_size or horizon each row holds one number, so "
     r"fill_value must be one number or '' \(padding\), got '1 2'"),
    ({"input_features": [{"name": "x", "type": "timeseries"}],
      "defaults": {"timeseries": {"preprocessing": {"window_size": -2}}}},
     r"^config: defaults\.timeseries\.preprocessing\.window_size: Input should be greater than or equal to 0"),
])
def test_bad_forecasting_options_are_one_line_naming_the_key(config, error):
    with pytest.raises(ConfigError, match=error) as exc:
        parse_config(config)
    assert "\n" not in str(exc.value)


def test_defaults_reach_the_timeseries_features_of_their_side():
    by_name = _features(defaults={"timeseries": {"preprocessing": {"window_size": 4, "horizon": 2,
                                                                   "padding_value": 1.0}}})
    assert (by_name["x"].preprocessing["window_size"], by_name["x"].preprocessing["horizon"]) == (4, 0)
    assert (by_name["y"].preprocessing["window_size"], by_name["y"].preprocessing["horizon"]) == (0, 2)
    assert by_name["y"].preprocessing["padding_value"] == 1.0


def test_a_window_longer_than_the_length_limit_is_the_length():
    f = windowed_feature(window_size=300)
    assert f.options.timeseries_length_limit == 300 and f.options.window_width == 300
    assert windowed_feature(window_size=3).options.timeseries_length_limit == 256


def test_serving_a_forecasting_artifact_takes_each_rows_series(tmp_path):
    _, art = _forecast(tmp_path, 1)
    pre = Preprocessor.load(art.path)
    window = " ".join(str(280 + i) for i in range(10))
    got = pre.transform({"Seattle": [window], "datetime": ["2013-01-01 00:00:00"]}, outputs=False)
    assert got["Seattle"].tolist() == [[280 + i for i in range(10)]]
    with pytest.raises(DataError, match=r"row 0, column 'Seattle': .*\(window_size 10\) encodes series of 10 values"):
        pre.transform({"Seattle": ["280.5"], "datetime": ["2013-01-01 00:00:00"]}, outputs=False)


def test_a_fill_value_that_is_no_number_names_the_feature_whose_strategy_applies():
    f = windowed_feature(window_size=2)
    rows = np.arange(3)
    x, missing = np.array([1.0, np.nan, 2.0]), np.array([False, True, False])
    with pytest.raises(DataError, match=r"^column 't': the fill value of feature 'kind' \(the first feature reading the "
                                        r"column, .*\) must be one number or '' to fill a windowed timeseries, "
                                        r"got 'unknown'$"):
        timeseries_windows.build(f, rows, x, missing, state_of("fill_with_const", "unknown"), "kind")
