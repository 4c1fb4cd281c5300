"""Split types and sampling: properties (hypothesis) of each splitter, and the stage end to end
(independent of npartitions, sampling applied before the split)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, DataError
from storage.cache import StageCache
from tasks.config.loader import parse_config
from tasks.graph import execute
from tasks.ingest import stage as ingest
from tasks.runtime.context import RunContext
from tasks.split import dates as split_dates
from tasks.split import rows as split_rows
from tasks.split import stage as split
from tasks.split import stratify
from tests.helpers import write_csv

PROBS = st.sampled_from([[0.7, 0.1, 0.2], [0.8, 0.2, 0.0], [0.5, 0.25, 0.25], [0.34, 0.33, 0.33], [0.9, 0.05, 0.05],
                         [0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rows(n: int, seed: int) -> np.ndarray:
    """Sorted, gappy row numbers (as after sampling)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(np.arange(n * 3), size=n, replace=False))


# ---- stratify ----------------------------------------------------------------------------------

@st.composite
def class_columns(draw):
    sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=6))
    labels = [f"c{i}" for i, size in enumerate(sizes) for _ in range(size)]
    order = draw(st.permutations(range(len(labels))))
    return pd.Series([labels[i] for i in order], dtype="string")


@SETTINGS
@given(values=class_columns(), probabilities=PROBS, seed=st.integers(0, 2**31), row_seed=st.integers(0, 99))
def test_stratify_is_complete_proportional_per_class_and_nonempty(values, probabilities, seed, row_seed):
    rows = _rows(len(values), row_seed)
    out = stratify.stratify_split(values, rows, probabilities, seed)
    assert out.dtype == np.int8 and set(np.unique(out)) <= {0, 1, 2}  # complete and disjoint: one split per row
    n = len(values)
    sizes = values.value_counts()
    expected = {c: stratify.class_counts(int(k), probabilities) for c, k in sizes.items()}
    needed_fixup = n >= 3 and any(p > 0 and sum(e[s] for e in expected.values()) == 0
                                  for s, p in enumerate(probabilities))
    for c, k in sizes.items():
        got = np.bincount(out[(values == c).to_numpy()], minlength=3)
        if k == 1 and not needed_fixup:
            assert got.tolist() == ([1, 0, 0] if probabilities[0] > 0 else got.tolist())
        bound = 2 if needed_fixup else 1
        assert np.all(np.abs(got - np.array(probabilities) * k) < bound), (c, k, got)
    if n >= 3:
        for s, p in enumerate(probabilities):
            assert p == 0 or (out == s).any()
    for s, p in enumerate(probabilities):
        assert p > 0 or not (out == s).any()


@SETTINGS
@given(values=class_columns(), seed=st.integers(0, 2**31))
def test_stratify_depends_on_rows_not_on_their_order_in_the_call(values, seed):
    rows = _rows(len(values), 1)
    out = stratify.stratify_split(values, rows, [0.6, 0.2, 0.2], seed)
    perm = np.random.default_rng(seed).permutation(len(rows))
    shuffled = stratify.stratify_split(values.iloc[perm].reset_index(drop=True), rows[perm], [0.6, 0.2, 0.2], seed)
    assert np.array_equal(out[perm], shuffled)


def test_stratify_single_row_classes_go_to_train_and_numbers_match_their_strings():
    values = pd.Series([1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 3.0], dtype="float64")
    out = stratify.stratify_split(values, np.arange(11), [0.6, 0.2, 0.2], 0)
    assert out[10] == 0
    as_text = stratify.stratify_split(values.map(lambda v: str(int(v))).astype("string"), np.arange(11),
                                   [0.6, 0.2, 0.2], 0)
    assert np.array_equal(out, as_text)
    assert np.bincount(out[:5], minlength=3).tolist() == [3, 1, 1]


# ---- datetime ----------------------------------------------------------------------------------

@SETTINGS
@given(days=st.lists(st.integers(0, 30), min_size=1, max_size=80), probabilities=PROBS, fmt=st.sampled_from(
    ["%Y-%m-%d", "%m/%d/%Y", "%d %B %Y", "%Y-%m-%dT%H:%M:%S"]))
def test_datetime_orders_splits_keeps_ties_together_and_is_nonempty(days, probabilities, fmt):
    dates = pd.Timestamp("2021-01-01") + pd.to_timedelta(days, unit="D")
    values = pd.Series(dates.strftime(fmt), dtype="string")
    rows = np.arange(len(days))
    try:
        out = split_dates.datetime_split(values, rows, probabilities, "d")
    except DataError as exc:  # only when there are fewer distinct dates than splits to fill
        assert len(days) >= 3 and len(set(days)) < sum(p > 0 for p in probabilities), exc
        assume(False)
        return
    day = np.array(days)
    present = [s for s in range(3) if (out == s).any()]
    for a, b in zip(present, present[1:], strict=False):
        assert day[out == a].max() < day[out == b].min()  # older split first, no date in two splits
    if len(days) >= 3:
        assert all(p == 0 or (out == s).any() for s, p in enumerate(probabilities))
    assert all(p > 0 or not (out == s).any() for s, p in enumerate(probabilities))


