"""The config's JSON Schema with every feature type's preprocessing options (``prepflow schema``).

``tasks.config.schema`` is the schema of the config's structure and imports no feature type; each feature
type owns its options (``FeatureType.Preprocessing``, a pydantic model). This module joins them: the
schema of each registered type's options (JSON types, defaults, allowed values, bounds) goes under
``$defs`` as ``<type>_preprocessing``, and a feature's ``preprocessing`` (and
``defaults.<type>.preprocessing``) refers to its type's. Editors then complete and check every option.

Every option has a description: the model field's own ``description`` when it has one
(``Field(description=...)``), else the one in ``DESCRIPTIONS`` (per type, then shared by name). A
type's ``missing_value_strategy`` description lists that type's strategies and default.
``tests/unit/config/test_config_schema.py`` fails for an option of a registered type without one.
"""

from __future__ import annotations

from typing import Any

from tasks.config.schema import json_schema as structure_schema
from tasks.features import REGISTRY

# Shared by every type that has the option (a type's own entry in TYPE_DESCRIPTIONS wins).
DESCRIPTIONS: dict[str, str] = {
    "fill_value": "the value missing rows get with missing_value_strategy fill_with_const",
    # binary
    "fallback_true_label": "for a column of exactly two strings outside the yes/no, true/false, 1/0 sets: the "
                           "value that maps to True (default: the larger of the two in string order)",
    # number
    "normalization": "zscore (x - mean) / std, minmax, iq ((x - median) / interquartile range), log1p, none, or "
                     "bins (an int32 quantile bin id)",
    "num_bins": "normalization bins: the number of quantile bins (repeated edges are dropped, so fewer may result)",
    "bin_edges": "normalization bins: strictly increasing bin edges to use instead of fitted quantiles",
    # category
    "most_common": "keep at most this many tokens, the most frequent of the fit rows (ties by string ascending)",
    "min_frequency": "tokens seen fewer times than this in the fit rows are left out of the vocabulary",
    "num_oov_buckets": "values outside the vocabulary are hashed into this many buckets (XXH3-64) instead of all "
                       "becoming <UNK>",
    "hash_buckets": "no vocabulary: every value is hashed (XXH3-64) into this many buckets",
    "encoded": "the column already holds integer ids in [0, cardinality): kept as given, nothing is fitted",
    "cardinality": "with encoded: true, the number of ids (vocab_size)",
    "out_of_range_id": "with encoded: true, the id every out-of-range id (and, without fill_value, a missing value) "
                       "maps to instead of an error",
    # token features (set, bag, sequence, text)
    "tokenizer": "how a value is split into tokens: space, space_punct (words and punctuation), characters, "
                 "comma, or regex (split on pattern)",
    "pattern": "with tokenizer: regex, the separator regular expression (RE2 syntax, e.g. '[;|]')",
    "lowercase": "lower-case values (Unicode) before tokenizing",
    "vocab_file": "a file of one token per line that fixes the vocabulary and its order (instead of fitting it)",
    "vocab_file_sha256": "set by prepflow: the sha256 of vocab_file, so that editing the file changes the "
                         "artifact id (a configured value is overwritten)",
    "max_sequence_length": "the longest sequence kept; L is the smaller of this and the longest tokenized row",
    "sequence_length": "Ludwig's exact sequence length L (else from the data, capped by max_sequence_length)",
    "length_percentile": "cap L further at this percentile (0-100] of the fitted rows' lengths",
    "padding": "pad short rows after (right) or before (left) their values",
    "truncation": "long rows lose their tail (right) or head (left)",
    "start_stop": "wrap every row in <START> ... <STOP> (ids 2 and 3)",
    "padding_symbol": "Ludwig's padding symbol name; only its default <PAD> is accepted",
    "unknown_symbol": "Ludwig's unknown symbol name; only its default <UNK> is accepted",
    "symbols": "special symbol ids: prepflow's (<PAD>=0, <UNK>=1) or ludwig's (<EOS>=0, <SOS>=1, <PAD>=2, "
               "<UNK>=3, rows wrapped in <SOS> ... <EOS>); compatibility: ludwig sets ludwig",
    # text (Keras TextVectorization)
    "standardize": "Keras TextVectorization standardization: lower_and_strip_punctuation (ASCII, the default once a "
                   "Keras option is set), lower, strip_punctuation or none",
    "split": "Keras TextVectorization split: whitespace (the default once a Keras option is set), character, or a "
             "prepflow tokenizer name",
    "ngrams": "also count n-grams up to this length (1-3; Keras' order and separator)",
    "output_mode": "int (word and character ids), or count, binary, tfidf (one n x vocab_size float32 vector; "
                   "multi_hot and tf_idf are Keras' names for binary and tfidf)",
    "max_tokens": "Keras' vocabulary size limit (special symbols included)",
    "char_most_common": "the character vocabulary's size limit (the <name>_char column)",
    "char_max_sequence_length": "the longest row in characters kept in the <name>_char column",
    # timeseries
    "timeseries_length_limit": "the longest series kept; L is the smaller of this and the longest fitted row",
    "padding_value": "the value padding positions get",
    # vector
    "vector_size": "the number of values per row (default: inferred from the fit rows, which must agree)",
    # date
    "datetime_format": "strftime codes every value must match (e.g. '%d/%m/%Y %H:%M'), or epoch_s / epoch_ms for "
                       "numbers since 1970 (default: ISO 8601, then common formats, per value)",
    "on_parse_error": "a value that is not a date: error (naming the row and column) or fill (treated as missing)",
    # media (image, audio)
    "mode": "eager (tensors in the artifact), lazy (each row's source, decoded by the loader) or lazy_cached "
            "(decoded once into a memmap beside the artifact); default eager",
    "in_memory": "Ludwig's name: false means mode lazy_cached, true eager",
    "on_decode_error": "a file that cannot be decoded: fail (naming the row and path), skip_row, or fill (zeros for "
                       "images, padding_value for audio)",
    "media_root": "the folder every path must stay inside; relative paths resolve against it (a relative "
                  "media_root against the dataset's folder)",
    "num_processes": "decode threads (default: PREPFLOW_MEDIA_THREADS or the CPU count + 1)",
    # image
    "height": "resize every image to this height (set with width; default: inferred from a sample of the fit rows)",
    "width": "resize every image to this width (set with height; default: inferred from a sample of the fit rows)",
    "num_channels": "1, 3 or 4 channels (default: the sample's mean channel count, rounded to one of these)",
    "resize_method": "interpolate, or crop_or_pad to the target size",
    "jpeg_draft": "let libjpeg decode large JPEGs at a reduced scale first (faster; pixels differ slightly)",
    "infer_image_dimensions": "infer height and width from the sample's mean (false: the first image's size)",
    "infer_image_num_channels": "infer num_channels from the sample (false: the first image's)",
    "infer_image_max_height": "the largest inferred height",
    "infer_image_max_width": "the largest inferred width",
    "infer_image_sample_size": "how many images of the fit rows (in input order) inference reads",
    "scaling": "Ludwig model-side option, accepted and ignored (the artifact holds raw uint8 pixels)",
    "standardize_image": "Ludwig model-side option, accepted and ignored (the artifact holds raw uint8 pixels)",
    "requires_equal_dimensions": "Ludwig option, accepted and ignored (every image is resized)",
    # audio
    "type": "audio features: raw (samples), stft, stft_phase, group_delay or fbank (filter banks)",
    "audio_file_length_limit_in_s": "longer audio is cut at this many seconds",
    "window_length_in_s": "the analysis window's length in seconds",
    "window_shift_in_s": "the step between windows in seconds",
    "num_fft_points": "FFT size (default: the window length in samples)",
    "window_type": "the analysis window function",
    "num_filter_bands": "fbank: the number of mel filter bands",
    "norm": "per_file: normalize each file's features to zero mean and unit variance; none (default)",
    "sampling_rate": "the sampling rate in Hz every file is read at (default: the first readable file's of the fit "
                     "rows)",
    "resample": "resample a file at another rate (false: such a file is a decode error naming the rates)",
    "audio_feature": "Ludwig < 0.5 nested the audio options here; not supported (put them under preprocessing)",
    "arithmetic": "float64: normalize in float64, then round to float32; float32: in float32 with the statistics "
                  "rounded first, as Ludwig does (set by compatibility: ludwig)",
    # keys Ludwig reads from the metadata (ludwig --training_set_metadata), recorded at Ludwig's defaults;
    # a config may name them only with these values
    "outlier_strategy": "Ludwig's outlier handling; only null (none) is supported, recorded for Ludwig",
    "outlier_threshold": "Ludwig's outlier z-score threshold; recorded for Ludwig at its default",
    "computed_outlier_fill_value": "Ludwig's outlier fill value; recorded for Ludwig at its default",
    "cache_encoder_embeddings": "Ludwig's encoder-embedding cache; only false is supported, recorded for Ludwig",
    "ngram_size": "Ludwig's n-gram size for its ngram tokenizer; recorded for Ludwig at its default",
    "pretrained_model_name_or_path": "Ludwig's Hugging Face tokenizer; only null is supported, recorded for Ludwig",
    "compute_idf": "Ludwig's compute_idf for text; recorded for Ludwig at its default",
}

