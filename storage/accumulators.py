"""A fit's accumulator (the mergeable state of ``core.combiner.Combiner``) written into a cache entry and
read back, without pickle: JSON for the structure, ``.npy`` files for numpy arrays and Arrow IPC files for
Arrow tables beside it.

What it holds: None, bools, ints, floats (NaN and infinities too), strings, lists, tuples, sets, dicts (keys
of any of those scalar types: a dict whose keys are not all strings is stored as its pairs), pandas' nulls
(``pd.NA``, ``pd.NaT``: a raw gate's unexpected values, ``expectations.runner``), numpy scalars and
arrays, Arrow tables and ``storage.exact_sum.ExactSum``. Anything else raises ``TypeError`` naming the
type (``Unstorable``, a ``TypeError``): the caller then keeps fitting that state from the data instead of
caching it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from storage.exact_sum import ExactSum

STATE_FILE = "accumulator.json"
PANDAS_NULLS = ("NAType", "NaTType")


class Unstorable(TypeError):
    """A value ``dump`` cannot write without pickle."""


def dump(obj: Any, folder: Path) -> None:
    """``obj`` into ``folder`` (``STATE_FILE`` and its arrays and tables)."""
    folder.mkdir(parents=True, exist_ok=True)
    files: list[int] = [0]

    def enc(x: Any) -> Any:
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return int(x)
        if isinstance(x, (float, np.floating)):
            x = float(x)
            return x if math.isfinite(x) else {"__float__": repr(x)}
        if isinstance(x, np.bool_):
            return bool(x)
        if isinstance(x, ExactSum):
            return {"__exact__": [str(x.numerator), x.exponent]}
        if isinstance(x, np.ndarray):
            if x.dtype == object:
                raise Unstorable("an object array cannot be stored without pickle")
            name = f"a{files[0]}.npy"
            files[0] += 1
            np.save(folder / name, x, allow_pickle=False)
            return {"__npy__": name}
        if isinstance(x, pa.Table):
            name = f"t{files[0]}.arrow"
            files[0] += 1
            feather.write_feather(x, str(folder / name), compression="uncompressed")
            return {"__arrow__": name}
        if isinstance(x, tuple):
            return {"__tuple__": [enc(v) for v in x]}
        if isinstance(x, (set, frozenset)):
            return {"__set__": [enc(v) for v in x]}
        if type(x).__name__ in PANDAS_NULLS and type(x).__module__.startswith("pandas."):
            return {"__null__": type(x).__name__}
        if isinstance(x, list):
            return [enc(v) for v in x]
        if isinstance(x, dict):
            if all(isinstance(k, str) for k in x) and not any(k.startswith("__") for k in x):
                return {k: enc(v) for k, v in x.items()}
            return {"__pairs__": [[enc(k), enc(v)] for k, v in x.items()]}
        raise Unstorable(f"cannot store a {type(x).__name__} accumulator without pickle")

    (folder / STATE_FILE).write_text(json.dumps(enc(obj), sort_keys=True))


def load(folder: Path) -> Any:
    """What ``dump`` wrote into ``folder``."""

    def dec(x: Any) -> Any:
        if isinstance(x, list):
            return [dec(v) for v in x]
        if not isinstance(x, dict):
            return x
        if "__float__" in x:
            return float(x["__float__"])
        if "__exact__" in x:
            return ExactSum(int(x["__exact__"][0]), int(x["__exact__"][1]))
        if "__npy__" in x:
            return np.load(folder / x["__npy__"], allow_pickle=False)
        if "__arrow__" in x:
            return feather.read_table(str(folder / x["__arrow__"]), memory_map=False)
        if "__tuple__" in x:
            return tuple(dec(v) for v in x["__tuple__"])
        if "__set__" in x:
            return {dec(v) for v in x["__set__"]}
        if "__null__" in x:
            from core.lazy import pandas as pd  # pandas only for an entry that holds one of its nulls

            return pd.NA if x["__null__"] == "NAType" else pd.NaT
        if "__pairs__" in x:
            return {_key(dec(k)): dec(v) for k, v in x["__pairs__"]}
        return {k: dec(v) for k, v in x.items()}

    return dec(json.loads((folder / STATE_FILE).read_text()))


def _key(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k