def test_datetime_ties_at_a_boundary_go_to_the_earlier_split():
    days = [1] * 13 + [2] * 2 + [3] * 2 + [4] * 3  # exact cuts 14 and 16 fall inside day 2's and day 3's runs
    values = pd.Series([f"2022-03-{d:02d}" for d in days])
    out = split_dates.datetime_split(values, np.arange(20), [0.7, 0.1, 0.2], "d")
    assert out.tolist() == [0] * 15 + [1] * 2 + [2] * 3


def test_datetime_ties_go_to_the_later_split_only_when_the_earlier_would_empty_a_split():
    days = [1] * 6 + [2] * 2 + [3] * 2  # forward past day 2 would leave validation empty
    values = pd.Series([f"2022-03-{d:02d}" for d in days])
    out = split_dates.datetime_split(values, np.arange(10), [0.7, 0.1, 0.2], "d")
    assert out.tolist() == [0] * 6 + [1, 1] + [2, 2]


def test_datetime_counts_are_exact_without_ties_and_accept_timestamps_and_numbers():
    stamps = pd.Series(pd.date_range("2020-01-01", periods=20, freq="h", tz="Europe/Berlin")[::-1])
    out = split_dates.datetime_split(stamps, np.arange(20), [0.7, 0.1, 0.2], "t")
    assert np.bincount(out).tolist() == [14, 2, 4]
    assert out[-1] == 0 and out[0] == 2  # the newest rows (listed first) are the test split
    numbers = pd.Series(np.arange(20.0)[::-1])
    assert np.array_equal(split_dates.datetime_split(numbers, np.arange(20), [0.7, 0.1, 0.2], "t"), out)


@pytest.mark.parametrize("value,message", [("not a date", r"row 2, column 'when': .*cannot parse 'not a date'"),
                                            (None, r"row 2, column 'when': .*missing value")])
def test_datetime_bad_values_name_row_and_column(value, message):
    values = pd.Series(["2020-01-01", "2020-01-02", value, "2020-01-03"], dtype="string")
    with pytest.raises(DataError, match=message):
        split_dates.datetime_split(values, np.array([0, 1, 2, 3]), [0.7, 0.1, 0.2], "when")


def test_datetime_format_hint_is_used():
    values = pd.Series(["01/02/2020", "02/01/2020", "03/01/2020", "01/03/2020"])
    month_first = split_dates.datetime_split(values, np.arange(4), [0.5, 0.25, 0.25], "d")
    day_first = split_dates.datetime_split(values, np.arange(4), [0.5, 0.25, 0.25], "d", "%d/%m/%Y")
    assert month_first.tolist() == [0, 1, 2, 0]
    assert day_first.tolist() == [1, 0, 0, 2]  # 2 Jan, 3 Jan | 1 Feb | 1 Mar


# ---- hash --------------------------------------------------------------------------------------

KEYS = st.lists(st.text(min_size=1, max_size=8), min_size=150, max_size=300, unique=True)


@SETTINGS
@given(keys=KEYS, extra=st.lists(st.text(min_size=1, max_size=8), max_size=50), seed=st.integers(0, 2**31))
def test_hash_split_of_a_key_never_changes_when_rows_are_added_or_removed(keys, extra, seed):
    probabilities = [0.6, 0.2, 0.2]
    base = split.hash_split(pd.Series(keys, dtype="string"), np.arange(len(keys)), probabilities, "k", seed)
    grown_keys = extra + keys[::-1] + keys[:5]  # new rows, other positions, duplicated keys
    grown = split.hash_split(pd.Series(grown_keys, dtype="string"), np.arange(len(grown_keys)), probabilities,
                             "k", seed)
    by_key = dict(zip(keys, base.tolist(), strict=True))
    for k, s in zip(grown_keys, grown.tolist(), strict=True):
        if k in by_key:
            assert by_key[k] == s
    subset = keys[::3]
    small = split.hash_split(pd.Series(subset, dtype="string"), np.arange(len(subset)), [0.6, 0.2, 0.2], "k", seed)
    assert small.tolist() == [by_key[k] for k in subset]


