"""Configs and feature specs whose YAML aliases multiply ("billion laughs") are refused while the YAML is
read, before any value is built or copied; a config value of the wrong shape (a nested list as a category's
``fill_value``) is one error naming the key. Each crafted input is a few hundred bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.yaml_load import EXPANSION_FACTOR, MIN_EXPANDED_NODES, YamlExpansionError, load_yaml
from tests.artifact_crafting import copy, publish, sign
from tests.cli_inprocess import ERROR, runner
from tests.conftest import ROOT

WIDTH = 9  # aliases per level


def anchors(depth: int, indent: str = "  ") -> str:
    """``depth`` levels of anchors, each a list of ``WIDTH`` aliases of the one before: the last one
    expands to ``WIDTH ** depth`` strings."""
    lines = [f"{indent}l0: &l0 [{', '.join(['lol'] * WIDTH)}]"]
    lines += [f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * WIDTH)}]" for i in range(1, depth)]
    return "\n".join(lines)


def bomb_config(depth: int, where: str) -> str:
    """A config whose accepted, ignored ``trainer`` section holds the anchors, used at ``where``."""
    last = f"*l{depth - 1}"
    feature = "{name: a, type: number}"
    if where == "fill_value":
        feature = f"{{name: a, type: category, preprocessing: {{fill_value: {last}}}}}"
    text = f"trainer:\n{anchors(depth)}\ninput_features:\n  - {feature}\n"
    return text + (f"hyperopt: {last}\n" if where == "hyperopt" else "")


@pytest.fixture
def prepflow(capfd, monkeypatch):
    yield from runner(capfd, monkeypatch)


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "d.csv"
    path.write_text("a\n" + "\n".join(str(i % 3) for i in range(30)) + "\n")
    return path


def one_error(result, *needles: str) -> str:
    return result.one_error(*needles)


# ---- the loader --------------------------------------------------------------------------------------

@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_aliases_within_the_bound_load_as_pyyaml_loads_them(loader):
    text = ("base: &b {fill_value: x, lowercase: true}\nshared: &s [1, 2]\n"
            "features:\n  - {<<: *b, name: a}\n  - {<<: *b, name: b, tags: *s}\n")
    assert load_yaml(text, loader) == yaml.load(text, Loader=loader)
    assert load_yaml("", loader) is None


@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_a_document_expanding_past_the_bound_is_refused_at_the_node_that_passes_it(loader):
    # the smallest nesting over the floor: WIDTH ** depth > MIN_EXPANDED_NODES
    depth = next(d for d in range(1, 20) if WIDTH ** d > MIN_EXPANDED_NODES)
    start = time.perf_counter()
    with pytest.raises(YamlExpansionError) as info:
        load_yaml(f"x:\n{anchors(depth)}\n", loader)
    assert time.perf_counter() - start < 1
    assert f"{MIN_EXPANDED_NODES:,}" in str(info.value) and f"line {depth + 1}" in str(info.value)
    load_yaml(f"x:\n{anchors(depth - 1)}\n", loader)  # one level less is within the bound


def test_the_bound_grows_with_what_is_written_out():
    """A long document that reuses a block many times is read: the bound is relative to its size."""
    written = MIN_EXPANDED_NODES // 2
    text = "block: &b {" + ", ".join(f"k{i}: {i}" for i in range(50)) + "}\nitems:\n"
    text += "".join(f"  - [{', '.join(['v'] * 50)}]\n" for _ in range(written // 50))
    uses = (EXPANSION_FACTOR * written) // 101 // 2  # stays under the factor
    text += "uses:\n" + "  - *b\n" * uses
    assert len(load_yaml(text)["uses"]) == uses


@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_merge_keys_that_multiply_are_refused_and_a_recursive_alias_too(loader):
    levels = ["- &m0 {a: 1, b: 2, c: 3}"]
    levels += [f"- &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * WIDTH)}]}}" for i in range(1, 8)]
    with pytest.raises(YamlExpansionError):
        load_yaml("\n".join(levels), loader)
    with pytest.raises(YamlExpansionError, match="recursive"):
        load_yaml("a: &x [1, *x]\n", loader)


# ---- configs through the CLI ------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["trainer", "hyperopt", "fill_value"])
@pytest.mark.parametrize("command", ["validate", "run", "infer"])
def test_an_alias_bomb_in_a_config_is_one_error_naming_the_file(prepflow, tmp_path, data, where, command):
    config = tmp_path / "bomb.yaml"
    config.write_text(bomb_config(7, where))
    args = {"validate": ["validate", data, "--config", config],
            "run": ["run", config, "--dataset", data, "--output", tmp_path / "out", "--cache-dir", tmp_path / "c"],
            "infer": ["infer", data, "--config", config]}[command]
    start = time.perf_counter()
    result = prepflow(*args)
    assert time.perf_counter() - start < 10
    one_error(result, str(config), "aliases", "line ")
    assert not (tmp_path / "out").exists()


def test_a_billion_laughs_config_is_refused_in_bounded_time_and_memory(tmp_path, data):
    """A real ``prepflow validate`` process: peak RSS (its own and its children's) and wall time."""
    config = tmp_path / "bomb.yaml"
    config.write_text(bomb_config(10, "fill_value"))
    assert config.stat().st_size < 1024
    code = ("import resource, sys\nfrom flows.cli import main\ncode = main(sys.argv[1:])\n"
            # VmHWM, not RUSAGE_SELF: ru_maxrss keeps the forking pytest process's peak across exec
            "own = int(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')))\n"
            "peak = max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "print('peak-kb', peak, file=sys.stderr)\nsys.exit(code)")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, "validate", str(data), "--config", str(config)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PREPFLOW_PREFECT": "off"})
    seconds = time.perf_counter() - start
    errors = [line for line in proc.stderr.splitlines() if line.startswith(ERROR)]
    assert proc.returncode in (1, 2) and len(errors) == 1 and "aliases" in errors[0], proc.stderr[-2000:]
    peak_mb = int(proc.stderr.split("peak-kb")[-1].split()[0]) / 1024
    assert peak_mb < 500 and seconds < 10, (peak_mb, seconds)


