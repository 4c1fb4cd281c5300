"""A rerun whose artifact is already published reads no data, so it must not pay for the data stack:
parsing the config and computing the artifact id import neither pandas nor Dask (~0.4 s of a 1 s rerun)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFIG = {
    "input_features": [{"name": t, "type": t} for t in ("number", "binary", "category", "set", "bag", "sequence",
                                                        "text", "timeseries", "vector", "date", "image", "audio")],
    "output_features": [{"name": "y", "type": "category"}],
}

PROBE = """
import json, sys
sys.path.insert(0, {root!r})
import flows.cli  # noqa: F401  (what `prepflow run` imports before it looks for a published artifact)
from tasks import publish
from tasks.config import parse_config

config = parse_config(json.loads({config!r}))
art_id = publish.artifact_id("0" * 64, publish.normalized_config(config))
print(json.dumps({{"id": art_id, "loaded": [m for m in ("pandas", "dask", "tasks.encode") if m in sys.modules]}}))
"""


def test_the_artifact_id_needs_neither_pandas_nor_dask():
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT), config=json.dumps(CONFIG))],
                         capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["loaded"] == [] and len(result["id"]) == 24


def test_the_features_still_work_on_data_through_the_lazy_pandas():
    import pandas as pd

    from tasks.features.lazy_pandas import pd as lazy

    assert lazy.Series is pd.Series and isinstance(lazy.NA, type(pd.NA))
