"""Image and audio features through the whole pipeline: the three modes give the same tensors, the
artifact does not depend on partitioning, content (not names) keys the caches and memmaps, bad media
follow on_decode_error, in-memory DataFrame values go through the media cache. Real images made with
Pillow, real audio as generated tones written as WAV and FLAC by soundfile; all tiny."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from PIL import Image

from core.errors import DataError
from storage.artifact import Artifact
from storage.cache import StageCache
from tasks.config.loader import parse_config
from tasks.graph import STAGES, run_pipeline
from tasks.runtime.context import RunContext
from tests.helpers import artifact_files, run, write_csv

RATE = 8000
N = 24


def make_image(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h, w = 10 + seed % 7, 12 + seed % 5
    mode = ("RGB", "RGB", "L", "RGBA")[seed % 4]
    arr = rng.integers(0, 256, (h, w, {"RGB": 3, "L": 1, "RGBA": 4}[mode]), dtype=np.uint8)
    im = Image.fromarray(arr[:, :, 0] if mode == "L" else arr)
    if path.suffix == ".jpg":
        im = im.convert("RGB")
    im.save(path)


def make_tone(path: Path, seed: int, rate: int = RATE) -> None:
    t = np.arange(int((0.1 + 0.02 * (seed % 6)) * rate)) / rate
    x = 0.3 * np.sin(2 * np.pi * (200 + 90 * seed) * t)
    sf.write(str(path), np.round(x * 32767).astype(np.int16), rate, subtype="PCM_16")


def make_dataset(root: Path, n: int = N) -> Path:
    (root / "img").mkdir(parents=True, exist_ok=True)
    (root / "snd").mkdir(exist_ok=True)
    photos, sounds = [], []
    for i in range(n):
        photo = f"img/p{i}.{'jpg' if i % 3 == 0 else 'png'}"
        sound = f"snd/s{i}.{'flac' if i % 2 else 'wav'}"
        make_image(root / photo, i)
        make_tone(root / sound, i)
        photos.append(photo)
        sounds.append(sound)
    df = pd.DataFrame({"photo": photos, "voice": sounds, "x": np.arange(n, dtype=float) % 5,
                       "label": [i % 3 == 0 for i in range(n)]})
    return write_csv(df, root / "data.csv")


def config(mode: str, **image_options) -> dict:
    return {
        "input_features": [
            {"name": "photo", "type": "image", "preprocessing": {"mode": mode, **image_options}},
            {"name": "voice", "type": "audio",
             "preprocessing": {"mode": mode, "type": "fbank", "num_filter_bands": 16, "audio_file_length_limit_in_s": 0.2,
                               "norm": "per_file"}},
            {"name": "x", "type": "number"},
        ],
        "output_features": [{"name": "label", "type": "binary"}],
        "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 3},
                          "oversample_minority": 1.0},
        "publish": {"formats": ["parquet", "npy"], "shard_rows": 10, "row_group_rows": 4},
    }


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("media"))


@pytest.fixture(scope="module")
def modes(dataset, tmp_path_factory) -> dict:
    out = {}
    for mode in ("eager", "lazy", "lazy_cached"):
        tmp = tmp_path_factory.mktemp(mode)
        out[mode] = (run(config(mode), dataset, tmp, npartitions=2), tmp)
    return out


def batches(art: Artifact, split: str, **kw) -> dict[str, np.ndarray]:
    got: dict[str, list] = {}
    for batch in art.batches(split, batch_size=5, **kw):
        for k, v in batch.items():
            got.setdefault(k, []).append(v.numpy())
    return {k: np.concatenate(v) for k, v in got.items()}


def test_the_three_modes_give_the_same_tensors(modes):
    arts = {m: Artifact.open(r.artifact["artifact_path"], verify=True) for m, (r, _) in modes.items()}
    eager = arts["eager"]
    meta = eager.metadata
    assert (meta["photo"]["num_channels"], meta["photo"]["height"], meta["photo"]["width"]) == (3, 13, 14)
    assert meta["voice"]["sampling_rate_in_hz"] == RATE and meta["voice"]["reshape"] == [meta["voice"]["max_length"], 16]
    for m in ("lazy", "lazy_cached"):
        lazy_meta = arts[m].metadata
        for name in ("photo", "voice"):
            assert lazy_meta[name]["codec"] == meta[name]["codec"] and lazy_meta[name]["mode"] == m
    for split in eager.splits:
        published = eager.read_split(split)
        assert published["photo"].shape == (eager.num_rows(split), 3, 13, 14) and published["photo"].dtype == np.uint8
        assert published["voice"].dtype == np.float32
        for m, art in arts.items():
            assert art.num_rows(split) == eager.num_rows(split)
            got = batches(art, split, shuffle=True, seed=1)
            order = batches(eager, split, shuffle=True, seed=1)
            for name in ("photo", "voice"):
                assert np.array_equal(got[name], order[name]), (m, split, name)
            row = art.torch_dataset(split)[1]
            assert np.array_equal(row["photo"].numpy(), published["photo"][1])
        for m in ("lazy", "lazy_cached"):  # read_split decodes lazy media as eager publishes it
            decoded = arts[m].read_split(split)
            assert list(decoded) == list(published)
            for name in published:
                assert decoded[name].dtype == published[name].dtype, (m, split, name)
                np.testing.assert_array_equal(decoded[name], published[name], err_msg=f"{m} {split} {name}")
            slots = arts[m].read_split(split, decode=False)  # as stored: a slot into the media table
            assert slots["photo"].dtype == np.int64 and slots["photo"].shape == (eager.num_rows(split),)
    for m, art in arts.items():  # inspect's columns: the decoded items, named as media
        columns = art.describe()["columns"]
        assert columns["photo"]["media"] == f"image ({m})" and columns["voice"]["media"] == f"audio ({m})"
        assert columns["photo"]["dtype"] == "torch.uint8" and columns["photo"]["shape"] == [3, 13, 14]


def test_inspect_shows_lazy_media_as_images_and_audio(modes, capsys):
    from flows.cli import main

    assert main(["inspect", modes["lazy"][0].artifact["artifact_path"]]) == 0
    out = capsys.readouterr().out
    section = out.split("\ncolumns:\n", 1)[1].split("\nchannels:\n", 1)[0]
    lines = {line.split()[0]: line for line in section.splitlines()}
    assert "torch.uint8" in lines["photo"] and "shape (3, 13, 14)" in lines["photo"]
    assert lines["photo"].endswith("image (lazy)") and lines["voice"].endswith("audio (lazy)")
    assert "int64" in lines["__row__"] and "int64" not in lines["photo"]


def test_lazy_cached_memmaps_sit_next_to_the_artifact_named_by_content(modes):
    result, tmp = modes["lazy_cached"]
    art = Artifact.open(result.artifact["artifact_path"])
    chunks = [c for s in art.splits for c in art.chunks(s) if c["type"] == "media"]
    assert {c["features"][0] for c in chunks} == {"photo", "voice"}
    for chunk in chunks:
        path = Path(art.path).parent / "media" / chunk["memmap"]
        assert path.is_file() and Path(str(path) + ".done").is_file()
        assert chunk["memmap"].startswith(f"{chunk['features'][0]}-")
    names = sorted(p.name for p in (Path(art.path).parent / "media").iterdir())
    assert len(names) == 2 * len(chunks)  # one .npy and one .done per feature and split


@pytest.mark.parametrize("mode", ["eager", "lazy_cached"])
def test_artifact_is_byte_identical_for_any_partition_count(dataset, tmp_path, mode, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    one = run(config(mode), dataset, tmp_path / "one", npartitions=1)
    three = run(config(mode), dataset, tmp_path / "three", npartitions=3)
    assert one.artifact["artifact_id"] == three.artifact["artifact_id"]
    assert artifact_files(one.artifact["artifact_path"]) == artifact_files(three.artifact["artifact_path"])
    if mode == "lazy_cached":
        assert sorted(os.listdir(tmp_path / "one" / "out" / "media")) == \
            sorted(os.listdir(tmp_path / "three" / "out" / "media"))


def test_rerun_is_cached_and_a_changed_file_changes_the_memmap_name(tmp_path):
    data = make_dataset(tmp_path / "data", n=12)
    cfg = config("lazy_cached")
    first = run(cfg, data, tmp_path)
    media_dir = tmp_path / "out" / "media"
    before = sorted(os.listdir(media_dir))
    again = run(cfg, data, tmp_path)
    assert [s.stage for s in again.stages] == list(STAGES) and all(s.cached for s in again.stages)
    assert again.artifact["artifact_id"] == first.artifact["artifact_id"] and sorted(os.listdir(media_dir)) == before

    art = Artifact.open(first.artifact["artifact_path"])
    metadata = art.metadata
    make_image(tmp_path / "data" / "img" / "p4.png", seed=99)  # same name, new content
    changed = run(cfg, data, tmp_path)
    cached = {s.stage: s.cached for s in changed.stages}
    assert cached["ingest"] and cached["encode"] and not cached["media_cache"] and not cached["publish"]
    assert changed.artifact["artifact_id"] != first.artifact["artifact_id"]
    after = set(os.listdir(media_dir))
    new_names = after - set(before)
    assert new_names and all(n.startswith("photo-") for n in new_names) and set(before) <= after
    new_art = Artifact.open(changed.artifact["artifact_path"])
    codec = metadata["photo"]["codec"]
    from storage.media_image import ImageCodec

    expected = ImageCodec.from_json(codec).decode((tmp_path / "data" / "img" / "p4.png").read_bytes())[0]
    for split in new_art.splits:
        table = pd.read_parquet(new_art.path / split / "photo.media.parquet")
        hits = [i for i, s in enumerate(table["source"]) if s.endswith("p4.png")]
        if hits:
            rows = np.flatnonzero(new_art.read_split(split, decode=False)["photo"] == hits[0])
            got = batches(new_art, split, shuffle=False)["photo"]
            assert np.array_equal(got[rows[0]], expected)


def test_eager_artifacts_follow_a_changed_image_too(tmp_path):
    data = make_dataset(tmp_path / "data", n=9)
    cfg = config("eager", height=8, width=8)
    first = run(cfg, data, tmp_path)
    make_image(tmp_path / "data" / "img" / "p1.png", seed=50)
    second = run(cfg, data, tmp_path)
    assert second.artifact["artifact_id"] != first.artifact["artifact_id"]
    a = Artifact.open(first.artifact["artifact_path"])
    b = Artifact.open(second.artifact["artifact_path"])
    assert any(not np.array_equal(a.read_split(s)["photo"], b.read_split(s)["photo"]) for s in a.splits)


# ---- bad media ---------------------------------------------------------------------------------------

def broken_dataset(root: Path) -> Path:
    data = make_dataset(root, n=12)
    df = pd.read_csv(data)
    (root / "img" / "p2.png").write_bytes((root / "img" / "p2.png").read_bytes()[:60])  # truncated
    df.loc[5, "photo"] = "img/missing.png"
    (root / "outside.png").write_bytes((root / "img" / "p1.png").read_bytes())
    df.loc[7, "photo"] = "../outside.png"  # escapes media_root "img"... and the dataset folder
    (root / "snd" / "s3.flac").write_bytes(b"")  # zero-length audio file
    df.loc[:, "photo"] = [p.removeprefix("img/") for p in df["photo"]]
    return write_csv(df, root / "data.csv")


def test_fail_names_the_row_and_the_path(tmp_path):
    """Files that cannot be read (missing, outside media_root) are found before any decoding; then the
    first value that does not decode stops the run."""
    data = broken_dataset(tmp_path / "data")
    cfg = config("eager", media_root="img", height=8, width=8)
    with pytest.raises(DataError, match=r"row 5, column 'photo': image feature 'photo' cannot decode 'missing.png' "
                                        r"\(.*img/missing.png\): file not found\. Set on_decode_error: skip_row or fill"):
        run(cfg, data, tmp_path / "a")
    df = pd.read_csv(data)
    df.loc[5, "photo"] = "p1.png"
    with pytest.raises(DataError, match=r"row 7, column 'photo': .*'../outside.png' \(../outside.png\): the path "
                                        r"resolves to .*outside.png, outside media_root"):
        run(cfg, write_csv(df, tmp_path / "data" / "data2.csv"), tmp_path / "b")
    df.loc[7, "photo"] = "p1.png"
    with pytest.raises(DataError, match=r"row 2, column 'photo': .*'p2.png' \(.*img/p2.png\): corrupt or truncated"):
        run(cfg, write_csv(df, tmp_path / "data" / "data3.csv"), tmp_path / "c")
    df.loc[2, "photo"] = "p1.png"
    with pytest.raises(DataError, match=r"row 3, column 'voice': audio feature 'voice' cannot decode 'snd/s3.flac' "
                                        r"\(.*\): empty file"):
        run(cfg, write_csv(df, tmp_path / "data" / "data4.csv"), tmp_path / "d")


@pytest.mark.parametrize("policy", ["skip_row", "fill"])
def test_skip_row_and_fill_are_the_same_in_every_mode(tmp_path, policy):
    data = broken_dataset(tmp_path / "data")
    results = {}
    for mode in ("eager", "lazy", "lazy_cached"):
        cfg = config(mode, media_root="img", height=8, width=8, on_decode_error=policy)
        cfg["input_features"][1]["preprocessing"]["on_decode_error"] = policy
        cfg["preprocessing"].pop("oversample_minority")
        result = run(cfg, data, tmp_path / mode)
        art = Artifact.open(result.artifact["artifact_path"])
        results[mode] = {s: batches(art, s, shuffle=False) for s in art.splits}
        stats = art.manifest["statistics"]
        assert stats["media_cache.decode_failures.photo"]["count"] == 3
        assert stats["media_cache.decode_failures.voice"]["count"] == 1
        assert art.manifest["validation"]["encoded"]["success"]
        total = sum(art.num_rows(s) for s in art.splits)
        if policy == "skip_row":
            assert stats["media_cache.rows_skipped.photo"]["count"] + stats["media_cache.rows_skipped.voice"]["count"] == 4
            assert total == 8
        else:
            assert total == 12 and stats["media_cache.rows_filled.photo"]["count"] == 3
            zero_images = sum(int((b["photo"].reshape(len(b["photo"]), -1) == 0).all(axis=1).sum())
                              for b in results[mode].values())
            assert zero_images == 3
    for mode in ("lazy", "lazy_cached"):
        for split, got in results[mode].items():
            for name in ("photo", "voice", "numerical", "label"):
                assert np.array_equal(got[name], results["eager"][split][name]), (mode, split, name)


def test_a_decompression_bomb_is_a_decode_failure(tmp_path):
    from tests.unit.media.test_media_image import png_header_only

    data = make_dataset(tmp_path / "data", n=6)
    (tmp_path / "data" / "img" / "p1.png").write_bytes(png_header_only(20_000, 20_000))
    cfg = config("lazy", height=8, width=8)
    with pytest.raises(DataError, match=r"row 1, column 'photo'.*decompression bomb"):
        run(cfg, data, tmp_path / "a")
    cfg["input_features"][0]["preprocessing"]["on_decode_error"] = "fill"
    result = run(cfg, data, tmp_path / "b")
    assert result.artifact["rows"] and Artifact.open(result.artifact["artifact_path"]).manifest["statistics"][
        "media_cache.decode_failures.photo"]["count"] == 1


# ---- the loader, after the fact ------------------------------------------------------------------------

def test_a_missing_memmap_is_rebuilt_and_a_changed_lazy_source_is_an_error(tmp_path):
    data = make_dataset(tmp_path / "data", n=10)
    cached = run(config("lazy_cached", height=8, width=8), data, tmp_path / "cached")
    art = Artifact.open(cached.artifact["artifact_path"])
    before = batches(art, "train", shuffle=False)
    media_dir = Path(art.path).parent / "media"
    shutil.rmtree(media_dir)
    again = batches(Artifact.open(art.path), "train", shuffle=False)
    assert all(np.array_equal(before[k], again[k]) for k in before)
    assert any(p.name.endswith(".done") for p in media_dir.iterdir())

    lazy = run(config("lazy", height=8, width=8), data, tmp_path / "lazy")
    lazy_art = Artifact.open(lazy.artifact["artifact_path"])
    table = pd.read_parquet(lazy_art.path / "train" / "photo.media.parquet")
    make_image(Path(table["source"][0]), seed=77)
    with pytest.raises(DataError, match="changed since it was hashed"):
        batches(lazy_art, "train", shuffle=False)


def test_media_decoding_reports_progress(tmp_path):
    from tasks.runtime import progress

    events = []
    progress.set_reporter(lambda stage, done, total: events.append((stage, done, total)))
    try:
        run(config("eager", height=8, width=8), make_dataset(tmp_path / "data", n=6), tmp_path)
    finally:
        progress.set_reporter(None)
    media_events = [e for e in events if e[0] == "media_cache"]
    assert media_events and media_events[-1][1] == media_events[-1][2] > 0


# ---- a pandas DataFrame with in-memory media ----------------------------------------------------------

def in_memory_frame(root: Path, n: int = 8) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same pictures and tones as paths and as in-memory values of every supported kind."""
    data = make_dataset(root, n=n)
    paths = pd.read_csv(data)
    paths["photo"] = [str(root / p) for p in paths["photo"]]
    paths["voice"] = [str(root / p) for p in paths["voice"]]
    photos, voices = [], []
    for i, (p, v) in enumerate(zip(paths["photo"], paths["voice"], strict=True)):
        im = Image.open(p)
        im.load()
        kind = i % 5
        if kind == 0:
            photos.append(Path(p).read_bytes())
        elif kind == 1 and im.mode in ("RGB", "RGBA"):
            photos.append(np.asarray(im).transpose(2, 0, 1))  # CHW
        elif kind == 2:
            photos.append({"bytes": Path(p).read_bytes(), "path": None})
        elif kind == 3:
            photos.append({"bytes": None, "path": p})
        else:
            photos.append(np.asarray(im) if Path(p).suffix == ".png" else im)
        samples, rate = sf.read(v, dtype="int16")
        voices.append({"array": samples, "sampling_rate": rate} if i % 2 else io.BytesIO(Path(v).read_bytes()).read())
    memory = paths.copy()
    memory["photo"] = photos
    memory["voice"] = voices
    return paths, memory


