"""The report's top tokens by a numpy sort (issue 19: a vocabulary of 10^5 tokens was sorted in Python):
the same tokens, counts and order as the Python sort gave."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.report import view as report

tokens = st.text(min_size=1, max_size=6)
counts = st.one_of(st.integers(-3, 10**12), st.floats(-2, 50, allow_nan=False))


def reference_top_tokens(meta: dict) -> tuple[list[tuple[str, int]], int]:
    """The report's top tokens as written before (Python sort of every token)."""
    freq = meta.get("str2freq") or {}
    order = meta.get("idx2str") or sorted(freq, key=lambda t: -freq[t])
    toks = [(t, int(freq.get(t, 0))) for t in order if freq.get(t, 0) > 0]
    toks.sort(key=lambda tn: -tn[1])
    return toks[:report.TOP_TOKENS], max(len(toks) - report.TOP_TOKENS, 0)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(tokens, counts, max_size=60), st.booleans(), st.lists(tokens, max_size=5))
def test_top_tokens_equals_python_sort(freq, with_order, unseen):
    """Ties (many equal counts) keep vocabulary order; zero, negative and fractional counts as before;
    vocabulary entries without a count are left out."""
    meta = {"str2freq": freq}
    if with_order:
        meta["idx2str"] = list(dict.fromkeys([*freq, *unseen]))
    assert report.top_tokens(meta) == reference_top_tokens(meta)


def test_top_tokens_counts_the_rest():
    freq = {f"t{i}": 1 + i % 3 for i in range(report.TOP_TOKENS + 7)}
    top, rest = report.top_tokens({"str2freq": freq, "idx2str": list(freq)})
    assert rest == 7 and [n for _t, n in top] == sorted((n for n in freq.values()), reverse=True)[:len(top)]
    assert top[0] == ("t2", 3)  # the first 3 in vocabulary order