@pytest.mark.parametrize("value, shape", [("[[x, y], z]", "a list of 2 items"), ("{a: 1}", "a mapping with 1 key"),
                                          ("[x]", "a list of 1 item")])
def test_a_category_fill_value_of_the_wrong_shape_names_the_key(prepflow, tmp_path, data, value, shape):
    config = tmp_path / "c.yaml"
    config.write_text(f"input_features:\n  - {{name: a, type: category, preprocessing: {{fill_value: {value}}}}}\n")
    one_error(prepflow("validate", data, "--config", config), "input_features[0].preprocessing.fill_value",
              "expected one value", shape)


def test_wrong_shaped_defaults_fill_value_names_the_defaults_key(prepflow, tmp_path, data):
    config = tmp_path / "c.yaml"
    config.write_text("input_features:\n  - {name: a, type: number}\n"
                      "defaults:\n  number:\n    preprocessing: {fill_value: [1, [2]]}\n")
    one_error(prepflow("validate", data, "--config", config), "defaults.number.preprocessing.fill_value")


def test_a_vector_fill_value_may_be_a_flat_list_of_numbers_but_not_a_nested_one(prepflow, tmp_path):
    data = tmp_path / "v.csv"
    data.write_text("v\n" + "\n".join(["1 2", "3 4", "", "5 6"] * 5) + "\n")
    config = tmp_path / "c.yaml"
    config.write_text("input_features:\n  - {name: v, type: vector, preprocessing: {fill_value: [0, 0]}}\n")
    assert prepflow("validate", data, "--config", config).code == 0
    config.write_text("input_features:\n  - {name: v, type: vector, preprocessing: {fill_value: [0, [0]]}}\n")
    one_error(prepflow("validate", data, "--config", config), "input_features[0].preprocessing.fill_value",
              "flat list")


# ---- an artifact's feature spec ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return publish(tmp_path_factory.mktemp("made"))


def test_an_alias_bomb_in_a_feature_spec_channel_is_refused_by_inspect(made, tmp_path, prepflow):
    art = copy(made, tmp_path)
    spec = art / "feature_spec.yaml"
    text = spec.read_text()
    assert "\nchannel_spec:\n" in text
    bombed = text.replace("\nchannel_spec:\n", f"\nx_prepflow_note:\n{anchors(10)}\nchannel_spec:\n  bomb: *l9\n")
    spec.write_text(bombed)
    sign(art, "feature_spec.yaml")
    start = time.perf_counter()
    result = prepflow("inspect", art, "--json")
    assert time.perf_counter() - start < 10
    one_error(result, "feature_spec.yaml", "aliases")