def run_frame(cfg: dict, frame: pd.DataFrame, tmp: Path):
    ctx = RunContext(parse_config(cfg), frame, StageCache(tmp / "cache"), 2, str(tmp / "out"))
    return run_pipeline(ctx)


def test_a_dataframe_with_in_memory_media_gives_the_same_tensors_and_reruns_write_nothing(tmp_path):
    paths, memory = in_memory_frame(tmp_path / "data")
    cfg = config("eager", height=8, width=8)
    from_paths = Artifact.open(run_frame(cfg, paths, tmp_path / "p").artifact["artifact_path"])
    result = run_frame(cfg, memory, tmp_path / "m")
    from_memory = Artifact.open(result.artifact["artifact_path"])
    for split in from_paths.splits:
        a, b = from_paths.read_split(split), from_memory.read_split(split)
        assert np.array_equal(a["photo"], b["photo"]) and np.array_equal(a["voice"], b["voice"]), split
    stored = sorted((tmp_path / "m" / "cache" / "media").rglob("*"))
    assert {p.suffix for p in stored if p.is_file()} >= {".png", ".wav"}
    stamps = {p: p.stat().st_mtime_ns for p in stored}
    again = run_frame(cfg, memory.copy(), tmp_path / "m")
    assert all(s.cached for s in again.stages)
    assert {p: p.stat().st_mtime_ns for p in sorted((tmp_path / "m" / "cache" / "media").rglob("*"))} == stamps
    lazy = run_frame(config("lazy", height=8, width=8), memory, tmp_path / "m")
    lazy_art = Artifact.open(lazy.artifact["artifact_path"])
    for split in from_paths.splits:
        assert np.array_equal(batches(lazy_art, split, shuffle=False)["photo"], from_paths.read_split(split)["photo"])
    assert json.loads(json.dumps(lazy_art.metadata)) == lazy_art.metadata


