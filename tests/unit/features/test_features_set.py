"""set: golden multi-hot layout, <PAD>/<UNK> columns, max_set_size, property test."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import expected, feature, fit, nullable_texts, ref_tokens


def test_golden_multi_hot():
    f = feature("set")
    meta = fit(f, ["a b", "b c c", None, "b"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "b", "c", "a"]
    assert meta["str2freq"] == {"<PAD>": 0, "<UNK>": 0, "b": 3, "c": 2, "a": 1}
    assert meta["vocab_size"] == 5 and meta["max_set_size"] == 3
    out = f.encode(pd.Series(["a b", "c zzz", None, "B"], dtype="string"), meta)["f"]
    assert out.dtype == np.int8 and out.shape == (4, 5)
    assert out.tolist() == [[0, 0, 1, 0, 1], [0, 1, 0, 1, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 0]]


def test_lowercase_and_comma_tokenizer():
    f = feature("set", tokenizer="comma", lowercase=True)
    meta = fit(f, ["New York, Boston", "boston"])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "boston", "new york"]
    assert f.encode(pd.Series(["NEW YORK,boston"], dtype="string"), meta)["f"].tolist() == [[0, 0, 1, 1]]


def test_output_columns():
    f = feature("set")
    meta = fit(f, ["a b"])
    (col,) = f.output_columns(meta)
    assert (col.name, col.dtype, col.shape) == ("f", "int8", (4,))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(values=st.lists(nullable_texts, min_size=1, max_size=25), most_common=st.integers(1, 10),
       tokenizer=st.sampled_from(["space", "space_punct", "comma"]), nparts=st.integers(1, 4))
def test_encode_then_decode_gives_the_token_set_back(values, most_common, tokenizer, nparts):
    f = feature("set", most_common=most_common, tokenizer=tokenizer)
    meta = fit(f, values, npartitions=nparts)
    assert meta == fit(f, values)
    assert meta["max_set_size"] == max(len(ref_tokens(v, tokenizer)) for v in values)
    out = f.encode(pd.Series(values, dtype="string"), meta)["f"]
    assert out.shape == (len(values), meta["vocab_size"])
    assert not out[:, 0].any()  # <PAD> never set
    for row, value in zip(out, values, strict=True):
        decoded = {meta["idx2str"][j] for j in np.flatnonzero(row)}
        assert decoded == set(expected(ref_tokens(value, tokenizer), meta["idx2str"]))
