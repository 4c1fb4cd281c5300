"""The media cache's temporary files left by killed runs are removed; a live writer's and a finished
file never (storage/media.py: store_file, store_batch, MemmapWriter; storage/tmpdirs.py).

Writers run the real code in child processes that are really SIGKILLed (the kernel drops their locks)
or stay alive while the parent writes into the same folder: ``os.replace`` is wrapped in the child to
wait at the n-th rename of a temporary path matching a pattern (written, not renamed yet).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from storage import media
from storage.artifact import Artifact
from storage.media_image import store_value
from storage.tmpdirs import ABANDONED_AFTER_S, LOCK_SUFFIX
from tests.helpers import run
from tests.unit.media.test_media_pipeline import batches, config, in_memory_frame, make_dataset, run_frame
from tests.unit.runtime.test_tmpdirs import Writer, age

# argv: kind, root, marker, go, pattern, n, *args. kind "frame": a pipeline run of the in-memory frame of
# args[0] into root (ingest stores the values in one store_batch); "value": store_value(root, "im", an
# array of seed args[0]) outside a batch; "memmap": ensure_memmaps(args[0]) (the loader's build).
CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tests.helpers import hold_renames
    kind, root, marker, go, pattern, n, *args = sys.argv[1:]
    hold_renames(marker, go, pattern, int(n))
    if kind == "frame":
        from tests.unit.media.test_media_pipeline import config, in_memory_frame, run_frame
        run_frame(config("eager", height=8, width=8), in_memory_frame(Path(args[0]))[1], Path(root))
    elif kind == "value":
        import numpy as np
        from storage.media_image import store_value
        store_value(root, "im", np.random.default_rng(int(args[0])).integers(0, 256, (6, 5, 3), dtype=np.uint8))
    else:
        from storage.media import ensure_memmaps
        ensure_memmaps(args[0])
""")
STAGED = r"/\.tmp-[0-9a-f]+/"  # a batch's temporary file, in its staging folder
SINGLE = r"/\.[^/]+\.[0-9a-f]+\.tmp$"  # a TempFile of its own (outside a batch; a memmap)
DONE_TEMP = r"/\.[^/]+\.npy\.done\.[0-9a-f]+$"


def child(kind: str, root: Path, tmp_path: Path, pattern: str, n: int = 1, *args: str) -> Writer:
    return Writer(kind, root, tmp_path, pattern, str(n), *args, script=CHILD)


