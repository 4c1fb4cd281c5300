"""Generate the bundled example: a seeded, Titanic-shaped table (891 rows).

The real Titanic data has a licence of its own, so the example is synthetic with the same columns
and similar distributions (ages ~20% missing, embarked with 2 missing, survival depending on sex and
class). Run ``python examples/titanic/make_titanic.py`` to rebuild ``titanic.csv`` byte for byte.
"""

import csv
from pathlib import Path

import numpy as np


def main() -> None:
    rng = np.random.default_rng(1912)
    n = 891
    pclass = rng.choice([1, 2, 3], size=n, p=[0.24, 0.21, 0.55])
    sex = rng.choice(["male", "female"], size=n, p=[0.65, 0.35])
    age = np.clip(rng.normal(29.7, 14.5, size=n), 0.42, 80).round(1)
    age_missing = rng.random(n) < 0.2
    sibsp = rng.choice([0, 1, 2, 3, 4], size=n, p=[0.68, 0.23, 0.04, 0.02, 0.03])
    parch = rng.choice([0, 1, 2], size=n, p=[0.76, 0.13, 0.11])
    fare = np.round(np.exp(rng.normal(2.7, 1.0, size=n)) * (4 - pclass) / 2, 4)
    embarked = rng.choice(["S", "C", "Q"], size=n, p=[0.72, 0.19, 0.09]).astype(object)
    embarked[rng.choice(n, size=2, replace=False)] = ""
    p_survive = 0.15 + 0.55 * (sex == "female") + 0.12 * (pclass == 1) - 0.08 * (pclass == 3)
    survived = (rng.random(n) < np.clip(p_survive, 0.02, 0.95)).astype(int)
    out = Path(__file__).with_name("titanic.csv")
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["PassengerId", "Survived", "Pclass", "Sex", "Age", "SibSp", "Parch", "Fare", "Embarked"])
        for i in range(n):
            w.writerow([i + 1, survived[i], pclass[i], sex[i], "" if age_missing[i] else age[i], sibsp[i],
                        parch[i], fare[i], embarked[i]])


if __name__ == "__main__":
    main()
