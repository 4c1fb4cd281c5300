"""Helpers for running the pipeline in-process (no Prefect) on small, test-made data."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import yaml

from storage.cache import StageCache
from tasks.config.loader import parse_config
from tasks.graph import PipelineResult, run_pipeline
from tasks.runtime.context import RunContext

ROOT = Path(__file__).resolve().parent.parent
WORKER_MEMORY_ENV = ("ARROW_DEFAULT_MEMORY_POOL", "MALLOC_MMAP_THRESHOLD_")


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path


def names_passed(monkeypatch, owner, attr: str) -> list[str]:
    """``owner.attr`` (a function whose first argument is a path) wrapped for the test: the list it returns
    gets the file name of each call's path, in call order (the files a run hashes or reads)."""
    names: list[str] = []
    real = getattr(owner, attr)

    def recorded(path, *args, **kwargs):
        names.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(owner, attr, recorded)
    return names


def config_parses(monkeypatch) -> list[str]:
    """What each outermost ``load_config`` / ``parse_config`` call parsed (a file, or ``mapping``), in call
    order, wherever the caller imported them from (their bindings in every loaded module are wrapped; a module
    imported later takes the loader's, which is wrapped too). ``load_config`` calling ``parse_config`` is one
    parse; so is a file whose parse the loader's own cache answers."""
    from tasks.config import loader

    calls: list[str] = []
    depth = [0]

    def counted(real, name):
        def call(data, *args, **kwargs):
            if not depth[0]:
                calls.append(f"{name}:{data if isinstance(data, (str, os.PathLike)) else 'mapping'}")
            depth[0] += 1
            try:
                return real(data, *args, **kwargs)
            finally:
                depth[0] -= 1
        return call

    for name in ("load_config", "parse_config"):
        real = getattr(loader, name)
        wrapped = counted(real, name)
        for module in list(sys.modules.values()):
            if getattr(module, name, None) is real:
                monkeypatch.setattr(module, name, wrapped)
    return calls


def write_config(config: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def run(config: dict, dataset: Path, tmp: Path, npartitions: int | None = None, cache: str = "cache",
        output: str = "out") -> PipelineResult:
    ctx = RunContext(parse_config(config), str(dataset), StageCache(tmp / cache), npartitions, str(tmp / output))
    return run_pipeline(ctx)


def without_created_at(files: dict[str, bytes]) -> dict[str, bytes]:
    """``artifact_files`` with manifest.json's ``created_at`` (the one time in an artifact) removed."""
    manifest = json.loads(files["manifest.json"])
    manifest.pop("created_at")
    return {**files, "manifest.json": json.dumps(manifest, sort_keys=True).encode()}


def artifact_files(path: str | Path) -> dict[str, bytes]:
    root = Path(path)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def hold_renames(marker: str, go: str, pattern: str = r"/\.[^/]*$", nth: int = 0) -> None:
    """For a writer child process that a test SIGKILLs or keeps alive: wrap ``os.replace`` so that a
    rename of a source path matching ``pattern`` (default: a dot-named temporary, written but not renamed
    yet) says so through the ``marker`` file and waits until the ``go`` file exists. ``nth``: only the
    nth matching rename waits (0: every one)."""
    import os
    import re
    import time

    replace, seen = os.replace, [0]

    def held(src, dst):
        if re.search(pattern, str(src)):
            seen[0] += 1
            if nth in (0, seen[0]):
                Path(marker).write_text("ready")
                while not Path(go).exists():
                    time.sleep(0.02)
        replace(src, dst)

    os.replace = held


class InProcess:
    """``prepflow ARGS`` through ``flows.cli.main`` in this process (the command's code without an
    interpreter and ~4 s of imports per call), stdout and stderr captured with pytest's ``capfd``: a
    ``tests.conftest.CliResult`` look-alike. A ``run`` quiets Prefect's console for the process: use
    the ``prefect_console`` fixture with it."""

    def __init__(self, capfd, *args):
        from flows.cli import main  # heavy optional dependency: flows.cli imports prefect

        capfd.readouterr()
        self.returncode = main([str(a) for a in args])
        self.stdout, self.stderr = capfd.readouterr()

    def json(self) -> dict:
        return json.loads(self.stdout.strip().splitlines()[-1])


def worker_memory_env() -> dict[str, str]:
    """The Dask workers' memory settings from the compose file's dask-worker service (README, scaling out),
    for tests that start workers as the stack does."""
    environment = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["dask-worker"]["environment"]
    return {name: str(environment[name]) for name in WORKER_MEMORY_ENV}
