"""``compatibility: ludwig`` resolves every preprocessing option of the ten non-media input types to Ludwig's
default, and every Ludwig option prepflow lacks is one ``tasks.config.ludwig.LUDWIG_ONLY`` accepts at that
default (or drops).

The reference, ``tests/data/ludwig_0.17_preprocessing_defaults.json``, is Ludwig 0.17.10's own schema
defaults, written by the Ludwig venv (``python tests/ludwig_venv.py 0.17``)::

    ~/.cache/prepflow/ludwig-0.17/bin/python -c "import json; from ludwig.schema.features.preprocessing \\
        import category; print(json.dumps(category.CategoryPreprocessingConfig().to_dict()))"

and likewise for set, bag, sequence, text, date, number, binary, vector, timeseries (Ludwig 0.11.0's are
identical, key for key: checked with the 0.11 venv).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.config.loader import parse_config
from tasks.config.ludwig import ALWAYS, LUDWIG_ONLY
from tasks.features import build_all

LUDWIG = json.loads((Path(__file__).parents[2] / "data" / "ludwig_0.17_preprocessing_defaults.json").read_text())
TYPES = sorted(k for k in LUDWIG if not k.startswith("_"))


def resolved_options(type_name: str, compatibility: str | None) -> dict:
    config = {"input_features": [{"name": "f", "type": type_name}]}
    if compatibility:
        config["compatibility"] = compatibility
    feat = build_all(parse_config(config))[0]
    options = feat.options.model_dump()
    options["missing_value_strategy"] = feat.missing_strategy  # None: the type's default
    if "fill_value" in options and options["fill_value"] is None:
        options["fill_value"] = feat.default_fill_value
    return options


def accepted_at(type_name: str, key: str, value) -> bool:
    accepted = LUDWIG_ONLY[type_name].get(key, ())
    return accepted is ALWAYS or (callable(accepted) and accepted(value)) or \
        (isinstance(accepted, tuple) and value in accepted)


def test_the_reference_holds_the_ten_types():
    assert TYPES == sorted(["binary", "number", "category", "set", "bag", "sequence", "text", "timeseries",
                            "vector", "date"])


@pytest.mark.parametrize("type_name", TYPES)
def test_compatibility_ludwig_resolves_to_ludwigs_defaults(type_name):
    ours = resolved_options(type_name, "ludwig")
    differ = {key: (ours[key], value) for key, value in LUDWIG[type_name].items()
              if key in ours and ours[key] != value}
    assert differ == {}, f"{type_name}: (prepflow, Ludwig) {differ}"
    unknown = [key for key, value in LUDWIG[type_name].items() if key not in ours
               and not accepted_at(type_name, key, value)]
    assert unknown == [], f"{type_name}: Ludwig options neither prepflow's nor accepted at Ludwig's default"


def test_without_compatibility_the_documented_defaults_differ():
    """The README's list: number fill_with_mean, date fill_with_mode (no fill_value), empty fills for tokens, text
    lowercase."""
    differ = {t: sorted(k for k, v in LUDWIG[t].items() if k in (ours := resolved_options(t, None)) and ours[k] != v)
              for t in TYPES}
    assert {t: keys for t, keys in differ.items() if keys} == {
        "bag": ["fill_value"], "date": ["fill_value", "missing_value_strategy"], "number": ["missing_value_strategy"],
        "sequence": ["fill_value"], "set": ["fill_value"], "text": ["fill_value", "lowercase"]}
