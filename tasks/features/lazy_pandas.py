"""``pd`` for the feature-type modules: pandas, imported on first use.

Parsing a config builds every feature type's ``Preprocessing`` model, so ``tasks.config`` imports these
modules; their pandas code only runs on data. Importing pandas (~0.3 s) is half of a rerun that finds
its artifact already published and reads no data. ``pd.Series`` etc. resolve through
``importlib.import_module``, which holds the import lock, so threads that touch ``pd`` first at the same
time still import pandas once; after that each lookup is a ``sys.modules`` hit.
"""

from __future__ import annotations

import importlib
from typing import Any


class _LazyPandas:
    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)

    def __repr__(self) -> str:
        return "<pandas, imported on first use>"


pd: Any = _LazyPandas()
