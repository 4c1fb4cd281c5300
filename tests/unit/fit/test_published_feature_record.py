"""The metadata a feature type's fit records under ``preprocessing`` is what the artifact publishes: the vocab
stage adds the config's options and the fill state around it and never overwrites it with the config's."""

from __future__ import annotations

import pandas as pd

from storage.artifact import Artifact
from tasks.features.number import NumberFeature
from tests.helpers import run, write_csv


class RecordsItsFit(NumberFeature):
    """A number feature whose fit records a value it chose (as a hashed category records its buckets)."""

    def extract(self, acc: dict, missing_state: dict) -> dict:
        meta = super().extract(acc, missing_state)
        meta["preprocessing"] = {"normalization": "chosen-by-the-fit", "fitted_rows": int(acc["n"])}
        return meta


def test_the_feature_types_own_preprocessing_record_is_published(tmp_path):
    data = write_csv(pd.DataFrame({"x": [float(i % 7) for i in range(40)], "y": [i % 2 for i in range(40)]}),
                     tmp_path / "d.csv")
    config = {"input_features": [{"name": "x", "type": f"{__name__}:RecordsItsFit",
                                  "preprocessing": {"normalization": "zscore"}}],
              "output_features": [{"name": "y", "type": "binary"}],
              "preprocessing": {"split": {"type": "random", "probabilities": [1.0, 0.0, 0.0]}}}
    meta = Artifact.open(run(config, data, tmp_path).artifact["artifact_path"]).metadata["x"]
    assert meta["preprocessing"]["fitted_rows"] == 40  # the type's record, absent from the config
    assert meta["preprocessing"]["normalization"] == "chosen-by-the-fit"  # the type's value over the config's
    assert {"missing_value_strategy", "computed_fill_value"} <= set(meta["preprocessing"])  # the fill state beside it
