"""The fitted state of a published artifact, as the nodes ``prepflow apply`` runs in place of the fit.

``prepflow apply ARTIFACT`` encodes new rows with an artifact's metadata and refits nothing: its graph
(``tasks.graph.expand_apply``) is the run's graph with the fitting nodes replaced by these, under the
same names so that encode, media_cache, the encoded gate and publish read their outputs as they read a
run's:

    split         every ingested row in the one output split (``split.npy``, int8)
    fill_missing  each feature's missing-value state, as ``training_set_metadata.json`` records it
    balance       no multiplicities (apply never balances)
    vocab         the artifact's ``training_set_metadata.json`` (without ``__row__``) and its Parquet
                  vocabularies, copied into the entry: the ``Fitted`` output encode reads

Each is a cached step keyed by the fitted artifact's id (its content), so an apply rerun on the same
input reuses every stage, as a run does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from core.errors import DataError
from storage import artifact_read, vocab_store
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.runtime import fitted_metadata
from tasks.runtime.node import Node
from tasks.runtime.outputs import (
    Fitted,
    Ingested,
    MissingStates,
    Multiplicity,
    SplitAssignment,
)
from tasks.runtime.statistics import Statistics


def _source(ctx) -> dict:
    """The fitted artifact (``ctx.fitted_from``: ``artifact_id``, ``path``, ``local`` (its folder here), ``split``)."""
    if ctx.fitted_from is None:
        raise DataError("the fitted nodes need an artifact to apply (prepflow apply ARTIFACT)")
    return ctx.fitted_from


def read_metadata(path: str | Path) -> dict:
    """The artifact's ``training_set_metadata.json`` without the ``__row__`` entry publish adds, read through
    ``storage.artifact_read`` (inside the folder, of the size and sha256 its manifest lists)."""
    meta_path = Path(path) / fitted_metadata.METADATA_FILE
    metadata = artifact_read.read_json(path, artifact_read.read_manifest(path), fitted_metadata.METADATA_FILE,
                                      "every feature's fitted metadata")
    if not isinstance(metadata, dict):
        raise DataError(f"{meta_path}: not a mapping of features; {path} is not a complete prepflow artifact")
    return {name: meta for name, meta in metadata.items() if name != ROW}


def feature_state(meta: dict) -> dict:
    """The fill_missing state the fit recorded in a feature's metadata (as the serving Preprocessor reads it)."""
    state = {k: v for k, v in meta.items() if k != "preprocessing"}
    state.update(meta.get("preprocessing", {}))
    state.setdefault("str2bool", {})
    return state


def _slice(ctx) -> dict:
    source = _source(ctx)
    return {"fitted_from": source["artifact_id"], "split": source["split"]}


def compute_split(ctx, out: Path, ingest: Ingested) -> Statistics:
    """Every row in the applied split."""
    split_id = SPLIT_NAMES.index(_source(ctx)["split"])
    SplitAssignment.write(out, np.full(ingest.num_rows, split_id, dtype=np.int8))
    stats = Statistics()
    stats.counter(f"split.rows.{SPLIT_NAMES[split_id]}", ingest.num_rows)
    return stats


def compute_missing(ctx, out: Path, ingest: Ingested, split: SplitAssignment) -> Statistics:
    """The missing-value states the artifact's metadata records."""
    metadata = read_metadata(_source(ctx)["local"])
    MissingStates.write(out, {f.name: feature_state(metadata[f.name]) for f in ctx.features})
    return Statistics()


def compute_balance(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates) -> Statistics:
    """No balancing: every applied row once."""
    return Statistics()


def compute_vocab(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates) -> Statistics:
    """The artifact's metadata and its Parquet vocabularies."""
    source = _source(ctx)
    metadata = read_metadata(source["local"])
    files = artifact_read.read_manifest(source["local"])["files"]
    for rel in vocab_store.files(metadata):
        src = artifact_read.listed_file(source["local"], files, rel)  # inside, listed, of its listed size
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / rel)
    fitted_metadata.write(out, metadata)
    stats = Statistics()
    for name, meta in metadata.items():
        if "vocab_size" in meta:
            stats.counter(f"vocab.size.{name}", meta["vocab_size"])
    return stats


SPLIT = Node("split", compute_split, inputs=("ingest",), output=SplitAssignment, reads=_slice)
FILL_MISSING = Node("fill_missing", compute_missing, inputs=("ingest", "split"), output=MissingStates, reads=_slice)
BALANCE = Node("balance", compute_balance, inputs=("ingest", "split", "fill_missing"), output=Multiplicity,
               reads=_slice)
VOCAB = Node("vocab", compute_vocab, inputs=("ingest", "split", "fill_missing"), output=Fitted, reads=_slice)
NODES = {n.name: n for n in (SPLIT, FILL_MISSING, BALANCE, VOCAB)}
