"""Artifact safety (issue 40): a trainer opens an artifact it did not make.

Each case is a crafted artifact (a published one, edited, its manifest re-signed with the edited files'
sha256) or a crafted config; each must be refused with one line naming the file or the feature, with
nothing read or written outside the artifact or the download cache and no module imported from the
artifact's metadata (checked in a fresh interpreter: ``"this" not in sys.modules``, the Zen of Python not
printed). The same remote cases run against a real S3 endpoint in tests/integration/test_s3_artifact_safety.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest

from core.errors import ConfigError, DataError
from flows.cli import main as cli_main
from prepflow import Artifact, Preprocessor
from tasks.config.loader import parse_config
from tests.artifact_crafting import (
    CONFIG,
    copy,
    edit_json,
    edit_spec,
    frame,
    npy_with_rows,
    publish,
    refused,
    sign,
)
from tests.conftest import ROOT
from tests.helpers import run, write_config, write_csv

ZEN = "Beautiful is better than ugly"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return publish(tmp_path_factory.mktemp("made"))


@pytest.fixture
def art(made, tmp_path) -> Path:
    return copy(made, tmp_path)




def python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter from the repository root (nothing imported before it)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


# ---- local paths -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../secret.txt", "../absent.txt", "/etc/hostname", "train/../../secret.txt"])
def test_a_manifest_entry_outside_the_artifact_is_refused_by_name_before_any_read(art, name, capfd):
    (art.parent / "secret.txt").write_text("secret")
    sign(art, name, b"guess")  # a wrong digest: the answer must not tell whether the file exists
    message = refused(lambda: Artifact.open(art, verify=True), repr(name), "manifest.json")
    assert "differs" not in message and "missing" not in message  # no oracle on files outside
    refused(lambda: Artifact.open(art), repr(name))  # also without verify: the names are checked at open
    capfd.readouterr()
    assert cli_main(["inspect", str(art), "--verify"]) == 1
    err = capfd.readouterr().err
    assert repr(name) in err and "Traceback" not in err


def test_a_symlink_out_of_the_artifact_is_refused_and_an_unlisted_file_fails_verify(art):
    outside = art.parent / "outside.npy"
    np.save(outside, np.arange(3))
    (art / "train" / "link.npy").symlink_to(outside)
    sign(art, "train/link.npy")
    refused(lambda: Artifact.open(art, verify=True), "'train/link.npy'", "symlink")

    manifest = json.loads((art / "manifest.json").read_text())
    del manifest["files"]["train/link.npy"]
    (art / "manifest.json").write_text(json.dumps(manifest))
    refused(lambda: Artifact.open(art, verify=True), "train/link.npy: not listed in manifest.json")
    (art / "train" / "link.npy").unlink()
    (art / "notes.txt").write_text("not made by prepflow")
    refused(lambda: Artifact.open(art, verify=True), "notes.txt: not listed in manifest.json")
    (art / "notes.txt").unlink()
    Artifact.open(art, verify=True)  # what prepflow wrote, manifest.json beside it: good


@pytest.mark.parametrize("name", ["../outside.npy", "/tmp/outside-prepflow-40.npy"])
def test_feature_spec_files_outside_the_artifact_are_refused_before_batches_read_them(art, name):
    outside = art.parent / "outside.npy"
    np.save(outside, np.zeros(210, np.float32))

    def point(spec):
        for chunk in spec["source_spec"]["train"]:
            if chunk["type"] == "npy" and chunk["features"] == ["Age"]:
                chunk["files"] = [name]
    edit_spec(art, point)
    opened = Artifact.open(art, verify=True)  # every listed file matches: only the spec's names are wrong
    refused(lambda: list(opened.batches("train", batch_size=64)), repr(name), "feature_spec.yaml")
    refused(lambda: opened.read_split("train"), repr(name))


def test_latest_naming_a_folder_outside_the_output_is_refused(art):
    (art.parent / "LATEST").write_text("../victim\n")
    message = refused(lambda: Artifact.open(art.parent), f"{art.parent / 'LATEST'}:", "artifact id")
    assert "victim" not in message  # a LATEST's content is never quoted


# ---- code from the artifact ----------------------------------------------------------------------------

def test_preprocessor_never_imports_a_module_the_metadata_names_without_trust(art):
    edit_json(art, "training_set_metadata.json", lambda m: m["c"].update(type="this:X"))
    code = f"""
import sys
from prepflow import Preprocessor
from core.errors import DataError
try:
    Preprocessor.load({str(art)!r})
except DataError as exc:
    print("REFUSED", exc)
try:
    Preprocessor.load({str(art)!r}, trust_plugins=["prepflow_example_plugin"])
except DataError as exc:
    print("REFUSED", exc)
print("IMPORTED" if "this" in sys.modules else "NOT IMPORTED")
"""
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert ZEN not in out.stdout and out.stdout.strip().endswith("NOT IMPORTED"), out.stdout
    assert out.stdout.count("REFUSED training_set_metadata.json: feature 'c': feature type 'this:X'") == 2
    assert "module 'this'" in out.stdout


def test_even_a_trusting_caller_never_runs_a_standard_library_module(art):
    edit_json(art, "training_set_metadata.json", lambda m: m["c"].update(type="this:X"))
    out = python(f"""
