"""The category counts' merge (tasks.category_vocab.merge_counts): exact per (feature, value) sums and first
rows, whatever the grouping of the partitions' tables, pandas (a shuffle's output) or Arrow."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.category_vocab import COUNT, FEATURE, FIRST, VALUE, merge_counts

rows = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", "", "ü", "a b", "<UNK>"]),
                          st.integers(1, 2**40), st.integers(0, 10**6)), max_size=30)


def _table(part: list[tuple], as_pandas: bool):
    table = pa.table({FEATURE: pa.array([r[0] for r in part], pa.int32()), VALUE: pa.array([r[1] for r in part], pa.string()),
                      COUNT: pa.array([r[2] for r in part], pa.int64()), FIRST: pa.array([r[3] for r in part], pa.int64())})
    if not as_pandas:
        return table
    return pd.DataFrame({FEATURE: table.column(FEATURE).to_numpy(), COUNT: table.column(COUNT).to_numpy(),
                         VALUE: pd.array(table.column(VALUE), dtype=pd.StringDtype("pyarrow")),
                         FIRST: table.column(FIRST).to_numpy()})


def _as_dict(table: pa.Table) -> dict:
    out = {}
    for f, v, c, first in zip(*(table.column(k).to_pylist() for k in (FEATURE, VALUE, COUNT, FIRST)), strict=True):
        assert (f, v) not in out  # one row per distinct (feature, value)
        out[(f, v)] = (c, first)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, min_size=1, max_size=6), st.integers(2, 4), st.booleans())
def test_merging_in_any_grouping_gives_the_exact_sums_and_first_rows(parts, fan_in, as_pandas):
    counts, firsts = Counter(), {}
    for part in parts:
        for f, v, c, first in part:
            counts[(f, v)] += c
            firsts[(f, v)] = min(firsts.get((f, v), first), first)
    level = [_table(p, as_pandas) for p in parts]
    while len(level) > 1:  # a tree of fan_in-table merges, as a local run does
        level = [merge_counts(level[i:i + fan_in]) for i in range(0, len(level), fan_in)]
    merged = merge_counts(level)
    assert _as_dict(merged) == {k: (counts[k], firsts[k]) for k in counts}
    assert merged.column(COUNT).type == pa.int64() and np.issubdtype(merged.column(FEATURE).to_numpy().dtype, np.integer)
