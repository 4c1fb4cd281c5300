"""The base of prepflow's expectation kernels (``expectations.kernels``): a kernel reads one pandas partition (``partial``) and merges the partials (``merge``) into the result Great Expectations gives for the whole frame; the helpers every kernel shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.lazy import pandas as pd
from expectations import results

_BETWEEN_TYPE_ERROR = "Column values, min_value, and max_value must either be None or of the same type."


class Rescan:
    """What a kernel's merge returns when the partials it chose cannot give the exact result (see
    ``ValuesToBeUnique``): the runner scans the partitions again with the kernel's ``exact`` set."""


RESCAN = Rescan()


class Flag:
    """What ``ValuesToBeUnique``'s merge returns when the workers' blocks found repeated keys: ``keys``, the
    repeated ones (sorted, distinct). The runner has each partition flag its rows holding one
    (``ValuesToBeUnique.flag``, on the workers) and merges those (``merge_flagged``): the exact result,
    without this process receiving every key."""

    def __init__(self, summary: dict, keys: np.ndarray):
        self.summary = summary
        self.keys = keys


class KernelError(Exception):
    """An expectation that cannot be evaluated on the data (GX raises for it too); its message is
    reported in the result."""


def missing_column(column: str) -> str:
    return f'Error: The column "{column}" in BatchData does not exist.'


def is_numeric(dtype) -> bool:
    return (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)) \
        and not isinstance(dtype, pd.CategoricalDtype)


def numbers(series: pd.Series) -> np.ndarray:
    """A null-free numeric series as a numpy array (masked and Arrow dtypes as their numpy dtype)."""
    numpy_dtype = getattr(series.dtype, "numpy_dtype", None)
    return series.to_numpy(dtype=numpy_dtype) if numpy_dtype is not None else series.to_numpy()


def _float_bound(value):
    """GX reports integer bounds as floats (its pydantic field type)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Kernel:
    """One generated expectation. Subclasses set ``columns`` (the columns it reads)."""

    type: str = ""

    def __init__(self, kwargs: dict, columns: list[str]):
        # as GX reports them: without None and without the defaults (mostly 1, strict bounds off)
        self.kwargs = {k: v for k, v in kwargs.items() if v is not None and not (k == "mostly" and v == 1)
                       and not (k in ("strict_min", "strict_max") and v is False)}
        if "mostly" in self.kwargs:
            self.kwargs["mostly"] = float(self.kwargs["mostly"])
        self.table_columns = list(columns)
        self.column = kwargs.get("column")

    def reported_kwargs(self) -> dict:
        return dict(self.kwargs)

    @property
    def absent(self) -> str | None:
        """The column this expectation names that the table lacks, if any."""
        return self.column if self.column is not None and self.column not in self.table_columns else None

    def partial(self, frame: pd.DataFrame) -> Any:
        raise NotImplementedError

    def result(self, partials: list) -> tuple[bool, dict]:
        raise NotImplementedError

    def merge(self, partials: list) -> dict:
        if self.absent is not None:
            return results.failed(self.type, self.reported_kwargs(), missing_column(self.absent))
        errors = [p for p in partials if isinstance(p, KernelError)]
        if errors:
            return results.failed(self.type, self.reported_kwargs(), str(errors[0]))
        outcome = self.result(partials)
        if outcome is RESCAN or isinstance(outcome, Flag):
            return outcome
        success, result = outcome
        return results.entry(self.type, self.reported_kwargs(), success, result)

    # A kernel that ``combines`` merges its partials on the workers, in the tree that gathers the partitions
    # (``expectations.runner``): ``leaf(partial, index)`` starts a state from partition ``index``'s partial,
    # ``combine(*states)`` merges states (associative; the tree may take the partitions in any order) and
    # ``finish(state)`` gives the list of partials that ``merge`` takes in this process.
    combines = False

    def per_file(self, dtypes: dict[str, str]) -> bool:
        """Whether this kernel's partials are plain values a cache entry keeps (counts, the first unexpected
        values and their rows, distinct values), so that a file's partials can be kept for the next run
        (``expectations.runner``). ``dtypes``: the table's columns' pandas dtype names."""
        return True

    def scan(self, frame: pd.DataFrame) -> Any:
        """``partial`` guarded: a missing column gives nothing, an evaluation error its message."""
        if self.absent is not None:
            return None
        try:
            return self.partial(frame)
        except KernelError as exc:
            return exc
