"""Custom stages: a haversine distance (no fit) and a frequency encoding (fitted in two steps)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from tasks import Stage
from tasks.runtime.statistics import Counter, Histogram

DISTANCE_BUCKETS = (1.0, 10.0, 100.0, 1000.0, 10000.0)


class HaversineParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lat1: str = "lat1"
    lon1: str = "lon1"
    lat2: str = "lat2"
    lon2: str = "lon2"
    output: str = "distance_km"
    radius_km: float = Field(default=6371.0088, gt=0)  # the mean Earth radius


class Haversine(Stage):
    """Great-circle distance in kilometres between (lat1, lon1) and (lat2, lon2), given in degrees.

    A row with a missing coordinate, or one outside [-90, 90] x [-180, 180], gets a missing
    distance (the distance feature's missing-value strategy fills it) and is counted.
    """

    Params = HaversineParams

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.input_type = {p.lat1: "float64", p.lon1: "float64", p.lat2: "float64", p.lon2: "float64"}
        self.output_type = {p.output: "float64"}

    def transform(self, df: pd.DataFrame) -> pd.DataFrame:
        p = self.params
        lat1, lon1, lat2, lon2 = (df[c].to_numpy(dtype="float64", na_value=np.nan) for c in (p.lat1, p.lon1, p.lat2,
                                                                                             p.lon2))
        missing = np.isnan(lat1) | np.isnan(lon1) | np.isnan(lat2) | np.isnan(lon2)
        with np.errstate(invalid="ignore"):
            invalid = ~missing & ((np.abs(lat1) > 90) | (np.abs(lat2) > 90) | (np.abs(lon1) > 180)
                                  | (np.abs(lon2) > 180))
        phi1, phi2 = np.radians(lat1), np.radians(lat2)
        a = (np.sin((phi2 - phi1) / 2) ** 2
             + np.cos(phi1) * np.cos(phi2) * np.sin(np.radians(lon2 - lon1) / 2) ** 2)
        distance = 2.0 * p.radius_km * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
        distance[missing | invalid] = np.nan
        hist = Histogram("distance_km", DISTANCE_BUCKETS)
        hist.add_array(distance[~np.isnan(distance)])
        self.emit(Counter("missing_coordinates", int(missing.sum())), Counter("invalid_coordinates", int(invalid.sum())),
                  hist)
        return df.assign(**{p.output: distance})


class FrequencyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    column: str
    output: str | None = None  # default: <column>_freq


class FrequencyEncode(Stage):
    """Count encoding: each value -> its share of the fit rows (0.0 for a value not seen there).

    Fitted like a built-in feature (``tasks.runtime.combine``): ``create`` starts empty, ``add`` counts a
    partition's values, ``merge`` adds the counts (exact, so the partitioning does not matter),
    ``extract`` keeps them, sorted, with the total.
    The state is ``{"counts": {value: count}, "total": rows}``.
    """

    Params = FrequencyParams

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.input_type = {p.column: "string"}
        self.output_type = {p.output or f"{p.column}_freq": "float64"}

    @property
    def output(self) -> str:
        return next(iter(self.output_type))

    def create(self) -> dict:
        return {"counts": {}, "total": 0}

    def add(self, acc: dict, df: pd.DataFrame) -> dict:
        values = df[self.params.column]
        counts = values.dropna().astype("string").value_counts(sort=False)
        return self.merge(acc, {"counts": {str(k): int(v) for k, v in counts.items()}, "total": int(len(values))})

    def merge(self, a: dict, b: dict) -> dict:
        counts = dict(a["counts"])
        for k, v in b["counts"].items():
            counts[k] = counts.get(k, 0) + v
        return {"counts": counts, "total": a["total"] + b["total"]}

    def extract(self, acc: dict) -> dict:
        return {"counts": dict(sorted(acc["counts"].items())), "total": acc["total"]}

    def transform(self, df: pd.DataFrame, state: dict) -> pd.DataFrame:
        values = df[self.params.column].astype("string")
        counts = values.map(state["counts"]).astype("float64")
        unseen = counts.isna() & values.notna()
        self.emit(Counter("unseen", int(unseen.sum())))
        share = counts.fillna(0.0).to_numpy() / max(state["total"], 1)
        return df.assign(**{self.output: share})
