"""Set and bag ``symbols: ludwig`` (issue 20): Ludwig's ``create_vocabulary`` (set without its special
symbols, ``<UNK>`` moved or inserted at id 3; bag with ``<EOS>``, ``<SOS>``, ``<PAD>``, ``<UNK>`` at 0-3),
``max_set_size`` the largest row + 2, Ludwig's lookup, for any partitioning.

The reference follows ``ludwig/utils/strings_utils.py`` (``create_vocabulary``, ``add_or_move_symbol``) and
``ludwig/features/feature_utils.py`` (``set_str_to_idx``): ``Counter.most_common`` over the tokens in
first-occurrence order (a stable sort by count), ``str2freq`` each entry's count in the data.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import feature
from tests.unit.ludwig.test_ludwig_vocab import fit_partitioned

SPECIALS = ["<EOS>", "<SOS>", "<PAD>", "<UNK>"]


def ludwig_vocabulary(rows: list[str], most_common: int, bag: bool) -> tuple[list[str], dict[str, int], int]:
    counts: Counter = Counter()
    for row in rows:
        for token in row.split():
            counts[token] += 1
    vocab = [token for token, _ in counts.most_common(most_common)]
    for index, symbol in enumerate(SPECIALS):
        if bag or symbol == "<UNK>":
            if symbol in vocab:
                vocab.remove(symbol)
            vocab.insert(index, symbol)
    return vocab, {t: counts.get(t, 0) for t in vocab}, max(len(r.split()) for r in rows) + 2


def ludwig_rows(rows: list[str], vocab: list[str], bag: bool) -> np.ndarray:
    str2idx = {t: i for i, t in enumerate(vocab)}
    out = np.zeros((len(rows), len(vocab)), np.float32)
    for i, row in enumerate(rows):
        for token in row.split():
            j = str2idx.get(token, str2idx["<UNK>"])
            out[i, j] = out[i, j] + 1 if bag else 1
    return out


tokens = st.sampled_from(["b", "a", "c", "d", "e", "zz", "<UNK>", "<PAD>", "<EOS>"])
rows_strategy = st.lists(st.lists(tokens, max_size=5).map(" ".join), min_size=2, max_size=40)


@settings(max_examples=100, deadline=None)
@given(rows=rows_strategy, most_common=st.integers(1, 8), npartitions=st.integers(1, 5), seed=st.integers(0, 99),
       bag=st.booleans())
def test_set_and_bag_vocabularies_and_rows_are_ludwigs_for_any_partitioning(rows, most_common, npartitions, seed,
                                                                           bag):
    feat = feature("bag" if bag else "set", symbols="ludwig", most_common=most_common)
    meta = fit_partitioned(feat, rows, npartitions, seed)
    vocab, freq, max_set_size = ludwig_vocabulary(rows, most_common, bag)
    assert meta["idx2str"] == vocab and meta["str2freq"] == freq and meta["vocab_size"] == len(vocab)
    assert meta["str2idx"] == {t: i for i, t in enumerate(vocab)} and meta["max_set_size"] == max_set_size
    probe = [*rows, "never seen a"]
    out = feat.encode(pd.Series(probe, dtype="string"), meta)["f"]
    np.testing.assert_array_equal(out.astype(np.float32), ludwig_rows(probe, vocab, bag))


def test_set_unk_is_id_3_and_there_is_no_pad():
    meta = fit_partitioned(feature("set", symbols="ludwig"), ["b a", "a c d", "<UNK>", "e"], 2, 0)
    assert meta["idx2str"] == ["a", "b", "c", "<UNK>", "d", "e"] and meta["str2freq"]["<UNK>"] == 1
    assert meta["max_set_size"] == 5
    short = fit_partitioned(feature("set", symbols="ludwig"), ["b", "b a"], 1, 0)
    assert short["idx2str"] == ["b", "a", "<UNK>"]  # fewer than 3 tokens: <UNK> appended
