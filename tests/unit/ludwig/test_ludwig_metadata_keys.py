"""The preprocessing keys Ludwig 0.11 and 0.17 read from ``training_set_metadata.json`` (``ludwig/data/preprocessing.py``
``build_data`` takes each feature's ``preprocessing`` from there with ``--training_set_metadata``; 0.17's feature
modules read the same ``preprocessing_parameters`` keys as 0.11's) are in the options prepflow records, at
Ludwig's defaults; without them ``ludwig preprocess`` stops with a KeyError."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.unit.feature_helpers import feature, fit

LUDWIG_READS = {
    "number": {"outlier_strategy": None, "outlier_threshold": 3.0, "computed_outlier_fill_value": 0.0},
    "category": {"lowercase": False, "cache_encoder_embeddings": False},
    "sequence": {"ngram_size": 2, "cache_encoder_embeddings": False, "padding_symbol": "<PAD>",
                 "unknown_symbol": "<UNK>"},
    "text": {"pretrained_model_name_or_path": None, "ngram_size": 2, "compute_idf": False,
             "cache_encoder_embeddings": False},
}


@pytest.mark.parametrize("type_name", sorted(LUDWIG_READS))
def test_recorded_options_hold_the_keys_ludwig_reads(type_name):
    options = feature(type_name).options.model_dump()
    assert {k: options.get(k, "missing") for k in LUDWIG_READS[type_name]} == LUDWIG_READS[type_name]


def test_float32_arithmetic_rounds_the_statistics_first_as_ludwig():
    values = pd.Series([9.1, 10.37, 3.3, 12.0, 7.77, 15.25, 8.0, 11.11])
    f64, f32 = feature("number"), feature("number", arithmetic="float32")
    meta = fit(f64, values)
    x = values.to_numpy(np.float32)
    ludwig = (x - np.float32(meta["mean"])) / np.float32(meta["std"])  # numpy 2: Python floats -> float32
    assert np.array_equal(f32.encode(values, meta)[f32.name], ludwig)
    exact = ((values.to_numpy() - meta["mean"]) / meta["std"]).astype(np.float32)
    assert np.array_equal(f64.encode(values, meta)[f64.name], exact)
    assert not np.array_equal(ludwig, exact)  # these values tell the two apart (6 of 8 differ in the last bit)
