"""``symbols: ludwig`` vocabularies are Ludwig's ``create_vocabulary`` for any partitioning.

The reference below follows ``ludwig/utils/strings_utils.py`` (0.11; 0.17's differs only in how it maps rows): tokens counted with
``value_counts(sort=False)`` (first occurrence order), ``Counter.most_common(most_common)`` (a stable sort by
count, so equal counts stay in first-occurrence order; data tokens spelled like a special symbol, such as a
missing value filled with ``<UNK>``, take part), then ``<EOS>``, ``<SOS>``, ``<PAD>``, ``<UNK>`` moved or
inserted at ids 0-3; ``str2freq`` is each entry's count in the data.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import feature, fit_keeping_rows

SPECIALS = ["<EOS>", "<SOS>", "<PAD>", "<UNK>"]


def ludwig_vocabulary(rows: list[str], most_common: int) -> tuple[list[str], dict[str, int]]:
    counts: Counter = Counter()
    for row in rows:  # dict insertion order = first occurrence, as value_counts(sort=False)
        for token in row.split():
            counts[token] += 1
    vocab = [token for token, _ in counts.most_common(most_common)]
    for index, symbol in enumerate(SPECIALS):  # add_or_move_symbol, STOP/START/PADDING/UNKNOWN = 0/1/2/3
        if symbol in vocab:
            vocab.remove(symbol)
        vocab.insert(index, symbol)
    return vocab, {token: counts.get(token, 0) for token in vocab}


def fit_partitioned(feat, rows: list[str], npartitions: int, seed: int) -> dict:
    return fit_keeping_rows(feat, pd.Series(rows, dtype="string"), npartitions, seed)


tokens = st.sampled_from(["b", "a", "c", "d", "e", "zz", "<UNK>", "<PAD>"])
rows_strategy = st.lists(st.lists(tokens, max_size=5).map(" ".join), min_size=2, max_size=40)


@settings(max_examples=150, deadline=None)
@given(rows=rows_strategy, most_common=st.integers(1, 8), npartitions=st.integers(1, 5), seed=st.integers(0, 99))
def test_sequence_vocabulary_is_ludwigs_for_any_partitioning(rows, most_common, npartitions, seed):
    feat = feature("sequence", symbols="ludwig", most_common=most_common)
    meta = fit_partitioned(feat, rows, npartitions, seed)
    vocab, freq = ludwig_vocabulary(rows, most_common)
    assert meta["idx2str"] == vocab
    assert meta["str2freq"] == freq
    assert meta["vocab_size"] == len(vocab)


def test_equal_counts_keep_first_occurrence_at_the_most_common_cut():
    rows = ["x y", "x y", "zulu", "bravo", "<UNK>", "yankee", "<UNK>"]  # <UNK>: two missing values, filled
    meta = fit_partitioned(feature("sequence", symbols="ludwig", most_common=4), rows, npartitions=3, seed=1)
    # top 4 by count, ties by first occurrence: x, y, <UNK>, zulu; by string order it would be bravo
    assert meta["idx2str"] == [*SPECIALS, "x", "y", "zulu"]
    assert meta["str2freq"]["<UNK>"] == 2


def test_text_vocabulary_orders_ties_by_first_occurrence():
    feat = feature("text", symbols="ludwig", lowercase=False)
    meta = fit_partitioned(feat, ["Plum, fig!", "fig Plum ."], npartitions=2, seed=3)
    assert meta["idx2str"] == [*SPECIALS, "Plum", "fig", ",", "!", "."]


def test_prepflow_symbols_keep_string_order_for_ties():
    meta = fit_partitioned(feature("sequence", most_common=2), ["zulu bravo", "yankee"], npartitions=1, seed=0)
    assert meta["idx2str"] == ["<PAD>", "<UNK>", "bravo", "yankee"]
