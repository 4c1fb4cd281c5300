"""The prepflow config schema: a superset of Ludwig's preprocessing config (pydantic models).

This module is the schema only; it imports no feature type. Read a config with
``tasks.config.loader.load_config``/``parse_config``, which bring Ludwig's forms to this one
(``tasks.config.ludwig``), validate it here (unknown keys and bad values raise ``ConfigError`` naming
the key path and the closest valid spelling) and resolve each feature's ``preprocessing`` with its
feature type (``tasks.config.loader.resolve_preprocessing``).

Ludwig's model-side sections (``combiner``, ``trainer``, ``hyperopt``, ...) and feature keys
(``encoder``, ``decoder``, ``loss``, ...) are declared here so that editors and "did you mean" know
them; ``tasks.config.ludwig`` drops their values before validation, so they never reach the
normalized config or the artifact id.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.options import StrictModel

LUDWIG_FEATURE_KEYS = ("encoder", "decoder", "loss", "tied", "dependencies", "reduce_input",
                       "reduce_dependencies", "top_k", "calibration", "threshold", "class_similarities",
                       "column", "proc_column", "active", "augmentation", "input_size")


class FeatureConfig(BaseModel):
    """One input or output feature. ``preprocessing`` is validated by the feature type."""

    model_config = ConfigDict(extra="forbid")
    # Ludwig's model-side keys are accepted but never offered as "did you mean" (core.options)
    hidden_keys: typing.ClassVar[tuple[str, ...]] = tuple(k for k in LUDWIG_FEATURE_KEYS if k != "column")
    name: str = Field(min_length=1)
    type: str | None = None  # None: inferred from the data (``infer_types``)
    column: str | None = None  # Ludwig: the dataset column; defaults to ``name``
    preprocessing: dict[str, Any] = Field(default_factory=dict)
    # Ludwig model-side keys, accepted and ignored.
    encoder: Any = None
    decoder: Any = None
    loss: Any = None
    tied: Any = None
    dependencies: Any = None
    reduce_input: Any = None
    reduce_dependencies: Any = None
    top_k: Any = None
    calibration: Any = None
    threshold: Any = None
    class_similarities: Any = None
    proc_column: Any = None
    active: Any = None
    augmentation: Any = None
    input_size: Any = None

    @property
    def source_column(self) -> str:
        return self.column or self.name


class SplitConfig(StrictModel):
    type: Literal["random", "fixed", "stratify", "datetime", "hash"] = "random"
    probabilities: list[float] = Field(default_factory=lambda: [0.7, 0.1, 0.2])
    seed: int = 42
    column: str | None = None  # fixed / stratify / datetime / hash
    # random: exact counts (None, the default: proportions exact to within a row; adding rows can move a row to
    # another split) or false: each row's split from its own hash of (seed, position), never moved by rows
    # added later (a growing folder's earlier files keep their fits cached); proportions then in expectation
    exact: bool | None = None

    @field_validator("probabilities")
    @classmethod
    def _probabilities(cls, value: list[float]) -> list[float]:
        if len(value) != 3:
            raise ValueError("must have 3 values (train, validation, test)")
        if any(p < 0 for p in value):
            raise ValueError("must be non-negative")
        if abs(sum(value) - 1.0) > 1e-6:
            raise ValueError(f"must sum to 1; they sum to {sum(value):g}")
        return value

    @model_validator(mode="after")
    def _column_needed(self) -> "SplitConfig":
        if self.type == "fixed" and not self.column:
            self.column = "split"  # Ludwig's default column for a fixed split
        if self.type != "random" and not self.column:
            raise ValueError(f"split type '{self.type}' needs 'column'")
        if self.type != "random" and self.exact is not None:
            raise ValueError(f"'exact' is an option of the random split, not of '{self.type}'")
        return self


class BalanceConfig(StrictModel):
    oversample_minority: float | None = Field(default=None, gt=0, le=1)
    undersample_majority: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _exclusive(self) -> "BalanceConfig":
        if self.oversample_minority is not None and self.undersample_majority is not None:
            raise ValueError("oversample_minority and undersample_majority are mutually exclusive")
        return self


class CsvOptions(StrictModel):
    """How CSV/TSV datasets are read; what is not given is sniffed from the file (tasks/dataset/csv_dialect.py)."""

    delimiter: str | None = Field(default=None, min_length=1, max_length=1, pattern=r'^[^"\r\n]$',
                                  description="the field delimiter (one character, e.g. ';' or a tab); "
                                              "default: sniffed among , tab ; |")


class GlobalPreprocessing(StrictModel):
    split: SplitConfig = Field(default_factory=SplitConfig)
    csv: CsvOptions | None = None  # None (not an empty model): configs without it keep their artifact ids
    balance: BalanceConfig = Field(default_factory=BalanceConfig)
    # Ludwig spells the balance options directly under preprocessing; both are accepted.
    oversample_minority: float | None = Field(default=None, gt=0, le=1)
    undersample_majority: float | None = Field(default=None, gt=0, le=1)
    fit_on: Literal["train", "all"] = "train"
    sample_ratio: float = Field(default=1.0, gt=0, le=1)
    sample_size: int | None = Field(default=None, gt=0)
    sample_seed: int = 42
    # a folder's or glob's files whose columns differ from the first file's: fail (None, the default) or allow
    # (a missing column read as nulls: a schema-drift entry of the run); None keeps configs' artifact ids
    schema_drift: Literal["fail", "allow"] | None = None

    @model_validator(mode="after")
    def _merge_balance(self) -> "GlobalPreprocessing":
        if self.oversample_minority is not None or self.undersample_majority is not None:
            self.balance = BalanceConfig(
                oversample_minority=self.oversample_minority or self.balance.oversample_minority,
                undersample_majority=self.undersample_majority or self.balance.undersample_majority,
            )
            self.oversample_minority = self.undersample_majority = None
        return self


class TypeDefaults(StrictModel):
    preprocessing: dict[str, Any] = Field(default_factory=dict)
    # Ludwig lets defaults carry encoder/decoder/loss too: accepted and ignored.
    encoder: Any = None
    decoder: Any = None
    loss: Any = None


class DriftThreshold(StrictModel):
    warn: float | None = Field(default=None, ge=0)
    fail: float | None = Field(default=None, ge=0)


class DriftConfig(StrictModel):
    """Drift (``prepflow apply``) and skew (a run's validation/test splits against its train split)."""
    action: Literal["warn", "fail"] = "warn"  # fail: any ``fail`` status stops the run, nothing published
    number: DriftThreshold = Field(default_factory=lambda: DriftThreshold(warn=0.1, fail=0.25))  # PSI
    category: DriftThreshold = Field(default_factory=lambda: DriftThreshold(warn=0.1, fail=0.3))  # L-infinity
    oov_rate: DriftThreshold = Field(default_factory=lambda: DriftThreshold(warn=0.05, fail=0.2))
    missing_rate: DriftThreshold = Field(default_factory=lambda: DriftThreshold(warn=0.05, fail=0.2))
    features: dict[str, DriftThreshold] = Field(default_factory=dict)  # per feature: its main statistic's


class ValidationConfig(StrictModel):
    drift: DriftConfig | None = None  # absent: the defaults (DriftConfig()); None keeps artifact ids unchanged
    raw: str | list[str] | None = None
    encoded: str | list[str] | None = None
    on_failure: Literal["fail", "warn"] = "fail"
    generated: bool = True  # run the suites prepflow derives from the config
    bounds: dict[str, list[float | None]] = Field(default_factory=dict)  # raw gate: column -> [min, max]


class PublishConfig(StrictModel):
    formats: list[Literal["parquet", "npy", "split_binary"]] = Field(default_factory=lambda: ["parquet"])
    channels: dict[str, list[str]] | None = None
    shard_rows: int = Field(default=1_000_000, gt=0)
    row_group_rows: int = Field(default=65_536, gt=0)

    @field_validator("formats")
    @classmethod
    def _formats(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must name at least one format (parquet, npy, split_binary)")
        return sorted(set(value), key=value.index)


class StageSpec(StrictModel):
    uses: str
    after: str = "fill_missing"
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class Config(StrictModel):
    input_features: list[FeatureConfig] = Field(min_length=1)
    output_features: list[FeatureConfig] = Field(default_factory=list)
    preprocessing: GlobalPreprocessing = Field(default_factory=GlobalPreprocessing)
    defaults: dict[str, TypeDefaults] = Field(default_factory=dict)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    publish: PublishConfig = Field(default_factory=PublishConfig)
    stages: list[StageSpec] = Field(default_factory=list)
    # ludwig: Ludwig's defaults where prepflow's differ (tasks.config.ludwig.LUDWIG_DEFAULTS), fit_on: all
    compatibility: Literal["ludwig"] | None = None
    # Ludwig model-side sections, accepted and ignored.
    combiner: Any = None
    trainer: Any = None
    hyperopt: Any = None
    backend: Any = None
    ludwig_version: Any = None
    model_type: Any = None

    @property
    def features(self) -> list[FeatureConfig]:
        return [*self.input_features, *self.output_features]

    def is_output(self, name: str) -> bool:
        return any(f.name == name for f in self.output_features)

    @model_validator(mode="after")
    def _ludwig_fit_on(self) -> "Config":
        if self.compatibility == "ludwig" and "fit_on" not in self.preprocessing.model_fields_set:
            self.preprocessing.fit_on = "all"  # Ludwig fits its metadata on every row
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> "Config":
        seen: set[str] = set()
        for feature in self.features:
            if feature.name in seen:
                raise ValueError(f"feature name '{feature.name}' is used twice")
            seen.add(feature.name)
        return self

    @model_validator(mode="after")
    def _balance_label(self) -> "Config":
        """Balancing needs exactly one binary/category output (an untyped one is checked after inference)."""
        balance = self.preprocessing.balance
        if balance.oversample_minority is None and balance.undersample_majority is None:
            return self
        outputs = self.output_features
        if len(outputs) != 1 or outputs[0].type not in (None, "binary", "category"):
            raise ValueError("preprocessing.balance: balancing needs exactly one output feature of type binary or "
                             f"category, the config has {[(f.name, f.type) for f in outputs]}")
        return self


def json_schema() -> dict:
    schema = Config.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "prepflow config"
    return schema
