"""tests/ludwig_venv.py without building anything: where each Ludwig version's venv lives, which Python builds
it and which constraints it installs with (the build itself runs in the Ludwig integration test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.ludwig_venv import VERSIONS, LudwigVenvError, find_python, venv_dir


def test_each_version_has_its_own_cached_venv(monkeypatch, tmp_path):
    for name in ("PREPFLOW_LUDWIG_VENV", "PREPFLOW_LUDWIG_VENV_0_11", "PREPFLOW_LUDWIG_VENV_0_17"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert venv_dir("0.11") == tmp_path / "prepflow" / "ludwig-0.11"
    assert venv_dir("0.17") == tmp_path / "prepflow" / "ludwig-0.17"
    monkeypatch.setenv("PREPFLOW_LUDWIG_VENV", str(tmp_path / "old"))  # the 0.11 variable kept its meaning
    monkeypatch.setenv("PREPFLOW_LUDWIG_VENV_0_17", str(tmp_path / "v17"))
    assert (venv_dir("0.11"), venv_dir("0.17")) == (tmp_path / "old", tmp_path / "v17")


def test_an_unknown_version_is_refused_with_the_known_ones():
    with pytest.raises(LudwigVenvError, match=r"'0\.12'.*\['0\.11', '0\.17'\]"):
        venv_dir("0.12")


def test_constraints_pin_the_torch_prepflow_uses():
    for recipe in VERSIONS.values():
        lines = [line.strip() for line in recipe.constraints.read_text().splitlines()]
        assert "torch==2.13.0" in lines, recipe.constraints
    assert VERSIONS["0.17"].python == "3.12" and VERSIONS["0.11"].python == "3.11"


def test_find_python_skips_interpreters_of_another_version(monkeypatch, tmp_path):
    wrong = tmp_path / "python3.12"  # e.g. an inactive pyenv shim, or another Python behind the name
    wrong.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrong.chmod(0o755)
    monkeypatch.setenv("PREPFLOW_PYTHON312", str(wrong))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    if any(Path(p).exists() for p in ("/usr/bin/python3.12", "/usr/local/bin/python3.12")):
        pytest.skip("a system python3.12 exists: it would be found")
    with pytest.raises(LudwigVenvError, match="no Python 3.12 interpreter found"):
        find_python("3.12")
