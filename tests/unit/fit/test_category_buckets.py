"""Category OOV buckets, hash buckets and Parquet vocabularies (issue 11): golden ids, the same ids in
every process and for any partition count, serving from a moved artifact, exact joins."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from core.combiner import fit_batches
from core.errors import ConfigError, DataError
from prepflow import Artifact, Preprocessor
from storage import string_hash, vocab_store
from tasks.config.constants import SPLIT_NAMES
from tasks.config.loader import parse_config
from tasks.features import build_all
from tests.helpers import artifact_files, run, without_created_at, write_csv

ROOT = Path(__file__).resolve().parents[3]
FEATURES = [{"name": "o", "type": "category", "preprocessing": {"num_oov_buckets": 3, "min_frequency": 2}},
            {"name": "h", "type": "category", "preprocessing": {"hash_buckets": 10}}]
CONFIG = {"input_features": FEATURES, "output_features": [{"name": "y", "type": "binary"}]}
TRAIN = ["b", "a", "b", "c", "a", "d", "b", "<UNK>"]
NEW = ["a", "b", "c", "d", "zz", "<UNK>", None, "é"]


def features():
    o, h = build_all(parse_config(CONFIG))[:2]
    return o, h


def fitted():
    o, h = features()
    train = pd.Series(TRAIN, dtype="string")
    return (o, json.loads(json.dumps(fit_batches(o.fit_combiner({}), [train])))), (h, fit_batches(h.fit_combiner({}), [train]))


# ---- the hash --------------------------------------------------------------------------------------

def test_the_hash_is_xxh3_64():
    import xxhash

    # XXH3-64 of the empty input with seed 0, from the xxHash specification's test vectors
    assert xxhash.xxh3_64_intdigest(b"", 0) == 0x2D06800538D394C2
    values = ["", "a", "<UNK>", "é", "prepflow", "日本語"]
    assert [string_hash.reference_hash(v) for v in values] == \
        [xxhash.xxh3_64_intdigest(v.encode("utf-8"), seed=string_hash.SEED) for v in values]
    assert string_hash.SEED == int.from_bytes(b"prepflow", "big")


def test_hash_golden_values():
    """Published ids depend on these: a change here must come with a new HASH_NAME."""
    golden = {"": 0x8E06E762180F2D24, "a": 0xAD40A1D1D0B4D2AA, "<UNK>": 0x859FBB4C1877D1E5,
              "é": 0xB4340FBEA71E8C12, "prepflow": 0xCAEC0C620AACE7EB}
    assert {v: string_hash.reference_hash(v) for v in golden} == golden
    assert string_hash.hash_strings(list(golden)).tolist() == list(golden.values())
    assert string_hash.HASH_NAME == "xxh3_64-seed-70726570666c6f77"


def test_vectorized_hash_matches_the_definition():
    rng = np.random.default_rng(0)
    values = ["".join(chr(int(c)) for c in rng.integers(32, 0x2FFF, int(n))) for n in rng.integers(0, 90, 3000)]
    values += ["x" * 5000, "", "a\x00", "日本語"]
    arr = pa.array(values)
    expected = [string_hash.reference_hash(v) for v in values]
    assert string_hash.hash_strings(arr).tolist() == expected
    assert string_hash.hash_strings(arr.slice(7, 100)).tolist() == expected[7:107]  # array offsets
    assert string_hash.hash_strings(arr.cast(pa.large_string())).tolist() == expected
    assert string_hash.hash_strings(pa.chunked_array([arr[:5], arr[5:9]])).tolist() == expected[:9]
    assert string_hash.hash_strings(pa.array([], pa.string())).dtype == np.uint64
    with pytest.raises(ValueError, match="null"):
        string_hash.hash_strings(pa.array(["a", None]))


def test_metadata_of_the_old_fnv_hash_is_refused_naming_the_feature():
    (o, meta), (h, hmeta) = fitted()
    new = pd.Series(NEW, dtype="string")
    for feature, m in ((o, meta), (h, hmeta)):
        old = {**m, "hash": "fnv1a64-fmix64-prepflow1"}
        with pytest.raises(DataError, match=rf"{feature.name}.*fnv1a64-fmix64-prepflow1.*rebuild"):
            feature.encode(new, old)


# ---- id layout ---------------------------------------------------------------------------------------

def test_oov_buckets_sit_between_unk_and_the_vocabulary():
    (o, meta), _ = fitted()
    # min_frequency 2 keeps b (3) and a (2); c and d go to buckets; the literal <UNK> stays 0
    assert meta["idx2str"] == ["<UNK>", "<OOV_0>", "<OOV_1>", "<OOV_2>", "b", "a"]
    assert meta["vocab_size"] == 6 and meta["num_oov_buckets"] == 3 and meta["hash"] == string_hash.HASH_NAME
    assert meta["str2freq"] == {"<UNK>": 1, "<OOV_0>": 1, "<OOV_1>": 0, "<OOV_2>": 1, "b": 3, "a": 2}
    ids = o.encode(pd.Series(NEW, dtype="string"), meta)["o"]
    assert ids.dtype == np.int32
    assert ids.tolist() == [5, 4, 1, 3, 2, 0, 0, 1]  # golden: a, b, c, d, zz (unseen), <UNK>, missing, é


def test_hash_buckets_need_no_vocabulary():
    _, (h, meta) = fitted()
    assert meta == {"hash_buckets": 10, "hash": string_hash.HASH_NAME, "vocab_size": 11,
                    "preprocessing": {"hash_buckets": 10}}
    ids = h.encode(pd.Series(NEW, dtype="string"), meta)["h"]
    assert ids.tolist() == [1, 7, 9, 6, 8, 0, 0, 3]  # golden; <UNK> and missing are 0
    expected = [1 + string_hash.reference_hash(v) % 10 for v in ["a", "b", "c", "d", "zz"]]
    assert ids[:5].tolist() == expected


def test_oov_counts_include_the_buckets():
    (o, meta), (h, hmeta) = fitted()
    assert o.oov_count(np.array([0, 1, 3, 4, 5], np.int32), meta) == 3
    assert h.oov_count(np.array([0, 1], np.int32), hmeta) is None


def test_hash_buckets_and_oov_buckets_are_exclusive():
    bad = {"input_features": [{"name": "c", "type": "category",
                               "preprocessing": {"hash_buckets": 8, "num_oov_buckets": 2}}],
           "output_features": [{"name": "y", "type": "binary"}]}
    with pytest.raises(ConfigError, match="num_oov_buckets"):
        build_all(parse_config(bad))


_IDS_SCRIPT = """
import json, sys
import pandas as pd
sys.path.insert(0, {root!r})
from tests.unit.fit.test_category_buckets import NEW, fitted
(o, meta), (h, hmeta) = fitted()
new = pd.Series(NEW, dtype="string")
print(json.dumps([o.encode(new, meta)["o"].tolist(), h.encode(new, hmeta)["h"].tolist()]))
"""


def test_ids_are_the_same_in_other_processes():
    (o, meta), (h, hmeta) = fitted()
    new = pd.Series(NEW, dtype="string")
    here = [o.encode(new, meta)["o"].tolist(), h.encode(new, hmeta)["h"].tolist()]
    for seed in ("1", "4242"):  # str hashing is salted per process; these ids must not be
        proc = subprocess.run([sys.executable, "-c", _IDS_SCRIPT.format(root=str(ROOT))], capture_output=True,
                              text=True, env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == here


# ---- the join against a large vocabulary ------------------------------------------------------------

def test_lookup_finds_each_value_exactly():
    values = pa.array(["<UNK>", "<OOV_0>", *[f"v{i}" for i in range(500)], "", "é", "v1 "])
    lookup = vocab_store.VocabLookup(values, first=2)
    assert len(lookup) == 503
    query = pa.array(["v2", "v499", "nope", "v7", "", "é", "v1", "v1 ", "<UNK>", "V2"])
    assert lookup.positions(query).tolist() == [2, 499, -1, 7, 500, 501, 1, 502, -1, -1]
    assert lookup.positions(pa.array([], pa.string())).tolist() == []
    assert vocab_store.VocabLookup(values.slice(0, 2), first=2).positions(query).tolist() == [-1] * 10
    rng = np.random.default_rng(1)
    words = [f"w{int(i)}" for i in rng.permutation(3000)]
    big = vocab_store.VocabLookup(pa.array(words))
    asked = list(dict.fromkeys(f"w{int(i)}" for i in rng.integers(0, 4000, 2000)))
    row = {w: i for i, w in enumerate(words)}
    assert big.positions(pa.array(asked)).tolist() == [row.get(w, -1) for w in asked]


# ---- the pipeline: Parquet vocabularies, partition counts, serving ------------------------------------

def _frame(n: int = 1500, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    zipf = np.minimum(rng.zipf(1.4, n), 400)
    df = pd.DataFrame({"o": [f"k{z}" for z in zipf], "big": [f"u{z * 7 % 401}-é" for z in zipf],
                       "h": rng.choice([f"t{i}" for i in range(90)], n), "y": rng.random(n) < 0.4})
    df.loc[rng.random(n) < 0.05, "o"] = None
    df.loc[rng.random(n) < 0.05, "big"] = None
    return df


PIPELINE = {
    "input_features": [
        {"name": "o", "type": "category", "preprocessing": {"num_oov_buckets": 5, "min_frequency": 2, "most_common": 40}},
        {"name": "big", "type": "category", "preprocessing": {"most_common": 1000}},
        {"name": "h", "type": "category", "preprocessing": {"hash_buckets": 16}},
    ],
    "output_features": [{"name": "y", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.7, 0.15, 0.15], "seed": 3}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 400, "row_group_rows": 100},
}


@pytest.fixture(scope="module")
def parquet_vocab_runs(tmp_path_factory):
    """The pipeline with vocabularies over 20 ids stored as Parquet, for 1, 3 and 7 partitions."""
    from tasks.features import category

    tmp = tmp_path_factory.mktemp("pq_vocab")
    data = write_csv(_frame(), tmp / "data.csv")
    old = category.INLINE_MAX
    category.INLINE_MAX = 20
    try:
        results = {n: run(PIPELINE, data, tmp / f"n{n}", npartitions=n) for n in (1, 3, 7)}
    finally:
        category.INLINE_MAX = old
    return data, results


def test_large_vocabularies_are_parquet_files_in_the_manifest(parquet_vocab_runs):
    _, results = parquet_vocab_runs
    art = Artifact.open(results[1].artifact["artifact_path"], verify=True)  # sha256 of every file, vocab included
    meta = art.metadata
    for name in ("o", "big"):
        ref = meta[name]["vocab_file"]
        assert "idx2str" not in meta[name] and ref["path"] == f"vocab/{name}.parquet"
        assert ref["path"] in art.manifest["files"] and art.manifest["files"][ref["path"]]["sha256"] == ref["sha256"]
        table = vocab_store.read(art.path / ref["path"], ref["sha256"])
        assert table.num_rows == ref["rows"] == meta[name]["vocab_size"]
        assert table.column("value")[0].as_py() == "<UNK>"
    values = vocab_store.read(art.path / meta["o"]["vocab_file"]["path"]).column("value").to_pylist()
    assert values[1:6] == [f"<OOV_{b}>" for b in range(5)] and len(values) == 1 + 5 + 40
    assert "vocab_file" not in meta["h"] and meta["h"]["vocab_size"] == 17
    stats = art.manifest["statistics"]
    train = art.read_split("train")
    assert stats["encode.oov.train.o"]["count"] == int((train["o"] <= 5).sum())


def test_parquet_vocabularies_are_byte_identical_for_any_partition_count(parquet_vocab_runs):
    _, results = parquet_vocab_runs
    files = {n: without_created_at(artifact_files(r.artifact["artifact_path"])) for n, r in results.items()}
    assert any(k.startswith("vocab/") for k in files[1])
    assert files[3] == files[1] and files[7] == files[1]


def test_inline_and_parquet_vocabularies_give_the_same_ids(parquet_vocab_runs, tmp_path):
    data, results = parquet_vocab_runs
    inline = run(PIPELINE, data, tmp_path, npartitions=2)
    a = Artifact.open(inline.artifact["artifact_path"])
    b = Artifact.open(results[1].artifact["artifact_path"])
    assert "idx2str" in a.metadata["big"]
    for split in SPLIT_NAMES:
        got, ref = a.read_split(split), b.read_split(split)
        assert all(np.array_equal(got[k], ref[k]) for k in ref)
    table = vocab_store.read(b.path / b.metadata["big"]["vocab_file"]["path"])
    assert table.column("value").to_pylist() == a.metadata["big"]["idx2str"]
    assert table.column("count").to_pylist() == [a.metadata["big"]["str2freq"][t] for t in a.metadata["big"]["idx2str"]]


def test_preprocessor_serves_a_moved_artifact_with_parquet_vocabularies(parquet_vocab_runs, tmp_path):
    data, results = parquet_vocab_runs
    result = results[3]
    moved = tmp_path / "elsewhere" / "artifact"
    shutil.copytree(result.artifact["artifact_path"], moved)
    split = next(s for s in result.stages if s.stage == "split")
    assign = np.load(Path(split.path) / "split.npy")
    raw = pd.read_csv(data, dtype=str, keep_default_na=False)
    pre = Preprocessor.load(moved)
    art = Artifact.open(moved)
    for split_id, name in enumerate(SPLIT_NAMES):
        rows = np.flatnonzero(assign == split_id)
        got = pre.transform(raw.iloc[rows])
        ref = art.read_split(name)
        assert ref.pop("__row__").tolist() == rows.tolist()  # the published row ids, not a feature
        assert list(got) == list(ref)
        for col in ref:
            assert got[col].tobytes() == ref[col].tobytes(), (name, col)
    unseen = pre.transform({"o": ["never-seen"], "big": ["never-seen"], "h": ["never-seen"]}, outputs=False)
    assert unseen["big"].tolist() == [0]
    assert unseen["o"].tolist() == [1 + string_hash.reference_hash("never-seen") % 5]
    assert unseen["h"].tolist() == [1 + string_hash.reference_hash("never-seen") % 16]