def test_a_dataframe_with_a_bad_in_memory_value_names_the_row(tmp_path):
    _, memory = in_memory_frame(tmp_path / "data", n=4)
    memory.loc[2, "photo"] = None
    memory["photo"] = memory["photo"].astype(object)
    memory.at[2, "photo"] = np.zeros((4, 4, 3), dtype=np.float64)
    with pytest.raises(DataError, match=r"row 2, column 'photo': image feature 'photo' cannot store this ndarray "
                                        r"value: expected uint8 pixels"):
        run_frame(config("eager"), memory, tmp_path)


def test_the_preprocessor_decodes_paths_like_the_pipeline(tmp_path):
    from prepflow import Preprocessor

    data = make_dataset(tmp_path / "data", n=8)
    cfg = config("lazy_cached", height=8, width=8)
    cfg["preprocessing"].pop("oversample_minority")
    art = Artifact.open(run(cfg, data, tmp_path).artifact["artifact_path"])
    raw = pd.read_csv(data)
    for column in ("photo", "voice"):
        raw[column] = [str(tmp_path / "data" / p) for p in raw[column]]
    served = Preprocessor.load(art.path).transform(raw)
    assert served["photo"].shape == (8, 3, 8, 8) and served["voice"].dtype == np.float32
    published = {s: batches(art, s, shuffle=False) for s in art.splits}
    seen = {p.tobytes() for b in published.values() for p in b["photo"]}
    assert {p.tobytes() for p in served["photo"]} == seen
    seen_voice = {v.tobytes() for b in published.values() for v in b["voice"]}
    assert {v.tobytes() for v in served["voice"]} == seen_voice


