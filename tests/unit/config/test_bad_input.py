"""Bad input: a clear message naming what is wrong, a non-zero exit, nothing left that a later run trusts."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError, DataError
from tests.helpers import InProcess, run

CONFIG = {
    "input_features": [{"name": "age", "type": "number"}, {"name": "city", "type": "category"}],
    "output_features": [{"name": "label", "type": "binary"}],
}


def leftovers(root: Path) -> list[str]:
    """Files under a cache or output root that a later run could trust."""
    if not root.exists():
        return []
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


CASES = [
    ("missing column", b"age,label\n1,0\n2,1\n", DataError, r"'city'.*not in the dataset"),
    ("text in a number column", b"age,city,label\n1,a,0\n2,b,1\nold,c,1\n", DataError,
     r"row 2 \(line 4\), column 'age': expected a number, got 'old'"),
    ("empty file", b"", DataError, r"the file is empty"),
    ("header only", b"age,city,label\n", DataError, r"no data rows"),
    ("non-UTF-8", b"age,city,label\n1,M\xfcnchen,0\n", DataError, r"line 2: not UTF-8 \(byte 0xfc"),
    ("ragged row", b"age,city,label\n1,a,0\n2,b,1,9\n", DataError, r"line 3: expected 3 fields, got 4"),
    ("duplicate columns", b"age,city,city,label\n1,a,b,0\n", DataError, r"duplicate column names \['city'\]"),
    ("infinity", b"age,city,label\n1,a,0\n-inf,b,1\n3,c,0\n", DataError, r"row 1, column 'age'.*infinities"),
    ("too few rows for the split", b"age,city,label\n1,a,0\n2,b,1\n", DataError, r"needs at least 3 rows"),
]


def untrusted_or_later(cache: Path, failed_stage: str) -> list[str]:
    """Temp folders, entries without a valid _entry.json, or any entry of the failed or a later stage."""
    from storage.cache import StageCache
    from tasks.graph import STAGES

    later = STAGES[STAGES.index(failed_stage):]
    bad = []
    for path in leftovers(cache):
        stage, key = path.split("/")[:2]
        if stage in later or key.startswith(".") or StageCache(cache).get(stage, key) is None:
            bad.append(path)
    return bad


@pytest.mark.parametrize("name,content,error,pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_dataset(tmp_path, name, content, error, pattern):
    data = tmp_path / "data.csv"
    data.write_bytes(content)
    with pytest.raises(error, match=pattern):
        run(CONFIG, data, tmp_path)
    failed_stage = "split" if name == "too few rows for the split" else "ingest"
    assert untrusted_or_later(tmp_path / "cache", failed_stage) == []
    assert leftovers(tmp_path / "out") == []


def test_config_typo_names_the_key_and_the_closest_spelling():
    from tasks.config.loader import parse_config

    bad = {"input_features": [{"name": "age", "type": "number", "preprocesing": {}}]}
    with pytest.raises(ConfigError, match=r"input_features\[0\]\.preprocesing: unknown key; did you mean "
                                          r"'preprocessing'\?"):
        parse_config(bad)


@pytest.mark.parametrize("config,pattern", [
    ({"input_features": [{"name": "a", "type": "number", "preprocessing": {"normalization": "z-score"}}]},
     r"the 'normalization' parameter of number feature 'a' must be one of zscore, minmax, iq, log1p, none, bins\. "
     r"Got 'z-score' instead\."),
    ({"input_features": [{"name": "a", "type": "nubmer"}]}, r"unknown feature type 'nubmer'; did you mean 'number'"),
    ({"input_features": [{"name": "a", "type": "number"}], "preprocessing": {"split": {"probabilities": [0.5, 0.6, 0]}}},
     r"preprocessing\.split\.probabilities: must sum to 1"),
    ({"input_features": [{"name": "a", "type": "category", "preprocessing": {"most_comon": 3}}]},
     r"most_comon: unknown key; did you mean 'most_common'"),
    ({"input_features": [{"name": "a", "type": "number", "preprocessing": {"missing_value_strategy": "fill_with_true"}}]},
     r"missing_value_strategy.*must be one of .*fill_with_mean.*Got 'fill_with_true'"),
    ({"input_features": [{"name": "a", "type": "number"}, {"name": "a", "type": "category"}]},
     r"feature name 'a' is used twice"),
    ({"input_features": []}, r"input_features"),
    ({"input_features": [{"name": "a", "type": "number"}], "preprocessing": {"fit_on": "everything"}},
     r"preprocessing\.fit_on: the value must be one of train, all"),
])
def test_config_errors(config, pattern):
    from tasks.config.loader import parse_config

    with pytest.raises(ConfigError, match=pattern):
        parse_config(config)


def test_unsafe_yaml_tag_is_rejected_not_executed(tmp_path):
    from tasks.config.loader import load_config

    marker = tmp_path / "pwned"
    path = tmp_path / "c.yaml"
    path.write_text(f"input_features: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    assert not marker.exists()


def test_ludwig_model_sections_are_accepted_and_ignored():
    from tasks.config.loader import parse_config

    config = parse_config({
        "model_type": "ecd", "ludwig_version": "0.10",
        "input_features": [{"name": "a", "type": "number", "encoder": {"type": "dense"}}],
        "output_features": [{"name": "y", "type": "binary", "decoder": {"type": "regressor"}, "loss": {}}],
        "combiner": {"type": "concat"}, "trainer": {"epochs": 3},
    })
    assert [f.name for f in config.features] == ["a", "y"]


# ---- the same through the CLI: exit codes and no traceback ------------------------------------------

def test_cli_config_error_exits_2_without_traceback(capfd, tmp_path, prefect_console):
    bad = tmp_path / "c.yaml"
    bad.write_text("input_features:\n  - {name: a, type: number, preprocesing: {}}\n")
    result = InProcess(capfd, "run", bad, "--dataset", tmp_path / "none.csv", "--output", tmp_path / "out")
    assert result.returncode == 2
    assert "did you mean 'preprocessing'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


# the in-process runner of the same stage graph in the fast lane; through Prefect's flow and local
# server (~20-30 s to start) in the integration lane
@pytest.mark.parametrize("prefect", ["off", pytest.param("local-server", marks=pytest.mark.integration)])
def test_cli_data_error_exits_1_without_traceback(cli, tmp_path, prefect, capfd, monkeypatch, request):
    data = tmp_path / "d.csv"
    data.write_bytes(b"age,city,label\n1,a,0\nold,b,1\n")
    config = tmp_path / "c.yaml"
    import yaml

    config.write_text(yaml.safe_dump(CONFIG))
    args = ("run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "cache")
    if prefect == "off":  # in this process
        request.getfixturevalue("prefect_console")
        monkeypatch.setenv("PREPFLOW_PREFECT", "off")
        result = InProcess(capfd, *args)
    else:  # a real prepflow process, through its local Prefect server
        result = cli(*args, env={"PREPFLOW_PREFECT": prefect})
    assert result.returncode == 1, result.stderr
    assert "prepflow: error:" in result.stderr and "column 'age': expected a number, got 'old'" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert leftovers(tmp_path / "cache") == [] and leftovers(tmp_path / "out") == []


def test_cli_schema_prints_the_config_json_schema(capfd):
    result = InProcess(capfd, "schema")
    assert result.returncode == 0
    import json

    schema = json.loads(result.stdout)
    assert schema["title"] == "prepflow config"
    assert "input_features" in schema["properties"]


def test_cli_usage_error_exits_2(cli):
    assert cli("run").returncode == 2
    assert cli("no-such-command").returncode == 2
