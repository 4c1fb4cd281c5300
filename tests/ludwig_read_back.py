"""Read back the files ``ludwig preprocess`` writes, as ``<split>.npz`` keyed by feature name.

Run by the Ludwig virtualenv's Python (it has h5py, pyarrow and Ludwig; prepflow's has no h5py):
``python tests/ludwig_read_back.py OUT_DIR FEATURE,FEATURE,... FILE.training.EXT [FILE.validation.EXT ...]``.

* Ludwig 0.11 writes HDF5 (``ludwig/utils/data_utils.py`` ``save_hdf5``): the column names under
  ``columns`` and each column as a dataset;
* Ludwig 0.17 writes Parquet (``ludwig/data/dataset/pandas.py`` ``_save_parquet``: one row per example,
  multi-dimensional columns flattened, their shapes in a ``.shapes.json`` sidecar); it is read with
  Ludwig's own ``_load_parquet``, the function its trainer loads the cache with.

Either way each column is named ``<feature>_<hash>`` (Ludwig's ``proc_column``; the hash may hold ``_`` too),
named here by the longest feature name it starts with.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def feature_of(column: str, features: list[str]) -> str:
    return max((f for f in features if column.startswith(f + "_")), key=len)


def read_hdf5(path: Path) -> dict[str, np.ndarray]:
    import h5py  # only the Ludwig 0.11 venv writes HDF5

    with h5py.File(path, "r") as h5:
        return {c.decode(): h5[c.decode()][()] for c in h5["columns"][()].tolist()}


def read_parquet(path: Path) -> dict[str, np.ndarray]:
    from ludwig.data.dataset.pandas import _load_parquet  # Ludwig >= 0.17's cache format

    return {column: np.stack(values) if values.dtype == object else values
            for column, values in _load_parquet(str(path)).items()}


def read(path: Path, features: list[str]) -> dict[str, np.ndarray]:
    columns = read_parquet(path) if path.suffix == ".parquet" else read_hdf5(path)
    return {feature_of(column, features): values for column, values in columns.items()}


def main(out_dir: str, features: str, *files: str) -> None:
    for name in files:
        path = Path(name)
        split = path.name.rsplit(".", 2)[-2]  # data.training.hdf5 -> training
        np.savez(Path(out_dir) / f"{split}.npz", **read(path, features.split(",")))


if __name__ == "__main__":
    main(*sys.argv[1:])
