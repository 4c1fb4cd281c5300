"""Ludwig's own configs run unchanged: 18 from Ludwig's examples, dataset configs and docs, and four resolved
configs (three printed by Ludwig 0.5 when training, one built from Ludwig 0.17's schema defaults). Each
fixture in tests/data/ludwig_configs/ names its source in its first lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from core.combiner import fit_batches
from core.errors import ConfigError
from tasks.config.loader import load_config, parse_config
from tasks.features import build_all
from tasks.features.binary import BinaryFeature, BinaryPreprocessing
from tests.unit.feature_helpers import feature, fit

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "ludwig_configs"
ACCEPTED = sorted(p.name for p in FIXTURES.glob("*.yaml"))  # every one: none is refused


def test_the_fixtures_are_real_configs_with_their_source():
    assert len(ACCEPTED) >= 17 + 4
    for path in FIXTURES.glob("*.yaml"):
        assert path.read_text().startswith(("# Source: github.com/ludwig-ai/", "# Constructed")), path.name


@pytest.mark.parametrize("name", ACCEPTED)
def test_ludwig_config_parses_unchanged(name):
    config = load_config(FIXTURES / name)
    raw = yaml.safe_load((FIXTURES / name).read_text())
    assert [f.name for f in config.input_features] == [f["name"] for f in raw["input_features"]]
    assert len(build_all(config)) == len(config.features)  # every typed feature builds with its options


def test_forecasting_window_size_and_horizon_are_options_of_their_side():
    features = {f.name: f for f in load_config(FIXTURES / "forecasting.yaml").features}
    seattle, ahead = features["Seattle"], features["Seattle_next"]
    assert (seattle.preprocessing["window_size"], seattle.preprocessing["horizon"]) == (10, 0)
    assert (ahead.preprocessing["window_size"], ahead.preprocessing["horizon"]) == (0, 2)
    assert ahead.source_column == "Seattle"
    built = {f.name: f for f in build_all(load_config(FIXTURES / "forecasting.yaml"))}
    assert built["Seattle"].options.window_width == 10 and built["Seattle_next"].options.window_width == 2


def test_nbeats_flat_window_size_is_a_model_parameter_as_in_ludwig():
    # Ludwig nests a flat feature key into the encoder (input) or decoder (output): no windowing, the
    # history column holds whole series (tests/unit/features/test_timeseries_windows.py windows the forecasting example)
    features = {f.name: f for f in load_config(FIXTURES / "nbeats_forecasting.yaml").features}
    assert features["history"].preprocessing["window_size"] == 0
    assert features["forecast"].preprocessing["horizon"] == 0 and features["forecast"].preprocessing["window_size"] == 0


def _features(name: str) -> dict:
    return {f.name: f for f in load_config(FIXTURES / name).features}


def test_legacy_and_model_side_keys_are_dropped_as_ludwig_moves_them_into_encoder_or_decoder():
    image = _features("insurance_lite.yaml")["image_path"]
    dumped = image.model_dump(exclude_none=True)
    assert "img_height" not in str(dumped) and "encoder" not in dumped  # img_height, hidden_size, ... ignored
    assert image.preprocessing["height"] == 224 and image.preprocessing["in_memory"] is True
    label = _features("tabnet_higgs_small.yaml")["label"]  # output feature with weight_regularization: null
    assert label.type == "binary"
    mnist = _features("mnist.yaml")["image_path"]  # conv_layers / fc_layers flat on the feature
    assert mnist.preprocessing["num_processes"] == 4


def test_date_fill_value_empty_string_is_accepted():
    date = _features("insurance_lite.yaml")["expiry_date"]
    assert date.preprocessing["fill_value"] == "" and date.preprocessing["datetime_format"] == "%Y-%m-%d"


def test_fixed_split_defaults_its_column_to_split():
    for name in ("sst2_benchmark.yaml", "ames_housing_benchmark.yaml"):
        split = load_config(FIXTURES / name).preprocessing.split
        assert (split.type, split.column) == ("fixed", "split")


def test_fallback_true_label_with_its_leading_space():
    income = _features("adult_census_income_docs.yaml")["income"]
    assert income.preprocessing["fallback_true_label"] == ">50K"
    f = BinaryFeature("income", "income", BinaryPreprocessing(fallback_true_label=" >50K"))
    raw = pd.Series([" <=50K", " >50K", " >50K", None], dtype="string")
    typed = f.cast(raw, np.arange(4))
    state = fit_batches(f.missing_combiner(), [typed])
    assert state["str2bool"] == {"<=50K": False, ">50K": True}
    assert f.normalize(typed, state, np.arange(4)).tolist()[:3] == [False, True, True]


def test_defaults_block_applies_and_legacy_training_section_is_accepted():
    features = _features("adult_census_income_docs.yaml")
    assert features["age"].preprocessing["missing_value_strategy"] == "fill_with_mean"
    assert _features("adult_census_income_default.yaml")["income"].type == "category"  # has `training:`


def test_resolved_configs_keep_what_prepflow_reads():
    text = _features("resolved_text_0_5.yaml")["title"]  # 0.5: per-type options under preprocessing
    assert text.preprocessing["fill_value"] == "<UNK>" and text.preprocessing["tokenizer"] == "space_punct"
    config = load_config(FIXTURES / "resolved_constructed_0_17.yaml")
    by_name = {f.name: f for f in config.features}
    assert by_name["number_in"].preprocessing["missing_value_strategy"] == "fill_with_const"
    assert by_name["number_in"].preprocessing["fill_value"] == 0.0  # Ludwig's resolved fill, followed as written
    assert by_name["amount"].preprocessing["normalization"] == "none"  # Ludwig's null
    assert by_name["image_in"].preprocessing["mode"] == "lazy"
    assert by_name["sequence_in"].preprocessing["sequence_length"] is None
    assert "h3" in config.defaults and "computed_fill_value" not in by_name["text_in"].preprocessing


def _config(preprocessing: dict | None = None, defaults: dict | None = None, **feature_keys) -> dict:
    out = {"input_features": [{"name": "x", "type": "number", "preprocessing": preprocessing or {}, **feature_keys}]}
    if defaults:
        out["defaults"] = defaults
    return out


def test_a_bad_key_in_defaults_is_reported_under_defaults():
    with pytest.raises(ConfigError, match=r"^c\.yaml: defaults\.number\.preprocessing\.normalisation: unknown key; "
                                          r"did you mean 'normalization'\?"):
        parse_config(_config(defaults={"number": {"preprocessing": {"normalisation": "minmax"}}}), "c.yaml")
    with pytest.raises(ConfigError, match=r"^c\.yaml: defaults\.number\.preprocessing\.normalization: the "
                                          r"'normalization' parameter of defaults\.number must be one of"):
        parse_config(_config(defaults={"number": {"preprocessing": {"normalization": "l2"}}}), "c.yaml")


def test_misspelled_feature_keys_are_still_errors():
    with pytest.raises(ConfigError, match=r"input_features\[0\]\.preprocesing: unknown key; did you mean "
                                          r"'preprocessing'\?"):
        parse_config(_config(preprocesing={"normalization": "minmax"}))


def test_a_ludwig_option_prepflow_does_not_implement_is_refused_unless_at_its_default():
    parse_config(_config({"outlier_strategy": None, "outlier_threshold": 3.0, "computed_fill_value": 0.0}))
    with pytest.raises(ConfigError, match=r"^config: input_features\[0\]\.preprocessing\.outlier_strategy: "
                                          r"Ludwig's option 'outlier_strategy' = 'fill_with_mean' is not supported"):
        parse_config(_config({"outlier_strategy": "fill_with_mean"}))
    with pytest.raises(ConfigError, match=r"defaults\.category\.preprocessing\.lowercase"):
        parse_config({"input_features": [{"name": "c", "type": "category"}],
                      "defaults": {"category": {"preprocessing": {"lowercase": True}}}})


def test_legacy_forms_are_upgraded():
    config = parse_config({
        "input_features": [{"name": "s", "type": "sequence", "preprocessing": {"word_most_common": 7,
                                                                               "sequence_length_limit": 9}},
                           {"name": "n", "type": "numerical", "preprocessing": {"missing_value_strategy": "backfill"}}],
        "output_features": [{"name": "y", "type": "binary", "fc_layers": [{"output_size": 64}], "num_fc_layers": 2,
                             "weight_regularization": None}],
        "preprocessing": {"split_probabilities": [0.8, 0.1, 0.1], "stratify": "y", "force_split": False,
                          "text": {"most_common": 5}},
        "training": {"epochs": 1},
    })
    s, n = config.input_features
    assert (s.preprocessing["most_common"], s.preprocessing["max_sequence_length"]) == (7, 9)
    assert (n.type, n.preprocessing["missing_value_strategy"]) == ("number", "bfill")
    split = config.preprocessing.split
    assert (split.type, split.column, split.probabilities) == ("stratify", "y", [0.8, 0.1, 0.1])
    assert config.defaults["text"].preprocessing == {"most_common": 5}
    assert config.output_features[0].model_dump(exclude_none=True).keys() == {"name", "type", "preprocessing"}


def test_sequence_length_fixes_the_width_as_in_ludwig():
    f = feature("sequence", sequence_length=5)
    meta = fit(f, ["a b", "a b c d e f g"])
    assert meta["max_sequence_length"] == 5
    assert f.encode(pd.Series(["a b"], dtype="string"), meta)["f"].shape == (1, 5)


@pytest.mark.parametrize(("type_name", "options"), [("sequence", {}), ("text", {}), ("text", {"output_mode": "tfidf"})])
def test_sequence_and_text_metadata_carry_the_keys_ludwig_reads(type_name, options):
    f = feature(type_name, **options)
    meta = fit(f, ["a b c", "a b", None, "c " * 30])
    assert (meta["padding_symbol"], meta["unknown_symbol"], meta["pad_idx"], meta["unk_idx"]) == ("<PAD>", "<UNK>", 0, 1)
    assert meta["idx2str"][meta["pad_idx"]] == "<PAD>" and meta["idx2str"][meta["unk_idx"]] == "<UNK>"
    assert meta["str2idx"]["<PAD>"] == 0 and len(meta["str2freq"]) == meta["vocab_size"]
    assert (f.options.padding_symbol, f.options.unknown_symbol) == ("<PAD>", "<UNK>")  # -> metadata preprocessing
    if type_name == "text":
        assert meta["max_sequence_length_99ptile"] == 30
        assert (meta["str2idf"] is None) == (options.get("output_mode") != "tfidf")


def test_compatibility_ludwig_uses_ludwigs_symbols_ids_wrapping_and_defaults():
    config = parse_config({"compatibility": "ludwig",
                           "input_features": [{"name": "s", "type": "sequence"}, {"name": "t", "type": "text"},
                                              {"name": "d", "type": "date"}, {"name": "n", "type": "number"}],
                           "output_features": [{"name": "y", "type": "number"}]})
    s, t, d, n, y = build_all(config)
    assert config.preprocessing.fit_on == "all"
    assert (t.options.lowercase, t.options.symbols, s.options.fill_value) == (False, "ludwig", "<UNK>")
    assert (d.options.missing_value_strategy, d.options.fill_value) == ("fill_with_const", "")
    assert (n.missing_strategy, n.options.fill_value, y.missing_strategy) == ("fill_with_const", 0.0, "drop_row")
    # ludwig/utils/strings_utils.py: <EOS>=0, <SOS>=1, <PAD>=2, <UNK>=3, each row [<SOS>, ids..., <EOS>],
    # right-padded with <PAD>, L = longest row + 2; a missing value is filled with "<UNK>"
    raw = pd.Series(["a b c", "a b", None, "d"], dtype="string")
    filled = raw.fillna(fit_batches(s.missing_combiner(), [raw])["computed_fill_value"])
    meta = fit(s, filled)
    assert meta["idx2str"] == ["<EOS>", "<SOS>", "<PAD>", "<UNK>", "a", "b", "c", "d"]
    assert (meta["pad_idx"], meta["unk_idx"], meta["max_sequence_length"]) == (2, 3, 5)
    assert s.encode(filled, meta)["s"].tolist() == [[1, 4, 5, 6, 0], [1, 4, 5, 0, 2], [1, 3, 0, 2, 2], [1, 7, 0, 2, 2]]
    assert t.tokens(pd.Series(["Hi, You"], dtype="string")).row(0) == ["Hi", ",", "You"]  # Ludwig: lowercase false


def test_the_adult_census_docs_config_runs_end_to_end(tmp_path):
    """The docs' config unchanged, on data shaped like the adult census file (values with a leading space)."""
    from storage.artifact import Artifact
    from tests.helpers import run, write_csv

    rng = np.random.default_rng(7)
    n = 120
    df = pd.DataFrame({
        "age": rng.integers(18, 80, n).astype(float), "fnlwgt": rng.integers(10_000, 400_000, n),
        "education-num": rng.integers(1, 16, n), "capital-gain": rng.integers(0, 5000, n),
        "capital-loss": rng.integers(0, 300, n), "hours-per-week": rng.integers(10, 60, n),
        **{c: rng.choice([" A", " B", " C"], n) for c in ("workclass", "education", "marital-status", "occupation",
                                                          "relationship", "race", "sex", "native-country")},
        "income": rng.choice([" <=50K", " >50K"], n),
    })
    df.loc[::10, "age"] = np.nan
    config = yaml.safe_load((FIXTURES / "adult_census_income_docs.yaml").read_text())
    result = run(config, write_csv(df, tmp_path / "adult.csv"), tmp_path)
    art = Artifact.open(result.artifact["artifact_path"])
    income = art.metadata["income"]
    assert income["str2bool"] == {"<=50K": False, ">50K": True}
    labels = np.concatenate([art.read_split(s)["income"] for s in art.splits])
    assert len(labels) == n and labels.dtype == bool and labels.sum() == (df["income"] == " >50K").sum()


def test_flat_model_keys_are_named_in_one_warning(caplog):
    with caplog.at_level("WARNING", logger="prepflow.config"):
        parse_config(_config(img_height=224, use_pretrained=True, encoder={"type": "dense"}), "c.yaml")
    assert [r.getMessage() for r in caplog.records] == [
        "c.yaml: input_features[0]: img_height, use_pretrained: not feature keys; as Ludwig does, taken as "
        "encoder/decoder parameters and ignored"]


@pytest.mark.parametrize("name", ["titanic_model1.yaml", "titanic_model2.yaml", "titanic_default.yaml"])
def test_ludwigs_titanic_configs_run_on_the_titanic_data(name, tmp_path):
    from storage.artifact import Artifact
    from tests.helpers import run

    data = Path(__file__).resolve().parents[3] / "examples" / "titanic" / "titanic.csv"
    result = run(yaml.safe_load((FIXTURES / name).read_text()), data, tmp_path)
    art = Artifact.open(result.artifact["artifact_path"])
    assert sum(art.num_rows(s) for s in art.splits) == len(pd.read_csv(data))
    assert art.metadata["Survived"]["type"] == "binary" and art.metadata["Sex"]["vocab_size"] == 3
