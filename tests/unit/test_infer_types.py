"""Type inference: a table of crafted columns, one per failure mode Ludwig's users hit, plus the
things the stage must guarantee (full pass, partition independence, `prepflow infer` output,
`prepflow run` on untyped features gives the same artifact as the hand-typed config)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml

from flows.cli import main as cli_main
from tasks import infer_types, ingest
from tasks.config import load_config
from tasks.errors import ConfigError, DataError
from tests.helpers import run, write_csv

N = 1000
RNG = np.random.default_rng(2024)


def _with_missing(values, share=0.1):
    values = pd.Series(values, dtype=object)
    values[RNG.random(len(values)) < share] = None
    return values


WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches near old "
         "river banks").split()
TAGS = ["red", "green", "blue", "small", "large", "cheap", "new", "used"]

# (column, values, expected type or None = excluded, pattern the reason must match)
CASES = [
    # numeric ids inferred as category and vice versa
    ("age", RNG.integers(0, 81, N), "number", r"distinct integers \(0\.\.80\)"),
    ("zip", [f"{z:05d}" for z in RNG.choice([2134, 2139, 501, 10001, 94110], N)], "category", r"leading zeros"),
    ("zip_code", RNG.choice([10001, 94110, 60614, 73301], N), "category", r"name 'zip_code' suggests a code"),
    ("store", RNG.choice([40512, 40877, 51230, 66001, 70400, 88112], N), "category", r"fixed-width 5-digit codes"),
    ("year", RNG.integers(1990, 2021, N), "number", r"distinct integers \(1990\.\.2020\)"),
    ("user_id", RNG.integers(0, 50, N), "category", r"suggests a code"),
    ("two_codes", RNG.choice([1, 2], N), "category", r"two integer values"),
    ("price", np.round(RNG.exponential(20, N), 2), "number", r"distinct numeric values"),
    ("late_floats", [*range(1, 11), *np.round(RNG.normal(5, 2, N - 10), 3)], "number", r"numeric values"),
    ("late_letters", [*map(str, range(100, 120)), *(f"A{i % 30}" for i in range(N - 20))], "category",
     r"distinct values"),
    ("score_with_junk", [*(str(x) for x in RNG.integers(0, 100, N - 5)), *["?"] * 5], "category",
     r"not numbers, so not a number column"),
    # booleans spelled many ways
    ("yes_no", _with_missing(RNG.choice(["yes", "no"], N)), "binary", r"boolean values.*missing"),
    ("y_n_mixed_case", RNG.choice(["Y", "N", "y", "n"], N), "binary", r"boolean values"),
    ("one_zero", RNG.choice([0, 1], N), "binary", r"boolean values"),
    ("true_false", RNG.choice(["TRUE", "false", "True"], N), "binary", r"boolean values"),
    ("all_yes", RNG.choice(["yes", "Yes", "y"], N), None, r"every value means the same boolean"),
    # single-value and empty columns
    ("constant", ["A"] * N, None, r"single value \('A'\)"),
    ("constant_with_missing", _with_missing(["A"] * N, 0.5), None, r"single value"),
    ("all_missing", [None] * N, None, r"every value is missing"),
    # ID-like columns
    ("passenger_id", np.arange(1, N + 1), None, r"ID-like .*sequential"),
    ("ticket", RNG.permutation(np.arange(10**6, 10**6 + 7 * N, 7)), "number", r"distinct integers"),
    ("order_ref", RNG.permutation(np.arange(10**6, 10**6 + 7 * N, 7)).astype(str), "number", r"integers"),
    ("uuid", [f"{RNG.integers(0, 16**8):08x}-1a2b-4c3d-8e9f-{i:012x}" for i in range(N)], None, r"UUIDs"),
    ("token", [f"tok{RNG.integers(0, 10**9)}x{i}" for i in range(N)], None, r"ID-like .*distinct values"),
    # cardinality of strings
    ("city", [f"city{c}" for c in RNG.integers(0, 700, N)], "category", r"high-cardinality"),
    ("phrase", RNG.choice(["New York", "San Francisco", "Los Angeles", "Salt Lake City"], N), "category",
     r"short phrases"),
    ("review", [" ".join(RNG.choice(WORDS, RNG.integers(4, 15))) for _ in range(N)], "text", r"free text"),
    ("tags", [" ".join(sorted(set(RNG.choice(TAGS, RNG.integers(1, 4))))) for _ in range(N)], "set",
     r"combinations of 8 space-separated tokens"),
    ("small_vocab_text", [" ".join(RNG.choice(WORDS[:6], RNG.integers(4, 9))) for _ in range(N)], "text",
     r"free text"),  # few words, but they repeat within a value: not a set
    # other modalities
    ("when", (pd.Timestamp("2020-01-01") + pd.to_timedelta(RNG.integers(0, 900, N), unit="D")).strftime("%m/%d/%Y"),
     "date", r"parses as a date"),
    ("when_iso", (pd.Timestamp("2021-06-01") + pd.to_timedelta(RNG.integers(0, 10**6, N), unit="s")).astype(str),
     "date", r"parses as a date"),
    ("photo", [f"images/{i:04d}.JPG" for i in range(N)], "image", r"image file paths"),
    ("clip", [f"s3://bucket/a/{i}.wav" for i in range(N)], "audio", r"audio file paths"),
    ("embedding", [" ".join(f"{x:.3f}" for x in RNG.normal(size=4)) for _ in range(N)], "vector",
     r"a list of 4 numbers"),
    ("json_list", [str(RNG.integers(0, 9, 3).tolist()) for _ in range(N)], "vector", r"a list of 3 numbers"),
    ("ragged", [" ".join(map(str, RNG.normal(size=RNG.integers(2, 6)).round(2))) for _ in range(N)], "timeseries",
     r"a list of numbers, of 2 to 5 values"),
]


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    df = pd.DataFrame({name: pd.Series(values, dtype=object) for name, values, _t, _r in CASES})
    df["target_unique"] = np.arange(N) + 1  # ID-like, but a target
    return write_csv(df, tmp_path_factory.mktemp("infer") / "crafted.csv")


@pytest.fixture(scope="module")
def decisions(crafted):
    inferred, rows = infer_types.infer_dataset(str(crafted), target="target_unique")
    assert rows == N
    return {i.name: i for i in inferred}


@pytest.mark.parametrize("name,expected,pattern", [(c[0], c[2], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_inferred_type_and_reason(decisions, name, expected, pattern):
    item = decisions[name]
    assert item.type == expected, item.reason
    assert re.search(pattern, item.reason), item.reason


def test_a_target_is_never_excluded(decisions):
    item = decisions["target_unique"]
    assert item.output and item.type == "number" and "because it is the target" in item.reason


def test_inference_is_independent_of_partitioning(crafted, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "PART_ROWS", 128)
    columns = [c[0] for c in CASES]
    spec = ingest.IngestSpec({c: "string" for c in columns}, "csv")
    ingest.write_parts(ingest.read_batches(str(crafted), spec), spec, tmp_path / "data", str(crafted))
    results, sketches = [], []
    for npartitions in (1, 3, 8):
        profiles = infer_types.profile_columns(str(tmp_path / "data"), columns, npartitions)
        results.append({c: infer_types.decide(c, profiles[c]).to_json() for c in columns})
        sketches.append({c: (profiles[c]["hll"], profiles[c]["counts"], profiles[c]["token_counts"],
                             profiles[c]["sample"]) for c in columns})
    assert results[0] == results[1] == results[2]
    for other in sketches[1:]:
        for c in columns:
            assert np.array_equal(sketches[0][c][0], other[c][0]) and sketches[0][c][1:] == other[c][1:]


def test_hyperloglog_estimates_distinct_counts_and_merges_exactly():
    values = np.array([f"v{i}" for i in range(60_000)], dtype=object)
    whole = infer_types.hll_registers(infer_types._hashes(values))
    halves = np.maximum(infer_types.hll_registers(infer_types._hashes(values[::2])),
                        infer_types.hll_registers(infer_types._hashes(values[1::2])))
    assert np.array_equal(whole, halves)
    assert abs(infer_types.hll_estimate(whole) - 60_000) < 0.03 * 60_000
    assert infer_types.hll_estimate(infer_types.hll_registers(infer_types._hashes(values[:100]))) in range(97, 104)


def test_distinct_counts_cover_every_row_not_a_head_sample():
    # 12,000 rows: the first 10,000 hold 3 values, the rest are unique: a head sample calls it a category
    values = pd.Series([*np.repeat(["a", "b", "c"], [4000, 3000, 3000]), *(f"id{i}" for i in range(2000))],
                       dtype="string")
    prof = infer_types.profile_values(values)
    count, exact = infer_types.distinct(prof)
    assert count == 2003 and exact
    big = pd.Series([f"id{i}" for i in range(30_000)], dtype="string")
    count, exact = infer_types.distinct(infer_types.profile_values(big))
    assert not exact and abs(count - 30_000) < 900


def test_native_parquet_types(tmp_path):
    df = pd.DataFrame({
        "flag": RNG.random(200) < 0.5,
        "n": RNG.integers(0, 1000, 200),
        "x": RNG.normal(size=200),
        "ts": pd.date_range("2020-01-01", periods=200, freq="h"),
        "vec": [RNG.normal(size=3) for _ in range(200)],
        "label": RNG.choice(["a", "b", "c"], 200),
    })
    path = tmp_path / "data.parquet"
    df.to_parquet(path)
    inferred, _rows = infer_types.infer_dataset(str(path), target="label")
    assert {i.name: i.type for i in inferred} == {"flag": "binary", "n": "number", "x": "number", "ts": "date",
                                                  "vec": "vector", "label": "category"}


def test_prepflow_infer_prints_a_config_that_loads(crafted, tmp_path, capsys):
    from tasks.features import REGISTRY

    assert cli_main(["infer", str(crafted), "--target", "target_unique"]) == 0
    text = capsys.readouterr().out
    data = yaml.safe_load(text)
    assert len(data["input_features"]) == sum(1 for c in CASES if c[2])
    assert "  - name: age\n    type: number  # " in text
    assert re.search(r"^#  - name: passenger_id  # ID-like", text, re.M)
    # types other engineers are still adding (image, audio, ...) are left out of the load check
    data["input_features"] = [f for f in data["input_features"] if f["type"] in REGISTRY]
    (tmp_path / "inferred.yaml").write_text(yaml.safe_dump(data))
    config = load_config(tmp_path / "inferred.yaml")
    assert [f.name for f in config.output_features] == ["target_unique"]


def test_prepflow_infer_unknown_target_is_a_usage_error(crafted, capsys):
    assert cli_main(["infer", str(crafted), "--target", "Age"]) == 2
    assert "did you mean 'age'" in capsys.readouterr().err


TITANIC_TYPED = {
    "input_features": [{"name": "Pclass", "type": "category"}, {"name": "Sex", "type": "category"},
                       {"name": "Age", "type": "number", "preprocessing": {"normalization": "minmax"}},
                       {"name": "Fare", "type": "number"}, {"name": "Embarked", "type": "category"}],
    "output_features": [{"name": "Survived", "type": "binary"}],
    "preprocessing": {"split": {"type": "stratify", "column": "Survived"}},
}


def test_run_with_untyped_features_uses_the_same_inference(titanic_csv, tmp_path):
    untyped = yaml.safe_load(yaml.safe_dump(TITANIC_TYPED))
    for f in untyped["input_features"] + untyped["output_features"]:
        f.pop("type")
    typed = run(TITANIC_TYPED, titanic_csv, tmp_path / "typed")
    inferred = run(untyped, titanic_csv, tmp_path / "untyped", npartitions=3)
    assert inferred.artifact["artifact_id"] == typed.artifact["artifact_id"]
    assert [s.stage for s in inferred.stages][:2] == ["ingest", "infer_types"]
    again = run(untyped, titanic_csv, tmp_path / "untyped", npartitions=3)
    assert all(s.cached for s in again.stages)
    stats = next(s for s in inferred.stages if s.stage == "infer_types").statistics
    assert {k: v["count"] for k, v in stats.items()} == {"infer_types.category": 3, "infer_types.number": 2,
                                                        "infer_types.binary": 1}


def test_run_rejects_an_untyped_feature_that_inference_excludes(titanic_csv, tmp_path):
    config = {"input_features": [{"name": "PassengerId"}, {"name": "Age", "type": "number"}],
              "output_features": [{"name": "Survived", "type": "binary"}]}
    with pytest.raises(DataError, match=r"feature 'PassengerId' .* has no type and inference would exclude it: "
                                        r"ID-like .*give it a 'type'"):
        run(config, titanic_csv, tmp_path)


def test_balance_with_an_untyped_number_output_is_rejected_after_inference(titanic_csv, tmp_path):
    config = {"input_features": [{"name": "Sex", "type": "category"}], "output_features": [{"name": "Fare"}],
              "preprocessing": {"oversample_minority": 0.5}}
    with pytest.raises(ConfigError, match=r"exactly one output feature of type binary or category"):
        run(config, titanic_csv, tmp_path)
