"""Fuzzing (issue 9): the config loader and the CSV ingest raise only prepflow's own errors.

Hypothesis generates near-valid configs (real keys, wrong and odd values, typos, nesting) and CSV
bytes (quotes, separators, newlines, BOMs, invalid UTF-8, numbers and non-numbers). Anything other
than a ``core.errors.PrepflowError`` is a bug. Example counts are tuned so both take ~60 s together.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import PrepflowError
from tasks.ingest import spec as ingest_spec

pytestmark = pytest.mark.integration

def fuzz(examples: int) -> settings:
    return settings(deadline=None, derandomize=True, max_examples=examples,
                    suppress_health_check=list(HealthCheck))

KEYS = ["input_features", "output_features", "preprocessing", "defaults", "validation", "publish", "stages",
        "name", "type", "column", "split", "probabilities", "seed", "balance", "oversample_minority",
        "fit_on", "sample_ratio", "formats", "channels", "shard_rows", "missing_value_strategy",
        "normalization", "most_common", "tokenizer", "max_sequence_length", "fill_value", "uses", "after",
        "params", "preprocesing", "on_failure", "raw", "bounds", "height", "media_root", "trainer"]
TYPES = ["number", "category", "binary", "text", "set", "bag", "sequence", "date", "vector", "timeseries",
         "image", "audio", "nubmer", "", "pkg.mod:Cls"]
scalars = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=True)
           | st.sampled_from(TYPES) | st.sampled_from(KEYS) | st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5),
                      max_leaves=20)
feature = st.fixed_dictionaries({"name": st.text(max_size=5) | st.sampled_from(["a", "b"]),
                                 "type": st.sampled_from(TYPES)},
                                optional={"preprocessing": st.dictionaries(st.sampled_from(KEYS), values, max_size=3),
                                          "column": values})
config = st.fixed_dictionaries(
    {"input_features": st.lists(feature, max_size=3) | values},
    optional={"output_features": st.lists(feature, max_size=2) | values,
              "preprocessing": st.dictionaries(st.sampled_from(KEYS), values, max_size=4),
              "defaults": st.dictionaries(st.sampled_from(TYPES), values, max_size=2),
              "publish": st.dictionaries(st.sampled_from(KEYS), values, max_size=3),
              "validation": st.dictionaries(st.sampled_from(KEYS), values, max_size=3),
              **{k: values for k in ("preprocesing", "stages")}}) | values


@fuzz(2000)
@given(config)
def test_config_loader_raises_only_prepflow_errors(data):
    from tasks.config.loader import parse_config

    try:
        parse_config(data)
    except PrepflowError:
        pass


@fuzz(8000)
@given(st.lists(st.sampled_from(list('ab,"\n\r\t 1.5e-x\\') + ["inf", "NaN", "é", "\ufeff"]), max_size=40)
       .map(lambda s: "".join(s).encode()) | st.binary(max_size=60),
       st.sampled_from([b"", b"a,b\n", b"\xef\xbb\xbfa,b\n", b'"a","b"\r\n']))
def test_csv_ingest_raises_only_prepflow_errors(body, header):
    from tasks.ingest import stage as ingest

    spec = ingest_spec.IngestSpec(columns={"a": "float64", "b": "string"}, format="csv")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.csv"
        path.write_bytes(header + body)
        try:
            ingest_spec.write_parts(ingest.read_batches(str(path), spec), spec, Path(tmp) / "out", str(path))
        except PrepflowError:
            pass
