"""``prepflow schema``: the config's JSON Schema lists every feature type's options (issue 21 item 8)."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from flows.cli import main
from tasks.config.json_schema import json_schema
from tasks.features import REGISTRY


@pytest.fixture(scope="module")
def schema():
    return json_schema()


def test_every_registered_type_has_its_options_with_a_description(schema):
    for type_name, cls in REGISTRY.items():
        options = schema["$defs"][f"{type_name}_preprocessing"]
        assert set(options["properties"]) == set(cls.Preprocessing.model_fields), type_name
        for option, prop in options["properties"].items():
            assert prop.get("description", "").strip(), f"{type_name}.{option} has no description"
            assert "default" in prop or option in options.get("required", []), f"{type_name}.{option}: no default"


def test_image_and_audio_options_carry_types_defaults_and_values(schema):
    image = schema["$defs"]["image_preprocessing"]["properties"]
    assert image["mode"]["anyOf"][0]["enum"] == ["eager", "lazy", "lazy_cached"]
    assert image["resize_method"]["default"] == "interpolate"
    assert image["infer_image_max_height"]["default"] == 256
    audio = schema["$defs"]["audio_preprocessing"]["properties"]
    assert audio["type"]["default"] == "fbank" and "stft" in audio["type"]["enum"]
    assert audio["window_length_in_s"] == {**audio["window_length_in_s"], "type": "number", "default": 0.04}
    number = schema["$defs"]["number_preprocessing"]["properties"]
    assert "fill_with_mean" in number["missing_value_strategy"]["description"]


def test_a_feature_preprocessing_is_checked_against_its_type(schema):
    def config(preprocessing: dict, type_name: str = "image") -> dict:
        return {"input_features": [{"name": "photo", "type": type_name, "preprocessing": preprocessing}],
                "output_features": [{"name": "y", "type": "binary"}]}

    jsonschema.validate(config({"height": 32, "width": 32, "mode": "lazy"}), schema)
    with pytest.raises(jsonschema.ValidationError, match="heigth"):
        jsonschema.validate(config({"heigth": 32}), schema)
    with pytest.raises(jsonschema.ValidationError, match="lazy_cashed"):
        jsonschema.validate(config({"mode": "lazy_cashed"}), schema)
    with pytest.raises(jsonschema.ValidationError, match="hz"):
        jsonschema.validate(config({"type": "hz"}, "audio"), schema)
    with pytest.raises(jsonschema.ValidationError, match="most_comon"):
        jsonschema.validate({**config({}), "defaults": {"category": {"preprocessing": {"most_comon": 3}}}}, schema)


def test_the_example_config_validates(schema):
    jsonschema.validate(yaml.safe_load(open("examples/titanic/config.yaml")), schema)


def test_prepflow_schema_prints_it(capsys):
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(REGISTRY) <= {k.removesuffix("_preprocessing") for k in printed["$defs"]}
    assert printed["$defs"]["audio_preprocessing"]["properties"]["num_filter_bands"]["default"] == 80
