"""pandas, imported when first used: ``from core.lazy import pandas as pd``.

Why: the flow process of a cluster run imports every stage and feature module (to plan), but the
pandas code in them runs on the Dask workers. Importing pandas is a measurable share of the flow
process's CPU and memory on every run (`python -X importtime`; figures in benchmarks/RESULTS.md). This
is what Python 3.15's ``lazy import pandas as pd`` (PEP 810) will do; until then an attribute of the
object below imports pandas (once, under Python's import lock, so threads are safe) and returns
pandas' attribute. ``tests/integration/test_dask_cluster.py`` checks that a cluster run's flow process
never imports pandas.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """A module imported on its first attribute access; every access returns the module's attribute."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


pandas: Any = LazyModule("pandas")
