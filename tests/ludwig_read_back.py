"""Read back the HDF5 files ``ludwig preprocess`` writes, as ``<split>.npz`` keyed by feature name.

Run by the Ludwig virtualenv's Python (it has h5py; prepflow's does not):
``python tests/ludwig_read_back.py OUT_DIR FEATURE,FEATURE,... FILE.training.hdf5 [FILE.validation.hdf5 ...]``.
Ludwig (``ludwig/utils/data_utils.py`` ``save_hdf5``) stores the column names under ``columns`` and each
column as a dataset named ``<feature>_<hash>`` (its ``proc_column``; the hash may hold ``_`` too), named
here by the longest feature name it starts with.
"""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np


def feature_of(column: str, features: list[str]) -> str:
    return max((f for f in features if column.startswith(f + "_")), key=len)


def read(path: Path, features: list[str]) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as h5:
        columns = [c.decode() for c in h5["columns"][()].tolist()]
        return {feature_of(column, features): h5[column][()] for column in columns}


def main(out_dir: str, features: str, *files: str) -> None:
    for name in files:
        path = Path(name)
        split = path.name.rsplit(".", 2)[-2]  # data.training.hdf5 -> training
        np.savez(Path(out_dir) / f"{split}.npz", **read(path, features.split(",")))


if __name__ == "__main__":
    main(*sys.argv[1:])
