"""The bad-input corpus (``tests/bad_inputs/``), run by one table-driven test through the CLI (issue 9).

One folder per case: ``config.yaml``, the dataset (``data.*``, plus media files) and ``expected.txt``,
``key: value`` lines (``#`` starts a comment):

* ``exit``: the expected exit code (0 for inputs that must work, such as a BOM or NaN strings);
* ``error``: a regex searched in stderr (the one-line ``prepflow: error: ...`` message);
* ``stage``: the stage that fails; no cache entry of it or a later stage may remain;
* ``dataset``: the dataset argument (default: the folder's ``data.*`` file); ``generate``: a function
  below that writes the dataset into the test's temporary copy (big inputs are not checked in);
* ``env: NAME=VALUE`` (repeatable; ``{closed_port}`` is a local port nothing listens on);
* ``subprocess: yes``: run a real ``prepflow`` process (the rest run ``flows.cli.main`` in one
  long-lived worker process: the same code path without ~4 s of imports each); ``max_seconds``: a bound on the run's wall time;
* ``absent``: a file that must not exist in the case folder afterwards (``{tmp}`` in config.yaml is
  that folder).

After every case: no temporary folder is left in the cache or output, every cache entry verifies, a
failed run leaves no artifact and no ``LATEST``.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import time
from pathlib import Path

import pytest

from storage.cache import StageCache
from tasks.graph import STAGES
from tests.conftest import run_cli

CORPUS = Path(__file__).parent / "bad_inputs"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.txt").is_file())


def parse_expected(path: Path) -> dict:
    spec: dict = {"env": {}}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "env":
            name, _, val = value.partition("=")
            spec["env"][name] = val
        else:
            spec[key] = value
    return spec


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- generators: inputs too big to check in ---------------------------------------------------------

def many_categories(folder: Path) -> Path:
    """10^6 rows, every ``city`` value distinct."""
    path = folder / "data.csv"
    n = 1_000_000
    with open(path, "w") as fh:
        fh.write("age,city,label\n")
        fh.writelines(f"{i % 90},c{i:07d},{i % 2}\n" for i in range(n))
    return path


def long_cell(folder: Path) -> Path:
    """One 1 MB text cell among short ones."""
    path = folder / "data.csv"
    rows = [f"{20 + i},word{i} other,{i % 2}" for i in range(12)]
    rows[5] = "25," + " ".join(["token"] * ((1 << 20) // 6)) + "x" * 8 + ",1"
    path.write_text("age,review,label\n" + "\n".join(rows) + "\n")
    assert path.stat().st_size > 1 << 20
    return path


def ten_megabyte_cell(folder: Path) -> Path:
    """One 10 MB text cell (no quotes: one field of words) among short ones."""
    path = folder / "data.csv"
    rows = [f"{20 + i},word{i} other,{i % 2}" for i in range(12)]
    rows[5] = "25," + " ".join(["token"] * ((10 << 20) // 6)) + ",1"
    path.write_text("age,review,label\n" + "\n".join(rows) + "\n")
    assert path.stat().st_size > 10 << 20
    return path


def nested_json(folder: Path) -> Path:
    path = folder / "data.json"
    depth = 100_000
    path.write_text('[{"age": 1, "city": ' + "[" * depth + "]" * depth + ', "label": 0}]')
    return path


GENERATORS = {f.__name__: f for f in (many_categories, long_cell, ten_megabyte_cell, nested_json)}


# ---- what a failed run may leave ----------------------------------------------------------------------

def untrusted_leftovers(cache: Path, out: Path, failed_stage: str | None, ok: bool) -> list[str]:
    bad = [p.as_posix() for root in (cache, out) if root.exists() for p in root.rglob(".tmp-*")]
    store = StageCache(cache)
    later = STAGES[STAGES.index(failed_stage):] if failed_stage else ()
    for stage_dir in (p for p in cache.iterdir() if p.is_dir()) if cache.exists() else ():
        for entry in (p for p in stage_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if stage_dir.name in later or store.get(stage_dir.name, entry.name) is None:
                bad.append(f"cache entry {stage_dir.name}/{entry.name}")
    if not ok and out.exists():
        bad += [f"output {p.name}" for p in out.iterdir() if not p.name.startswith(".")]
    return bad


def _main_in_worker(args: list[str], env: dict) -> tuple[int, str]:
    """``flows.cli.main(args)`` in the pool's worker process, its stdout and stderr captured."""
    import contextlib
    import io
    import os

    from flows.cli import main

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, err.getvalue() + out.getvalue()


@pytest.fixture(scope="module")
def worker():
    """One long-lived process runs the in-process cases: prefect and dask are imported once."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def run_case(folder: Path, spec: dict, worker) -> tuple[int, str, float]:
    env = {k: v.format(closed_port=closed_port()) for k, v in spec["env"].items()}
    if spec.get("dataset"):
        dataset = spec["dataset"] if "://" in spec["dataset"] else str(folder / spec["dataset"])
    else:
        (dataset,) = [str(p) for p in folder.iterdir() if p.stem == "data"]
    args = ["run", str(folder / "config.yaml"), "--dataset", dataset, "--output", str(folder / "out"),
            "--cache-dir", str(folder / "cache"), "--json"]
    start = time.perf_counter()
    if spec.get("subprocess") == "yes":
        result = run_cli(*args, env=env, timeout=300)
        return result.returncode, result.stderr + result.stdout, time.perf_counter() - start
    code, output = worker.submit(_main_in_worker, args, env).result(timeout=300)
    return code, output, time.perf_counter() - start


# Each case runs the in-process runner of the same stage graph in the fast lane (no Prefect API), and
# Prefect's flow on its local server in the integration lane.
@pytest.mark.parametrize("prefect", ["off", pytest.param("local-server", marks=pytest.mark.integration)])
@pytest.mark.parametrize("case", CASES)
def test_bad_input(case, prefect, tmp_path, worker):
    folder = tmp_path / case
    shutil.copytree(CORPUS / case, folder)
    spec = parse_expected(folder / "expected.txt")
    spec["env"].setdefault("PREPFLOW_PREFECT", prefect)
    config = folder / "config.yaml"
    raw = config.read_bytes()
    if b"{tmp}" in raw:
        config.write_bytes(raw.replace(b"{tmp}", str(folder).encode()))
    if spec.get("generate"):
        GENERATORS[spec["generate"]](folder)

    code, output, seconds = run_case(folder, spec, worker)

    expected_exit = int(spec["exit"])
    assert code == expected_exit, output[-4000:]
    if spec.get("error"):
        assert re.search(spec["error"], output), output[-4000:]
    if expected_exit:
        assert "prepflow: error:" in output and "Traceback" not in output, output[-4000:]
    else:
        summary = json.loads(output.strip().splitlines()[-1])
        assert (Path(summary["artifact_path"]) / "manifest.json").is_file()
    if spec.get("max_seconds"):
        assert seconds < float(spec["max_seconds"]), f"took {seconds:.1f} s"
    if spec.get("absent"):
        assert not (folder / spec["absent"]).exists(), "the config was executed"
    assert untrusted_leftovers(folder / "cache", folder / "out", spec.get("stage"), ok=expected_exit == 0) == []


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 30
