"""Reading a published artifact (DESIGN section 5).

``Artifact.open`` reads ``manifest.json`` (refusing a folder without one: an artifact without its
manifest is not complete) and, with ``verify=True``, checks every file's size and sha256 against
it. ``read_split`` returns ``{column: numpy array}`` exactly as published.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from storage.cache import verify_files
from tasks.errors import DataError, IntegrityError

MANIFEST = "manifest.json"


def arrow_to_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column as numpy; fixed-size list columns become n x d (x ...) arrays."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    shape = [len(arr)]
    while pa.types.is_fixed_size_list(arr.type):
        shape.append(arr.type.list_size)
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False).reshape(shape)


class Artifact:
    def __init__(self, path: Path, manifest: dict):
        self.path = path
        self.manifest = manifest

    @classmethod
    def open(cls, path: str | Path, verify: bool = False) -> "Artifact":
        path = Path(path)
        if (path / "LATEST").is_file() and not (path / MANIFEST).exists():
            path = path / (path / "LATEST").read_text().strip()
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise DataError(f"{path}: not a complete artifact (no {MANIFEST})")
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError as exc:
            raise IntegrityError(f"{manifest_path}: unreadable manifest ({exc})") from None
        art = cls(path, manifest)
        if verify:
            art.verify()
        return art

    def verify(self) -> None:
        problems = verify_files(self.path, self.manifest["files"])
        if problems:
            raise IntegrityError(f"{self.path}: {len(problems)} file(s) do not match manifest.json: "
                                 + "; ".join(problems[:10]))

    # ---- metadata --------------------------------------------------------------------------------
    @property
    def artifact_id(self) -> str:
        return self.manifest["artifact_id"]

    @property
    def splits(self) -> list[str]:
        return [s for s, n in self.manifest["rows"].items()]

    def num_rows(self, split: str) -> int:
        return int(self.manifest["rows"][split])

    @property
    def metadata(self) -> dict:
        return json.loads((self.path / "training_set_metadata.json").read_text())

    @property
    def feature_spec(self) -> dict:
        return yaml.safe_load((self.path / "feature_spec.yaml").read_text())

    def describe(self) -> dict:
        spec = self.feature_spec
        stats = {n: (s.get("count") if s.get("kind") == "counter" else s.get("counts"))
                 for n, s in self.manifest.get("statistics", {}).items()}
        return {k: self.manifest.get(k) for k in ("artifact_id", "created_at", "prepflow_version",
                                                   "dataset_fingerprint", "rows")} | {
            "columns": spec["feature_spec"], "channels": spec["channel_spec"], "statistics": stats}

    # ---- data ------------------------------------------------------------------------------------
    def chunks(self, split: str) -> list[dict]:
        return self.feature_spec["source_spec"].get(split, [])

    def read_split(self, split: str, columns: list[str] | None = None) -> dict[str, np.ndarray]:
        if split not in self.manifest["rows"]:
            raise DataError(f"{self.path}: no split {split!r}; splits are {self.splits}")
        out: dict[str, np.ndarray] = {}
        chunks = self.chunks(split)
        parquet = [c for c in chunks if c["type"] == "parquet"]
        if parquet:
            files = [self.path / f for f in parquet[0]["files"]]
            table = pa.concat_tables([pq.read_table(f, columns=columns) for f in files])
            for name in table.column_names:
                out[name] = arrow_to_numpy(table.column(name))
            return out
        for chunk in chunks:
            if chunk["type"] == "npy":
                for name, file in zip(chunk["features"], chunk["files"], strict=False):
                    if columns is None or name in columns:
                        out[name] = np.load(self.path / file)
        return out
