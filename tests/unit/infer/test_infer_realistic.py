"""Inference on realistic generated tables (Titanic-like, MovieLens-like, flights-like): the types a person
would pick, and `prepflow infer`'s config runs as printed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from flows.cli import main as cli_main
from flows.infer import infer_dataset
from storage.artifact import Artifact
from tasks.infer_types import rules
from tests.helpers import run, write_csv

RNG = np.random.default_rng(1912)
GENRES = ["Action", "Adventure", "Animation", "Children", "Comedy", "Crime", "Documentary", "Drama", "Fantasy",
          "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western"]


def titanic(n: int = 891) -> pd.DataFrame:
    sex = RNG.choice(["male", "female"], n, p=[0.65, 0.35])
    survived = (RNG.random(n) < np.where(sex == "female", 0.74, 0.19)).astype(int)
    first = RNG.choice(["John", "Mary", "William", "Anna", "Karl", "Elin", "Patrick", "Bridget"], n)
    surname = [f"Surname{i}" for i in RNG.integers(0, 700, n)]
    title = np.where(sex == "female", RNG.choice(["Mrs.", "Miss."], n), "Mr.")
    age = np.round(RNG.gamma(5, 6, n), 0)
    return pd.DataFrame({
        "PassengerId": np.arange(1, n + 1), "Survived": survived, "Pclass": RNG.choice([1, 2, 3], n, p=[.24, .21, .55]),
        "Name": [f"{s}, {t} {f} {m}" for s, t, f, m in zip(surname, title, first, RNG.choice(list("ABCDEH"), n),
                                                                strict=True)],  # surnames repeat, like families
        "Sex": sex, "Age": np.where(RNG.random(n) < 0.2, np.nan, age),
        "SibSp": RNG.choice([0, 1, 2, 3, 4], n, p=[.68, .23, .05, .02, .02]),
        "Fare": np.round(np.exp(RNG.normal(2.6, 1.3, n)), 4),
        "Cabin": np.where(RNG.random(n) < 0.77, None, [f"C{i}" for i in RNG.integers(1, 150, n)]),
        "Embarked": RNG.choice(["S", "C", "Q"], n, p=[.72, .19, .09]),
    })


def movielens(n: int = 5000) -> pd.DataFrame:
    movie_ids = np.sort(RNG.choice(np.arange(1, 193_610), 400, replace=False))
    genres = {m: "|".join(sorted(set(RNG.choice(GENRES, RNG.integers(1, 5))))) for m in movie_ids}
    movie = RNG.choice(movie_ids, n)
    return pd.DataFrame({
        "userId": RNG.integers(1, 611, n), "movieId": movie, "genres": [genres[m] for m in movie],
        "rating": RNG.choice(np.arange(1, 11) / 2, n), "timestamp": RNG.integers(828_124_615, 1_537_799_250, n),
    })


def flights(n: int = 5000) -> pd.DataFrame:
    carriers = RNG.choice(["AA", "DL", "UA", "WN", "B6"], n)
    return pd.DataFrame({
        "UniqueCarrier": carriers, "FlightNum": RNG.choice(RNG.integers(1, 7000, 900), n),
        "TailNum": [f"N{i}{c}" for i, c in zip(RNG.integers(100, 999, n), carriers, strict=True)],
        "DepTime": RNG.integers(1, 2400, n), "DepDelay": np.round(RNG.normal(5, 30, n)),
        "Origin": RNG.choice(["ATL", "ORD", "DFW", "LAX", "JFK", "SFO", "SEA"], n), "Distance": RNG.integers(80, 2700, n),
        "Cancelled": (RNG.random(n) < 0.02).astype(int), "user_id": RNG.choice(10**8, n, replace=False) + 10**8,
        "booked_at_ms": RNG.integers(1_500_000_000_000, 1_560_000_000_000, n),
    })


def infer(df: pd.DataFrame, folder: Path, target: str) -> dict[str, rules.Inferred]:
    path = write_csv(df, folder / "data.csv")
    return {i.name: i for i in infer_dataset(str(path), target=target)[0]}


def test_titanic_like(tmp_path):
    got = infer(titanic(), tmp_path, "Survived")
    assert {k: v.type for k, v in got.items()} == {
        "PassengerId": None, "Survived": "binary", "Pclass": "category", "Name": "text", "Sex": "binary",
        "Age": "number", "SibSp": "number", "Fare": "number", "Cabin": "category", "Embarked": "category"}
    assert got["Sex"].preprocessing == {"fallback_true_label": "female"}
    assert "true label 'female': the rarer value" in got["Sex"].reason
    assert "consider preprocessing: {normalization: log1p}" in got["Fare"].reason
    assert "log1p" not in got["Age"].reason and "log1p" not in got["SibSp"].reason


def test_movielens_like(tmp_path):
    got = infer(movielens(), tmp_path, "rating")
    assert {k: v.type for k, v in got.items()} == {"userId": "category", "movieId": "category", "genres": "set",
                                                  "rating": "number", "timestamp": "date"}
    assert got["genres"].preprocessing == {"tokenizer": "regex", "pattern": r"\s*\|\s*"}
    assert got["timestamp"].preprocessing == {"datetime_format": "epoch_s"}
    assert "never" not in got["userId"].reason and "identifier" in got["userId"].reason


def test_flights_like(tmp_path):
    got = infer(flights(), tmp_path, "Cancelled")
    assert {k: v.type for k, v in got.items()} == {
        "UniqueCarrier": "category", "FlightNum": "category", "TailNum": "category", "DepTime": "number",
        "DepDelay": "number", "Origin": "category", "Distance": "number", "Cancelled": "binary", "user_id": None,
        "booked_at_ms": "date"}
    assert "ID-like" in got["user_id"].reason and got["booked_at_ms"].preprocessing == {"datetime_format": "epoch_ms"}


@pytest.mark.integration
def test_the_printed_config_runs_as_printed(tmp_path, capsys):
    """`prepflow infer` -> YAML -> `prepflow run`: the binary's true label and the set's tokenizer are
    in the config and the artifact follows them."""
    df = titanic().drop(columns=["Name"])
    df["Tags"] = [",".join(sorted(set(RNG.choice(["vip", "crew", "family", "solo"], RNG.integers(1, 3)))))
                  for _ in range(len(df))]
    df["Genres"] = ["|".join(sorted(set(RNG.choice(GENRES[:6], RNG.integers(1, 4))))) for _ in range(len(df))]
    data = write_csv(df, tmp_path / "data.csv")
    assert cli_main(["infer", str(data), "--target", "Survived"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    features = {f["name"]: f for f in config["input_features"]}
    assert features["Sex"] == {"name": "Sex", "type": "binary", "preprocessing": {"fallback_true_label": "female"}}
    assert features["Tags"] == {"name": "Tags", "type": "set", "preprocessing": {"tokenizer": "comma"}}
    assert features["Genres"]["preprocessing"] == {"tokenizer": "regex", "pattern": r"\s*\|\s*"}
    result = run(config, data, tmp_path / "out")
    art = Artifact.open(result.artifact["artifact_path"])
    meta = json.loads((Path(result.artifact["artifact_path"]) / "training_set_metadata.json").read_text())
    assert meta["Sex"]["str2bool"] == {"female": True, "male": False}
    assert set(meta["Tags"]["idx2str"][2:]) == {"vip", "crew", "family", "solo"}
    assert set(meta["Genres"]["idx2str"][2:]) == set(GENRES[:6])
    train = art.read_split("train")
    assert train["Tags"].shape[1] == 6


@pytest.mark.integration
def test_an_untyped_two_valued_feature_gets_the_explained_true_label_in_a_run(tmp_path):
    """The pipeline's infer_types stage decides the same true label as `prepflow infer` prints (the
    decision's ``preprocessing`` must reach the run's config)."""
    data = write_csv(titanic(), tmp_path / "data.csv")
    config = {"input_features": [{"name": "Sex"}, {"name": "Age", "type": "number"}],
              "output_features": [{"name": "Survived", "type": "binary"}]}
    result = run(config, data, tmp_path / "out")
    meta = json.loads((Path(result.artifact["artifact_path"]) / "training_set_metadata.json").read_text())
    assert meta["Sex"]["str2bool"] == {"female": True, "male": False}
