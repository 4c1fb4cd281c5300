"""Every reader of an artifact goes through ``storage.artifact_read`` (issue 48, items 1, 2 and 5's LATEST).

Crafted artifacts, as in tests/unit/artifact/test_artifact_safety.py: a published artifact copied and edited the way
an attacker would, its manifest re-signed. Each case is refused by every reader (a typed error in Python,
one ``prepflow: error:`` line and exit 1 on the command line) with nothing written outside the output.
The same store cases on a real S3 endpoint: tests/integration/test_s3_artifact_safety.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fsspec
import pytest

from core.errors import IntegrityError
from flows.apply import open_fitted
from flows.cli import main as cli_main
from prepflow import Artifact, Preprocessor
from storage.safe_paths import ID_MAX
from tasks.config.constants import REPORT_SUFFIX
from tests.artifact_crafting import copy, edit_json, publish, sign

SECRET = "AWS_SECRET_ACCESS_KEY=prepflow48secret"
METADATA = "training_set_metadata.json"
SPEC = "feature_spec.yaml"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return publish(tmp_path_factory.mktemp("made"))


@pytest.fixture
def art(made, tmp_path) -> Path:
    return copy(made, tmp_path / "out")


def refused(call, *needles: str, error=IntegrityError) -> str:
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def cli_refused(capfd, args: list[str], *needles: str) -> str:
    """``prepflow <args>`` exits 1 with one ``prepflow: error:`` line holding ``needles``, and nothing else."""
    capfd.readouterr()
    code = cli_main(args)
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert code == 1, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("prepflow: error:"), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


# ---- item 1: an artifact id is one plain folder name; a report never writes elsewhere -------------------------

@pytest.mark.parametrize("bad_id", ["../../x", "ABS", "a" * (ID_MAX + 1), "0123abcd\n", "..", "x.y"])
def test_a_manifest_id_that_is_not_a_plain_hex_id_is_refused_and_report_writes_nothing(art, tmp_path, capfd, bad_id):
    if bad_id == "ABS":
        bad_id = str(tmp_path / "elsewhere" / "x")  # absolute: the report would be <that>.report.html
        (tmp_path / "elsewhere").mkdir()
    edit_json(art, "manifest.json", lambda m: m.update(artifact_id=bad_id))
    before = files_under(tmp_path)
    refused(lambda: Artifact.open(art, verify=True), "manifest.json", "artifact id")
    refused(lambda: Artifact.open(art), "artifact id")
    cli_refused(capfd, ["report", str(art)], "manifest.json", "artifact id")
    assert files_under(tmp_path) == before  # no <id>.report.html, inside or outside the output
    assert not list(tmp_path.parent.glob("*" + REPORT_SUFFIX)) and not (tmp_path.parent / "x.report.html").exists()


def test_a_manifest_that_is_a_symlink_is_refused(art, tmp_path):
    outside = tmp_path / "manifest-elsewhere.json"
    shutil.move(art / "manifest.json", outside)
    (art / "manifest.json").symlink_to(outside)
    refused(lambda: Artifact.open(art), "manifest.json", "symlink")
    refused(lambda: Preprocessor.load(art), "manifest.json", "symlink")


# ---- item 2: symlinked metadata and spec (manifest re-signed with the outside file's digest) --------------------

def link_outside(art: Path, name: str) -> Path:
    """``name`` replaced by a symlink to an edited copy outside the artifact, the manifest re-signed with it."""
    outside = art.parent.parent / f"outside-{name}"
    text = (art / name).read_text()
    if name == METADATA:
        meta = json.loads(text)
        meta["Age"]["mean"] = 1e6  # what an attacker's statistics would encode with
        text = json.dumps(meta)
    else:
        text += "\n# edited outside\n"
    outside.write_text(text)
    (art / name).unlink()
    (art / name).symlink_to(outside)
    sign(art, name)  # the digest of the outside file, read through the link
    return outside


READERS = {
    "Preprocessor.load": lambda art: Preprocessor.load(art),
    "batches": lambda art: list(Artifact.open(art).batches("train", batch_size=64)),
    "read_split": lambda art: Artifact.open(art).read_split("train"),
    "torch_dataset": lambda art: Artifact.open(art).torch_dataset("train")[0],
    "metadata": lambda art: Artifact.open(art).metadata,
    "apply": lambda art: open_fitted(art),
}


@pytest.mark.parametrize("name", [METADATA, SPEC])
@pytest.mark.parametrize("reader", list(READERS))
def test_a_symlinked_metadata_or_spec_is_refused_by_every_reader(art, name, reader):
    link_outside(art, name)
    refused(lambda: READERS[reader](art), repr(name), "symlink")


@pytest.mark.parametrize("name", [METADATA, SPEC])
@pytest.mark.parametrize("command", ["report", "inspect"])
def test_cli_commands_refuse_a_symlinked_metadata_or_spec_in_one_line(art, tmp_path, capfd, name, command):
    link_outside(art, name)
    before = files_under(tmp_path)
    cli_refused(capfd, [command, str(art)], repr(name), "symlink")
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("name", [METADATA, SPEC])
def test_a_metadata_or_spec_unlike_its_manifest_entry_is_refused_before_use(art, name):
    path = art / name
    path.write_text(path.read_text().replace("Age", "Agf", 1))  # same size, not re-signed
    refused(lambda: Preprocessor.load(art), str(path), "sha256 differs from manifest.json")
    path.write_text(path.read_text() + " ")  # a byte more
    refused(lambda: Preprocessor.load(art), str(path), "bytes, manifest.json lists")


def test_a_shard_not_of_its_listed_size_is_refused_before_it_is_read(art):
    shard = art / "train" / "part-00000.parquet"
    shard.write_bytes(shard.read_bytes() + b"\0" * 16)
    refused(lambda: list(Artifact.open(art).batches("train", prefer="parquet")), str(shard), "bytes, manifest.json")
    refused(lambda: Artifact.open(art).read_split("train"), str(shard))


# ---- LATEST: one plain id, its content never quoted ----------------------------------------------------------------

@pytest.mark.parametrize("size", [len(SECRET), 2 << 20])
def test_latest_linked_to_a_file_outside_is_refused_naming_latest_and_never_quoting_it(art, tmp_path, capfd, size):
    secret = tmp_path / "secrets.env"
    secret.write_text((SECRET + "\n") * (size // (len(SECRET) + 1) + 1))
    (art.parent / "LATEST").symlink_to(secret)
    message = refused(lambda: Artifact.open(art.parent), str(art.parent / "LATEST"))
    assert "prepflow48secret" not in message and len(message) < 400
    line = cli_refused(capfd, ["inspect", str(art.parent)], "LATEST")
    assert "prepflow48secret" not in line and len(line) < 400


def test_latest_in_the_folder_holding_no_plain_id_is_refused_without_its_content(art, capfd):
    (art.parent / "LATEST").write_text(SECRET + "\n")
    message = refused(lambda: Preprocessor.load(art.parent), "LATEST", "hex digits")
    assert "prepflow48secret" not in message
    (art.parent / "LATEST").write_text(art.name + "\n")  # what publish writes: followed
    assert Artifact.open(art.parent).artifact_id == json.loads((art / "manifest.json").read_text())["artifact_id"]


# ---- a report of an artifact on a store (fsspec memory://; S3 in the integration lane) ------------------------------

@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "cache"))
    url = f"memory://prepflow-readers-{tmp_path.name}/deep/out"
    yield url
    fs = fsspec.filesystem("memory")
    root = url.split("/deep/")[0]
    if fs.exists(root):
        fs.rm(root, recursive=True)


def upload(art: Path, url: str) -> None:
    fs = fsspec.filesystem("memory")
    for path in art.rglob("*"):
        if path.is_file():
            fs.pipe_file(f"{url}/{path.relative_to(art).as_posix()}", path.read_bytes())


def stored(url: str) -> list[str]:
    fs = fsspec.filesystem("memory")
    root = url.split("/deep/")[0]
    return sorted(fs.find(root))


def test_report_on_a_store_refuses_an_id_that_climbs_out(art, store, capfd):
    edit_json(art, "manifest.json", lambda m: m.update(artifact_id="../../x"))
    upload(art, f"{store}/{art.name}")
    before = stored(store)
    cli_refused(capfd, ["report", f"{store}/{art.name}"], "manifest.json", "'../../x'")
    assert stored(store) == before  # no deep/../../x.report.html, no object at all


def test_report_on_a_store_checks_the_metadata_against_the_manifest(art, store, capfd):
    upload(art, f"{store}/{art.name}")
    url = f"{store}/{art.name}/{METADATA}"
    meta = json.loads((art / METADATA).read_text())
    meta["Age"]["mean"] = 1e6  # edited on the store, the manifest unchanged
    fsspec.filesystem("memory").pipe_file(url, json.dumps(meta).encode())
    refused(lambda: Artifact.open(f"{store}/{art.name}"), METADATA)  # as a download refuses it
    before = stored(store)
    cli_refused(capfd, ["report", f"{store}/{art.name}"], url, "sha256 differs from manifest.json")
    assert stored(store) == before


def test_report_on_a_store_of_a_good_artifact_is_written_beside_it(art, store):
    upload(art, f"{store}/{art.name}")
    assert cli_main(["report", f"{store}/{art.name}"]) == 0
    art_id = json.loads((art / "manifest.json").read_text())["artifact_id"]
    assert [p for p in stored(store) if p.endswith(REPORT_SUFFIX)] == [
        p for p in stored(store) if p.endswith(f"/deep/out/{art_id}{REPORT_SUFFIX}")] != []
