"""Category ``encoded: true``: pre-encoded integer ids kept as given, a declared cardinality,
out-of-range ids and missing values as documented in tasks/features/category.py (issue 20 item 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.combiner import fit_batches
from core.errors import ConfigError, DataError
from flows.feature_contract import check_feature_type
from prepflow import Artifact, Preprocessor
from tasks.config.loader import parse_config
from tasks.features import build_all
from tasks.features.category import CategoryFeature
from tests.helpers import run, write_csv


def feature(**options) -> CategoryFeature:
    config = {"input_features": [{"name": "c", "type": "category", "preprocessing": {"encoded": True, **options}}],
              "output_features": [{"name": "y", "type": "binary"}]}
    return build_all(parse_config(config))[0]


def prepared(f: CategoryFeature, raw: list) -> tuple[pd.Series, dict]:
    """cast -> fill (as fill_missing does with the feature's state) -> fit (extract), like the pipeline."""
    values = f.cast(pd.Series(raw, dtype=object), np.arange(len(raw)))
    state = fit_batches(f.missing_combiner(), [values])
    filled = values.fillna(state["computed_fill_value"]) if state["computed_fill_value"] is not None else values
    return filled, fit_batches(f.fit_combiner(state), [filled])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n - 1), max_size=60))),
       st.sampled_from(["int", "str", "float"]))
def test_ids_are_kept_as_given(case, form):
    n, ids = case
    raw = {"int": ids, "str": [f" {i} " for i in ids], "float": [float(i) for i in ids]}[form]
    f = feature(cardinality=n)
    values, meta = prepared(f, raw)
    assert meta == {"vocab_size": n, "encoded": True, "cardinality": n,
                    "preprocessing": {"encoded": True, "cardinality": n, "out_of_range_id": None}}
    out = f.encode(values, meta)["c"]
    assert out.dtype == np.int32 and out.tolist() == ids
    assert f.oov_count(out, meta) is None and f.id_ranges(meta) == {"c": (0, n)}


@pytest.mark.parametrize(("raw", "bad"), [([0, 3, 7, 2], "7"), (["1", "-1", "2"], "'-1'"), ([0, 2**40], str(2**40))])
def test_an_id_outside_the_cardinality_names_row_and_column(raw, bad):
    f = feature(cardinality=7)
    with pytest.raises(DataError) as err:
        f.cast(pd.Series(raw, dtype=object), np.arange(len(raw)) + 10)
    row = 10 + next(i for i, v in enumerate(raw) if not 0 <= int(v) < 7)  # 0-based, as __row__
    assert str(err.value).startswith(f"row {row}, column 'c': category feature 'c' got id {bad}, outside its "
                                     "cardinality 7 (ids 0..6)")


@pytest.mark.parametrize("value", ["abc", "1.5", 2.5, True, "inf"])
def test_a_value_that_is_not_an_integer_id_is_an_error(value):
    f = feature(cardinality=7)
    with pytest.raises(DataError, match=r"^row 1, column 'c': .* expects an integer id in \[0, 7\), got"):
        f.cast(pd.Series([1, value], dtype=object), np.arange(2))


def test_out_of_range_id_maps_every_outside_id_to_it_and_fills_missing():
    f = feature(cardinality=5, out_of_range_id=0)
    values, meta = prepared(f, [4, 5, -2, None, "3", "", 99])
    assert f.encode(values, meta)["c"].tolist() == [4, 0, 0, 0, 3, 0, 0]
    assert meta["preprocessing"]["out_of_range_id"] == 0


def test_missing_values_need_a_fill():
    f = feature(cardinality=5)
    with pytest.raises(DataError, match=r"^row 2, column 'c': .* has a missing value; set preprocessing.fill_value"):
        f.cast(pd.Series([1, 2, None], dtype=object), np.arange(3))
    filled = feature(cardinality=5, fill_value=4)
    values, meta = prepared(filled, [1, None, 2])
    assert filled.encode(values, meta)["c"].tolist() == [1, 4, 2]
    mode = feature(cardinality=5, missing_value_strategy="fill_with_mode")
    values, meta = prepared(mode, [3, None, 3, 1])
    assert mode.encode(values, meta)["c"].tolist() == [3, 3, 3, 1]
    with pytest.raises(ConfigError, match=r"preprocessing.fill_value: expected an id in \[0, 5\).*got 9"):
        prepared(feature(cardinality=5, fill_value=9), [1, None])


@pytest.mark.parametrize(("options", "message"), [
    ({}, "encoded: true needs cardinality"),
    ({"cardinality": 4, "most_common": 10}, "most_common cannot be combined"),
    ({"cardinality": 4, "hash_buckets": 10}, "hash_buckets cannot be combined"),
    ({"cardinality": 4, "out_of_range_id": 4}, "out_of_range_id 4 must be an id below cardinality 4"),
    ({"cardinality": 0}, "cardinality"),
])
def test_option_errors_name_the_key(options, message):
    with pytest.raises(ConfigError, match=message):
        feature(**options)


def test_cardinality_without_encoded_is_refused():
    config = {"input_features": [{"name": "c", "type": "category", "preprocessing": {"cardinality": 4}}],
              "output_features": [{"name": "y", "type": "binary"}]}
    with pytest.raises(ConfigError, match="only apply to pre-encoded ids: add encoded: true"):
        build_all(parse_config(config))


def test_the_feature_contract_holds():
    rng = np.random.default_rng(0)
    values = [str(int(v)) for v in rng.integers(0, 50, 300)]
    check_feature_type(CategoryFeature, values, {"encoded": True, "cardinality": 50})
    with_missing = [None if i % 7 == 0 else v for i, v in enumerate(values)]
    check_feature_type(CategoryFeature, with_missing, {"encoded": True, "cardinality": 50, "out_of_range_id": 0})


CONFIG = {"input_features": [{"name": "c", "type": "category", "preprocessing": {"encoded": True, "cardinality": 1000}},
                             {"name": "w", "type": "category"}],
          "output_features": [{"name": "y", "type": "binary"}]}


def test_a_run_keeps_the_ids_and_serves_them(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({"c": rng.integers(0, 1000, n), "w": rng.choice(["a", "b"], n), "y": rng.integers(0, 2, n)})
    data = write_csv(df, tmp_path / "data.csv")
    result = run(CONFIG, data, tmp_path, npartitions=3)
    art = Artifact.open(result.artifact["artifact_path"])
    assert art.metadata["c"]["vocab_size"] == 1000 and art.metadata["c"]["encoded"] is True
    published = np.concatenate([art.read_split(s)["c"] for s in art.splits if art.num_rows(s)])
    assert sorted(published.tolist()) == sorted(df["c"].tolist())  # every id as given, none re-indexed
    pre = Preprocessor.load(art.path)
    assert pre.transform({"c": ["17", "999"], "w": ["a", "b"]}, outputs=False)["c"].tolist() == [17, 999]
    with pytest.raises(DataError, match="id '1000', outside its cardinality 1000"):
        pre.transform({"c": ["1000"], "w": ["a"]}, outputs=False)


def test_a_run_with_an_out_of_range_id_fails_naming_row_and_column(tmp_path):
    df = pd.DataFrame({"c": np.arange(40) % 7, "w": ["a", "b"] * 20, "y": [0, 1] * 20})
    df.loc[22, "c"] = 1000
    data = write_csv(df, tmp_path / "data.csv")
    with pytest.raises(DataError, match=r"row 22, column 'c': .* got id '1000', outside its cardinality 1000"):
        run(CONFIG, data, tmp_path)
