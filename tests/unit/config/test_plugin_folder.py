"""A plugin module beside the config (issue 48, item 8; docs/security.md: "or live under the config file's
folder").

A config in a folder of its own names ``folderplug_stage:Scale`` and ``folderplug_stage:Scaled`` (a custom
stage and a feature type) whose module, ``folderplug_stage.py``, lies beside it. ``prepflow validate`` and
``prepflow run``, started from another folder in a fresh interpreter (nothing on ``sys.path`` but prepflow),
import it from there. The folder is not put on ``sys.path``: another file in it answers no other import, and
a module named like an installed one is still the installed one. The same on Dask workers:
tests/integration/test_plugin_folder_cluster.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core import plugins
from tasks.config.loader import load_config
from tests.artifact_crafting import frame
from tests.conftest import ROOT

BIN = Path(sys.executable).parent
MODULE = "folderplug_stage"
PLUGIN = '''
from tasks import Stage
from tasks.features.number import NumberFeature


class Scale(Stage):
    input_type = {"Age": "number"}
    output_type = {"scaled": "float64"}

    def transform(self, df):
        return df.assign(scaled=df["Age"] * 2.0)


class Scaled(NumberFeature):
    """A number feature under its own name."""
'''
CONFIG = {
    "stages": [{"uses": f"{MODULE}:Scale", "after": "fill_missing"}],
    "input_features": [{"name": "scaled", "type": f"{MODULE}:Scaled", "preprocessing": {"normalization": "none"}},
                       {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
}


def project(tmp_path: Path) -> Path:
    """A folder holding the config, its plugin and the data; the commands run from another one."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(PLUGIN)
    (folder / "config.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    frame().to_csv(folder / "data.csv", index=False)
    return folder


def prepflow(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PREPFLOW_PLUGIN_PATH", "PYTHONPATH")}
    env.update(PYTHONPATH=str(ROOT), PREPFLOW_PREFECT="off")  # prepflow from this checkout, nothing else
    return subprocess.run([str(BIN / "prepflow"), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_validate_and_run_import_a_plugin_beside_the_config(tmp_path):
    folder = project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    checked = prepflow("validate", folder / "data.csv", "--config", folder / "config.yaml", "--cache-dir",
                       tmp_path / "cache", cwd=elsewhere)
    assert checked.returncode == 0, checked.stderr[-3000:]
    ran = prepflow("run", folder / "config.yaml", "--dataset", folder / "data.csv", "--output", tmp_path / "out",
                   "--cache-dir", tmp_path / "cache", "--json", cwd=elsewhere)
    assert ran.returncode == 0, ran.stderr[-3000:]
    artifact = Path(json.loads(ran.stdout.splitlines()[-1])["artifact_path"])
    metadata = json.loads((artifact / "training_set_metadata.json").read_text())
    assert metadata["scaled"]["type"] == f"{MODULE}:Scaled"


def test_the_config_folder_answers_only_the_modules_the_config_names(tmp_path, monkeypatch):
    folder = project(tmp_path)
    (folder / "folderplug_stray.py").write_text("raise SystemExit('a stray module was imported')\n")
    (folder / "yaml.py").write_text("raise SystemExit('the folder shadowed an installed module')\n")
    monkeypatch.setenv(plugins.PLUGIN_PATH_ENV, "")  # restored after the test, as are the module's records
    for name, value in (("_ROOTS", []), ("_CHECKED", set()), ("_FROM_FOLDERS", {})):
        monkeypatch.setattr(plugins, name, value)
    monkeypatch.chdir(tmp_path)
    try:
        load_config(folder / "config.yaml")
        assert sys.modules[MODULE].__file__ == str(folder / f"{MODULE}.py")
    finally:
        sys.modules.pop(MODULE, None)
    assert str(folder) not in sys.path and str(folder.resolve()) not in sys.path
    assert importlib.util.find_spec("folderplug_stray") is None
    assert importlib.util.find_spec("yaml").origin != str(folder / "yaml.py")
    assert plugins.folder_plugins()[MODULE] == str(folder.resolve())


@pytest.mark.parametrize("ref", ["folderplug_missing:Scale", "os:system"])
def test_a_module_in_no_allowed_folder_is_still_refused(tmp_path, monkeypatch, ref):
    folder = project(tmp_path)
    config = {**CONFIG, "stages": [{"uses": ref, "after": "fill_missing"}]}
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    checked = prepflow("validate", folder / "data.csv", "--config", folder / "config.yaml", "--cache-dir",
                       tmp_path / "cache", cwd=tmp_path)
    assert checked.returncode == 2, checked.stderr[-3000:]
    assert f"stages[0].uses: cannot load custom stage '{ref}'" in checked.stderr
