"""``prepflow apply`` with the fitted ARTIFACT, the dataset and the output on S3 (moto's server, as
tests/integration/test_s3_artifact.py starts it), issue 39: the fitted artifact is downloaded into the artifact
cache and checked as ``Artifact.open`` does, the rows equal a local apply's, and a crafted or incomplete remote
artifact is refused with one line, nothing published and nothing left in the caches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import prepflow
from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from tests.artifact_crafting import copy, edit_json, sign
from tests.helpers import run, write_csv
from tests.integration.test_s3_artifact import BUCKET, in_env, s3_env  # noqa: F401  (the fixtures)
from tests.unit.serving.test_apply import CONFIG, frame

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("in_env")]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fit")
    return Path(run(CONFIG, write_csv(frame(500, 1), tmp / "train.csv"), tmp).artifact["artifact_path"])


def s3():
    from storage.fs import filesystem

    return filesystem(f"s3://{BUCKET}")  # the endpoint and credentials from the environment (in_env)


def upload(art: Path, root: str, name: str | None = None) -> str:
    """``art``'s files under ``root/<name>`` (default: its folder name) and ``root/LATEST`` naming it; the URL."""
    fs = s3()
    url = f"{root}/{name or art.name}"
    for path in sorted(art.rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{url}/{path.relative_to(art).as_posix()}", path.read_bytes())
    fs.pipe_file(f"{root}/LATEST", f"{name or art.name}\n".encode())
    fs.invalidate_cache()
    return url


def cached(tmp_path: Path) -> list[str]:
    """What the artifact cache (``PREPFLOW_ARTIFACT_CACHE``, set by in_env) holds, its lock files left out."""
    cache = tmp_path / "artifact-cache"
    return sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*")
                  if not p.name.startswith(".") or p.name.startswith(".tmp-")) if cache.exists() else []


def test_apply_a_fitted_artifact_on_s3(fitted, tmp_path):
    base = f"s3://{BUCKET}/apply/{tmp_path.name}"
    art_url = upload(fitted, f"{base}/fit")
    data = write_csv(frame(200, 2, unseen=0.2), tmp_path / "new.csv")
    s3().put_file(str(data), f"{base}/new.csv")
    local = prepflow.apply(fitted, data, tmp_path / "local", cache_dir=tmp_path / "local-cache")
    want = Artifact.open(local["artifact_path"]).read_split("test")

    # the output root (through LATEST) and the artifact's URL; the dataset and the output on S3 or here
    for i, (artifact, dataset, output) in enumerate([(f"{base}/fit", f"{base}/new.csv", f"{base}/applied"),
                                                     (art_url, str(data), str(tmp_path / "applied"))]):
        summary = prepflow.apply(artifact, dataset, output, cache_dir=tmp_path / f"cache{i}")
        assert summary["artifact_id"] == local["artifact_id"]
        assert summary["artifact_path"] == f"{output}/{local['artifact_id']}"
        art = Artifact.open(summary["artifact_path"], verify=True)
        # the lineage names the fitted artifact itself, not the output root whose LATEST moves on
        assert art.manifest["fitted_from"] == {"artifact_id": fitted.name, "path": art_url}
        got = art.read_split("test")
        assert set(got) == set(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)

    # downloaded into the artifact cache, every file checked against its sha256, no download left behind
    assert fitted.name in cached(tmp_path) and not [p for p in cached(tmp_path) if p.startswith(".tmp-")]
    Artifact.open(tmp_path / "artifact-cache" / fitted.name, verify=True)


def test_the_output_root_of_a_remote_fitted_artifact_is_refused(fitted, tmp_path):
    root = f"s3://{BUCKET}/apply/{tmp_path.name}/fit"
    art_url = upload(fitted, root)
    data = write_csv(frame(30, 3), tmp_path / "new.csv")
    for artifact, output in ((root, root), (art_url, root + "/")):
        with pytest.raises(ConfigError, match="fitted artifact's output root"):
            prepflow.apply(artifact, data, output, cache_dir=tmp_path / "cache")
    assert s3().cat_file(f"{root}/LATEST") == f"{fitted.name}\n".encode()  # still names the fitted artifact
    assert sorted(s3().ls(root)) == sorted([f"{BUCKET}/apply/{tmp_path.name}/fit/{n}" for n in ("LATEST", fitted.name)])


