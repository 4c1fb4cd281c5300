"""``check_feature_type`` over every registered non-media feature type and the example plugin's type,
with the options that change what they fit; and types broken on purpose, one per property."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from prepflow_example_plugin.features import HashedTokens

from core.errors import NotFittedError
from flows.feature_contract import FeatureContractError, check_feature_type
from tasks.features import REGISTRY
from tasks.features.number import NumberFeature
from tasks.features.set import SetFeature

rng = np.random.default_rng(3)
WORDS = np.array(["alpha", "Beta", "gamma", "delta", "épsilon", "zeta", "x", "y", "z", "#tag", "@me", "ok!"])


def _texts(n: int, k: int) -> list[str | None]:
    out: list[str | None] = [" ".join(rng.choice(WORDS, size=int(rng.integers(0, k)))) for _ in range(n)]
    for i in rng.choice(n, size=n // 10, replace=False):
        out[i] = None
    return out


def _numbers(n: int) -> list[str | None]:
    return [None if rng.random() < 0.1 else f"{v:.3f}" for v in rng.normal(10, 3, n)]


N = 60
SAMPLES = {
    "binary": [None if rng.random() < 0.1 else str(rng.choice(["yes", "no"])) for _ in range(N)],
    "number": _numbers(N),
    "numerical": _numbers(N),
    "category": [None if rng.random() < 0.1 else str(rng.choice(WORDS[:6])) for _ in range(N)],
    "set": _texts(N, 4),
    "bag": _texts(N, 6),
    "sequence": _texts(N, 8),
    "text": _texts(N, 8),
    "timeseries": [None if rng.random() < 0.1 else " ".join(f"{v:.2f}" for v in rng.normal(size=int(rng.integers(1, 7))))
                   for _ in range(N)],
    "vector": [None if rng.random() < 0.1 else " ".join(f"{v:.2f}" for v in rng.normal(size=3)) for _ in range(N)],
    "date": [None if rng.random() < 0.1 else f"2021-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 28)):02d}"
             for _ in range(N)],
}
MEDIA = ("image", "audio")  # need files: test_media_types_keep_the_contract

CASES = [(t, {}) for t in SAMPLES] + [
    ("binary", {"missing_value_strategy": "fill_with_mode"}),
    ("number", {"normalization": "minmax", "missing_value_strategy": "ffill"}),
    ("number", {"normalization": "iq", "missing_value_strategy": "drop_row"}),
    ("number", {"normalization": "bins", "num_bins": 4, "missing_value_strategy": "bfill"}),
    ("number", {"normalization": "log1p", "missing_value_strategy": "fill_with_const", "fill_value": 1}),
    ("category", {"num_oov_buckets": 3, "most_common": 3}),
    ("category", {"hash_buckets": 16}),
    ("set", {"most_common": 3, "lowercase": True}),
    ("sequence", {"start_stop": True, "max_sequence_length": 4, "truncation": "left", "padding": "left"}),
    ("text", {"output_mode": "tfidf", "ngrams": 2, "max_tokens": 12}),
    ("text", {"output_mode": "count", "split": "whitespace", "standardize": "lower_and_strip_punctuation"}),
    ("date", {"missing_value_strategy": "fill_with_const", "fill_value": ""}),
    ("sequence", {"symbols": "ludwig", "fill_value": "<UNK>"}),
    ("text", {"symbols": "ludwig", "lowercase": False, "max_sequence_length": 5}),
]


def test_every_registered_type_is_covered():
    assert set(REGISTRY) == set(SAMPLES) | set(MEDIA)


@pytest.mark.parametrize(("type_name", "options"), CASES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CASES)])
def test_builtin_types_keep_the_contract(type_name, options):
    metadata = check_feature_type(REGISTRY[type_name], SAMPLES[type_name], options)
    assert isinstance(metadata, dict)


@pytest.mark.parametrize("options", [{}, {"num_buckets": 7, "missing_value_strategy": "ffill"}])
def test_the_example_plugin_type_keeps_the_contract(options):
    check_feature_type(HashedTokens, SAMPLES["text"], options)


# ---- each property, broken on purpose -------------------------------------------------------------------

class FirstPartitionWins(SetFeature):
    """Keeps the vocabulary of whichever accumulator comes first: depends on the partitioning."""

    def merge(self, a, b):
        return a or b  # (create()'s empty accumulator is {})


class AddForgetsTheAccumulator(NumberFeature):
    """``add`` starts over instead of adding to ``acc``: right for one batch per partition, wrong for two."""

    def add(self, acc, values):
        return super().add(self.create(), values)


class KeyErrorWhenNotFitted(NumberFeature):
    def encode(self, values, metadata):
        return {self.name: (values.to_numpy(dtype="float64") - metadata["mean"]).astype(np.float32)}


class TupleMetadata(NumberFeature):
    def extract(self, acc, missing_state):
        return {**super().extract(acc, missing_state), "range": (0, 1)}

    def encode(self, values, metadata):
        out = super().encode(values, metadata)
        if isinstance(metadata.get("range"), tuple):  # behaves differently on its own JSON copy
            out[self.name] = out[self.name] + 1
        return out


class WrongDeclaredDtype(NumberFeature):
    def output_columns(self, metadata):
        return [c.__class__(c.name, "float64", c.shape) for c in super().output_columns(metadata)]


class ServesDifferently(NumberFeature):
    """Keeps fitted state on the instance: the pipeline's instance has it, the Preprocessor's (built from
    the metadata, like every serving instance) does not."""

    shift = 0.0

    def add(self, acc, values):
        self.shift = 1.0
        return super().add(acc, values)

    def encode(self, values, metadata):
        out = super().encode(values, metadata)
        return {self.name: out[self.name] + np.float32(self.shift)}


@pytest.mark.parametrize(("cls", "values", "prop"), [
    (FirstPartitionWins, SAMPLES["set"], "partition invariance"),
    (AddForgetsTheAccumulator, SAMPLES["number"], "partition invariance: the metadata fitted by adding one row"),
    (KeyErrorWhenNotFitted, SAMPLES["number"], "not fitted: encode with empty metadata raised KeyError"),
    (TupleMetadata, SAMPLES["number"], "JSON round trip"),
    (WrongDeclaredDtype, SAMPLES["number"], "declared columns"),
])
def test_a_broken_property_is_named(cls, values, prop):
    with pytest.raises(FeatureContractError, match=prop):
        check_feature_type(cls, values)


def test_serving_parity_is_checked():
    with pytest.raises(FeatureContractError, match="serving parity: the Preprocessor's output differs"):
        check_feature_type(ServesDifferently, SAMPLES["number"])


def test_not_fitted_is_one_error_for_every_type():
    for type_name, values in SAMPLES.items():
        cls = REGISTRY[type_name]
        feature = cls("f", "f", cls.Preprocessing.model_validate({}))
        series = pd.Series([v for v in values if v is not None][:3], dtype="string")
        if type_name == "binary":
            with pytest.raises(NotFittedError, match="binary feature 'f': normalize needs the fitted fill state"):
                feature.normalize(series, {}, np.arange(3))
            continue
        with pytest.raises(NotFittedError, match=rf"^{cls.type_name} feature 'f': "):
            feature.encode(series, {})


@pytest.fixture(scope="module")
def media_files(tmp_path_factory):
    """Small PNGs of several sizes and WAV tones, a missing value every 7th row."""
    import soundfile as sf
    from PIL import Image

    root = tmp_path_factory.mktemp("media")
    images, sounds = [], []
    for i in range(20):
        shade = rng.integers(0, 255, size=(6 + i % 5, 8 + i % 3, 3), dtype=np.uint8)
        Image.fromarray(shade).save(root / f"im{i}.png")
        t = np.arange(int(8000 * (0.05 + 0.01 * (i % 4)))) / 8000
        sf.write(root / f"tone{i}.wav", (0.3 * np.sin(2 * np.pi * (200 + 40 * i) * t)).astype(np.float32), 8000)
        images.append(None if i % 7 == 3 else str(root / f"im{i}.png"))
        sounds.append(None if i % 7 == 3 else str(root / f"tone{i}.wav"))
    return {"image": images, "audio": sounds}


@pytest.mark.parametrize(("type_name", "options"), [
    ("image", {"height": 5, "width": 7, "num_channels": 3}), ("image", {}),
    ("audio", {"type": "fbank", "num_filter_bands": 8, "audio_file_length_limit_in_s": 0.1}),
    ("audio", {"type": "raw", "audio_file_length_limit_in_s": 0.05, "missing_value_strategy": "ffill"}),
])
def test_media_types_keep_the_contract(media_files, type_name, options):
    metadata = check_feature_type(REGISTRY[type_name], media_files[type_name], options)
    assert "codec" in metadata