# (type, option) -> description, where one type's option means something else than the shared one.
TYPE_DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("timeseries", "tokenizer"): "how a value is split into numbers: space (whitespace) or comma",
    ("set", "fill_value"): "the tokens missing rows get with missing_value_strategy fill_with_const (default '': none)",
    ("bag", "fill_value"): "the tokens missing rows get with missing_value_strategy fill_with_const (default '': none)",
    ("date", "fill_value"): "the date missing rows get with fill_with_const, in any accepted form, or '' "
                            "(nine zeros)",
    ("binary", "strings"): "which strings are true: prepflow's (yes/no, true/false, on/off, 1/0; of two other "
                           "strings the larger) or ludwig's (Ludwig's sets, no on/off; of two other strings the "
                           "smaller); compatibility: ludwig sets ludwig",
    ("category", "symbols"): "vocabulary layout: prepflow's (<UNK>=0, then by count, ties by value) or ludwig's "
                             "(by count, ties by first row, <UNK> only when most_common cuts); compatibility: "
                             "ludwig sets ludwig",
    ("set", "symbols"): "vocabulary layout: prepflow's (<PAD>=0, <UNK>=1) or ludwig's (no <PAD>, <UNK> at id 3, "
                        "ties by first occurrence); compatibility: ludwig sets ludwig",
    ("bag", "symbols"): "vocabulary layout: prepflow's (<PAD>=0, <UNK>=1) or ludwig's (<EOS>, <SOS>, <PAD>, <UNK> "
                        "= 0-3); compatibility: ludwig sets ludwig",
}


