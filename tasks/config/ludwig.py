"""Ludwig's config forms brought to prepflow's: ``upgrade(mapping, source) -> mapping``.

Ludwig reads configs written for older Ludwig versions (it upgrades them, see Ludwig's
``ludwig/utils/backward_compatibility.py``) and writes back the fully resolved config
(``model_hyperparameters.json``: every option with its default). Both run unchanged here. Before
the schema validates a config, this module

* upgrades what Ludwig upgrades: ``training`` -> ``trainer``; ``preprocessing.<type>`` ->
  ``defaults.<type>.preprocessing``; ``preprocessing.split_probabilities``/``stratify``/
  ``force_split`` -> ``preprocessing.split``; feature type ``numerical`` -> ``number``;
  missing-value strategies ``backfill``/``pad`` -> ``bfill``/``ffill``; number ``normalization: null``
  -> ``none``; the word-level names of
  Ludwig < 0.4 (``word_most_common``, ``sequence_length_limit``, ...) -> ``most_common``,
  ``max_sequence_length``, ...; audio's nested ``audio_feature`` block; a ``type`` inside
  ``defaults.<type>``;
* drops the model side, which preprocessing does not read: the sections ``combiner``,
  ``trainer``, ``hyperopt``, ``backend``, LLM sections, ...; the feature keys Ludwig's feature
  schema holds besides ``name``/``type``/``column``/``preprocessing`` (``encoder``, ``decoder``,
  ``loss``, ``num_classes``, ...); and, as Ludwig does, any other flat feature key, which Ludwig
  moves into the feature's encoder (input) or decoder (output): ``fc_layers``,
  ``weight_regularization``, ``img_height``, ... A flat key that looks like a misspelled feature
  key (``preprocesing``) is left for the schema to reject with a suggestion;
* drops the preprocessing options Ludwig resolves or uses on the model side only
  (``computed_fill_value``, ``cache_encoder_embeddings``, ``outlier_threshold``, ``ngram_size``,
  ``compute_idf``, ``prefetch_size``, the LLM's ``global_max_sequence_length``, ...), and those Ludwig options prepflow does not implement when
  they hold Ludwig's no-op default (``outlier_strategy: null``, category ``lowercase: false``, ...).
  Any other value of those is a ``ConfigError`` naming the key: prepflow never silently changes what
  Ludwig would compute;
* checks timeseries forecasting's sides as Ludwig's schemas do: ``window_size`` is an input feature's
  option, ``horizon`` an output feature's; in ``defaults.timeseries.preprocessing`` each goes to the
  timeseries features of its side only (Ludwig's defaults hold the input options). A flat
  ``window_size`` on the feature (Ludwig's N-BEATS example) is an encoder/decoder parameter, as above.

``LUDWIG_DEFAULTS`` holds what ``compatibility: ludwig`` changes.

Paths in errors are the config's own: ``input_features[2].preprocessing.outlier_strategy`` or
``defaults.number.preprocessing.outlier_strategy``.
"""

from __future__ import annotations

import difflib
import logging
from typing import Any

from core.errors import ConfigError

log = logging.getLogger("prepflow.config")

# Top-level sections of Ludwig's ECD and LLM model configs that preprocessing does not read.
MODEL_SECTIONS = ("combiner", "trainer", "hyperopt", "backend", "ludwig_version", "model_type", "preset",
                  "prompt", "generation", "adapter", "adapters", "quantization", "model_parameters",
                  "base_model", "trust_remote_code", "is_multimodal")
# Keys of Ludwig's feature schemas other than name/type/column/preprocessing (model side).
FEATURE_MODEL_KEYS = ("encoder", "decoder", "loss", "tied", "dependencies", "reduce_input", "reduce_dependencies",
                      "top_k", "calibration", "threshold", "threshold_percentile", "class_similarities", "proc_column",
                      "active", "augmentation", "input_size", "num_classes", "default_validation_metric", "clip",
                      "softmax", "vector_size", "horizon")
FEATURE_KEYS = ("name", "type", "column", "preprocessing")

SEQUENCE_TYPES = ("sequence", "text", "audio", "timeseries")
# Ludwig 0.4's renames (``_update_level_metadata``), except the char_* ones: prepflow's text keeps
# its own char_most_common / char_max_sequence_length for the character ids.
LEGACY_SEQUENCE_KEYS = {"sequence_length_limit": "max_sequence_length", "word_most_common": "most_common",
                        "word_sequence_length_limit": "max_sequence_length", "word_tokenizer": "tokenizer",
                        "word_vocab_file": "vocab_file"}
LEGACY_STRATEGIES = {"backfill": "bfill", "pad": "ffill"}

ALWAYS = object()  # drop whatever the value


def _no_prompt(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and not value.get("template") and not value.get("task"))


# Per type: Ludwig preprocessing option -> ALWAYS (dropped) or the values prepflow accepts as a no-op.
_COMMON: dict[str, Any] = {"computed_fill_value": ALWAYS, "cache_encoder_embeddings": ALWAYS,
                           "prefetch_size": ALWAYS, "lazy_cache_dir": ALWAYS}
