"""The numeric part of serving-time preprocessing as TorchScript-able ``torch.nn.Module``s.

``NumberNormalizer`` applies, column by column, what the pipeline did to number features:
fill a missing value (NaN) with ``computed_fill_value`` (strategies fill_with_mean / _const /
_mode; columns filled by ffill/bfill/drop_row pass NaN through), then normalize in float64 and
round to float32 once, exactly as ``NumberFeature.encode`` does:

    zscore  (x - mean) / (std or 1)     minmax  (x - min) / ((max - min) or 1)
    iq      (x - q2) / ((q3 - q1) or 1)  log1p   log1p(x)          none  x

Subtraction and division are correctly rounded IEEE operations in both numpy and torch, so
zscore/minmax/iq/none agree bit for bit with ``Preprocessor.transform``; ``log1p`` goes through
each library's own log1p and may differ in the last float64 bit, which rounding to float32
almost always absorbs (the tests allow one float32 ulp there and nowhere else).

``NumberDiscretizer`` is one ``normalization: bins`` feature: fill, then the int32 bin id
``searchsorted(bin_edges[1:-1], x, right)``, exactly as ``NumberFeature.encode``.
"""

import math
from typing import List

import torch

from core.errors import DataError

FILLED = ("fill_with_mean", "fill_with_const", "fill_with_mode")


def _number_meta(metadata: dict, name: str) -> dict:
    meta = metadata.get(name)
    if meta is None or meta.get("type") not in ("number", "numerical"):
        raise DataError(f"'{name}' is not a number feature of this artifact; number features: "
                        f"{[n for n, m in metadata.items() if m.get('type') in ('number', 'numerical')]}")
    return meta


def _fill(meta: dict) -> float:
    pre = meta.get("preprocessing", {})
    value = pre.get("computed_fill_value")
    return float(value) if pre.get("missing_value_strategy") in FILLED and value is not None else math.nan


def _shift_scale(meta: dict, name: str) -> tuple[float, float, bool]:
    norm = meta.get("normalization", "none")
    if norm == "zscore":
        return meta["mean"], meta["std"] or 1.0, False
    if norm == "minmax":
        return meta["min"], (meta["max"] - meta["min"]) or 1.0, False
    if norm == "iq":
        return meta["q2"], (meta["q3"] - meta["q1"]) or 1.0, False
    if norm == "log1p":
        return 0.0, 1.0, True
    if norm == "none":
        return 0.0, 1.0, False
    if norm == "bins":
        raise DataError(f"number feature '{name}' is discretized (normalization: bins); export it with "
                        "Preprocessor.torch_discretizer")
    raise DataError(f"number feature '{name}': normalization {norm!r} has no torch export")


class NumberNormalizer(torch.nn.Module):
    """``n x k`` raw number columns (float64, NaN = missing) -> ``n x k`` float32 encoded columns."""

    features: List[str]

    def __init__(self, features: List[str], fill: List[float], shift: List[float], scale: List[float],
                 log1p: List[bool]):
        super().__init__()
        self.features = list(features)
        self.register_buffer("fill", torch.tensor(fill, dtype=torch.float64))
        self.register_buffer("shift", torch.tensor(shift, dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float64))
        self.register_buffer("log1p", torch.tensor(log1p, dtype=torch.bool))

    @classmethod
    def from_metadata(cls, metadata: dict, features: List[str]) -> "NumberNormalizer":
        fill, shift, scale, log1p = [], [], [], []
        for name in features:
            meta = _number_meta(metadata, name)
            fill.append(_fill(meta))
            a, b, is_log = _shift_scale(meta, name)
            shift.append(float(a))
            scale.append(float(b))
            log1p.append(is_log)
        return cls(features, fill, shift, scale, log1p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float64)
        x = torch.where(torch.isnan(x), self.fill, x)
        out = torch.where(self.log1p, torch.log1p(x), (x - self.shift) / self.scale)
        return out.to(torch.float32)


class NumberDiscretizer(torch.nn.Module):
    """One discretized number feature: ``n`` raw values (float64, NaN = missing) -> ``n`` int32 bin ids."""

    feature: str

    def __init__(self, feature: str, fill: float, bin_edges: List[float]):
        super().__init__()
        self.feature = feature
        self.register_buffer("fill", torch.tensor(fill, dtype=torch.float64))
        self.register_buffer("inner", torch.tensor(bin_edges[1:-1], dtype=torch.float64))

    @classmethod
    def from_metadata(cls, metadata: dict, feature: str) -> "NumberDiscretizer":
        meta = _number_meta(metadata, feature)
        if meta.get("normalization") != "bins":
            raise DataError(f"number feature '{feature}' is not discretized (normalization: "
                            f"{meta.get('normalization')}); export it with Preprocessor.torch_module")
        return cls(feature, _fill(meta), [float(e) for e in meta["bin_edges"]])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float64)
        x = torch.where(torch.isnan(x), self.fill, x)
        return torch.searchsorted(self.inner, x.contiguous(), right=True).to(torch.int32)
