"""Data-quality gates in the pipeline: generated and user suites, fail/warn, caching, manifest,
the encoded gate's checks, and ``prepflow validate`` exit codes (0 pass, 1 fail, 2 usage)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.errors import ConfigError, DataError, ValidationFailed
from flows.cli import main as cli_main
from tests.helpers import run, write_csv

ROOT = Path(__file__).resolve().parents[3]

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 1},
                      "oversample_minority": 0.9},
}


def frame(n: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"id": np.arange(n), "x": rng.normal(5, 2, n), "c": rng.choice(["a", "b", "c"], n),
                       "y": (rng.random(n) < 0.25).astype(int)})
    df.loc[rng.random(n) < 0.05, "y"] = None  # dropped by the output's drop_row
    return df


def suite_file(tmp_path: Path, expectations: list[dict], name: str = "user") -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "expectations": expectations}))
    return str(path)


def with_validation(tmp_path: Path, **validation) -> dict:
    return {**json.loads(json.dumps(CONFIG)), "validation": validation}


@pytest.fixture
def dataset(tmp_path):
    return write_csv(frame(), tmp_path / "data.csv")


def test_generated_gates_pass_and_land_in_the_manifest(dataset, tmp_path):
    result = run(CONFIG, dataset, tmp_path, npartitions=3)
    stages = [s.stage for s in result.stages]
    assert stages.index("validate_raw") < stages.index("split")
    assert stages.index("encode") < stages.index("validate_encoded") < stages.index("publish")
    manifest = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())
    raw, encoded = manifest["validation"]["raw"], manifest["validation"]["encoded"]
    assert raw["success"] and encoded["success"]
    kinds = {r["expectation_type"] for s in encoded["suites"] for r in s["results"]}
    assert {"expect_column_values_to_be_unique", "expect_table_row_count_to_equal",
            "expect_column_distinct_values_to_contain_set", "expect_column_values_to_be_between"} <= kinds
    count = next(r for s in encoded["suites"] for r in s["results"]
                 if r["expectation_type"] == "expect_table_row_count_to_equal")
    assert count["result"]["observed_value"] == sum(manifest["rows"].values())  # oversampled rows included
    assert manifest["statistics"]["validate_raw.expectations"]["count"] == raw["evaluated"]


def test_a_failing_fail_gate_stops_before_publish_and_names_the_gate(dataset, tmp_path):
    suite = suite_file(tmp_path, [{"type": "expect_column_values_to_be_between",
                                   "kwargs": {"column": "x", "min_value": 4, "max_value": 6}}])
    with pytest.raises(ValidationFailed) as info:
        run(with_validation(tmp_path, raw=suite), dataset, tmp_path)
    assert info.value.gate == "raw"
    assert "validation gate 'raw' failed" in str(info.value)
    assert "expect_column_values_to_be_between on 'x'" in str(info.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    # a cached failing result fails again
    with pytest.raises(ValidationFailed):
        run(with_validation(tmp_path, raw=suite), dataset, tmp_path)


def test_a_warn_gate_publishes_with_its_failures_recorded(dataset, tmp_path):
    suite = suite_file(tmp_path, [{"type": "expect_column_mean_to_be_between",
                                   "kwargs": {"column": "x", "max_value": 1}}])
    result = run(with_validation(tmp_path, raw=[suite], on_failure="warn"), dataset, tmp_path)
    manifest = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())
    gate = manifest["validation"]["raw"]
    assert not gate["success"] and gate["failed"] == 1
    assert [s["source"] for s in gate["suites"]] == ["generated:raw", suite]


def test_user_suite_columns_outside_the_config_are_ingested(dataset, tmp_path):
    suite = suite_file(tmp_path, [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}},
                                  {"type": "expect_column_values_to_be_between",
                                   "kwargs": {"column": "id", "min_value": 0}},
                                  {"type": "expect_column_to_exist", "kwargs": {"column": "not_there"}}])
    config = with_validation(tmp_path, raw=suite, on_failure="warn")
    result = run(config, dataset, tmp_path)
    gate = json.loads((Path(result.artifact["artifact_path"]) / "manifest.json").read_text())["validation"]["raw"]
    user = gate["suites"][1]["results"]
    assert [r["success"] for r in user] == [True, True, False]


def test_changing_a_suite_reruns_only_its_gate_and_gives_a_new_artifact(dataset, tmp_path):
    suite = tmp_path / "s.json"
    suite.write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "c"}}]}))
    config = with_validation(tmp_path, raw=str(suite))
    first = run(config, dataset, tmp_path)
    suite.write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x", "mostly": 0.5}}]}))
    second = run(config, dataset, tmp_path)
    cached = {s.stage: s.cached for s in second.stages}
    assert cached["ingest"] and cached["encode"] and cached["validate_encoded"]
    assert not cached["validate_raw"]
    assert second.artifact["artifact_id"] != first.artifact["artifact_id"]


def test_an_unsupported_expectation_is_a_config_error_before_any_data_is_read(dataset, tmp_path):
    suite = suite_file(tmp_path, [{"type": "expect_column_kl_divergence_to_be_less_than",
                                   "kwargs": {"column": "x"}}])
    with pytest.raises(ConfigError, match="kl_divergence.*not supported"):
        run(with_validation(tmp_path, raw=suite), dataset, tmp_path)
    assert not (tmp_path / "cache" / "ingest").exists()


def test_bounds_from_the_config(dataset, tmp_path):
    with pytest.raises(ValidationFailed, match="'x'"):
        run(with_validation(tmp_path, bounds={"x": [None, 6.0]}), dataset, tmp_path)


@pytest.mark.parametrize("bounds", [[6, 1], [None, None], [None, 1, 2]])
def test_bad_bounds_are_config_errors_before_any_data_is_read(dataset, tmp_path, bounds):
    with pytest.raises(ConfigError, match="validation.bounds.x: "):
        run(with_validation(tmp_path, bounds={"x": bounds}), dataset, tmp_path)
    assert not (tmp_path / "cache" / "ingest").exists()


def test_number_stored_as_text_is_one_error_naming_the_0_based_row(tmp_path):
    """Caught by ingest, as in a CSV (issue 43, item 2), before the raw gate would list it."""
    df = frame().astype({"x": str})
    df.loc[7, "x"] = "seven"
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    with pytest.raises(DataError) as info:
        run(CONFIG, path, tmp_path)
    assert not isinstance(info.value, ValidationFailed)
    assert str(info.value) == f"{path}: row 7, column 'x': expected a number, got 'seven' (the file stores the column as text)"


def test_the_generated_encoded_suite_catches_bad_output(dataset, tmp_path):
    """The encoded suite on a hand-made encoded view: an id out of range, a NaN, a row in two splits,
    an empty split and a wrong row count each fail."""
    from tasks.config.loader import parse_config
    from tasks.runtime.context import RunContext
    from tasks.validate import stage as validate

    ctx = RunContext(parse_config(CONFIG), str(dataset), None)
    metadata = {"x": {"mean": 0.0, "std": 1.0, "normalization": "zscore"},
                "c": {"idx2str": ["<UNK>", "a", "b"], "vocab_size": 3},
                "y": {}}
    suite = validate.encoded_suite(ctx, metadata, expected_rows=5)
    view = pd.DataFrame({"x": [0.1, np.nan, 0.3, 0.2], "c": np.array([0, 1, 3, 2], dtype=np.int32),
                         "y": [True, False, True, True], "__row__": pd.array([0, 1, 1, 2], dtype="Int64"),
                         "__split__": np.array([0, 0, 2, 2], dtype=np.int8)})
    [result] = validate.run_suites([("generated:encoded", suite)], [view], list(view.columns))
    failed = {(r["expectation_type"], r["kwargs"].get("column")) for r in result["results"] if not r["success"]}
    assert failed == {("expect_column_values_to_not_be_null", "x"), ("expect_column_values_to_be_between", "c"),
                      ("expect_column_values_to_be_unique", "__row__"),
                      ("expect_column_distinct_values_to_contain_set", "__split__"),
                      ("expect_table_row_count_to_equal", None)}


# ---- the command line --------------------------------------------------------------------------

@pytest.mark.integration  # real processes: prepflow run with its local Prefect server, or fresh interpreters
def prepflow(capfd, *args) -> tuple[int, str, str]:
    """``prepflow`` in this process (``flows.cli.main``, without an interpreter and ~4 s of imports per
    call): exit code, stdout, stderr."""
    capfd.readouterr()
    code = cli_main([str(a) for a in args])
    out, err = capfd.readouterr()
    return code, out, err


def test_cli_validate_exit_codes_and_report(capfd, tmp_path):
    df = frame()
    df.loc[3, "x"] = -50.0
    data = write_csv(df, tmp_path / "d.csv")
    suite = suite_file(tmp_path, [{"type": "expect_column_values_to_be_between",
                                   "kwargs": {"column": "x", "min_value": -20, "max_value": 30}},
                                  {"type": "expect_column_values_to_be_in_set",
                                   "kwargs": {"column": "c", "value_set": ["a", "b", "c"]}}])
    cache = tmp_path / "cache"
    code, out, err = prepflow(capfd, "validate", data, "--suite", suite, "--cache-dir", cache)
    assert code == 1, err
    assert "expect_column_values_to_be_between on 'x'" in out
    assert "-50.0 (row 3)" in out  # 0-based, as __row__
    code, out, err = prepflow(capfd, "validate", data, "--cache-dir", cache)
    assert code == 2 and "--config CONFIG or --suite FILE" in err


def test_ci_data_gate_command_line_passes_on_the_example(capfd, tmp_path):
    """The command of infra/ci/github-data-gate.yml: exit 0 and one JSON object as the last line."""
    assert 'prepflow validate "$DATASET" --config "$CONFIG" --json' in (
        ROOT / "infra" / "ci" / "github-data-gate.yml").read_text()
    code, out, err = prepflow(capfd, "validate", ROOT / "examples" / "titanic" / "titanic.csv", "--config",
                              ROOT / "examples" / "titanic" / "config.yaml", "--json", "--cache-dir",
                              tmp_path / "cache")
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["success"] and report["gates"][0]["gate"] == "raw"