_TOKENS = {**_COMMON, "ngram_size": ALWAYS, "compute_idf": ALWAYS, "pretrained_model_name_or_path": (None,),
           "prompt": _no_prompt}
LUDWIG_ONLY: dict[str, dict[str, Any]] = {
    "binary": dict(_COMMON),
    "number": {**_COMMON, "outlier_strategy": (None,), "outlier_threshold": ALWAYS,
               "computed_outlier_fill_value": ALWAYS},
    "category": {**_COMMON, "lowercase": (False,), "vocab": (None,), "fallback_label": ALWAYS},
    "set": dict(_COMMON),
    "bag": dict(_COMMON),
    "sequence": _TOKENS,
    "text": _TOKENS,
    "timeseries": dict(_COMMON),
    "vector": dict(_COMMON),
    "date": dict(_COMMON),
    "image": {**_COMMON, "num_classes": ALWAYS, "infer_image_num_classes": ALWAYS},
    "audio": dict(_COMMON),
}
LUDWIG_ONLY["numerical"] = LUDWIG_ONLY["number"]
LUDWIG_TYPES = (*LUDWIG_ONLY, "h3")  # Ludwig's feature types (h3: not one of prepflow's)


# ``compatibility: ludwig``: Ludwig's defaults where prepflow's differ, for input features, applied under
# ``defaults.<type>`` and the features' own options (tasks.config.loader.resolve_preprocessing); the config also
# defaults ``fit_on`` to ``all`` then. Checked against Ludwig 0.11 and 0.17 fitting their own metadata
# (tests/integration/test_ludwig_preprocess.py): binary of Ludwig's true/false strings, sequence, text
# (``symbols: ludwig``: Ludwig's ids, ties in first-occurrence order), vector, timeseries and date give
# Ludwig's tensors, and so does category (``symbols: ludwig``: ranked by count, ties by first occurrence,
# ``<UNK>`` only when most_common cuts), set (``symbols: ludwig``: no ``<PAD>``, ``<UNK>`` at id 3,
# max_set_size + 2), bag (``<EOS>``, ``<SOS>``, ``<PAD>``, ``<UNK>`` at ids 0-3, max_set_size + 2) and binary
# (``strings: ludwig``: Ludwig's true/false sets, without on/off; of two other strings the smaller is True),
# and number (``arithmetic: float32``: statistics of the float32-cast column, mean rounded to float32, std
# the float32 root of the float32 variance). Ludwig's mean is a float32 pairwise sum, so on some columns
# (not the test's) its last bit can still differ from prepflow's exactly rounded one.
LUDWIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "number": {"missing_value_strategy": "fill_with_const", "fill_value": 0.0, "arithmetic": "float32"},
    "sequence": {"symbols": "ludwig", "fill_value": "<UNK>"},
    "text": {"symbols": "ludwig", "fill_value": "<UNK>", "lowercase": False},
    "date": {"missing_value_strategy": "fill_with_const", "fill_value": ""},
    "category": {"symbols": "ludwig"},
    "set": {"symbols": "ludwig", "fill_value": "<UNK>"},
    "bag": {"symbols": "ludwig", "fill_value": "<UNK>"},
    "binary": {"strings": "ludwig"},
}
LUDWIG_DEFAULTS["numerical"] = LUDWIG_DEFAULTS["number"]


def upgrade(data: dict, source: str = "config") -> dict:
    """``data`` (a fresh copy: it is changed in place) in prepflow's form; see the module docstring."""
    if "training" in data and "trainer" not in data:
        data["trainer"] = data.pop("training")
    for key in MODEL_SECTIONS:
        data.pop(key, None)
    preprocessing = data.get("preprocessing")
    if isinstance(preprocessing, dict):
        _upgrade_global(preprocessing, data)
    defaults = data.get("defaults")
    if isinstance(defaults, dict):
        for type_name, block in list(defaults.items()):
            if isinstance(block, dict):
                block.pop("type", None)
                for key in FEATURE_MODEL_KEYS:  # the model side Ludwig resolves per type (image augmentation, ...)
                    block.pop(key, None)
                if isinstance(block.get("preprocessing"), dict):
                    _upgrade_options(type_name, block["preprocessing"], f"{source}: defaults.{type_name}.preprocessing")
    for section in ("input_features", "output_features"):
        features = data.get(section)
        if isinstance(features, list):
            for i, feature in enumerate(features):
                if isinstance(feature, dict):
                    _upgrade_feature(feature, f"{source}: {section}[{i}]")
                    _check_forecasting_side(feature, section, f"{source}: {section}[{i}]")
    _window_defaults_by_side(data)
    return data


# timeseries forecasting: the option of each side (Ludwig's input and output preprocessing schemas)
FORECASTING_SIDES = {"input_features": "window_size", "output_features": "horizon"}


