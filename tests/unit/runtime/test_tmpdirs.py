"""Temporary folders and files left by killed runs are removed; a live writer's never (storage/tmpdirs.py).

Writers run in real child processes that are really SIGKILLed (the kernel, not the writer, drops the
lock), or stay alive while the parent sweeps the same folder. Lock-less leftovers (an older prepflow's)
go only once abandoned (``ABANDONED_AFTER_S``, aged here with ``os.utime``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storage import remote
from storage.cache import StageCache
from storage.featurespec import DATASET_TEMP, FeatureSpecInput
from storage.tmpdirs import ABANDONED_AFTER_S, LOCK_SUFFIX, TempFolder, sweep
from tasks.config.loader import parse_config
from tasks.graph import run_pipeline
from tasks.publish.stage import sweep_output
from tasks.report.page import write_report
from tasks.runtime.context import RunContext
from tests.conftest import ROOT
from tests.helpers import run, write_csv
from tests.unit.artifact.test_featurespec import write_like_nvidia

CONFIG = {
    "input_features": [{"name": "x", "type": "number"}, {"name": "c", "type": "category"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "validation": {"generated": False},  # no gates: the child run does not import Great Expectations
}

# A writer in its own process: builds a temporary folder (a cache entry or a publish staging folder),
# writes a file into it, says so through the marker file, then waits for the go file (or for SIGKILL).
# ``kind`` is "cache" (a StageCache entry of stage encode, key k1) or the prefix of a bare TempFolder.
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    kind, root, marker, go = sys.argv[1:5]
    def wait():
        Path(marker).write_text("ready")
        while not Path(go).exists():
            time.sleep(0.02)
    if kind == "cache":
        from storage.cache import StageCache
        with StageCache(root).writer("encode", "k1") as tmp:
            (tmp / "part-00000.arrow").write_bytes(b"x" * 4096)
            wait()
    else:
        from storage.tmpdirs import TempFolder
        with TempFolder(root, kind) as tmp:
            (tmp / "manifest.json").write_text("{}")
            wait()
""")

# A writer of a single temporary file, in its own process: the real writer function (``kind`` "latest":
# publish.write_latest(root, args[0]); "report": report.write_report(args[0]); "dataset":
# FeatureSpecInput.load(args[0]).prepare(root)), whose os.replace of the written temporary file waits
# for the go file (or for SIGKILL) after saying so through the marker file.
FILE_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tests.helpers import hold_renames
    kind, root, marker, go, *args = sys.argv[1:]
    hold_renames(marker, go)  # every rename of a dot-named temporary file waits
    if kind == "latest":
        from tasks.publish.stage import write_latest
        write_latest(Path(root), args[0])
    elif kind == "report":
        from tasks.report.page import write_report
        write_report(args[0])
    else:
        from storage.featurespec import FeatureSpecInput
        FeatureSpecInput.load(args[0]).prepare(root)