def _sha_differs(art: Path) -> tuple[str, str]:
    meta = art / "training_set_metadata.json"
    text = meta.read_text()
    meta.write_text(text.replace('"', "'", 1))  # the same size, another sha256; the manifest not re-signed
    return art.name, r"training_set_metadata\.json: sha256 differs"


def _name_out_of_the_cache(art: Path) -> tuple[str, str]:
    sign(art, "../../../../tmp/prepflow-39-apply.txt", b"payload")
    return art.name, r"file name '\.\./\.\./\.\./\.\./tmp/prepflow-39-apply\.txt'"


def _id_climbing(art: Path) -> tuple[str, str]:
    edit_json(art, "manifest.json", lambda m: m.update(artifact_id="x/../../victim"))
    return art.name, r"artifact id 'x/\.\./\.\./victim'"


def _latest_climbing(art: Path) -> tuple[str, str]:
    return "../../x", r"LATEST: does not hold one artifact id \(hex digits"  # its content never quoted


def _no_manifest(art: Path) -> tuple[str, str]:
    (art / "manifest.json").unlink()
    return art.name, r"not a complete artifact \(no manifest\.json\)"


CRAFTED = {"a file whose sha256 differs": _sha_differs, "a name out of the cache": _name_out_of_the_cache,
           "an artifact id climbing out": _id_climbing, "a LATEST climbing out": _latest_climbing,
           "no manifest": _no_manifest}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_or_incomplete_remote_artifact_is_refused(fitted, tmp_path, case):
    art = copy(fitted, tmp_path / "crafted")
    name, message = CRAFTED[case](art)
    base = f"s3://{BUCKET}/apply/{tmp_path.name}"
    upload(art, f"{base}/fit", name if "/" not in name else None)
    if "/" in name:
        s3().pipe_file(f"{base}/fit/LATEST", f"{name}\n".encode())
    data = write_csv(frame(30, 4), tmp_path / "new.csv")
    with pytest.raises(DataError, match=message) as info:
        prepflow.apply(f"{base}/fit", data, f"{base}/applied", cache_dir=tmp_path / "cache")
    assert "\n" not in str(info.value).strip()
    assert not s3().exists(f"{base}/applied")  # nothing published
    assert cached(tmp_path) == []  # nothing kept in the artifact cache, no download left behind
    assert not (tmp_path / "cache").exists()  # no stage ran
    assert not Path("/tmp/prepflow-39-apply.txt").exists()


def test_the_cli_refuses_a_crafted_remote_artifact_with_one_line(cli, fitted, tmp_path, in_env):  # noqa: F811
    art = copy(fitted, tmp_path / "crafted")
    _sha_differs(art)
    base = f"s3://{BUCKET}/apply/{tmp_path.name}"
    upload(art, f"{base}/fit")
    data = write_csv(frame(30, 5), tmp_path / "new.csv")
    out = cli("apply", f"{base}/fit", "--dataset", data, "--output", f"{base}/applied", "--cache-dir",
              tmp_path / "cache", "--json", env={**in_env, "PREPFLOW_PREFECT": "off"})
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if line.startswith("prepflow: error:")]
    assert len(errors) == 1 and "training_set_metadata.json: sha256 differs" in errors[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not s3().exists(f"{base}/applied") and cached(tmp_path) == [] and not (tmp_path / "cache").exists()


def test_a_damaged_copy_in_the_artifact_cache_is_downloaded_again(fitted, tmp_path):
    """A remote ARTIFACT whose copy in the artifact cache lost a file's bytes (a full disk, a person's edit) is
    downloaded again and checked whole, not refused: the store's artifact is intact."""
    url = upload(fitted, f"s3://{BUCKET}/apply/{tmp_path.name}/fit")
    data = write_csv(frame(150, 3), tmp_path / "new.csv")
    first = prepflow.apply(url, data, tmp_path / "a1", cache_dir=tmp_path / "cache")
    copy_dir = tmp_path / "artifact-cache" / fitted.name
    damaged = max((p for p in copy_dir.rglob("*") if p.is_file() and p.name != "manifest.json"),
                  key=lambda p: (p.stat().st_size, p.name))
    damaged.write_bytes(damaged.read_bytes()[:100])
    again = prepflow.apply(url, data, tmp_path / "a2", cache_dir=tmp_path / "cache")
    assert again["artifact_id"] == first["artifact_id"]
    Artifact.open(copy_dir, verify=True)  # the cache's copy repaired
