"""The stage contract for every non-media feature type: the artifact is byte-identical for any
partition count, n x d columns are published as fixed-size lists and as n x d .npy files that agree,
the fitted metadata alone re-encodes rows, and bad rows are reported by input row."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from core.errors import DataError
from storage.artifact import Artifact
from tests.helpers import artifact_files, run, without_created_at, write_csv

CONFIG = {
    "input_features": [
        {"name": "tags", "type": "set", "preprocessing": {"most_common": 8}},
        {"name": "tag_bag", "column": "tags", "type": "bag"},
        {"name": "seq", "column": "text", "type": "sequence",
         "preprocessing": {"start_stop": True, "length_percentile": 90, "lowercase": True}},
        {"name": "text", "type": "text", "preprocessing": {"most_common": 40, "char_most_common": 20}},
        {"name": "tfidf", "column": "text", "type": "text",
         "preprocessing": {"output_mode": "tfidf", "ngrams": 2, "max_tokens": 60}},
        {"name": "ts", "type": "timeseries", "preprocessing": {"timeseries_length_limit": 6}},
        {"name": "vec", "type": "vector"},
        {"name": "when", "type": "date"},
        {"name": "amount", "type": "number", "preprocessing": {"normalization": "bins", "num_bins": 5}},
    ],
    "output_features": [{"name": "label", "type": "binary"}],
    "preprocessing": {"split": {"type": "random", "probabilities": [0.6, 0.2, 0.2], "seed": 11}},
    "publish": {"formats": ["parquet", "npy"], "shard_rows": 300, "row_group_rows": 64},
}


def make_frame(n: int = 900, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    words = np.array(["alpha", "Beta", "gamma", "delta", "épsilon", "zeta", "eta", "theta", "iota", "kappa",
                      "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "ünicode"])
    zipf = np.minimum(rng.zipf(1.5, 20 * n), len(words)) - 1
    pos = 0
    tags, texts, series, vectors = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(0, 6))
        tags.append(" ".join(words[zipf[pos:pos + k]]))
        pos += k
        k = int(rng.integers(1, 12))
        texts.append(" ".join(words[zipf[pos:pos + k]]) + rng.choice(["", ".", "!", ", ok?"]))
        pos += k
        series.append(" ".join(f"{v:.4g}" for v in rng.normal(size=int(rng.integers(1, 9)))))
        vectors.append(" ".join(f"{v:.5g}" for v in rng.normal(size=4)))
    df = pd.DataFrame({
        "tags": tags, "text": texts, "ts": series, "vec": vectors,
        "when": pd.Timestamp("2019-06-01") + pd.to_timedelta(rng.integers(0, 10**8, n), unit="s"),
        "amount": rng.lognormal(3, 1, n).round(2),
        "label": rng.random(n) < 0.3,
    })
    df["when"] = df["when"].dt.strftime("%Y-%m-%d %H:%M:%S")
    for col, frac in (("tags", 0.1), ("text", 0.05), ("ts", 0.05), ("vec", 0.05), ("when", 0.05), ("amount", 0.05)):
        df.loc[rng.random(n) < frac, col] = None
    return df


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_csv(make_frame(), tmp_path_factory.mktemp("data") / "features.csv")


@pytest.fixture(scope="module")
def reference(dataset, tmp_path_factory):
    result = run(CONFIG, dataset, tmp_path_factory.mktemp("ref"), npartitions=1)
    return result, artifact_files(result.artifact["artifact_path"])


@pytest.mark.parametrize("npartitions", [3, 7])
def test_artifact_is_byte_identical_for_any_partition_count(dataset, reference, tmp_path, npartitions):
    ref_result, ref_files = reference
    result = run(CONFIG, dataset, tmp_path, npartitions=npartitions)
    assert result.artifact["artifact_id"] == ref_result.artifact["artifact_id"]
    files = without_created_at(artifact_files(result.artifact["artifact_path"]))
    ref = without_created_at(ref_files)
    assert sorted(files) == sorted(ref)
    assert [name for name in ref if files[name] != ref[name]] == []


def test_published_columns_shapes_dtypes_and_npy_agree_with_parquet(reference):
    result, _ = reference
    art = Artifact.open(result.artifact["artifact_path"], verify=True)
    meta = art.metadata
    spec = art.feature_spec["feature_spec"]
    widths = {"tags": meta["tags"]["vocab_size"], "tag_bag": meta["tag_bag"]["vocab_size"],
              "seq": meta["seq"]["max_sequence_length"], "text": meta["text"]["max_sequence_length"],
              "text_char": meta["text"]["char_max_sequence_length"], "tfidf": meta["tfidf"]["vocab_size"],
              "ts": meta["ts"]["max_timeseries_length"], "vec": 4, "when": 9}
    dtypes = {"tags": "int8", "tag_bag": "float32", "seq": "int32", "text": "int32", "text_char": "int32",
              "tfidf": "float32", "ts": "float32", "vec": "float32", "when": "int32", "amount": "int32"}
    assert meta["vec"]["vector_size"] == 4 and meta["tfidf"]["vocab_size"] <= 60
    assert meta["amount"]["num_bins"] == 5 and len(meta["amount"]["bin_edges"]) == 6
    for split in art.splits:
        parquet = art.read_split(split)
        n = art.num_rows(split)
        for name, dtype in dtypes.items():
            shape = (n, widths[name]) if name in widths else (n,)
            assert parquet[name].shape == shape, name
            assert parquet[name].dtype == np.dtype(dtype), name
            assert spec[name]["shape"] == list(shape[1:])
        for chunk in art.chunks(split):
            if chunk["type"] == "npy":
                (name,) = chunk["features"]
                npy = np.load(art.path / chunk["files"][0], mmap_mode="r")
                assert npy.shape == parquet[name].shape and np.array_equal(npy, parquet[name]), name
    train = art.read_split("train")
    assert set(np.unique(train["amount"])) <= set(range(5))
    assert train["seq"][:, 0].tolist() == [2] * len(train["seq"])  # <START>


def test_fitted_metadata_alone_re_encodes_rows(reference, dataset):
    from tasks.config.loader import parse_config
    from tasks.features import build_all
    from tasks.runtime.frame import cast_partition

    result, _ = reference
    art = Artifact.open(result.artifact["artifact_path"])
    meta = json.loads(json.dumps(art.metadata))
    features = build_all(parse_config(CONFIG))
    raw = pd.read_csv(dataset, dtype=str, keep_default_na=True).head(50)
    raw["__row__"] = np.arange(len(raw))
    typed = cast_partition(raw, features, np.zeros(len(raw), dtype=np.int8))
    for f in features:
        fill = meta[f.name]["preprocessing"]["computed_fill_value"]
        values = typed[f.name].fillna(fill) if fill is not None else typed[f.name]
        out = f.encode(values, meta[f.name])
        for col in f.output_columns(meta[f.name]):
            assert out[col.name].dtype == np.dtype(col.dtype) and out[col.name].shape[1:] == col.shape


@pytest.mark.parametrize("npartitions", [1, 3])
def test_a_vector_row_of_the_wrong_length_is_reported_by_input_row(tmp_path, npartitions):
    df = make_frame(120)
    df.loc[:, ["tags", "text", "ts", "when", "amount"]] = df[["tags", "text", "ts", "when", "amount"]].ffill().bfill()
    df.loc[36, "vec"] = "1 2 3 4 5"
    config = {"input_features": [{"name": "vec", "type": "vector"}], "output_features": [{"name": "label",
                                                                                         "type": "binary"}]}
    with pytest.raises(DataError, match=r"row 36, column 'vec': vector feature 'vec' expects 4 values per row, got 5"):
        run(config, write_csv(df, tmp_path / "v.csv"), tmp_path, npartitions=npartitions)
