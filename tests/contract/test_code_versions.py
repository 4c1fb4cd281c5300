"""Stage cache versions derive from the code (core/code_version.py), never from a hand-kept number:
editing a stage module recomputes that stage and what follows on the next run; rewording a docstring
or a comment recomputes nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.contract.test_stage_contract import CONFIG, make_frame
from tests.helpers import write_config, write_csv

RUN = """
import json, sys
from storage.cache import StageCache
from tasks.config.loader import load_config
from tasks.runtime.context import RunContext
from tasks.graph import run_pipeline
ctx = RunContext(load_config(sys.argv[1]), sys.argv[2], StageCache(sys.argv[3]), 2, sys.argv[4])
print(json.dumps({s.stage: s.cached for s in run_pipeline(ctx).stages}))
"""


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of prepflow's packages that a test may edit; runs import it, not the checkout."""
    out = tmp_path / "tree"
    for package in ("core", "tasks", "storage", "expectations"):
        shutil.copytree(ROOT / package, out / package, ignore=shutil.ignore_patterns("__pycache__"))
    return out


def cached_by_stage(tree: Path, tmp: Path) -> dict[str, bool]:
    proc = subprocess.run([sys.executable, "-c", RUN, str(tmp / "c.yaml"), str(tmp / "d.csv"), str(tmp / "cache"),
                           str(tmp / "out")], cwd=tree, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def edit(path: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in ``path``."""
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


@pytest.mark.integration  # real processes: prepflow run with its local Prefect server, or fresh interpreters
def test_editing_a_stage_recomputes_it_and_what_follows_and_a_docstring_edit_nothing(tree, tmp_path):
    write_csv(make_frame(400), tmp_path / "d.csv")
    write_config(CONFIG, tmp_path / "c.yaml")
    first = cached_by_stage(tree, tmp_path)
    assert not any(first.values())
    assert all(cached_by_stage(tree, tmp_path).values())

    # a docstring and a comment reworded: the same syntax tree, every entry reused
    edit(tree / "tasks" / "vocab" / "stage.py", '"""', '"""Reworded. ')
    edit(tree / "tasks" / "vocab" / "stage.py", "\nfrom pathlib import ", "\n# a new comment\nfrom pathlib import ")
    assert all(cached_by_stage(tree, tmp_path).values())

    # the code of the vocab stage changed (an expression, no version bumped): vocab and every stage
    # downstream of it recompute, the stages before it are reused
    edit(tree / "tasks" / "vocab" / "stage.py", "\nfrom pathlib import ", "\n_EDITED = 1\nfrom pathlib import ")
    after = cached_by_stage(tree, tmp_path)
    assert all(after[s] for s in ("ingest", "split", "fill_missing", "balance"))  # their code imports no vocab
    assert not any(after[s] for s in ("vocab", "encode", "validate_encoded"))
    assert not after["publish"]  # vocab's code joins the artifact id: a new artifact is written