def option_description(type_name: str, cls: type, option: str, field) -> str | None:
    """An option's description: the model field's own, else this module's (per type, then shared)."""
    if field.description:
        return field.description
    if option == "missing_value_strategy":
        strategies = ", ".join(cls.allowed_missing_strategies)
        return (f"how missing values are filled: one of {strategies}; default {cls.default_missing_strategy} "
                "(drop_row for an output feature)")
    return TYPE_DESCRIPTIONS.get((type_name, option)) or DESCRIPTIONS.get(option)


def preprocessing_schema(type_name: str, cls: type) -> tuple[dict, dict]:
    """The JSON Schema of one feature type's options and the ``$defs`` it refers to."""
    schema = cls.Preprocessing.model_json_schema(ref_template="#/$defs/{model}")
    defs = schema.pop("$defs", {})
    schema["title"] = f"{type_name} preprocessing"
    for option, field in cls.Preprocessing.model_fields.items():
        text = option_description(type_name, cls, option, field)
        prop = schema["properties"].get(field.alias or option)
        if prop is not None and text:
            prop["description"] = text
    return schema, defs


def json_schema() -> dict:
    """The config's JSON Schema (draft 2020-12) with every registered feature type's options."""
    schema = structure_schema()
    defs: dict[str, Any] = schema["$defs"]
    branches = []
    for type_name, cls in REGISTRY.items():
        options, nested = preprocessing_schema(type_name, cls)
        for name, sub in nested.items():
            defs.setdefault(name, sub)
        defs[f"{type_name}_preprocessing"] = options
        branches.append({"if": {"properties": {"type": {"const": type_name}}, "required": ["type"]},
                         "then": {"properties": {"preprocessing": {"$ref": f"#/$defs/{type_name}_preprocessing"}}}})
    feature = defs["FeatureConfig"]
    feature["allOf"] = branches
    feature["properties"]["type"]["description"] = (
        f"the feature type: one of {', '.join(REGISTRY)}, or a plugin's 'pkg.module:Class'; none: inferred")
    feature["properties"]["preprocessing"]["description"] = "the feature type's options ($defs/<type>_preprocessing)"
    defaults = schema["properties"]["defaults"]
    defaults["properties"] = {
        type_name: {"allOf": [{"$ref": "#/$defs/TypeDefaults"}],
                    "properties": {"preprocessing": {"$ref": f"#/$defs/{type_name}_preprocessing"}}}
        for type_name in REGISTRY}
    defaults["description"] = "per-type preprocessing defaults, merged under each feature's own block (as in Ludwig)"
    return schema