import sys
from prepflow import Preprocessor
try:
    Preprocessor.load({str(art)!r}, trust_plugins=True)
except Exception as exc:
    print(type(exc).__name__, exc)
print("IMPORTED" if "this" in sys.modules else "NOT IMPORTED")
""")
    assert ZEN not in out.stdout and out.stdout.strip().endswith("NOT IMPORTED"), out.stdout
    assert "standard library" in out.stdout


def test_a_custom_stage_named_by_the_metadata_needs_trust_too(art):
    def add_stage(m):
        m["c"]["custom_stages"] = [{"uses": "this:Stage", "params": {}, "name": "zen", "after": "fill_missing",
                                    "code": "x", "phase": "x", "state": {}, "dataset_inputs": [], "passthrough": []}]
    edit_json(art, "training_set_metadata.json", add_stage)
    refused(lambda: Preprocessor.load(art), "feature 'c'", "custom stage 'this:Stage'", "module 'this'",
            error=DataError)
    assert "this" not in sys.modules


# ---- sizes ----------------------------------------------------------------------------------------------

def test_a_vocab_size_larger_than_the_stored_vocabulary_is_refused_before_allocation(art):
    edit_json(art, "training_set_metadata.json", lambda m: m["s"].update(vocab_size=10**12))
    start = time.perf_counter()
    refused(lambda: Preprocessor.load(art), "training_set_metadata.json", "feature 's'", "vocab_size is 1000000000000")
    assert time.perf_counter() - start < 10


def test_a_feature_spec_shape_unlike_the_metadata_is_refused(art):
    edit_spec(art, lambda spec: spec["feature_spec"]["s"].update(shape=[7]))
    refused(lambda: Preprocessor.load(art), "feature_spec.yaml", "feature 's'", "[7]")


@pytest.mark.parametrize("rows", [2100, 2**40])
def test_an_npy_header_claiming_more_rows_is_one_error_naming_the_file_and_feature(art, rows):
    npy_with_rows(art / "train" / "Age.npy", rows)
    sign(art, "train/Age.npy")
    opened = Artifact.open(art, verify=True)  # signed: only the header's claim is wrong
    refused(lambda: list(opened.batches("train", batch_size=64)), "train/Age.npy", "feature 'Age'", f"{rows} rows",
            "210")
    refused(lambda: Artifact.open(art).torch_dataset("train")[0], "train/Age.npy", "feature 'Age'")


def test_an_npy_header_unlike_its_file_size_is_refused(art):
    path = art / "train" / "Age.npy"
    path.write_bytes(path.read_bytes()[:-8])
    sign(art, "train/Age.npy")
    refused(lambda: list(Artifact.open(art).batches("train")), "train/Age.npy", "feature 'Age'", "file holds")


# ---- a damaged published artifact -------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_rerun_over_a_damaged_published_artifact_publishes_it_again(tmp_path, damage, caplog):
    data = write_csv(frame(), tmp_path / "data.csv")
    first = Path(run(CONFIG, data, tmp_path).artifact["artifact_path"])
    if damage == "delete":
        (first / "train" / "Age.npy").unlink()
    else:
        shard = first / "train" / "part-00000.parquet"
        shard.write_bytes(shard.read_bytes()[:100])
    again = run(CONFIG, data, tmp_path).artifact
    assert again["artifact_path"] == str(first) and not again["reused"]
    Artifact.open(first, verify=True)
    assert not list(first.parent.glob(".corrupt-*"))


def test_cli_rerun_over_a_damaged_artifact_does_not_return_it_as_good(tmp_path):
    config = write_config(CONFIG, tmp_path / "config.yaml")
    data = write_csv(frame(), tmp_path / "data.csv")
    args = ["run", str(config), "--dataset", str(data), "--output", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache"), "--json"]
    env = {**os.environ, "PREPFLOW_PREFECT": "off", "PYTHONPATH": str(ROOT)}
    first = subprocess.run([sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
    assert first.returncode == 0, first.stderr
    path = Path(json.loads(first.stdout.strip().splitlines()[-1])["artifact_path"])
    (path / "train" / "Age.npy").unlink()
    again = subprocess.run([sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stderr
    Artifact.open(path, verify=True)  # published again, not returned damaged


# ---- reserved columns ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("column", ["__row__", "__split__"])
def test_a_dataset_column_prepflow_reserves_is_one_error_naming_it(tmp_path, column):
    df = frame().assign(**{column: 7})
    with pytest.raises(DataError) as info:
        run(CONFIG, write_csv(df, tmp_path / "data.csv"), tmp_path)
    assert f"column '{column}'" in str(info.value) and "reserves" in str(info.value)


@pytest.mark.parametrize("key", ["name", "column"])
def test_a_feature_named_as_a_reserved_column_is_a_config_error(key):
    feature = {"name": "x", "type": "number", key: "__row__"}
    refused(lambda: parse_config({**CONFIG, "input_features": [feature]}), "input_features[0]", "'__row__'",
            error=ConfigError)


# ---- config plugins: checked before import -----------------------------------------------------------------

@pytest.mark.parametrize("ref", ["this:X", "os:system", "tabnanny:check"])
def test_a_config_naming_a_standard_library_module_is_refused_before_importing_it(ref):
    code = f"""
