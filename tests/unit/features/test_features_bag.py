"""bag: token counts per row (float32), <UNK> column counts unknown tokens, property test."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import expected, feature, fit, nullable_texts, ref_tokens


def test_golden_counts():
    f = feature("bag")
    meta = fit(f, ["a a b", "c", None])
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "a", "b", "c"]
    assert meta["max_set_size"] == 3
    out = f.encode(pd.Series(["a a b", "c", "a z z", None], dtype="string"), meta)["f"]
    assert out.dtype == np.float32
    assert out.tolist() == [[0, 0, 2, 1, 0], [0, 0, 0, 0, 1], [0, 2, 1, 0, 0], [0, 0, 0, 0, 0]]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(values=st.lists(nullable_texts, min_size=1, max_size=25), most_common=st.integers(1, 10),
       nparts=st.integers(1, 4))
def test_encode_then_decode_gives_the_token_counts_back(values, most_common, nparts):
    f = feature("bag", most_common=most_common, tokenizer="space_punct")
    meta = fit(f, values, npartitions=nparts)
    out = f.encode(pd.Series(values, dtype="string"), meta)["f"]
    for row, value in zip(out, values, strict=True):
        decoded = Counter({meta["idx2str"][j]: int(row[j]) for j in np.flatnonzero(row)})
        assert decoded == Counter(expected(ref_tokens(value, "space_punct"), meta["idx2str"]))
