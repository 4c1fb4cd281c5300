"""text: word + char ids (golden, Ludwig example), TextVectorization modes, ngrams, idf, property tests."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError
from tests.unit.feature_helpers import decode_ids, expected, feature, fit, nullable_texts, ref_tokens


def test_ludwig_worked_example_and_char_ids():
    f = feature("text")
    values = ["token3 token4 token2", "token3 token1"]
    meta = fit(f, values)
    assert meta["idx2str"][:3] == ["<PAD>", "<UNK>", "token3"]
    out = f.encode(pd.Series(values, dtype="string"), meta)
    s2i = meta["str2idx"]
    assert out["f"].tolist() == [[2, s2i["token4"], s2i["token2"]], [2, s2i["token1"], 0]]
    assert set(out) == {"f", "f_char"}
    assert meta["char_max_sequence_length"] == len(values[0])
    chars = meta["char_idx2str"]
    # e, k, n, o, t occur 5 times each (ties in string order), then '3' and ' ' 3 times
    assert chars[:9] == ["<PAD>", "<UNK>", "e", "k", "n", "o", "t", " ", "3"]
    assert decode_ids(out["f_char"][0], chars) == list(values[0])
    assert decode_ids(out["f_char"][1], chars) == list(values[1])
    assert out["f_char"].dtype == np.int32 and out["f_char"].shape == (2, 20)
    cols = f.output_columns(meta)
    assert [(c.name, c.dtype, c.shape) for c in cols] == [("f", "int32", (3,)), ("f_char", "int32", (20,))]


def test_defaults_lowercase_and_split_punctuation():
    f = feature("text")
    meta = fit(f, ["Hello, World!", "hello"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "hello", "!", ",", "world"]
    assert decode_ids(f.encode(pd.Series(["WORLD, hi"], dtype="string"), meta)["f"][0], meta["idx2str"]) == \
        ["world", ",", "<UNK>"]


def test_char_vocabulary_most_common_and_unicode():
    f = feature("text", char_most_common=2)
    meta = fit(f, ["ééa", "é b"])
    assert meta["char_idx2str"] == ["<PAD>", "<UNK>", "é", " "]  # é x3, then ' ', a, b once (string order)
    assert f.encode(pd.Series(["é中"], dtype="string"), meta)["f_char"][0].tolist() == [2, 1, 0]


def test_standardize_like_keras():
    f = feature("text", standardize="lower_and_strip_punctuation", tokenizer="space")
    meta = fit(f, ["Don't STOP, me-now!"])
    assert meta["idx2str"][2:] == ["dont", "menow", "stop"]
    g = feature("text", standardize="none", tokenizer="space")
    assert fit(g, ["A a"])["idx2str"][2:] == ["A", "a"]


def test_int_mode_ngrams_follow_the_words():
    f = feature("text", tokenizer="space", ngrams=3)
    meta = fit(f, ["a b c"])
    ids = f.encode(pd.Series(["a b c", "b c"], dtype="string"), meta)["f"]
    assert meta["max_sequence_length"] == 6
    assert decode_ids(ids[0], meta["idx2str"]) == ["a", "b", "c", "a b", "b c", "a b c"]
    assert decode_ids(ids[1], meta["idx2str"]) == ["b", "c", "b c"]


def test_tfidf_golden():
    f = feature("text", output_mode="tfidf", ngrams=2, tokenizer="space")
    rows = ["a b a", "b c", None]
    meta = fit(f, rows)
    # counts: a 2, b 2, "a b" 1, "b a" 1, "b c" 1, c 1 -> frequency desc, string asc
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "a", "b", "a b", "b a", "b c", "c"]
    docs = {"a": 1, "b": 2, "a b": 1, "b a": 1, "b c": 1, "c": 1}
    idf = {t: math.log(1 + 3 / (1 + d)) for t, d in docs.items()}
    assert meta["str2idf"]["<PAD>"] == 0.0
    assert meta["str2idf"]["<UNK>"] == pytest.approx(np.mean([idf[t] for t in meta["idx2str"][2:]]))
    for t, v in idf.items():
        assert meta["str2idf"][t] == pytest.approx(v, rel=1e-15)
    out = f.encode(pd.Series(["a b a", "z a"], dtype="string"), meta)["f"]
    assert out.dtype == np.float32 and out.shape == (2, 8)
    want0 = [0, 0, 2 * idf["a"], idf["b"], idf["a b"], idf["b a"], 0, 0]
    want1 = [0, meta["str2idf"]["<UNK>"] * 2, idf["a"], 0, 0, 0, 0, 0]  # "z", "z a" are unknown
    assert out[0].tolist() == pytest.approx(want0, rel=1e-6)
    assert out[1].tolist() == pytest.approx(want1, rel=1e-6)
    assert [c.name for c in f.output_columns(meta)] == ["f"]  # no char column outside int mode


def test_count_and_binary_modes_and_max_tokens():
    count = feature("text", output_mode="count", tokenizer="space", max_tokens=4)
    meta = fit(count, ["x x y", "y z x"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "x", "y"] and meta["vocab_size"] == 4
    assert count.encode(pd.Series(["x x z"], dtype="string"), meta)["f"].tolist() == [[0, 1, 2, 0]]
    binary = feature("text", output_mode="binary", tokenizer="space")
    meta = fit(binary, ["x x y"])
    assert binary.encode(pd.Series(["x x q"], dtype="string"), meta)["f"].tolist() == [[0, 1, 1, 0]]


def test_config_errors():
    with pytest.raises(ConfigError, match="start_stop"):
        feature("text", output_mode="tfidf", start_stop=True)
    with pytest.raises(ConfigError, match="ngrams"):
        feature("text", ngrams=4)
    with pytest.raises(ConfigError, match="output_mode"):
        feature("text", output_mode="tf-idf")


@settings(max_examples=50, deadline=None, derandomize=True)
@given(values=st.lists(nullable_texts, min_size=1, max_size=20), most_common=st.integers(1, 12),
       char_most_common=st.integers(1, 12), limit=st.integers(1, 12), start_stop=st.booleans(),
       nparts=st.integers(1, 4))
def test_int_mode_decodes_to_words_and_characters(values, most_common, char_most_common, limit, start_stop,
                                                  nparts):
    f = feature("text", most_common=most_common, char_most_common=char_most_common, max_sequence_length=limit,
                char_max_sequence_length=limit, start_stop=start_stop)
    meta = fit(f, values, npartitions=nparts)
    assert meta == fit(f, values)
    out = f.encode(pd.Series(values, dtype="string"), meta)
    for key, idx2str, tokens_of in (("f", meta["idx2str"], lambda v: ref_tokens(v, "space_punct", True)),
                                    ("f_char", meta["char_idx2str"], lambda v: list((v or "").lower()))):
        width = out[key].shape[1]
        for row, value in zip(out[key], values, strict=True):
            want = expected(tokens_of(value), idx2str)[: width - start_stop]  # [<START>] + tokens, cut at width
            assert decode_ids(row, idx2str) == want


KERAS_STRIP = r"[!\"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~']"  # Keras' DEFAULT_STRIP_REGEX


def keras_words(text: str | None, standardize: str = "lower_and_strip_punctuation") -> list[str]:
    """Keras TextVectorization's standardize (tf.strings.lower: ASCII only) then split='whitespace'."""
    if text is None:
        return []
    if "lower" in standardize:
        text = "".join(c.lower() if "A" <= c <= "Z" else c for c in text)
    if "strip" in standardize:
        text = re.sub(KERAS_STRIP, "", text)
    return [t for t in re.split(r"[ \t\n\v\f\r]+", text) if t]


