"""The datetime split on the workers (tasks.split.dates.datetime_on_workers) writes the ``split.npy`` of the
definition (``datetime_split`` after ``sample_mask``) for any partitioning, sampling and probabilities, with
datetimes, numbers (-0.0 is 0.0), ISO strings and formatted strings; a missing or unparseable date is the
same error; strings whose format would be guessed, and forward cuts that leave a split empty, go to one
process (``NotOnWorkers``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DataError
from tasks.config.constants import ROW
from tasks.split import stage as split
from tasks.split.dates import NotOnWorkers, datetime_on_workers, datetime_split

probabilities = st.sampled_from([[0.8, 0.1, 0.1], [0.6, 0.2, 0.2], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
days = st.integers(0, 12)


def _column(kind: str, day_list: list[int]) -> tuple[pd.Series, str | None]:
    stamps = pd.Timestamp("2024-01-01") + pd.to_timedelta(day_list, unit="D")
    if kind == "datetime":
        return pd.Series(stamps), None
    if kind == "number":
        return pd.Series([-0.0 if d == 0 else float(d) for d in day_list]), None
    if kind == "iso":
        return pd.Series(stamps.strftime("%Y-%m-%dT%H:%M:%S"), dtype=object), None
    return pd.Series(stamps.strftime("%d.%m.%Y"), dtype=object), "%d.%m.%Y"


def _definition(column, n, probs, ratio, fmt):
    keep = split.sample_mask(n, ratio, None, 3)
    assign = np.full(n, -1, dtype=np.int8)
    rows = np.flatnonzero(keep)
    assign[rows] = datetime_split(column[keep].reset_index(drop=True), rows, probs, "d", fmt)
    return assign


def _on_workers(tmp_path, column, n, probs, ratio, fmt, cuts):
    frame = pd.DataFrame({"d": column, ROW: np.arange(n, dtype=np.int64)})
    bounds = [0, *sorted({min(c, n) for c in cuts}), n]
    parts = [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    keep, sample = split._sample_on_workers(n, ratio, None, 3)
    path = tmp_path / "split.npy"
    counts = datetime_on_workers(parts, n, SimpleNamespace(column="d", probabilities=probs), sample, path, fmt)
    assign = np.load(path)
    assert counts == [int((assign == i).sum()) for i in range(3)] and sum(counts) == keep
    assert not (tmp_path / "_dates").exists()  # the keys files are gone
    return assign


@settings(max_examples=150, deadline=None)
@given(st.lists(days, min_size=1, max_size=60), probabilities, st.sampled_from(["datetime", "number", "iso", "fmt"]),
       st.lists(st.integers(0, 60), max_size=4), st.sampled_from([1.0, 0.6]))
def test_workers_write_the_definitions_split(tmp_path_factory, day_list, probs, kind, cuts, ratio):
    column, fmt = _column(kind, day_list)
    n = len(column)
    try:
        expected = _definition(column, n, probs, ratio, fmt)
    except DataError:
        expected = None  # too few distinct dates: the definition's error (the workers defer to it)
    tmp = tmp_path_factory.mktemp("d")
    try:
        got = _on_workers(tmp, column, n, probs, ratio, fmt, cuts)
    except NotOnWorkers:
        return  # the forward cuts left a split empty: one process decides, as the definition does
    assert expected is not None and got.tolist() == expected.tolist()


def test_many_rows_with_long_runs_select_exactly(tmp_path, monkeypatch):
    import tasks.split.dates as split_dates

    monkeypatch.setattr(split_dates, "BINS", 16)
    monkeypatch.setattr(split_dates, "SMALL", 8)  # several narrowing rounds, and bins that hold one date
    rng = np.random.default_rng(2)
    column, fmt = _column("datetime", sorted(rng.integers(0, 40, 20_000).tolist()))
    expected = _definition(column, 20_000, [0.7, 0.2, 0.1], 0.9, fmt)
    assert _on_workers(tmp_path, column, 20_000, [0.7, 0.2, 0.1], 0.9, fmt, [5_000, 9_999, 15_000]).tolist() == \
        expected.tolist()


def test_missing_and_unparseable_dates_are_the_definitions_errors(tmp_path):
    column = pd.Series(["2024-01-02", "2024-01-03", "2024-13-40", "2024-01-01", None, "2024-01-05"], dtype=object)
    with pytest.raises(DataError) as definition:
        _definition(column, 6, [0.6, 0.2, 0.2], 1.0, None)
    with pytest.raises(DataError) as workers:
        _on_workers(tmp_path, column, 6, [0.6, 0.2, 0.2], 1.0, None, [3])
    assert str(workers.value) == str(definition.value) and "row 4" in str(workers.value)  # missing first
    column[4] = "2024-01-04"
    fmt_column = pd.Series(["02.01.2024", "03.01.2024", "40.13.2024", "01.01.2024"], dtype=object)
    with pytest.raises(DataError) as definition:
        _definition(fmt_column, 4, [0.5, 0.25, 0.25], 1.0, "%d.%m.%Y")
    with pytest.raises(DataError) as workers:
        _on_workers(tmp_path, fmt_column, 4, [0.5, 0.25, 0.25], 1.0, "%d.%m.%Y", [2])
    assert str(workers.value) == str(definition.value) and "row 2" in str(workers.value)


def test_strings_whose_format_would_be_guessed_go_to_one_process(tmp_path):
    column = pd.Series(["01/02/2024", "01/03/2024", "01/04/2024", "01/05/2024"], dtype=object)
    with pytest.raises(NotOnWorkers):
        _on_workers(tmp_path, column, 4, [0.5, 0.25, 0.25], 1.0, None, [2])
