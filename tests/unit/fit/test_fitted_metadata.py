"""The fitted metadata's two files (tasks/runtime/fitted_metadata.py, issue 19): the full file written from the
workers' pre-serialized vocabularies has the bytes ``json.dumps`` gives, and the summary the flow process
reads holds no inline vocabulary."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.runtime import fitted_metadata
from tasks.runtime.fitted_metadata import VOCABULARY_KEYS
from tasks.runtime.outputs import Fitted
from tests.helpers import run, write_csv

TOKENS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
SMALL = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                  st.none(), TOKENS, st.lists(st.integers(0, 9), max_size=3),
                  st.dictionaries(TOKENS, st.integers(0, 9), max_size=3))
VOCABULARY = st.one_of(st.lists(TOKENS, max_size=8), st.dictionaries(TOKENS, st.integers(0, 10**6), max_size=8),
                       st.dictionaries(TOKENS, st.floats(allow_nan=False, allow_infinity=False), max_size=4))
META = st.dictionaries(st.one_of(st.sampled_from(sorted(VOCABULARY_KEYS)), TOKENS), st.none(), max_size=8).flatmap(
    lambda keys: st.fixed_dictionaries({k: VOCABULARY if k in VOCABULARY_KEYS else SMALL for k in keys}))
METADATA = st.dictionaries(TOKENS, META, max_size=5)


@settings(max_examples=300, deadline=None)
@given(METADATA)
def test_packed_vocabularies_dump_to_the_bytes_of_json_dumps(metadata):
    packed = {name: fitted_metadata.pack(meta) for name, meta in metadata.items()}
    assert fitted_metadata.dumps(packed) == json.dumps(metadata, sort_keys=True, ensure_ascii=False)
    # some features packed, some not (the flow's own fits), nested one level deeper: the same bytes
    mixed = {name: packed[name] if i % 2 else meta for i, (name, meta) in enumerate(metadata.items())}
    assert fitted_metadata.dumps({"m": mixed}) == json.dumps({"m": metadata}, sort_keys=True, ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(METADATA)
def test_the_summary_drops_only_the_vocabularies_and_names_them(metadata):
    summary = fitted_metadata.summary(metadata)
    assert summary.keys() == metadata.keys()
    for name, meta in metadata.items():
        inline = sorted(k for k in meta if k in VOCABULARY_KEYS)
        kept = {k: v for k, v in summary[name].items() if k != fitted_metadata.INLINE_KEY}
        assert kept == {k: v for k, v in meta.items() if k not in VOCABULARY_KEYS}
        assert summary[name].get(fitted_metadata.INLINE_KEY, []) == inline
        assert fitted_metadata.has_vocabulary(summary[name]) == fitted_metadata.has_vocabulary(meta)


def test_a_run_writes_both_files_and_the_flow_reads_the_summary(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({
        "c": rng.choice(["a", "b", "é", "<UNK>", "zz"], n),  # inline, a vocabulary built on the workers' side
        "s": [" ".join(rng.choice(["x", "y", "z"], 2)) for _ in range(n)],  # set: fitted in the flow's merge
        "t": rng.choice(["hello world", "good day", "ünïcode text"], n),
        "y": rng.integers(0, 2, n).astype(bool),
    })
    config = {"input_features": [{"name": "c", "type": "category"}, {"name": "s", "type": "set"},
                                 {"name": "t", "type": "text"}],
              "output_features": [{"name": "y", "type": "binary"}]}
    result = run(config, write_csv(df, tmp_path / "d.csv"), tmp_path, npartitions=3)
    fitted = next(s for s in result.stages if s.stage == "vocab")
    text = (tmp_path / "cache").glob("vocab/*/" + fitted_metadata.METADATA_FILE)
    full_path = next(p for p in text if str(p.parent) == str(fitted.path))
    full = json.loads(full_path.read_text(encoding="utf-8"))
    assert full_path.read_text(encoding="utf-8") == json.dumps(full, sort_keys=True, ensure_ascii=False)
    assert full["c"]["idx2str"] and full["s"]["idx2str"] and full["t"]["idx2str"]
    summary = fitted.metadata()
    assert summary == fitted_metadata.summary(full)
    assert not any(k in VOCABULARY_KEYS for meta in summary.values() for k in meta)
    assert summary["c"]["vocab_size"] == len(full["c"]["idx2str"])
    assert Fitted.read_full(fitted.path) == full
    # the artifact carries the full file (plus the __row__ entry), never the summary
    art = tmp_path / "out" / result.artifact["artifact_id"]
    published = json.loads((art / fitted_metadata.METADATA_FILE).read_text(encoding="utf-8"))
    assert {k: v for k, v in published.items() if k != "__row__"} == full
    assert not (art / fitted_metadata.SUMMARY_FILE).exists()
