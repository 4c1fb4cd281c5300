"""The base of the media feature types (image, audio): options every mode shares.

A media feature's raw value is a path (absolute, relative to the dataset's folder, or an fsspec
URL) or, for a pandas DataFrame passed in Python, an in-memory value that ingest stored in the
media cache (``storage.media``). Options:

* ``mode``: ``eager`` (tensors in the artifact), ``lazy`` (each row's source in the artifact,
  decoded by the loader), ``lazy_cached`` (decoded once into a memmap beside the artifact). Ludwig's
  ``in_memory: false`` means ``lazy_cached``.
* ``on_decode_error``: ``fail`` (default; DataError naming the row and path), ``skip_row`` or
  ``fill`` (the codec's fill tensor: zeros for images, ``padding_value`` for audio). The same in
  every mode: a value is judged when the artifact is made.
* ``media_root``: the folder every path must stay inside (relative paths resolve against it; a
  relative ``media_root`` against the dataset's folder).
* ``num_processes`` (Ludwig's name): decode threads (default: ``PREPFLOW_MEDIA_THREADS`` or the CPU
  count + 1).

Missing values default to ``bfill`` as in Ludwig. The fitted state (size, channels, sampling
rate, ...) needs the media itself, so it is finalized by the ``media_cache`` stage
(``finalize_media``), not by ``vocab``: until then the metadata has no ``codec`` and ``encode``
passes each row's raw value through for that stage. With the finalized metadata (serving),
``encode`` decodes the values into tensors.
"""

from __future__ import annotations

import os
from typing import Any, Callable, ClassVar, Iterator, Literal, TypeVar

import numpy as np
from pydantic import Field

from core.errors import DataError, NotFittedError
from core.lazy import pandas as pd
from storage.media_io import MediaError, decode_source, default_threads, ordered_map, resolve
from tasks.features.base import BasePreprocessing, ColumnSpec, FeatureType

MODES = ("eager", "lazy", "lazy_cached")
T = TypeVar("T")


class MediaPreprocessing(BasePreprocessing):
    mode: Literal["eager", "lazy", "lazy_cached"] | None = None
    in_memory: bool | None = None  # Ludwig: true -> eager, false -> lazy_cached
    on_decode_error: Literal["fail", "skip_row", "fill"] = "fail"
    media_root: str | None = None
    num_processes: int | None = Field(default=None, ge=1)


class MediaFeature(FeatureType):
    media_kind: ClassVar[str] = ""
    codec_type: ClassVar[type]  # the storage codec class (ImageCodec, AudioCodec) its metadata's ``codec`` describes
    Preprocessing = MediaPreprocessing
    default_missing_strategy = "bfill"
    allowed_missing_strategies = ("fill_with_const", "bfill", "ffill", "drop_row")
    fitted_keys = ("mode",)

    @property
    def mode(self) -> str:
        if self.options.mode is not None:
            return self.options.mode
        return "lazy_cached" if self.options.in_memory is False else "eager"

    def cast(self, values: pd.Series, rows: np.ndarray) -> pd.Series:
        if isinstance(values.dtype, pd.StringDtype):
            return values
        bad = values.map(lambda v: v is not None and v is not pd.NA and not isinstance(v, str)
                         and not (isinstance(v, float) and np.isnan(v))).to_numpy(dtype=bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"row {int(rows[i])}, column '{self.column}': {self.describe()} expects a path or "
                            f"URL, got {type(values.iloc[i]).__name__}; in-memory media values are read from a pandas "
                            "DataFrame passed in Python")
        return values.astype("string")

    # ---- fitted state (finalized by the media_cache stage) --------------------------------------
    def extract(self, acc: Any, missing_state: dict) -> dict:
        return {"mode": self.mode}

    def finalize_media(self, sample: Iterator[bytes]) -> dict:
        """Metadata needing the media (``codec`` included) from the fit rows' sources, in input order."""
        raise NotImplementedError

    def probe_sample(self, sample: Iterator[bytes], probe: Callable[[bytes], T], want: int, none_readable: str) -> list[T]:
        """``probe`` of up to ``want`` readable sources of ``sample`` (the fit rows' media, in input order),
        for ``finalize_media``. Unreadable ones are skipped here (``on_decode_error`` judges them when
        decoded); a DataError ``<feature>: <none_readable>`` when not one is readable."""

        found: list[T] = []
        for data in sample:
            try:
                found.append(probe(data))
            except MediaError:
                continue
            if len(found) >= want:
                break
        if not found:
            raise DataError(f"{self.describe()}: {none_readable}")
        return found

    def codec(self, metadata: dict):
        if "codec" not in metadata:
            raise NotFittedError(f"{self.describe()}: the metadata has no 'codec'; the media_cache stage finalizes it")
        if metadata["codec"].get("kind") != self.codec_type.kind:
            raise DataError(f"{self.describe()}: the metadata's codec is {metadata['codec'].get('kind')!r}, expected "
                            f"{self.codec_type.kind!r}")
        return self.codec_type.from_json(metadata["codec"])

    def output_columns(self, metadata: dict) -> list[ColumnSpec]:
        codec = self.codec(metadata)
        if metadata.get("mode", self.mode) == "eager":
            return [ColumnSpec(self.name, codec.dtype.name, tuple(codec.shape))]
        return [ColumnSpec(self.name, "int64", ())]

    # ---- encode ------------------------------------------------------------------------------------
    def encode(self, values: pd.Series, metadata: dict) -> dict[str, np.ndarray]:
        self.check_fitted(metadata)
        if "codec" not in metadata:  # the encode stage: the media_cache stage decodes
            return {self.name: np.array([None if pd.isna(v) else str(v) for v in values.tolist()], dtype=object)}
        return {self.name: self.decode_values(values, metadata)}

    def decode_values(self, values: pd.Series, metadata: dict) -> np.ndarray:
        """Serving: paths (absolute, or relative to the working directory / ``media_root``) -> tensors."""


        codec = self.codec(metadata)
        policy = self.options.on_decode_error

        def one(item):
            i, raw = item
            try:
                if raw is None:
                    raise MediaError("missing value")
                return decode_source(codec, resolve(raw, os.getcwd(), self.options.media_root))[0]
            except MediaError as exc:
                if policy == "fill":
                    return codec.fill()
                hint = " (skip_row cannot drop rows at serving time)" if policy == "skip_row" else ""
                raise DataError(f"row {i}, column '{self.column}': {self.describe()} cannot decode {raw!r}: "
                                f"{exc}{hint}") from None

        raws = [None if pd.isna(v) else str(v) for v in values.tolist()]
        out = np.empty((len(raws), *codec.shape), dtype=codec.dtype)
        threads = self.options.num_processes or default_threads()
        for i, arr in enumerate(ordered_map(one, enumerate(raws), threads)):
            out[i] = arr
        return out