def dotted(folder: Path) -> list[str]:
    """The temporary paths (and their locks) in ``folder``: every name starting with a dot."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) if folder.exists() else []


def finished(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def pixels(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (6, 5, 3), dtype=np.uint8)


def test_temp_names_match_and_finished_names_never_do():
    temps = [".ab12.png.0123456789ab.tmp", ".ab12.png.0123abcd.tmp", ".photo-train-0a1b.npy.0123456789ab.tmp",
             ".photo-train-0a1b.npy.done.0123456789ab", ".photo-train-0a1b.npy.done.0123abcd", ".tmp-0123456789ab"]
    kept = ["ab12.png", "ab12.wav", "ab12.tmp", "photo-train-0a1b.npy", "photo-train-0a1b.npy.done",
            ".photo-train-0a1b.npy", ".notes", ".tmp-notes", ".ab12.png.tmp"]
    assert [n for n in temps if media.TEMP_NAME.fullmatch(n)] == temps
    assert [n for n in kept if media.TEMP_NAME.fullmatch(n)] == []


@pytest.mark.integration  # writer subprocesses SIGKILLed or held mid-write: 8-24 s on the fast lane
def test_a_sigkilled_ingest_s_staging_folder_is_removed_by_the_next_run_and_stored_values_are_kept(tmp_path):
    """A real pipeline run of a DataFrame killed while ingest stores its in-memory values (one locked
    staging folder per media folder); the next run removes it and keeps every value stored before."""
    root, data = tmp_path / "run", tmp_path / "data"
    child("frame", root, tmp_path, STAGED, 3, str(data)).kill()
    store = root / "cache" / "media"
    stale = {f.name: dotted(f) for f in store.iterdir() if dotted(f)}
    assert len(stale) == 1, stale
    feature, names = next(iter(stale.items()))
    assert len(names) == 2 and names[1] == names[0] + LOCK_SUFFIX and names[0].startswith(media.STAGING_PREFIX)
    assert len(list((store / feature / names[0]).iterdir())) == 1  # written, killed before its rename
    before = {f.name: finished(f) for f in store.iterdir()}
    assert len(before[feature]) == 2

    result = run_frame(config("eager", height=8, width=8), in_memory_frame(data)[1], root)
    assert Artifact.open(result.artifact["artifact_path"]).read_split("train")["photo"].shape[1:] == (3, 8, 8)
    after = {f.name: finished(f) for f in store.iterdir()}
    assert [dotted(store / f) for f in after] == [[] for _ in after]
    for f, files in before.items():  # stored before the kill: the same files, never rewritten
        assert {k: after[f][k] for k in files} == files


@pytest.mark.integration  # writer subprocesses SIGKILLed or held mid-write: 8-24 s on the fast lane
def test_a_sigkilled_single_store_is_removed_by_the_next_write_once_per_process(tmp_path):
    folder = tmp_path / media.MEDIA_DIR / "im"
    ref = store_value(str(tmp_path), "im", pixels(0))  # this process's first write into the folder
    kept = finished(folder)
    child("value", tmp_path, tmp_path, SINGLE, 1, "1").kill()
    stale = dotted(folder)
    assert len(stale) == 2 and stale[0].endswith(".tmp") and stale[1] == stale[0] + LOCK_SUFFIX
    store_value(str(tmp_path), "im", pixels(2))  # not the first write of this process: no sweep
    assert dotted(folder) == stale
    child("value", tmp_path, tmp_path, SINGLE, 1, "3").finish()  # a new process's first write sweeps
    assert dotted(folder) == []
    assert len(finished(folder)) == 3 and all(finished(folder)[k] == v for k, v in kept.items())
    assert ref == f"{media.CACHE_REF}im/{next(iter(kept))}"


@pytest.mark.integration  # writer subprocesses SIGKILLed or held mid-write: 8-24 s on the fast lane
@pytest.mark.parametrize("batched", [False, True])
def test_a_live_writer_s_temporary_file_is_kept(batched, tmp_path):
    data, root = tmp_path / "data", tmp_path / "run"
    live = [child("value", root / "cache", tmp_path, SINGLE, 1, "5")]
    if batched:
        live.append(child("frame", root, tmp_path, STAGED, 1, str(data)))
    try:
        busy = {f: dotted(f) for f in (root / "cache" / media.MEDIA_DIR).iterdir() if dotted(f)}
        assert sum(len(v) for v in busy.values()) == 2 * len(live)
        folder = root / "cache" / media.MEDIA_DIR / "im"
        with media.store_batch():  # this process's first write into each folder sweeps it
            store_value(str(root / "cache"), "im", pixels(6))
            if batched:
                for f in set(busy) - {folder}:  # the frame's photo and voice folders
                    media.store_file(root / "cache", f.name, "x.bin", lambda p: p.write_bytes(b"x"))
        assert media.sweep_temps(folder) == [] and all(media.sweep_temps(f) == [] for f in busy)
        assert {f: dotted(f) for f in busy} == busy  # every live writer's file and lock kept
        for writer in live:
            writer.finish()
    finally:
        for writer in live:
            if writer.proc.poll() is None:
                writer.kill()
    assert all(dotted(f) == [] for f in (root / "cache" / media.MEDIA_DIR).iterdir())
    assert len(finished(folder)) == 2


@pytest.mark.integration  # writer subprocesses SIGKILLed or held mid-write: 8-24 s on the fast lane
def test_sigkilled_memmap_builds_are_removed_by_the_next_build_a_live_one_is_kept_and_built_memmaps_never(tmp_path):
    data = make_dataset(tmp_path / "data", n=10)
    art_path = run(config("lazy_cached", height=8, width=8), data, tmp_path).artifact["artifact_path"]
    art = Artifact.open(art_path)
    expected = batches(art, "train", shuffle=False)
    folder = media.memmap_dir(art_path)
    victim = next(p for p in sorted(folder.glob("photo-train-*.npy")))
    victim.unlink()
    victim.with_name(victim.name + media.DONE).unlink()
    others = finished(folder)
    assert len(others) >= 6  # every other split's and feature's memmap and sentinel

    child("memmap", tmp_path, tmp_path, SINGLE, 1, art_path).kill()  # killed with its memmap written
    stale = dotted(folder)
    assert len(stale) == 2 and stale[0].startswith(f".{victim.name}.") and stale[0].endswith(".tmp")
    assert (folder / stale[0]).stat().st_size > 0
    child("memmap", tmp_path, tmp_path, DONE_TEMP, 1, art_path).kill()  # the next build, killed at .done
    left = dotted(folder)
    assert len(left) == 2 and left[0].startswith(f".{victim.name}{media.DONE}.")  # the first build's pair gone
    assert victim.is_file() and not victim.with_name(victim.name + media.DONE).exists()

    live = child("memmap", tmp_path, tmp_path, SINGLE, 1, art_path)  # its writer swept the .done pair
    try:
        mine = dotted(folder)
        assert len(mine) == 2 and mine[0].endswith(".tmp")
        assert media.ensure_memmaps(art_path)  # this process rebuilds it too: sweeps, keeps the live pair
        assert dotted(folder) == mine
        live.finish()
    finally:
        if live.proc.poll() is None:
            live.kill()
    assert dotted(folder) == []
    assert {k: v for k, v in finished(folder).items() if k in others} == others  # never rewritten or removed
    again = batches(Artifact.open(art_path), "train", shuffle=False)
    assert all(np.array_equal(expected[k], again[k]) for k in expected)


def test_lock_less_media_temps_go_only_when_abandoned(tmp_path):
    old = ABANDONED_AFTER_S + 60
    folder = tmp_path / media.MEDIA_DIR / "im"
    folder.mkdir(parents=True)
    names = {".a.png.0123abcd.tmp": old, ".b.png.4567abcd.tmp": 0, ".c.npy.done.0123abcd": old,
             "a.png": old, "c.npy": old, "c.npy.done": old}
    for name, seconds in names.items():
        (folder / name).write_bytes(b"x")
        age(folder / name, seconds)
    assert media.sweep_temps(folder) == [".a.png.0123abcd.tmp", ".c.npy.done.0123abcd"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([".b.png.4567abcd.tmp", "a.png", "c.npy", "c.npy.done"])