def test_keras_options_standardize_then_split_on_whitespace():
    f = feature("text", output_mode="count")
    words = f.tokens(pd.Series(["Hello, World’s END… — ok Éa"], dtype="string")).row(0)
    assert words == ["hello", "world’s", "end…", "—", "ok Éa"]  # only ASCII is lowered/stripped
    assert keras_words("Hello, World’s END… — ok Éa") == words
    assert feature("text", split="character", standardize="none").tokens(
        pd.Series(["a B"], dtype="string")).row(0) == ["a", " ", "B"]
    assert feature("text", split="space_punct", standardize="lower").tokens(
        pd.Series(["Hi, yo"], dtype="string")).row(0) == ["hi", ",", "yo"]
    ludwig = feature("text")  # no Keras option: Ludwig's lowercase (Unicode) and space_punct
    assert ludwig.tokens(pd.Series(["Hello, Éa…"], dtype="string")).row(0) == ["hello", ",", "éa", "…"]


@settings(max_examples=50, deadline=None, derandomize=True)
@given(values=st.lists(nullable_texts, min_size=1, max_size=20), ngrams=st.integers(1, 3),
       max_tokens=st.one_of(st.none(), st.integers(3, 15)), nparts=st.integers(1, 4))
def test_count_mode_decodes_to_ngram_counts(values, ngrams, max_tokens, nparts):
    f = feature("text", output_mode="count", ngrams=ngrams, max_tokens=max_tokens)
    meta = fit(f, values, npartitions=nparts)
    assert meta == fit(f, values)
    if max_tokens is not None:
        assert meta["vocab_size"] <= max_tokens
    out = f.encode(pd.Series(values, dtype="string"), meta)["f"]
    for row, value in zip(out, values, strict=True):
        words = keras_words(value)
        grams = [" ".join(words[i:i + k]) for k in range(1, ngrams + 1) for i in range(len(words) - k + 1)]
        decoded = Counter({meta["idx2str"][j]: int(row[j]) for j in np.flatnonzero(row)})
        assert decoded == Counter(expected(grams, meta["idx2str"]))


def test_keras_output_mode_names_are_accepted():
    assert feature("text", output_mode="multi_hot").options.output_mode == "binary"
    assert feature("text", output_mode="tf_idf").options.output_mode == "tfidf"
