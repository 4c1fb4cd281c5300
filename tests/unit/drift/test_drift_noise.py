"""Drift judged against its sampling noise (tasks/drift/noise.py): no warning that sampling alone explains,
a real shift still caught, and the noise figure the formula's at the sizes compared."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import prepflow
from tasks.drift import measures, noise
from tests.helpers import write_csv

ROOT = Path(__file__).resolve().parents[3]
TITANIC = ROOT / "examples" / "titanic"


def psi_formula(k: int, n1: int, n2: int) -> float:
    s = 1 / n1 + 1 / n2
    return (k - 1) * s + noise.Z * math.sqrt(2 * (k - 1)) * s


def test_psi_noise_is_the_chi_square_level():
    assert noise.psi([100] * 10, [10] * 10) == pytest.approx(psi_formula(10, 1000, 100))
    assert noise.psi([100, 0, 100], [5, 0, 5]) == pytest.approx(psi_formula(2, 200, 10))  # empty bins left out
    assert noise.psi([100] * 10, [0] * 10) == 0.0


def test_proportion_and_linf_noise():
    assert noise.proportion(10, 100, 30, 100) == pytest.approx(noise.Z * math.sqrt(0.2 * 0.8 * 0.02))
    ref, _tail = measures.category_reference("c", np.array([0, 50, 50]))
    # pooled frequencies 0, .5, .5: the largest standard deviation is sqrt(.25 * (1/100 + 1/100))
    assert noise.linf(ref.counts, np.array([0, 50, 50]), skip=0) == pytest.approx(noise.Z * math.sqrt(0.25 * 0.02))
    assert noise.oov(ref.counts, 0, np.array([20, 40, 40])) == pytest.approx(noise.proportion(0, 100, 20, 100))


@pytest.mark.parametrize("n1, n2", [(624, 89), (5000, 200), (100_000, 20_000)])
def test_no_drift_rarely_passes_its_noise(n1, n2):
    """Samples of one distribution: the raw PSI is mostly over its no-drift expectation's ~(k-1)s, but passes
    its noise level in only a few percent of draws."""
    rng = np.random.default_rng(n1)
    over_expectation = over_noise = 0
    draws = 300
    for _ in range(draws):
        train, new = rng.lognormal(0, 1, n1), rng.lognormal(0, 1, n2)
        ref = measures.number_reference("x", train)
        counts = measures.number_counts(ref.starts, new)
        value = measures.psi(ref.counts, counts)
        over_expectation += value > 9 * (1 / n1 + 1 / n2) * 0.5
        over_noise += noise.judged(value, noise.psi(ref.counts, counts)) > 0
    assert over_expectation > draws * 0.5
    assert over_noise < draws * 0.08


def test_titanic_example_does_not_cry_wolf(tmp_path):
    summary = prepflow.run(TITANIC / "config.yaml", TITANIC / "titanic.csv", tmp_path / "out",
                           cache_dir=tmp_path / "cache")
    drift = summary["drift"]
    assert {f: e["status"] for f, e in drift.items()} == dict.fromkeys(drift, "ok")
    age = drift["Age"]
    assert age["value"] > 0 and age["noise"] > age["value"] / 2
    # the noise is the formula's at the sizes compared: the train rows against the entry's split's rows
    k = sum(1 for p, q in zip(age["fitted"], age["new"], strict=True) if p > 0 or q > 0)
    assert age["noise"] == pytest.approx(psi_formula(k, summary["rows"]["train"], summary["rows"][age["split"]]),
                                         abs=1e-6)


def shifted(n: int, shift: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    split = rng.choice([0, 1, 2], n, p=[0.7, 0.1, 0.2])
    x = rng.normal(0.0, 1.0, n) + shift * (split == 2)
    colors = np.where((split == 2) & (rng.random(n) < shift / 2), "red", rng.choice(["red", "green", "blue"], n))
    return pd.DataFrame({"x": x, "color": colors, "y": rng.integers(0, 2, n).astype(bool), "split": split})


CONFIG = {"input_features": [{"name": "x", "type": "number"}, {"name": "color", "type": "category"}],
          "output_features": [{"name": "y", "type": "binary"}],
          "preprocessing": {"split": {"type": "fixed", "column": "split"}}}


@pytest.mark.parametrize("shift, status", [(0.0, "ok"), (1.0, "fail")])
def test_a_real_shift_is_still_caught(tmp_path, shift, status):
    data = write_csv(shifted(2000, shift, 3), tmp_path / "data.csv")
    summary = prepflow.run(CONFIG, data, tmp_path / "out", cache_dir=tmp_path / "cache")
    x = summary["drift"]["x"]
    assert x["status"] == status and (x["split"] == "test" or status == "ok")
    assert x["noise"] < 0.1  # at 1400 against 400 rows the noise is small beside a 1-std shift's PSI (~1)
    if shift:
        assert summary["drift"]["color"]["status"] in ("warn", "fail")