def test_hash_split_proportions_numbers_and_golden_values():
    keys = pd.Series(np.arange(20000).astype(str), dtype="string")
    out = split.hash_split(keys, np.arange(20000), [0.7, 0.1, 0.2], "id", 42)
    share = np.bincount(out, minlength=3) / 20000
    assert np.all(np.abs(share - [0.7, 0.1, 0.2]) < 0.015)  # binomial sd ~0.003
    as_float = split.hash_split(pd.Series(np.arange(20000, dtype="float64")), np.arange(20000), [0.7, 0.1, 0.2],
                                "id", 42)
    assert np.array_equal(out, as_float)  # 7.0 hashes as "7"
    # pinned: a change here silently moves rows between splits of every user's dataset
    assert split.key_hash("user-1", 42) == 0x9D2D925C3C7485BB
    assert split.key_hash("user-1", 43) != split.key_hash("user-1", 42)
    assert out[:12].tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0]


@SETTINGS
@given(keys=st.lists(st.text(max_size=12), min_size=1, max_size=60),
       p=st.sampled_from([[0.8, 0.1, 0.1], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0],
                          [0.3, 0.3, 0.4]]),
       seed=st.integers(0, 2**31))
def test_hash_ids_put_each_key_where_its_own_hash_does(keys, p, seed):
    """The bulk hashes and the thresholds' comparisons (a threshold of 2**64: every key below it) give each
    key the split of ``key_hash`` against the cumulative probabilities, for any key, Unicode included."""
    out = split.hash_ids(pd.Series(keys, dtype="string"), np.arange(len(keys)), p, "k", seed)
    below = [sum(p[:1]) * 2**64, sum(p[:2]) * 2**64]
    for key, got in zip(keys, out.tolist(), strict=True):
        h = split.key_hash(key, seed)
        want = 0 if h < below[0] or p[0] >= 1 else 1 if h < below[1] or p[0] + p[1] >= 1 else 2
        assert got == want, key


def test_hash_split_empty_split_and_missing_key_are_clear_errors():
    with pytest.raises(DataError, match=r"column 'k': the hash split puts no key in"):
        split.hash_split(pd.Series(["a", "a", "a", "a"]), np.arange(4), [0.4, 0.3, 0.3], "k", 0)
    with pytest.raises(DataError, match=r"row 1, column 'k'.*missing value"):
        split.hash_split(pd.Series(["a", None, "b"], dtype="string"), np.arange(3), [0.4, 0.3, 0.3], "k", 0)


# ---- sampling ----------------------------------------------------------------------------------

@SETTINGS
@given(n=st.integers(1, 500), ratio=st.floats(0.01, 1.0), size=st.one_of(st.none(), st.integers(1, 600)),
       seed=st.integers(0, 2**31))
def test_sample_mask_keeps_an_exact_seeded_count(n, ratio, size, seed):
    mask = split.sample_mask(n, ratio, size, seed)
    expected = n if size is None else min(size, n)
    if ratio < 1.0:
        expected = min(expected, int(round(n * ratio)))
    assert int(mask.sum()) == expected
    assert np.array_equal(mask, split.sample_mask(n, ratio, size, seed))


def test_sample_mask_differs_by_seed_and_is_nested_in_ratio():
    a, b = split.sample_mask(1000, 0.3, None, 1), split.sample_mask(1000, 0.3, None, 2)
    assert not np.array_equal(a, b)
    small, large = split.sample_mask(1000, 0.1, None, 1), split.sample_mask(1000, 0.5, None, 1)
    assert not (small & ~large).any()  # a smaller ratio keeps a subset of a larger one


# ---- the stage: npartitions, sampling before the split -----------------------------------------

def _frame(n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({
        "x": rng.normal(size=n),
        "label": rng.choice(["a", "b", "c", "rare"], n, p=[0.6, 0.25, 0.145, 0.005]),
        "when": (pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 200, n), unit="D")).strftime("%Y-%m-%d"),
        "user": [f"u{i}" for i in rng.integers(0, 150, n)],
    })


def _stage(tmp_path, dataset, split_cfg: dict, npartitions: int, **pre) -> np.ndarray:
    config = parse_config({"input_features": [{"name": "x", "type": "number"}],
                           "output_features": [{"name": "label", "type": "category"}],
                           "preprocessing": {"split": split_cfg, **pre}})
    ctx = RunContext(config, str(dataset), StageCache(tmp_path / f"cache{npartitions}"), npartitions)
    return np.array(execute(split.NODE, ctx, [execute(ingest.NODE, ctx, [])]).assignment())


SPLIT_CONFIGS = {
    "stratify": {"type": "stratify", "column": "label", "probabilities": [0.7, 0.1, 0.2], "seed": 3},
    "datetime": {"type": "datetime", "column": "when", "probabilities": [0.7, 0.1, 0.2]},
    "hash": {"type": "hash", "column": "user", "probabilities": [0.7, 0.1, 0.2], "seed": 3},
    "random": {"type": "random", "probabilities": [0.7, 0.1, 0.2], "seed": 3},
}


