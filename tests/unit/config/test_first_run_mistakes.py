"""Twelve mistakes a new user makes (issue 21, Targets), through ``prepflow run`` (``flows.cli.main``, the
in-process runner: tests/cli_inprocess.py). Each gets exactly one ``prepflow: error:`` line naming the
file, row, column or key, no traceback, an exit code other than 0 and, where the mistake can be known
before the data is processed, no stage in the cache. An all-missing column is a warning, not an error
(issue 21 item 3): the run publishes and the warnings block names the feature.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_inprocess import runner, stage_entries

CONFIG = """input_features:
  - {name: age, type: number}
  - {name: city, type: category}
output_features:
  - {name: label, type: binary}
"""
ROWS = [f"{20 + i},{'abc'[i % 3]},{i % 2}" for i in range(30)]  # line 7 of the file is ROWS[5]
DATA = "age,city,label\n" + "\n".join(ROWS) + "\n"

# name: (config text, data text (None: no file), how the error line must read, known before any stage)
MISTAKES = {
    "misspelled column": (CONFIG.replace("name: city", "name: cty"), DATA,
                          r"data\.csv: .*'cty' \(did you mean 'city'\?\)", True),
    "wrong type name": (CONFIG.replace("type: category", "type: categorical"), DATA,
                        r"config\.yaml: input_features\[1\]\.type: unknown feature type 'categorical'", True),
    "ragged row": (CONFIG, DATA.replace(ROWS[5] + "\n", ROWS[5] + ",9\n"),
                   r"data\.csv: line 7: expected 3 fields, got 4", True),
    "missing file": (CONFIG, None, r"data\.csv: dataset file not found", True),
    "empty file": (CONFIG, "", r"data\.csv: the file is empty", True),
    "tab in YAML": (CONFIG.replace("  - {name: age", "\t- {name: age"), DATA, r"config\.yaml: not valid YAML", True),
    "split probabilities sum to 0.9": (CONFIG + "preprocessing:\n  split: {probabilities: [0.6, 0.1, 0.2]}\n",
                                       DATA, r"config\.yaml: ", True),
    "'1,234' in a number column": (CONFIG, DATA.replace(ROWS[5] + "\n", '"1,234",c,1\n'),
                                   r"data\.csv: row 5 \(line 7\), column 'age': expected a number, got '1,234'", True),
    # known once the column's values are read: after ingest and the split
    "three-valued binary": (CONFIG, DATA.replace(ROWS[5] + "\n", "25,c,2\n"),
                            r"column 'label': binary feature 'label' has 3 distinct values", False),
}


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


def _case(tmp_path: Path, config: str, data: str | None) -> tuple[Path, Path]:
    (tmp_path / "config.yaml").write_text(config)
    if data is not None:
        (tmp_path / "data.csv").write_text(data)
    return tmp_path / "config.yaml", tmp_path / "data.csv"


def _check_one_error(result, pattern: str) -> str:
    assert result.code != 0, result.text
    errors = result.error_lines()
    assert len(errors) == 1, result.text
    assert re.search(pattern, errors[0]), errors[0]
    assert "Traceback" not in result.text, result.text
    return errors[0]


@pytest.mark.parametrize("name", list(MISTAKES))
def test_mistake_gets_one_error_line(prepflow, tmp_path, name):
    config_text, data, pattern, up_front = MISTAKES[name]
    config, dataset = _case(tmp_path, config_text, data)
    result = prepflow("run", config, "--dataset", dataset, "--output", tmp_path / "out",
                      "--cache-dir", tmp_path / "cache")
    _check_one_error(result, pattern)
    if up_front:
        assert stage_entries(tmp_path / "cache") == []
    assert not (tmp_path / "out" / "LATEST").exists()


def test_unwritable_output_is_refused_before_any_stage(prepflow, tmp_path):
    config, dataset = _case(tmp_path, CONFIG, DATA)
    (tmp_path / "a-file").write_text("not a folder")
    output = tmp_path / "a-file" / "out"  # refused for root too (no permission bits involved)
    result = prepflow("run", config, "--dataset", dataset, "--output", output, "--cache-dir", tmp_path / "cache")
    line = _check_one_error(result, rf"^prepflow: error: --output {re.escape(str(output))}: cannot create the folder")
    assert result.code == 2, line
    assert stage_entries(tmp_path / "cache") == []
    assert "stage " not in result.text  # no stage started


def test_no_arguments(prepflow):
    result = prepflow()
    _check_one_error(result, r"the following arguments are required: COMMAND")
    assert result.code == 2


def test_all_missing_column_is_a_warning_not_an_error(prepflow, tmp_path):
    data = "age,city,label\n" + "\n".join(f"{20 + i},,{i % 2}" for i in range(30)) + "\n"
    config, dataset = _case(tmp_path, CONFIG, data)
    result = prepflow("run", config, "--dataset", dataset, "--output", tmp_path / "out",
                      "--cache-dir", tmp_path / "cache")
    assert result.code == 0, result.text
    assert result.error_lines() == []
    warned = [line for line in result.lines if "feature 'city'" in line]
    assert len(warned) == 1 and "has no value in any of its" in warned[0], result.text
    assert (tmp_path / "out" / "LATEST").exists()


@pytest.mark.parametrize("name, on_the_line", [("tab in YAML", r"line 2"),
                                               ("split probabilities sum to 0.9",
                                                r"preprocessing\.split\.probabilities")])
def test_config_mistakes_name_the_key_on_the_error_line(prepflow, tmp_path, name, on_the_line):
    config_text, data, _pattern, _up_front = MISTAKES[name]
    config, dataset = _case(tmp_path, config_text, data)
    result = prepflow("run", config, "--dataset", dataset, "--output", tmp_path / "out",
                      "--cache-dir", tmp_path / "cache")
    _check_one_error(result, on_the_line)
