"""sequence: golden tests (Ludwig's worked example), tokenizers, padding/truncation, property tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, NotFittedError
from tests.unit.feature_helpers import decode_ids, expected, feature, fit, nullable_texts, ref_tokens

LUDWIG = ["token3 token4 token2", "token3 token1"]


def test_ludwig_worked_example():
    f = feature("sequence")
    meta = fit(f, LUDWIG)
    assert meta["idx2str"][:2] == ["<PAD>", "<UNK>"]
    assert meta["str2idx"]["token3"] == 2
    # frequency descending, ties by string ascending
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "token3", "token1", "token2", "token4"]
    assert meta["str2freq"] == {"<PAD>": 0, "<UNK>": 0, "token3": 2, "token1": 1, "token2": 1, "token4": 1}
    assert meta["vocab_size"] == 6 and meta["max_sequence_length"] == 3
    ids = f.encode(pd.Series(LUDWIG, dtype="string"), meta)["f"]
    assert ids.dtype == np.int32 and ids.shape == (2, 3)
    s2i = meta["str2idx"]
    assert ids.tolist() == [[s2i["token3"], s2i["token4"], s2i["token2"]], [s2i["token3"], s2i["token1"], 0]]


def test_start_stop_reserved_at_2_and_3():
    f = feature("sequence", start_stop=True)
    meta = fit(f, LUDWIG)
    assert meta["idx2str"][:5] == ["<PAD>", "<UNK>", "<START>", "<STOP>", "token3"]
    assert meta["max_sequence_length"] == 5
    ids = f.encode(pd.Series(LUDWIG + ["never seen"], dtype="string"), meta)["f"]
    assert ids.tolist() == [[2, 4, 7, 6, 3], [2, 4, 5, 3, 0], [2, 1, 1, 3, 0]]


@pytest.mark.parametrize(("padding", "truncation", "rows"), [
    ("right", "right", [[4, 7], [4, 5]]),
    ("right", "left", [[7, 6], [4, 5]]),
    ("left", "right", [[4, 7], [4, 5]]),
    ("left", "left", [[7, 6], [4, 5]]),
])
def test_padding_and_truncation(padding, truncation, rows):
    f = feature("sequence", max_sequence_length=2, padding=padding, truncation=truncation)
    meta = fit(f, LUDWIG)
    assert meta["max_sequence_length"] == 2
    ids = f.encode(pd.Series(LUDWIG, dtype="string"), meta)["f"] + 2  # shift so ids read like start_stop ids
    assert ids.tolist() == rows


def test_left_padding_and_start_stop():
    f = feature("sequence", padding="left", start_stop=True)
    meta = fit(f, LUDWIG)
    ids = f.encode(pd.Series(["token1", None], dtype="string"), meta)["f"]
    assert ids.tolist() == [[0, 0, 2, 5, 3], [0, 0, 0, 2, 3]]


def test_length_percentile_caps_the_length():
    f = feature("sequence", length_percentile=50)
    values = ["a"] * 6 + ["a b c d e f g h"] * 4
    meta = fit(f, values)
    assert meta["max_sequence_length"] == 1  # half the rows have 1 token
    f90 = feature("sequence", length_percentile=90)
    assert fit(f90, values)["max_sequence_length"] == 8


@pytest.mark.parametrize(("tokenizer", "extra", "text", "tokens"), [
    ("space", {}, " a  b\tc\n", ["a", "b", "c"]),
    ("space_punct", {}, "Hi, you!! ok_1", ["Hi", ",", "you", "!", "!", "ok_1"]),
    ("characters", {}, "ab c", ["a", "b", " ", "c"]),
    ("comma", {}, "new york , boston,,la", ["new york", "boston", "la"]),
    ("regex", {"pattern": "[;|]+"}, "a;b||c;", ["a", "b", "c"]),
])
def test_tokenizers(tokenizer, extra, text, tokens):
    f = feature("sequence", tokenizer=tokenizer, **extra)
    meta = fit(f, [text])
    ids = f.encode(pd.Series([text], dtype="string"), meta)["f"][0]
    assert decode_ids(ids, meta["idx2str"]) == tokens


def test_lowercase_most_common_min_frequency_and_unk_counts():
    f = feature("sequence", lowercase=True, most_common=2, min_frequency=2)
    meta = fit(f, ["A a b", "B c", "a d"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "a", "b"]
    assert meta["str2freq"]["<UNK>"] == 2  # c, d
    ids = f.encode(pd.Series(["a c", "B"], dtype="string"), meta)["f"]
    assert ids.tolist() == [[2, 1, 0], [3, 0, 0]]


def test_special_symbols_in_the_data_are_unknown():
    f = feature("sequence")
    meta = fit(f, ["<PAD> x <UNK>"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "x"]
    assert f.encode(pd.Series(["<PAD> x"], dtype="string"), meta)["f"].tolist() == [[1, 2, 0]]


def test_vocab_file_fixes_tokens_and_order(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("zeta\nalpha\n\nzeta\n<UNK>\n")
    f = feature("sequence", vocab_file=str(vocab))
    assert len(f.options.vocab_file_sha256) == 64
    meta = fit(f, ["alpha beta", "alpha"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "zeta", "alpha"]
    assert meta["str2freq"] == {"<PAD>": 0, "<UNK>": 1, "zeta": 0, "alpha": 2}
    assert meta["max_sequence_length"] == 2
    assert f.encode(pd.Series(["beta zeta", "alpha"], dtype="string"), meta)["f"].tolist() == [[1, 2], [3, 0]]


def test_config_errors():
    with pytest.raises(ConfigError, match="pattern"):
        feature("sequence", tokenizer="regex")
    with pytest.raises(ConfigError, match="RE2"):
        feature("sequence", tokenizer="regex", pattern="(")
    with pytest.raises(ConfigError, match="vocab_file"):
        feature("sequence", vocab_file="/nonexistent/vocab.txt")
    with pytest.raises(ConfigError, match="tokenizer"):
        feature("sequence", tokenizer="spaces")


def test_encode_before_fit_is_a_clear_error():
    with pytest.raises(NotFittedError, match="fit"):
        feature("sequence").encode(pd.Series(["a"], dtype="string"), {})


def test_empty_partition_and_empty_input():
    f = feature("sequence")
    meta = fit(f, ["a b"])
    assert f.encode(pd.Series([], dtype="string"), meta)["f"].shape == (0, 2)
    assert fit(f, [None, None])["max_sequence_length"] == 1  # never zero-width


@settings(max_examples=60, deadline=None, derandomize=True)
@given(values=st.lists(nullable_texts, min_size=1, max_size=25),
       tokenizer=st.sampled_from(["space", "space_punct", "characters", "comma"]),
       lowercase=st.booleans(), most_common=st.integers(1, 12), limit=st.integers(1, 12),
       start_stop=st.booleans(), padding=st.sampled_from(["right", "left"]),
       truncation=st.sampled_from(["right", "left"]), nparts=st.integers(1, 4))
def test_encode_then_decode_gives_the_tokens_back(values, tokenizer, lowercase, most_common, limit, start_stop,
                                                   padding, truncation, nparts):
    f = feature("sequence", tokenizer=tokenizer, lowercase=lowercase, most_common=most_common,
                max_sequence_length=limit, start_stop=start_stop, padding=padding, truncation=truncation)
    meta = fit(f, values, npartitions=nparts)
    assert meta == fit(f, values, npartitions=1)  # the fit does not depend on the partitioning
    ids = f.encode(pd.Series(values, dtype="string"), meta)["f"]
    width = meta["max_sequence_length"]
    assert ids.shape == (len(values), width)
    extra = 2 if start_stop else 0
    longest = max(len(ref_tokens(v, tokenizer, lowercase)) for v in values)
    assert width == max(1, min(longest + extra, limit))
    for row, value in zip(ids, values, strict=True):
        full = ["<START>"] * start_stop + expected(ref_tokens(value, tokenizer, lowercase), meta["idx2str"]) \
            + ["<STOP>"] * start_stop
        kept = full[:width] if truncation == "right" else full[max(0, len(full) - width):]
        pads = ["<PAD>"] * (width - len(kept))
        assert [meta["idx2str"][i] for i in row] == (kept + pads if padding == "right" else pads + kept)
