"""Crafting artifacts for the safety tests (issue 40): copy a published artifact and edit it the way an
attacker would, re-signing its manifest (every edited file's sha256 and size) so only prepflow's own
checks stand between the edit and a reader."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from core.errors import IntegrityError
from tests.helpers import run, write_csv

CONFIG = {
    "input_features": [{"name": "Age", "type": "number"}, {"name": "c", "type": "category"},
                       {"name": "s", "type": "set"}],
    "output_features": [{"name": "y", "type": "binary"}],
    "publish": {"formats": ["parquet", "npy"]},
}


def frame(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(40)
    return pd.DataFrame({"Age": rng.normal(size=n), "c": rng.choice(list("abc"), n),
                         "s": rng.choice(["a b", "b", "c a"], n), "y": rng.integers(0, 2, n)})


def publish(tmp: Path) -> Path:
    result = run(CONFIG, write_csv(frame(), tmp / "data.csv"), tmp)
    return Path(result.artifact["artifact_path"])


def copy(art: Path, to: Path) -> Path:
    """A copy of ``art`` at ``to/<artifact id>`` (``to`` holds the copy's outside world)."""
    dest = to / art.name
    shutil.copytree(art, dest)
    return dest


def sign(art: Path, name: str, data: bytes | None = None) -> None:
    """List ``name`` in the manifest with ``data``'s sha256 and size (default: the file's own bytes)."""
    manifest = json.loads((art / "manifest.json").read_text())
    if data is None:
        data = (art / name).read_bytes()
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (art / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


def edit_json(art: Path, name: str, edit) -> None:
    data = json.loads((art / name).read_text())
    edit(data)
    (art / name).write_text(json.dumps(data, indent=1))
    if name != "manifest.json":
        sign(art, name)


def edit_spec(art: Path, edit) -> None:
    spec = yaml.safe_load((art / "feature_spec.yaml").read_text())
    edit(spec)
    (art / "feature_spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    sign(art, "feature_spec.yaml")


def npy_with_rows(path: Path, rows: int) -> None:
    """Rewrite an ``.npy`` file's header to claim ``rows`` rows, its data unchanged."""
    arr = np.load(path)
    header = {"descr": np.lib.format.dtype_to_descr(arr.dtype), "fortran_order": False,
              "shape": (rows, *arr.shape[1:])}
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(arr.tobytes())


def refused(call, *needles: str, error: type[Exception] = IntegrityError) -> str:
    """The one-line message of the ``error`` that ``call()`` raises, holding each of ``needles``."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message
