"""The user's own expectation suites that a config names (``validation.raw`` / ``validation.encoded``):
loaded and checked before any data is read, and the columns the raw ones need that no feature declares
(ingest reads those too)."""

from __future__ import annotations

import json
from pathlib import Path

from core.errors import ConfigError
from expectations.suites import SuiteError, check_suite, referenced_columns
from storage.hashing import stable_hash

NUMERIC_EXPECTATIONS = ("expect_column_values_to_be_between", "expect_column_mean_to_be_between",
                        "expect_column_sum_to_be_between", "expect_column_stdev_to_be_between",
                        "expect_column_min_to_be_between", "expect_column_max_to_be_between",
                        "expect_column_median_to_be_between", "expect_column_quantile_values_to_be_between")


def load_suite_file(path: str | Path) -> dict:
    """A GX 1.x suite JSON file, checked (without importing GX); ``ConfigError`` names the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: expectation suite not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a JSON expectation suite ({exc})") from None
    try:
        return check_suite(data, str(path))
    except SuiteError as exc:
        raise ConfigError(str(exc)) from None


def user_suite_paths(config, gate: str) -> list[str]:
    value = getattr(config.validation, gate)
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def user_suites(config, gate: str) -> list[tuple[str, dict]]:
    return [(p, load_suite_file(p)) for p in user_suite_paths(config, gate)]


def extra_raw_columns(config, available: list[str] | None) -> dict[str, str]:
    """Columns the raw user suites name that the config does not declare: ingest reads them too
    (as float64 when a numeric expectation names them, else as strings). With ``available`` (the
    dataset's columns, when cheap to know) a column the dataset lacks is left out, so the suite's
    expectation fails in the report instead of ingest failing."""
    declared = {f.source_column for f in config.features}
    out: dict[str, str] = {}
    for _path, suite in user_suites(config, "raw"):
        numeric = {e.get("kwargs", {}).get("column") for e in suite["expectations"]
                   if e.get("type") in NUMERIC_EXPECTATIONS}
        for column in referenced_columns(suite):
            if column in declared or (available is not None and column not in available):
                continue
            out[column] = "float64" if column in numeric or out.get(column) == "float64" else "string"
    return out


def suites_key(config_json: dict) -> dict:
    """The content hashes of the user suites a normalized config names (for the artifact id)."""
    validation = config_json.get("validation") or {}
    paths = [p for gate in ("raw", "encoded")
             for p in ([validation.get(gate)] if isinstance(validation.get(gate), str) else validation.get(gate) or [])]
    if not paths:
        return {}
    return {"suites": [[p, stable_hash(load_suite_file(p), 64)] for p in paths]}
