"""Id maps between two artifacts' vocabularies: where each of a parent artifact's ids went in a newer one.

A refit orders every vocabulary by frequency again, so a value's id may move. A model trained on the parent
carries its embedding rows across with the map (docs/loader.md): ``new_weight[id_map] = old_weight`` puts
parent row ``i`` at row ``id_map[i]`` of the new table.

A feature's vocabulary is its ``idx2str`` in ``training_set_metadata.json``, or the ``value`` column of its
Parquet ``vocab_file`` (a category of more than ``INLINE_MAX`` ids), or a binary feature's ``bool2str`` (its two
string labels, ids 0 and 1). Special symbols (``<PAD>``, ``<UNK>``, ``<OOV_k>``) are values like any other, so
they map to their own ids. A parent value that the new vocabulary lacks maps to the new ``<UNK>`` id (-1 where
the new vocabulary has none: a binary feature, or Ludwig's symbols without a cut). The map is one hash join of
the two vocabularies (pyarrow's ``index_in``), never a loop over values.

A text feature's character vocabulary (``char_idx2str``) is mapped too, under its ids' column name
``<feature>_char``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import vocab_store

UNK = "<UNK>"
MISSING = -1  # a left value's id when the new vocabulary has no <UNK>


def vocabulary(meta: dict, folder: str | Path) -> pa.Array | None:
    """A feature's vocabulary in id order (``idx2str``, its Parquet ``vocab_file``, or ``bool2str``); None when
    the feature has none (numbers, hashed or pre-encoded categories, binary booleans)."""
    if not isinstance(meta, dict):
        return None
    if isinstance(meta.get("idx2str"), list):
        return pa.array(meta["idx2str"], type=pa.string())
    if "vocab_file" in meta:
        resolved = vocab_store.resolve({"feature": meta}, folder)["feature"]
        column = vocab_store.read(resolved["vocab_path"], meta["vocab_file"].get("sha256")).column("value")
        return column.combine_chunks().cast(pa.string())
    if isinstance(meta.get("bool2str"), list):
        return pa.array(meta["bool2str"], type=pa.string())
    return None


def vocabularies(metadata: dict, folder: str | Path) -> dict[str, pa.Array]:
    """Every vocabulary feature's vocabulary (``vocabulary``), by feature name; a text feature's character
    vocabulary (``char_idx2str``) by the name of the column that holds its ids, ``<feature>_char``."""
    out = {}
    for name, meta in metadata.items():
        values = vocabulary(meta, folder)
        if values is not None:
            out[name] = values
        if isinstance(meta, dict) and isinstance(meta.get("char_idx2str"), list):
            out[f"{name}_char"] = pa.array(meta["char_idx2str"], type=pa.string())
    return out


def map_ids(parent: pa.Array, new: pa.Array) -> np.ndarray:
    """int32, one per parent id: the id of the same value in ``new`` (its first position), else ``new``'s
    ``<UNK>`` id (``MISSING`` when it has none)."""
    if len(parent) == 0:
        return np.zeros(0, dtype=np.int32)
    at = pc.index_in(parent, value_set=new)
    unk = pc.index_in(pa.array([UNK], pa.string()), value_set=new)[0].as_py()
    return at.fill_null(MISSING if unk is None else unk).to_numpy(zero_copy_only=False).astype(np.int32)


@dataclass(frozen=True)
class Moves:
    """What happened to a parent vocabulary in a newer one, counted by ids."""

    parent_size: int
    new_size: int
    kept: int  # parent ids whose value has the same id in the new vocabulary
    moved: int  # parent ids whose value has another id
    left: int  # parent ids whose value is not in the new vocabulary (mapped to <UNK>)
    added: int  # new ids whose value the parent vocabulary lacks

    def as_json(self) -> dict:
        return {"parent_size": self.parent_size, "new_size": self.new_size, "kept": self.kept, "moved": self.moved,
                "left": self.left, "new": self.added}


def moves(parent: pa.Array, new: pa.Array) -> Moves:
    """The counts of ``Moves`` from the two vocabularies (two hash joins)."""
    found = pc.is_in(parent, value_set=new).to_numpy(zero_copy_only=False) if len(parent) else np.zeros(0, bool)
    at = pc.index_in(parent, value_set=new).fill_null(MISSING).to_numpy(zero_copy_only=False) if len(parent) \
        else np.zeros(0, np.int64)
    kept = int(np.count_nonzero(found & (at == np.arange(len(parent)))))
    added = int(np.count_nonzero(~pc.is_in(new, value_set=parent).to_numpy(zero_copy_only=False))) if len(new) else 0
    return Moves(len(parent), len(new), kept, int(np.count_nonzero(found)) - kept,
                 int(np.count_nonzero(~found)), added)


def moves_between(new, parent) -> dict[str, dict]:
    """``Moves.as_json`` of every vocabulary feature the two artifacts (``storage.artifact.Artifact``) share."""
    mine = vocabularies(new.metadata, new.path)
    theirs = vocabularies(parent.metadata, parent.path)
    return {name: moves(values, mine[name]).as_json() for name, values in theirs.items() if name in mine}