@pytest.mark.parametrize("kind", sorted(SPLIT_CONFIGS))
def test_stage_output_is_independent_of_npartitions(tmp_path, kind, monkeypatch):
    monkeypatch.setattr(ingest, "PART_ROWS", 64)  # several Parquet parts, so repartitioning really splits
    dataset = write_csv(_frame(), tmp_path / "data.csv")
    outs = [_stage(tmp_path, dataset, SPLIT_CONFIGS[kind], n) for n in (1, 3, 7)]
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    assert set(np.unique(outs[0])) == {0, 1, 2}


def test_stage_samples_before_stratifying(tmp_path):
    df = _frame()
    dataset = write_csv(df, tmp_path / "data.csv")
    out = _stage(tmp_path, dataset, SPLIT_CONFIGS["stratify"], 2, sample_ratio=0.5, sample_seed=9)
    kept = out >= 0
    assert kept.sum() == 300
    assert np.array_equal(kept, split.sample_mask(600, 0.5, None, 9))
    for c, k in df.loc[kept, "label"].value_counts().items():
        got = np.bincount(out[kept & (df["label"] == c).to_numpy()], minlength=3)
        assert np.all(np.abs(got - np.array([0.7, 0.1, 0.2]) * k) < 1), (c, got)


def test_stage_datetime_error_names_the_row(tmp_path):
    df = _frame(50)
    df.loc[17, "when"] = "31/31/2020"
    dataset = write_csv(df, tmp_path / "data.csv")
    with pytest.raises(DataError, match=r"row 17, column 'when'.*'31/31/2020'"):
        _stage(tmp_path, dataset, SPLIT_CONFIGS["datetime"], 1)


def test_stratify_by_a_number_feature_is_a_config_error(tmp_path):
    dataset = write_csv(_frame(30), tmp_path / "data.csv")
    with pytest.raises(ConfigError, match=r"stratify split needs a binary or category column; 'x' is the number"):
        _stage(tmp_path, dataset, {"type": "stratify", "column": "x"}, 1)


@settings(max_examples=300, deadline=None)
@given(rows=st.sets(st.integers(0, 10**12), max_size=60),
       weights=st.lists(st.integers(0, 5), min_size=3, max_size=3).filter(any),
       seed=st.integers(0, 2**31 - 1))
def test_random_split_is_the_rank_of_each_rows_hash(rows, weights, seed):
    """The random split by selection equals its definition: sort the rows' splitmix64 hashes; the first
    counts[0] are train, the next counts[1] validation, the rest test."""
    active = np.array(sorted(rows), dtype=np.int64)
    probabilities = [w / sum(weights) for w in weights]
    counts = split_rows.split_counts(len(active), probabilities)
    ranks = np.empty(len(active), dtype=np.int64)
    ranks[np.argsort(split_rows.mix64(seed, active), kind="stable")] = np.arange(len(active))
    expected = np.where(ranks < counts[0], 0, np.where(ranks < counts[0] + counts[1], 1, 2))
    assert split.random_split(active, probabilities, seed).tolist() == expected.tolist()


def test_a_stable_random_split_never_moves_a_row_when_rows_are_added(tmp_path):
    """``exact: false``: a row's split is its own hash's against the probabilities, so appending rows keeps
    every earlier row in its split (the exact split re-cuts by rank: some rows move)."""
    cfg = {"type": "random", "probabilities": [0.7, 0.1, 0.2], "seed": 3}
    small, large = _frame(300), _frame(600)
    for exact, moves in ((False, False), (None, True)):
        split_cfg = {**cfg, **({} if exact is None else {"exact": exact})}
        a = _stage(tmp_path / f"a{exact}", write_csv(small, tmp_path / f"a{exact}.csv"), split_cfg, 2)
        b = _stage(tmp_path / f"b{exact}", write_csv(large, tmp_path / f"b{exact}.csv"), split_cfg, 3)
        assert (not np.array_equal(a, b[:300])) == moves
        if exact is False:  # each row where its own hash puts it
            rows = np.arange(600, dtype=np.int64)
            keys = split_rows.mix64(3, rows).astype(np.float64) / 2.0**64
            assert b.tolist() == np.where(keys < 0.7, 0, np.where(keys < 0.8, 1, 2)).tolist()


def test_exact_false_is_only_for_the_random_split():
    with pytest.raises(ConfigError, match="exact.*random split"):
        parse_config({"input_features": [{"name": "x", "type": "number"}],
                      "preprocessing": {"split": {"type": "hash", "column": "x", "exact": False}}})