""")


class Writer:
    def __init__(self, kind: str, root: Path, tmp_path: Path, *args: str, script: str = WRITER):
        tag = len(list(tmp_path.glob("ready-*")))
        self.marker, self.go = tmp_path / f"ready-{tag}", tmp_path / f"go-{tag}"
        self.proc = subprocess.Popen([sys.executable, "-c", script, kind, str(root), str(self.marker), str(self.go),
                                      *args], cwd=ROOT, start_new_session=True, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not self.marker.exists():
            assert self.proc.poll() is None, self.proc.communicate()[1]
            assert time.monotonic() < deadline, "the writer never started"
            time.sleep(0.02)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.communicate()
        assert self.proc.returncode == -signal.SIGKILL

    def finish(self) -> None:
        self.go.write_text("go")
        _, stderr = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, stderr


def leftovers(folder: Path, prefix: str = ".tmp-") -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(prefix)) if folder.exists() else []


def folders(folder: Path, prefix: str = ".tmp-") -> list[str]:
    return [n for n in leftovers(folder, prefix) if not n.endswith(LOCK_SUFFIX)]


@pytest.fixture
def dataset(tmp_path) -> Path:
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"x": rng.normal(size=120), "c": rng.choice(list("abc"), 120), "y": rng.integers(0, 2, 120)})
    return write_csv(df, tmp_path / "data.csv")


def test_sigkilled_cache_writer_folder_is_removed_by_the_next_writer_of_the_stage(tmp_path):
    cache = tmp_path / "cache"
    writer = Writer("cache", cache, tmp_path)
    writer.kill()
    stale = folders(cache / "encode")
    assert len(stale) == 1 and stale[0].startswith(".tmp-k1-")
    assert (cache / "encode" / (stale[0] + LOCK_SUFFIX)).is_file()
    with StageCache(cache).writer("ingest", "other") as tmp:  # another stage's folder: not touched
        (tmp / "f").write_text("1")
    assert folders(cache / "encode") == stale

    (cache / "encode" / ".corrupt-k0-0123abcd" / "part").mkdir(parents=True)  # a discard cut short by a kill
    store = StageCache(cache)
    with store.writer("encode", "k2") as tmp:
        assert leftovers(cache / "encode") == sorted([tmp.name, tmp.name + LOCK_SUFFIX])  # the stale pair is gone
        assert leftovers(cache / "encode", ".corrupt-") == []
        (tmp / "f").write_text("2")
    assert leftovers(cache / "encode") == []
    assert store.get("encode", "k2") is not None and store.get("encode", "k1") is None


def test_live_cache_writer_folder_is_kept_and_then_published(tmp_path):
    cache = tmp_path / "cache"
    writer = Writer("cache", cache, tmp_path)
    try:
        live = leftovers(cache / "encode")
        assert len(live) == 2  # the folder and its lock
        store = StageCache(cache)
        with store.writer("encode", "k2") as tmp:
            (tmp / "f").write_text("2")
        assert store.sweep("encode") == [] and sweep(cache / "encode", ".tmp-") == []
        assert leftovers(cache / "encode") == live
        assert (cache / "encode" / live[0] / "part-00000.arrow").stat().st_size == 4096
        writer.finish()
    finally:
        if writer.proc.poll() is None:
            writer.kill()
    assert store.get("encode", "k1") is not None and store.get("encode", "k2") is not None
    assert leftovers(cache / "encode") == []


@pytest.mark.integration  # writer subprocesses SIGKILLed or held mid-write: 8-24 s on the fast lane
@pytest.mark.parametrize("stage", ["encode", "publish"])
def test_next_run_removes_what_a_sigkilled_run_left(stage, dataset, tmp_path):
    """A real pipeline run killed with its stage half-written (the crash-test pause hook); the next run
    in the same cache and output removes its temporary folder and publishes."""
    marker = tmp_path / "paused"
    code = ("import sys; from pathlib import Path; from tests.helpers import run; "
            f"run({CONFIG!r}, Path(sys.argv[1]), Path(sys.argv[2]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(dataset), str(tmp_path)], cwd=ROOT,
                            start_new_session=True, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PREPFLOW_TEST_PAUSE_AT": stage, "PREPFLOW_TEST_PAUSE_FILE": str(marker)})
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"the run never reached {stage}"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    where = tmp_path / ("out" if stage == "publish" else f"cache/{stage}")
    assert len(folders(where)) == 1, "the kill did not land while the stage's output was half-written"

    result = run(CONFIG, dataset, tmp_path)
    assert leftovers(where) == [] and leftovers(tmp_path / "out") == []
    assert not [p for p in (tmp_path / "cache").rglob(".tmp-*")]
    assert (Path(result.artifact["artifact_path"]) / "manifest.json").is_file()


def test_publish_keeps_a_live_runs_staging_folder(dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    writer = Writer(".tmp-artifact0-", out, tmp_path)  # a concurrent publish, still writing
    try:
        run(CONFIG, dataset, tmp_path)
        assert len(folders(out)) == 1 and folders(out)[0].startswith(".tmp-artifact0-")
        writer.kill()
        run(CONFIG, dataset, tmp_path, cache="cache2")  # the same artifact is reused: publish still sweeps
        assert leftovers(out) == []
    finally:
        if writer.proc.poll() is None:
            writer.kill()


def test_remote_publish_and_fetch_remove_their_stale_folders(dataset, tmp_path, monkeypatch):
    systmp, artifact_cache = tmp_path / "systmp", tmp_path / "artifact-cache"
    systmp.mkdir()
    artifact_cache.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(artifact_cache))
    Writer(remote.STAGING_PREFIX, systmp, tmp_path).kill()  # a remote publish's local staging
    Writer(".tmp-0123-", artifact_cache, tmp_path).kill()  # a download
    assert len(folders(systmp, remote.STAGING_PREFIX)) == 1 and len(folders(artifact_cache)) == 1
    url = f"memory://prepflow-tmpdirs-{tmp_path.name}/out"
    try:
        ctx = RunContext(parse_config(CONFIG), str(dataset), StageCache(tmp_path / "cache"), None, url)
        assert not run_pipeline(ctx).artifact["reused"]
        assert leftovers(systmp, remote.STAGING_PREFIX) == []
        assert len(folders(artifact_cache)) == 1
        remote.fetch(url)
        assert leftovers(artifact_cache) == []
    finally:
        import fsspec

        fs = fsspec.filesystem("memory")
        if fs.exists(url):
            fs.rm(url, recursive=True)


def test_orphan_lock_is_removed_and_a_young_unlocked_legacy_folder_is_kept(tmp_path):
    (tmp_path / ".tmp-old-0123").mkdir()  # no lock file: an older prepflow's, maybe still running
    (tmp_path / ".tmp-k-gone.lock").write_text("")  # its writer died after renaming its folder away
    (tmp_path / ".tmp-x").mkdir()
    (tmp_path / "entry").mkdir()
    assert sweep(tmp_path, ".tmp-") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-old-0123", ".tmp-x", "entry"]
    assert sweep(tmp_path / "missing", ".tmp-") == []


def test_writers_and_sweepers_racing_never_lose_a_live_folder(tmp_path):
    """Threads here and a process beside them create, fill, sweep and check folders in one parent."""
    loops = 150
    code = textwrap.dedent(f"""
        import sys
        from storage.tmpdirs import TempFolder, sweep
        for i in range({loops}):
            with TempFolder(sys.argv[1], ".tmp-p-") as d:
                (d / "f").write_text(str(i))
                sweep(sys.argv[1], ".tmp-")
                assert (d / "f").read_text() == str(i), "a live folder was swept"
    """)
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    errors: list[BaseException] = []

    def work(tag: int) -> None:
        try:
            for i in range(loops):
                with TempFolder(tmp_path, f".tmp-t{tag}-") as d:
                    (d / "f").write_text(str(i))
                    sweep(tmp_path, ".tmp-")
                    assert (d / "f").read_text() == str(i), "a live folder was swept"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _, stderr = proc.communicate(timeout=120)
    assert not errors, errors
    assert proc.returncode == 0, stderr
    assert list(tmp_path.iterdir()) == []


def test_a_lock_file_unlinked_before_the_writer_locks_it_is_replaced(tmp_path, monkeypatch):
    """The race a sweeper can win: it unlinks a fresh lock file between the writer's open and flock."""
    import storage.tmpdirs as tmpdirs

    real_flock, calls = tmpdirs.fcntl.flock, []

    def flock(fd, op):
        if not calls:  # first lock taken by the writer: a sweeper got there first and unlinked the file
            for p in tmp_path.glob("*" + LOCK_SUFFIX):
                p.unlink()
        calls.append(op)
        return real_flock(fd, op)

    monkeypatch.setattr(tmpdirs.fcntl, "flock", flock)
    folder = TempFolder(tmp_path, ".tmp-r-")
    try:
        assert len(calls) == 2  # locked twice: the unlinked file, then a fresh one
        assert os.path.samestat(os.stat(folder.lock_path), os.fstat(folder._fd))
        fd = os.open(folder.lock_path, os.O_RDWR)  # and held: another open file cannot take it
        try:
            with pytest.raises(BlockingIOError):
                real_flock(fd, tmpdirs.fcntl.LOCK_EX | tmpdirs.fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        folder.close()
    assert list(tmp_path.iterdir()) == []


def file_writer(kind: str, root: Path, tmp_path: Path, *args: str) -> Writer:
    return Writer(kind, root, tmp_path, *args, script=FILE_WRITER)


@pytest.mark.integration  # real processes: prepflow run with its local Prefect server, or SIGKILLed writers
def test_sigkilled_latest_and_report_writers_files_are_removed_by_the_next_write_of_the_output(dataset, tmp_path):
    out = tmp_path / "out"
    art = run(CONFIG, dataset, tmp_path).artifact["artifact_path"]
    art_id = Path(art).name
    file_writer("report", out, tmp_path, art).kill()
    stale = leftovers(out, ".")
    assert len(stale) == 2 and stale[0].startswith(f".{art_id}.report.html.") and stale[1] == stale[0] + LOCK_SUFFIX
    assert (out / stale[0]).read_text().startswith("<!DOCTYPE")  # written, killed before its rename
    write_report(art)  # the next report into the output removes it
    assert leftovers(out, ".") == [] and (out / f"{art_id}.report.html").is_file()

    file_writer("report", out, tmp_path, art).kill()
    file_writer("latest", out, tmp_path, "0" * 24).kill()
    assert sorted(n.split(".")[1] for n in folders(out, ".")) == sorted(["LATEST", art_id])  # ids are hex: order varies
    assert (out / next(n for n in folders(out, ".") if n.startswith(".LATEST."))).read_text() == "0" * 24 + "\n"
    live = file_writer("latest", out, tmp_path, "1" * 24)  # a concurrent LATEST rewrite, still running
    try:
        mine = leftovers(out, ".LATEST.")
        mine = [n for n in mine if (out / n).is_file() and (out / n).read_text() == "1" * 24 + "\n"]
        assert len(mine) == 1
        result = run(CONFIG, dataset, tmp_path)  # artifact reused: publish sweeps the output all the same
        assert result.artifact["reused"]
        assert leftovers(out, ".") == [mine[0], mine[0] + LOCK_SUFFIX]  # the live writer's file and lock kept
        assert (out / "LATEST").read_text() == art_id + "\n"
        live.finish()
    finally:
        if live.proc.poll() is None:
            live.kill()
    assert leftovers(out, ".") == [] and (out / "LATEST").read_text() == "1" * 24 + "\n"


@pytest.mark.integration  # writer subprocesses SIGKILLed or held mid-write: 8-24 s on the fast lane
def test_sigkilled_transcode_dataset_file_is_removed_by_the_next_transcode(tmp_path):
    spec, work = write_like_nvidia("dlrm_transcoding_small_csv.yaml", tmp_path / "data")[0], tmp_path / "work"
    file_writer("dataset", work, tmp_path, str(spec)).kill()
    stale = leftovers(work, DATASET_TEMP)
    assert len(stale) == 2 and stale[0].endswith(".parquet") and (work / stale[0]).stat().st_size > 0
    live = file_writer("dataset", work, tmp_path, str(spec))
    try:
        mine = [n for n in leftovers(work, DATASET_TEMP) if n not in stale]
        assert len(mine) == 2
        dataset, _ = FeatureSpecInput.load(spec).prepare(work)
        assert leftovers(work, DATASET_TEMP) == mine  # the killed one's pair gone, the live one's kept
        assert dataset.is_file()
        live.finish()
    finally:
        if live.proc.poll() is None:
            live.kill()
    assert leftovers(work, DATASET_TEMP) == []


def age(path: Path, seconds: float) -> None:
    """Set the mtime of ``path`` and everything under it to ``seconds`` ago."""
    then = time.time() - seconds
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.utime(p, (then, then), follow_symlinks=False)


def test_lock_less_leftovers_go_only_when_abandoned_and_a_live_writers_never(tmp_path):
    old = ABANDONED_AFTER_S + 60
    cache, out, work = tmp_path / "cache", tmp_path / "out", tmp_path / "work"
    stage = cache / "encode"
    for folder in (stage / ".tmp-k0-0123", stage / ".tmp-k1-4567", stage / ".tmp-k2-89ab", stage / "k3"):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "part-00000.arrow").write_bytes(b"x")
    age(stage / ".tmp-k0-0123", old)  # an older prepflow's, abandoned: removed
    age(stage / ".tmp-k2-89ab", old)
    os.utime(stage / ".tmp-k2-89ab" / "sub" / "part-00000.arrow")  # old folder, a file written just now: kept
    age(stage / "k3", old)  # an entry, not a temporary folder
    live = Writer(".tmp-k4-", stage, tmp_path)  # a live writer of this prepflow whose folder is old
    try:
        age(next(stage.glob(".tmp-k4-*[!k]")), old)
        kept = leftovers(stage)
        assert StageCache(cache).sweep("encode") == [".tmp-k0-0123"]
        assert leftovers(stage) == [n for n in kept if n != ".tmp-k0-0123"] and (stage / "k3").is_dir()
    finally:
        live.kill()

    out.mkdir()
    for name in (".LATEST.0123abcd", ".LATEST.4567abcd", f".{'a' * 24}.report.html.0123abcd", "LATEST",
                 f".{'b' * 24}.report.html.4567abcd", ".notes"):
        (out / name).write_text("x")
        age(out / name, old if "4567" not in name else ABANDONED_AFTER_S - 60)
    assert sweep_output(out) == sorted([".LATEST.0123abcd", f".{'a' * 24}.report.html.0123abcd"])
    assert sorted(p.name for p in out.iterdir()) == sorted([".LATEST.4567abcd", "LATEST", ".notes",
                                                            f".{'b' * 24}.report.html.4567abcd"])

    work.mkdir()
    for name in (".dataset-0123abcd.parquet", ".dataset-4567abcd.parquet", "dataset.parquet"):
        (work / name).write_bytes(b"PAR1")
        age(work / name, 0 if "4567" in name else old)
    assert sweep(work, DATASET_TEMP) == [".dataset-0123abcd.parquet"]
    assert sorted(p.name for p in work.iterdir()) == [".dataset-4567abcd.parquet", "dataset.parquet"]


def test_a_stage_that_only_hits_the_cache_sweeps_its_folder_once_per_process(dataset, tmp_path):
    cache = tmp_path / "cache"
    run(CONFIG, dataset, tmp_path)  # every stage written
    Writer("cache", cache, tmp_path).kill()  # a killed run's encode entry
    assert len(folders(cache / "encode")) == 1
    result = run(CONFIG, dataset, tmp_path, output="out2")
    assert all(s.cached for s in result.stages if s.stage != "publish"), result.summary()["stages"]
    assert leftovers(cache / "encode") == []  # removed by a cache hit
    Writer("cache", cache, tmp_path).kill()
    run(CONFIG, dataset, tmp_path, output="out3")
    assert len(folders(cache / "encode")) == 1  # once per process: left to the next writer of the stage
    with StageCache(cache).writer("encode", "k2") as tmp:
        (tmp / "f").write_text("2")
    assert leftovers(cache / "encode") == []
