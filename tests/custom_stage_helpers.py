"""Custom stages for the tests (``uses: "tests.custom_stage_helpers:Name"``) and the example plugin's install."""

from __future__ import annotations

import fcntl
import importlib
import site
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from core import plugins as core_plugins
from tasks import Stage
from tasks.runtime.statistics import Counter, Histogram

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "plugin"
PLUGIN_DIST = "prepflow-example-plugin"


def ensure_example_plugin() -> None:
    """``pip install --no-deps -e examples/plugin`` into this interpreter's environment unless it is
    there (``make test`` installs it); then make this process see its entry points and package."""

    try:
        metadata.distribution(PLUGIN_DIST)
    except metadata.PackageNotFoundError:
        lock = Path(sys.prefix) / ".prepflow-example-plugin.lock"
        with open(lock, "w") as fh:  # several test processes may share the environment
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                metadata.distribution(PLUGIN_DIST)
            except metadata.PackageNotFoundError:
                subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                                "-e", str(PLUGIN)], check=True)
        site.addsitedir(sysconfig.get_paths()["purelib"])  # runs the new editable .pth in this process
        importlib.invalidate_caches()
    core_plugins.entry_points.cache_clear()


class LogDistance(Stage):
    """DESIGN section 9's example."""

    input_type = {"distance": "float64"}
    output_type = {"log_distance": "float64"}

    def transform(self, df):
        return df.assign(log_distance=np.log1p(df["distance"]))


class Typed(Stage):
    """Types from params, for DAG checks: copies its first input into every output."""

    def __init__(self, inputs: dict, outputs: dict):
        super().__init__(inputs=inputs, outputs=outputs)
        self.input_type = inputs
        self.output_type = outputs

    def transform(self, df):
        source = df[next(iter(self.input_type))]
        return df.assign(**{c: source for c in self.output_type})


class Shout(Stage):
    """Upper-cases a string column (raw phase: on the column as ingested)."""

    input_type = {"city": "string"}
    output_type = {"city_upper": "string"}

    def transform(self, df):
        self.emit(Counter("rows", len(df)))
        return df.assign(city_upper=df["city"].str.upper())


class Centered(Stage):
    """Fits the mean of ``distance`` on the fit rows (exact: integer micro-units summed)."""

    input_type = {"distance": "number"}
    output_type = {"distance_centered": "float64"}

    def create(self):
        return {"sum_micro": 0, "n": 0}

    def add(self, acc, df):
        return self.merge(acc, {"sum_micro": int(np.round(df["distance"].to_numpy() * 1e6).astype(np.int64).sum()),
                                "n": len(df)})

    def merge(self, a, b):
        return {"sum_micro": a["sum_micro"] + b["sum_micro"], "n": a["n"] + b["n"]}

    def extract(self, acc):
        return {"mean": acc["sum_micro"] / 1e6 / max(acc["n"], 1), "n": acc["n"]}

    def transform(self, df, state):
        return df.assign(distance_centered=df["distance"] - state["mean"])


class AddOnly(Centered):
    """Defines ``add`` but inherits ``Stage``'s create and merge: a fit that cannot start or merge."""

    create = Stage.create
    merge = Stage.merge


class WrongDtype(Stage):
    """Declares a float output but returns strings on the partition that holds input row 50."""

    input_type = {"distance": "float64"}
    output_type = {"bad": "float64"}

    def transform(self, df):
        if (df["__row__"] == 49).any():
            return df.assign(bad=df["distance"].astype("string"))
        return df.assign(bad=df["distance"])


class BadStatistics(Stage):
    input_type = {"distance": "float64"}
    output_type = {"ok": "float64"}

    def transform(self, df):
        self.emit({"rows": len(df)})
        return df.assign(ok=df["distance"])


class DropsRows(Stage):
    input_type = {"distance": "float64"}
    output_type = {"ok": "float64"}

    def transform(self, df):
        return df.iloc[1:].assign(ok=df["distance"].iloc[1:])


class MutatesInput(Stage):
    """Overwrites its input in place (allowed, and harmless to the feature that column holds)."""

    input_type = {"distance": "float64"}
    output_type = {"doubled": "float64"}

    def transform(self, df):
        df["distance"] = df["distance"] * 2
        return df.rename(columns={"distance": "doubled"})


class ShiftingHistogram(Stage):
    """Emits a histogram whose buckets depend on the partition (they cannot merge)."""

    input_type = {"distance": "float64"}
    output_type = {"ok": "float64"}

    def transform(self, df):
        hist = Histogram("d", [float(df["__row__"].iloc[0])])
        hist.add_array(df["distance"].to_numpy())
        self.emit(hist)
        return df.assign(ok=df["distance"])


class NotAStage:
    pass


def frame(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "distance": np.round(rng.exponential(500, n), 3),
        "city": rng.choice(["paris", "lima", "oslo", "quito"], n),
        "lat1": rng.uniform(-60, 60, n), "lon1": rng.uniform(-170, 170, n),
        "lat2": rng.uniform(-60, 60, n), "lon2": rng.uniform(-170, 170, n),
        "carrier": rng.choice(["AA", "UA", "DL", "WN", "B6"], n, p=[0.4, 0.3, 0.15, 0.1, 0.05]),
        "notes": rng.choice(["#ml rocks @ana", "Hello, world!", "big #data day #ml", "", None], n),
        "label": rng.integers(0, 2, n),
    })
    df.loc[rng.random(n) < 0.08, "distance"] = None
    df.loc[rng.random(n) < 0.05, "lat1"] = None
    return df
