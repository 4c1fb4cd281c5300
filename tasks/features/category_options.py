"""category's options (``preprocessing:``) and the id layout's constants: ``<UNK>``, the OOV buckets' names,
the largest vocabulary kept inline and the largest id (see ``tasks.features.category``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks.features.base import BasePreprocessing

UNK = "<UNK>"
# ids; a larger vocabulary is stored as Parquet (vocab stage); a change reaches the cache keys through the feature
# type's code (RunContext.features_slice)
INLINE_MAX = 100_000
MAX_IDS = 2**31 - 1  # ids are int32


def oov_name(bucket: int) -> str:
    return f"<OOV_{bucket}>"


class CategoryPreprocessing(BasePreprocessing):
    most_common: int = Field(default=10000, gt=0)
    min_frequency: int = Field(default=1, ge=1)
    num_oov_buckets: int = Field(default=0, ge=0, le=MAX_IDS // 2)
    hash_buckets: int | None = Field(default=None, gt=0, le=MAX_IDS - 1)
    encoded: bool = False  # the column holds integer ids in [0, cardinality), kept as given
    cardinality: int | None = Field(default=None, gt=0, le=MAX_IDS)
    out_of_range_id: int | None = Field(default=None, ge=0)
    # ``ludwig``: Ludwig's vocabulary (see the module docstring); set by ``compatibility: ludwig``
    symbols: Literal["prepflow", "ludwig"] = "prepflow"
    # Keys Ludwig reads from the metadata's preprocessing (``--training_set_metadata``), at Ludwig's defaults:
    # tasks.config.ludwig drops them from a config (and refuses other values), so they hold these values
    lowercase: Literal[False] = False
    cache_encoder_embeddings: bool = False

    @model_validator(mode="after")
    def _one_scheme(self) -> "CategoryPreprocessing":
        if self.hash_buckets is not None and self.num_oov_buckets:
            raise ValueError("hash_buckets hashes every value (no vocabulary), so num_oov_buckets cannot be "
                             "combined with it; use one or the other")
        if self.symbols == "ludwig":
            clash = [k for k in ("num_oov_buckets", "hash_buckets", "encoded") if getattr(self, k)]
            if clash:
                raise ValueError(f"symbols: ludwig is Ludwig's vocabulary (no buckets, no pre-encoded ids), so "
                                 f"{', '.join(clash)} cannot be combined with it")
        if not self.encoded:
            given = [k for k in ("cardinality", "out_of_range_id") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} only apply to pre-encoded ids: add encoded: true")
            return self
        if self.cardinality is None:
            raise ValueError("encoded: true needs cardinality: the number of ids (ids are 0 .. cardinality-1)")
        fields = type(self).model_fields
        clash = [k for k in ("most_common", "min_frequency", "num_oov_buckets", "hash_buckets")
                 if getattr(self, k) != fields[k].default]  # set to something else than the default
        if clash:
            raise ValueError(f"encoded: true keeps the ids as given (no vocabulary, no hashing), so "
                             f"{', '.join(clash)} cannot be combined with it")
        if self.out_of_range_id is not None and self.out_of_range_id >= self.cardinality:
            raise ValueError(f"out_of_range_id {self.out_of_range_id} must be an id below cardinality "
                             f"{self.cardinality}")
        return self
