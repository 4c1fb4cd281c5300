"""Category ``symbols: ludwig`` (issue 20): Ludwig's ``create_vocabulary_single_token`` and lookup, the same for
any partitioning.

The reference follows ``ludwig/utils/strings_utils.py`` and ``ludwig/features/category_feature.py``: stripped
values ranked by count, equal counts in first-occurrence order (a filled ``<UNK>`` is a value like any other);
``<UNK>`` prepended only when ``most_common`` cuts values; ``str2idx`` a dict over that list; ``str2freq``
each entry's count in the data; an unknown value gets ``str2idx['<UNK>']``, else the most frequent's id (0).
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError
from prepflow import Artifact
from tasks.features import category
from tasks.vocab import category as category_vocab
from tests.helpers import run, write_csv
from tests.unit.feature_helpers import feature
from tests.unit.ludwig.test_ludwig_vocab import fit_partitioned

UNK = "<UNK>"


def ludwig_vocabulary(rows: list[str], most_common: int) -> tuple[list[str], dict[str, int], dict[str, int]]:
    counts = Counter(v.strip() for v in rows)  # insertion order = first occurrence
    full = [v for v, _ in sorted(counts.items(), key=lambda kv: -kv[1])]  # stable: ties stay in that order
    vocab = [UNK, *full[:most_common]] if most_common < len(full) else full
    return vocab, {v: i for i, v in enumerate(vocab)}, {v: counts.get(v, 0) for v in vocab}


def ludwig_ids(values: list[str], str2idx: dict[str, int], str2freq: dict[str, int]) -> list[int]:
    fallback = str2idx[UNK] if UNK in str2idx else str2idx[max(str2freq, key=str2freq.get)]
    return [str2idx.get(v.strip(), fallback) for v in values]


values = st.sampled_from(["b", "a", "c", "d", " e", "zz", UNK])


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(values, min_size=2, max_size=40), most_common=st.integers(1, 8),
       npartitions=st.integers(1, 5), seed=st.integers(0, 99))
def test_category_vocabulary_and_ids_are_ludwigs_for_any_partitioning(rows, most_common, npartitions, seed):
    feat = feature("category", symbols="ludwig", most_common=most_common)
    cast = feat.cast(pd.Series(rows, dtype="string"), np.arange(len(rows)))
    meta = fit_partitioned(feat, cast.tolist(), npartitions, seed)
    vocab, str2idx, str2freq = ludwig_vocabulary(rows, most_common)
    assert meta["idx2str"] == vocab
    assert meta["str2idx"] == str2idx and meta["str2freq"] == str2freq and meta["vocab_size"] == len(str2idx)
    probe = [*rows, "never-seen", "  a "]
    ids = feat.encode(feat.cast(pd.Series(probe, dtype="string"), np.arange(len(probe))), meta)["f"]
    assert ids.tolist() == ludwig_ids(probe, str2idx, str2freq)


def test_without_a_cut_there_is_no_unk_and_an_unknown_value_gets_the_most_frequent_id():
    feat = feature("category", symbols="ludwig")
    rows = ["b", "a", "a", "c", "b", UNK, "c"]  # a, b, c twice: first-occurrence order b, a, c
    meta = json.loads(json.dumps(feat.extract(feat.add(feat.create(), pd.Series(rows, dtype="string")), {})))
    assert meta["idx2str"] == ["b", "a", "c", UNK] and meta["str2freq"][UNK] == 1
    ids = feat.encode(pd.Series(["zz", "c", UNK], dtype="string"), meta)["f"]
    assert ids.tolist() == [3, 2, 3]  # a data <UNK> is in str2idx: Ludwig maps unknown values to it
    meta = json.loads(json.dumps(feat.extract(feat.add(feat.create(), pd.Series(rows[:5], dtype="string")), {})))
    assert meta["idx2str"] == ["b", "a", "c"]  # b, a twice each: b first
    assert feat.encode(pd.Series(["zz", "c"], dtype="string"), meta)["f"].tolist() == [0, 2]  # the most frequent: b


def test_symbols_ludwig_refuses_buckets():
    with pytest.raises(ConfigError, match="symbols: ludwig"):
        feature("category", symbols="ludwig", num_oov_buckets=2)


def _table(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    color = rng.choice(["red", "blue", "green", "teal", "cyan", "pink"], n).astype(object)
    color[::17] = None
    return pd.DataFrame({"color": color, "y": rng.choice([0, 1], n)})


@pytest.mark.parametrize("inline_max", [100_000, 3])
def test_the_pipeline_gives_ludwigs_ids_for_any_partition_count(tmp_path, inline_max, monkeypatch):
    monkeypatch.setattr(category, "INLINE_MAX", inline_max)  # 3: the vocabulary goes to a Parquet file
    df = _table()
    data = write_csv(df, tmp_path / "data.csv")
    config = {"input_features": [{"name": "color", "type": "category", "preprocessing": {"most_common": 4}}],
              "output_features": [{"name": "y", "type": "binary"}], "compatibility": "ludwig",
              "preprocessing": {"split": {"type": "fixed", "column": "y"}}}
    filled = df["color"].fillna(UNK).tolist()
    vocab, str2idx, str2freq = ludwig_vocabulary(filled, 4)
    expected = np.asarray(ludwig_ids(filled, str2idx, str2freq))
    arrays = []
    # one partition; 7 merged in a tree of 2-table merges (3 levels); 7 exchanged to 4 reducers, as on a cluster
    for n, reduce_parts, fan_in in ((1, 64, 8), (7, 64, 2), (7, 4, 2)):
        monkeypatch.setattr(category_vocab, "LOCAL_REDUCE_PARTS", reduce_parts)
        monkeypatch.setattr(category_vocab, "MERGE_FAN_IN", fan_in)
        out = tmp_path / f"n{n}-{reduce_parts}-{fan_in}"
        art = Artifact.open(run(config, data, out, npartitions=n).artifact["artifact_path"])
        if inline_max == 100_000:
            assert art.metadata["color"]["idx2str"] == vocab and art.metadata["color"]["str2freq"] == str2freq
        else:
            assert art.metadata["color"]["vocab_file"]["path"] == "vocab/color.parquet"
        got = {s: art.read_split(s)["color"] for s in ("train", "validation")}
        arrays.append(np.concatenate([got["train"], got["validation"]]))
        split = df["y"].to_numpy()
        assert got["train"].tolist() == expected[split == 0].tolist()
        assert got["validation"].tolist() == expected[split == 1].tolist()
    assert arrays[0].tobytes() == arrays[1].tobytes() == arrays[2].tobytes()