import sys
from tasks.config.loader import parse_config
from core.errors import ConfigError
config = {{"input_features": [{{"name": "x", "type": {ref!r}}}], "output_features": [{{"name": "y", "type": "binary"}}]}}
try:
    parse_config(config)
except ConfigError as exc:
    print("REFUSED", exc)
print("IMPORTED" if {ref.partition(':')[0]!r} in sys.modules else "NOT IMPORTED")
"""
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert ZEN not in out.stdout and "REFUSED" in out.stdout and "standard library" in out.stdout, out.stdout
    if ref != "os:system":  # os is imported by Python itself
        assert out.stdout.strip().endswith("NOT IMPORTED"), out.stdout


@pytest.mark.parametrize("command", ["validate", "run", "infer"])
def test_cli_commands_never_print_the_zen_of_python(tmp_path, command):
    config = write_config({**CONFIG, "input_features": [{"name": "Age", "type": "this:X"}]}, tmp_path / "c.yaml")
    data = write_csv(frame(), tmp_path / "data.csv")
    args = {"validate": ["validate", str(data), "--config", str(config), "--cache-dir", str(tmp_path / "cache")],
            "run": ["run", str(config), "--dataset", str(data), "--output", str(tmp_path / "out"),
                    "--cache-dir", str(tmp_path / "cache")],
            "infer": ["infer", str(data), "--config", str(config)]}[command]
    out = subprocess.run([sys.executable, "-m", "flows.cli", *args], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PREPFLOW_PREFECT": "off", "PYTHONPATH": str(ROOT)}, timeout=300)
    assert ZEN not in out.stdout + out.stderr
    assert out.returncode == 2 and "'this:X'" in out.stderr and "standard library" in out.stderr, out.stderr


def test_a_plugin_outside_the_project_and_not_installed_is_refused_before_import(tmp_path, monkeypatch):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "sneaky_plugin_40.py").write_text("print('SNEAKY RAN')\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(ROOT)
    config = {**CONFIG, "input_features": [{"name": "x", "type": "sneaky_plugin_40:X"}]}
    refused(lambda: parse_config(config), "sneaky_plugin_40", "refused before it is imported", error=ConfigError)
    assert "sneaky_plugin_40" not in sys.modules


# ---- remote (fsspec memory://; S3 in the integration lane) -----------------------------------------------------

def upload(art: Path, url: str) -> None:
    fs = fsspec.filesystem("memory")
    for path in art.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"{url}/{path.relative_to(art).as_posix()}", path.read_bytes())


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "cache"))
    url = f"memory://prepflow-safety-{tmp_path.name}/out"
    yield url
    fs = fsspec.filesystem("memory")
    if fs.exists(url):
        fs.rm(url, recursive=True)


def cache_files(tmp_path: Path) -> list[str]:
    cache = tmp_path / "cache"
    return sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*")) if cache.exists() else []


@pytest.mark.parametrize("name", ["../../../../tmp/prepflow-40-x.txt", "/tmp/prepflow-40-abs.txt"])
def test_a_download_never_writes_outside_the_cache(art, store, tmp_path, name):
    target = Path("/tmp") / Path(name).name
    target.unlink(missing_ok=True)
    sign(art, name, b"payload")
    upload(art, f"{store}/{art.name}")
    fsspec.filesystem("memory").pipe_file(f"{store}/{art.name}/{name.lstrip('/')}", b"payload")
    refused(lambda: Artifact.open(f"{store}/{art.name}", verify=True), repr(name))
    assert not target.exists()
    assert cache_files(tmp_path) == []  # nothing downloaded, nothing left


def test_an_artifact_id_that_climbs_out_of_the_cache_is_refused(art, store, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    edit_json(art, "manifest.json", lambda m: m.update(artifact_id="x/../../victim"))
    upload(art, f"{store}/{art.name}")
    refused(lambda: Artifact.open(f"{store}/{art.name}", verify=True), "'x/../../victim'", "artifact id")
    assert (victim / "keep.txt").read_text() == "mine"
    assert cache_files(tmp_path) == []


def test_a_failed_download_leaves_nothing_behind(art, store, tmp_path):
    path = art / "train" / "Age.npy"
    path.write_bytes(path.read_bytes()[:-4] + b"\0\0\0\1")  # same size, wrong sha256
    upload(art, f"{store}/{art.name}")
    refused(lambda: Artifact.open(f"{store}/{art.name}", verify=True), "train/Age.npy", "sha256 differs")
    assert [p for p in cache_files(tmp_path) if "/" not in p and not p.startswith(".")] == []
    assert not [p for p in cache_files(tmp_path) if p.startswith(".tmp-")]
