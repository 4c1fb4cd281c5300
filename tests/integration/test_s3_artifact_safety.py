"""Crafted artifacts on a real S3 endpoint (moto's server, as tests/integration/test_s3_artifact.py starts it):
a download never writes outside ``PREPFLOW_ARTIFACT_CACHE``, an artifact id never climbs out of it, a failed
download leaves nothing behind, a damaged published artifact is published again (issue 40; the same cases
on fsspec's memory:// store are in the fast lane, tests/unit/artifact/test_artifact_safety.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import IntegrityError
from prepflow import Artifact
from tests.artifact_crafting import copy, edit_json, publish, sign
from tests.integration.test_s3_artifact import BUCKET, in_env, s3_env  # noqa: F401  (the fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("in_env")]


@pytest.fixture
def art(tmp_path) -> Path:
    return copy(publish(tmp_path / "made"), tmp_path)


def s3():
    from storage.fs import filesystem

    return filesystem(f"s3://{BUCKET}")  # the endpoint and credentials from the environment (in_env)


def upload(art: Path, url: str) -> None:
    fs = s3()
    for path in art.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"{url}/{path.relative_to(art).as_posix()}", path.read_bytes())
    fs.invalidate_cache()


def cached(tmp_path: Path) -> list[str]:
    cache = tmp_path / "artifact-cache"
    return sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*")) if cache.exists() else []


@pytest.mark.parametrize("name", ["../../../../tmp/prepflow-40-s3.txt", "/tmp/prepflow-40-s3-abs.txt"])
def test_s3_download_never_writes_outside_the_cache(art, tmp_path, name):
    target = Path("/tmp") / Path(name).name
    target.unlink(missing_ok=True)
    sign(art, name, b"payload")
    url = f"s3://{BUCKET}/safety/{tmp_path.name}/{art.name}"
    upload(art, url)
    with pytest.raises(IntegrityError, match=repr(name).replace(".", r"\.")):
        Artifact.open(url, verify=True)
    assert not target.exists()
    assert cached(tmp_path) == []


def test_s3_artifact_id_climbing_out_of_the_cache_is_refused(art, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    edit_json(art, "manifest.json", lambda m: m.update(artifact_id="x/../../victim"))
    url = f"s3://{BUCKET}/safety/{tmp_path.name}/{art.name}"
    upload(art, url)
    with pytest.raises(IntegrityError, match="artifact id 'x/../../victim'"):
        Artifact.open(url, verify=True)
    assert (victim / "keep.txt").read_text() == "mine"
    assert cached(tmp_path) == []


def test_s3_failed_download_leaves_nothing_behind(art, tmp_path):
    path = art / "train" / "Age.npy"
    path.write_bytes(path.read_bytes()[:-4] + b"\0\0\0\1")  # same size, wrong sha256
    url = f"s3://{BUCKET}/safety/{tmp_path.name}/{art.name}"
    upload(art, url)
    with pytest.raises(IntegrityError, match="train/Age.npy: sha256 differs"):
        Artifact.open(url, verify=True)
    assert [p for p in cached(tmp_path) if not p.startswith(".")] == []
    assert not [p for p in cached(tmp_path) if p.startswith(".tmp-")]


def test_s3_rerun_over_a_damaged_published_artifact_publishes_it_again(tmp_path):
    from storage.cache import StageCache
    from tasks.config.loader import parse_config
    from tasks.graph import run_pipeline
    from tasks.runtime.context import RunContext
    from tests.artifact_crafting import CONFIG, frame
    from tests.helpers import write_csv

    data = write_csv(frame(), tmp_path / "data.csv")
    output = f"s3://{BUCKET}/safety/{tmp_path.name}/out"

    def run():
        ctx = RunContext(parse_config(CONFIG), str(data), StageCache(tmp_path / "cache"), None, output)
        return run_pipeline(ctx).artifact

    first = run()
    s3().rm_file(f"{first['artifact_path']}/train/Age.npy")
    again = run()
    assert again["artifact_path"] == first["artifact_path"] and not again["reused"]
    Artifact.open(first["artifact_path"], verify=True)


def stored(prefix: str) -> list[str]:
    fs = s3()
    fs.invalidate_cache()
    return sorted(fs.find(prefix))


def test_s3_report_refuses_an_id_that_climbs_out_and_writes_no_object(art, tmp_path, capfd):
    from flows.cli import main as cli_main

    edit_json(art, "manifest.json", lambda m: m.update(artifact_id="../../x"))
    prefix = f"s3://{BUCKET}/safety/{tmp_path.name}"
    upload(art, f"{prefix}/deep/{art.name}")
    before = stored(f"{BUCKET}/safety")
    capfd.readouterr()
    assert cli_main(["report", f"{prefix}/deep/{art.name}"]) == 1
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("prepflow: error:") and "artifact id '../../x'" in err[0], err
    assert stored(f"{BUCKET}/safety") == before  # no deep/../../x.report.html


def test_s3_report_checks_the_metadata_against_the_manifest_as_open_does(art, tmp_path, capfd):
    import json

    from flows.cli import main as cli_main

    url = f"s3://{BUCKET}/safety/{tmp_path.name}/{art.name}"
    upload(art, url)
    meta = json.loads((art / "training_set_metadata.json").read_text())
    meta["Age"]["mean"] = 1e6  # edited on the store, the manifest unchanged
    s3().pipe_file(f"{url}/training_set_metadata.json", json.dumps(meta).encode())
    with pytest.raises(IntegrityError, match="training_set_metadata.json"):
        Artifact.open(url)
    before = stored(f"{BUCKET}/safety")
    capfd.readouterr()
    assert cli_main(["report", url]) == 1
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "training_set_metadata.json: size or sha256 differs from manifest.json" in err[0], err
    assert stored(f"{BUCKET}/safety") == before
