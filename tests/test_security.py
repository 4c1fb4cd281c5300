"""Security (issue 9): no pickle in caches, artifacts or the storage/task code; YAML only loaded safely;
credentials never written to logs, manifests, caches, reports or Prefect artifacts.

Media paths confined to ``media_root`` and an unsafe YAML tag that is refused, not executed, are cases
of the bad-input corpus (``tests/bad_inputs/media_path_traversal``, ``media_absolute_path_outside_root``,
``yaml_unsafe_tag``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, ROOT

CANARY_SECRET = "CANARYsecret0123456789abcdefCANARY"
CANARY_KEY_ID = "AKIACANARYKEYID0000"
CODE_DIRS = ("core", "storage", "tasks", "flows", "expectations")


def _files(root: Path):
    return [p for p in root.rglob("*") if p.is_file()]


def test_no_pickle_or_unsafe_yaml_in_the_code():
    pickle_use = re.compile(r"^\s*(import|from)\s+(cloudpickle|pickle|dill|joblib)\b|\b(pickle|cloudpickle)\.(dumps?|loads?)\b"
                            r"|allow_pickle\s*=\s*True", re.M)
    unsafe_yaml = re.compile(r"yaml\.(unsafe_load|full_load)\b|Loader\s*=\s*yaml\.(Unsafe|Full)?Loader\b"
                             r"|yaml\.load\((?![^\n]*Loader=([^\n]*Safe|loader\b))")
    found = []
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            if "Loader=loader" in text:  # that ``loader`` is libyaml's safe loader or the pure-Python one
                assert 'loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)' in text, path
            found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in pickle_use.finditer(text)]
            found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in unsafe_yaml.finditer(text)]
    assert found == []


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory):
    from tests.conftest import run_cli

    tmp = tmp_path_factory.mktemp("canary")
    env = {"AWS_SECRET_ACCESS_KEY": CANARY_SECRET, "AWS_ACCESS_KEY_ID": CANARY_KEY_ID,
           "AWS_SESSION_TOKEN": CANARY_SECRET + "token"}
    result = run_cli("run", EXAMPLE / "config.yaml", "--dataset", EXAMPLE / "titanic.csv", "--output", tmp / "out",
                     "--cache-dir", tmp / "cache", "--json", "--always-run-flow", env=env)
    assert result.returncode == 0, result.stderr
    return tmp, result


@pytest.mark.integration  # a prepflow run through its local Prefect server, whose API the test reads
def test_cache_and_artifact_files_hold_no_pickle(canary_run):
    tmp, _ = canary_run
    files = _files(tmp / "cache") + _files(tmp / "out")
    assert len(files) > 20
    pickled = [str(p) for p in files if re.match(rb"\x80[\x02-\x05]", p.read_bytes()[:2])]
    object_npy = [str(p) for p in files if p.suffix == ".npy" and b"'descr': '|O'" in p.read_bytes()[:256]]
    assert pickled == [] and object_npy == []


@pytest.mark.integration  # a prepflow run through its local Prefect server, whose API the test reads
def test_credentials_are_never_written(canary_run):
    tmp, result = canary_run
    leaks = [name for name, text in (("stdout", result.stdout), ("stderr", result.stderr)) if CANARY_SECRET in text
             or CANARY_KEY_ID in text]
    for path in _files(tmp / "cache") + _files(tmp / "out"):  # manifest, metadata, report html, cache entries
        data = path.read_bytes()
        if CANARY_SECRET.encode() in data or CANARY_KEY_ID.encode() in data:
            leaks.append(str(path))
    assert (Path(result.json()["artifact_path"]) / "manifest.json").is_file()
    assert Path(result.json()["report_path"]).is_file()

    import httpx

    from flows.local_server import ensure_server

    api = ensure_server()  # the server the CLI run used (same PREPFLOW_HOME)
    seen = 0
    for endpoint in ("artifacts/filter", "logs/filter", "flow_runs/filter", "task_runs/filter"):
        response = httpx.post(f"{api}/{endpoint}", json={"limit": 200, "offset": 0}, timeout=30)
        response.raise_for_status()
        seen += len(response.json())
        if CANARY_SECRET in response.text or CANARY_KEY_ID in response.text:
            leaks.append(f"Prefect API {endpoint}")
    assert seen > 0
    assert leaks == []