def _check_forecasting_side(feature: dict, section: str, where: str) -> None:
    options = feature.get("preprocessing")
    if feature.get("type") != "timeseries" or not isinstance(options, dict):
        return
    for side, key in FORECASTING_SIDES.items():
        if side != section and options.get(key) not in (None, 0):
            mine = FORECASTING_SIDES[section]
            raise ConfigError(f"{where}.preprocessing.{key}: {key} is an {side.removesuffix('_features')} "
                              f"feature's option (got {options[key]!r}); a timeseries "
                              f"{section.removesuffix('_features')} feature forecasts with {mine}")


def _window_defaults_by_side(data: dict) -> None:
    """``defaults.timeseries.preprocessing``'s window_size/horizon onto the typed timeseries features of
    their side that do not set them (defaults otherwise reach inputs and outputs alike)."""
    block = (data.get("defaults") or {}).get("timeseries") if isinstance(data.get("defaults"), dict) else None
    options = block.get("preprocessing") if isinstance(block, dict) else None
    if not isinstance(options, dict):
        return
    for side, key in FORECASTING_SIDES.items():
        value = options.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            continue  # absent, or left for validation to name under defaults
        del options[key]
        for feature in data.get(side) or []:
            if isinstance(feature, dict) and feature.get("type") == "timeseries":
                own = feature.setdefault("preprocessing", {})
                if isinstance(own, dict):
                    own.setdefault(key, value)


def _upgrade_global(preprocessing: dict, data: dict) -> None:
    preprocessing.pop("global_max_sequence_length", None)  # an LLM's prompt + answer budget (model side)
    for key in list(preprocessing):
        type_name = "number" if key == "numerical" else key
        defaults = data.setdefault("defaults", {})
        if type_name in LUDWIG_TYPES and isinstance(preprocessing[key], dict) and isinstance(defaults, dict):
            options = preprocessing.pop(key)  # Ludwig < 0.5 kept per-type options here
            options = options.get("preprocessing", options)
            block = defaults.setdefault(type_name, {})
            block["preprocessing"] = {**options, **(block.get("preprocessing") or {})}
    if data.get("defaults") == {}:
        del data["defaults"]
    split: dict[str, Any] = {}
    if (probabilities := preprocessing.pop("split_probabilities", None)) is not None:
        split["probabilities"] = probabilities
    if (stratify := preprocessing.pop("stratify", None)) is not None:
        split.update(type="stratify", column=stratify)
    if preprocessing.pop("force_split", None) is not None:
        split.setdefault("type", "random")
    if split:
        preprocessing["split"] = {**split, **(preprocessing.get("split") or {})}


def _upgrade_feature(feature: dict, where: str) -> None:
    if feature.get("type") == "numerical":
        feature["type"] = "number"
    flat = []
    for key in list(feature):
        if key in FEATURE_KEYS:
            continue
        if key in FEATURE_MODEL_KEYS:
            del feature[key]
        elif not difflib.get_close_matches(key, FEATURE_KEYS, n=1, cutoff=0.8):
            del feature[key]  # a flat encoder/decoder parameter (Ludwig nests it there)
            flat.append(key)
    if flat:
        log.warning("%s: %s: not feature keys; as Ludwig does, taken as encoder/decoder parameters and ignored",
                    where, ", ".join(flat))
    options = feature.get("preprocessing")
    if isinstance(options, dict):
        _upgrade_options(feature.get("type"), options, f"{where}.preprocessing")


def _upgrade_options(type_name: Any, options: dict, where: str) -> None:
    """One preprocessing block of a feature of ``type_name`` (or of ``defaults.<type_name>``). Values of the
    wrong kind are left as they are: validation then names the key."""
    if not isinstance(type_name, str):
        type_name = None
    if type_name in ("number", "numerical") and "normalization" in options and options["normalization"] is None:
        options["normalization"] = "none"  # Ludwig: null = no normalization (a number output's default)
    if isinstance(options.get("missing_value_strategy"), str) and options["missing_value_strategy"] in LEGACY_STRATEGIES:
        options["missing_value_strategy"] = LEGACY_STRATEGIES[options["missing_value_strategy"]]
    if type_name in SEQUENCE_TYPES:
        for old, new in LEGACY_SEQUENCE_KEYS.items():
            if old in options:
                value = options.pop(old)
                options.setdefault(new, value)
    if type_name == "audio" and isinstance(options.get("audio_feature"), dict):
        nested = options.pop("audio_feature")
        for key, value in nested.items():
            options.setdefault(key, value)
    for key, accepted in LUDWIG_ONLY.get(type_name, {}).items():
        if key not in options:
            continue
        value = options[key]
        if accepted is ALWAYS or (callable(accepted) and accepted(value)) or \
                (isinstance(accepted, tuple) and value in accepted):
            del options[key]
            continue
        expected = "null" if callable(accepted) else " or ".join(
            "null" if v is None else repr(v) for v in accepted)
        raise ConfigError(f"{where}.{key}: Ludwig's option {key!r} = {value!r} is not supported by prepflow's "
                          f"{type_name} feature (only {expected}, Ludwig's default, is accepted); remove it")