def test_a_remote_lazy_cached_artifact_builds_its_memmap_beside_the_downloaded_copy(tmp_path, monkeypatch):
    import fsspec

    monkeypatch.setenv("PREPFLOW_ARTIFACT_CACHE", str(tmp_path / "artifact-cache"))
    url = f"memory://prepflow-media-{tmp_path.name}/out"
    data = make_dataset(tmp_path / "data", n=8)
    cfg = config("lazy_cached", height=8, width=8)
    try:
        ctx = RunContext(parse_config(cfg), str(data), StageCache(tmp_path / "cache"), None, url)
        remote_art = Artifact.open(run_pipeline(ctx).artifact["artifact_path"])
        local = run(cfg, data, tmp_path / "local")
        local_art = Artifact.open(local.artifact["artifact_path"])
        got = batches(remote_art, "train", shuffle=False)
        assert np.array_equal(got["photo"], batches(local_art, "train", shuffle=False)["photo"])
        assert list((Path(remote_art.path).parent / "media").glob("photo-train-*.npy.done"))
    finally:
        fs = fsspec.filesystem("memory")
        if fs.exists(url):
            fs.rm(url, recursive=True)


@pytest.mark.parametrize("mode", ["eager", "lazy_cached"])
def test_a_media_feature_beside_a_parquet_category_vocabulary_publishes_and_serves(tmp_path, mode, monkeypatch):
    """media_cache hands publish its own entry in place of vocab's: the Parquet vocabulary files
    (category vocabularies over ``INLINE_MAX`` ids) must come along, into the artifact and its manifest."""
    from prepflow import Preprocessor
    from storage import vocab_store
    from tasks.config.constants import SPLIT_NAMES
    from tasks.features import category

    monkeypatch.setattr(category, "INLINE_MAX", 5)
    data = make_dataset(tmp_path / "data", n=16)
    raw = pd.read_csv(data)
    raw["tag"] = [f"t{i % 11:02d}" for i in range(len(raw))]
    raw.to_csv(data, index=False)
    cfg = config(mode, height=8, width=8)
    cfg["preprocessing"].pop("oversample_minority")
    cfg["input_features"].append({"name": "tag", "type": "category"})
    result = run(cfg, data, tmp_path / "run", npartitions=2)
    art = Artifact.open(result.artifact["artifact_path"], verify=True)  # the sha256 of every file, vocab included
    ref = art.metadata["tag"]["vocab_file"]
    assert ref["path"] == "vocab/tag.parquet" and ref["path"] in art.manifest["files"]
    values = vocab_store.read(art.path / ref["path"], ref["sha256"]).column("value").to_pylist()
    assert values[0] == "<UNK>" and len(values) == art.metadata["tag"]["vocab_size"] > 5
    split = next(s for s in result.stages if s.stage == "split")
    assign = np.load(Path(split.path) / "split.npy")
    for column in ("photo", "voice"):
        raw[column] = [str(tmp_path / "data" / p) for p in raw[column]]
    pre = Preprocessor.load(art.path)
    for split_id, name in enumerate(SPLIT_NAMES):
        rows = np.flatnonzero(assign == split_id)
        if not len(rows):
            continue
        served = pre.transform(raw.iloc[rows])
        published = art.read_split(name)
        assert served["tag"].tobytes() == published["tag"].tobytes(), name
        ids = {v: i for i, v in enumerate(values)}
        assert served["tag"].tolist() == [ids.get(t, 0) for t in raw["tag"].iloc[rows]]
        if mode == "eager":
            assert served["photo"].tobytes() == published["photo"].tobytes(), name


def test_untyped_media_columns_are_inferred_and_give_the_typed_artifact(tmp_path):
    data = make_dataset(tmp_path / "data", n=12)
    typed = config("eager", height=8, width=8)
    untyped = json.loads(json.dumps(typed))
    for f in untyped["input_features"][:2]:
        f.pop("type")  # photo and voice: inferred from their paths (the files exist)
    a = run(typed, data, tmp_path / "typed")
    b = run(untyped, data, tmp_path / "untyped", npartitions=3)
    assert b.artifact["artifact_id"] == a.artifact["artifact_id"]
    stats = next(s for s in b.stages if s.stage == "infer_types").statistics
    assert {k: v["count"] for k, v in stats.items()} == {"infer_types.image": 1, "infer_types.audio": 1}
    os.remove(tmp_path / "data" / "img" / "p5.png")
    with pytest.raises(DataError, match=r"feature 'photo' .* inference would exclude it: all 12 values are image file "
                                        r"paths .* 1 of the 12 sampled files does not exist .*'img/p5.png'"):
        run(untyped, data, tmp_path / "missing")  # a fresh cache: inference runs again and sees it
