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

import json
import shutil
from pathlib import Path

import numpy as np

from core.code_version import module_version
from core.errors import DataError
from storage import artifact_read, vocab_store
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.runtime import fitted_metadata
from tasks.runtime.context import run_cached
from tasks.runtime.node import Node
from tasks.runtime.outputs import (
    MISSING_FILE,
    SPLIT_FILE,
    Fitted,
    Ingested,
    MissingStates,
    Multiplicity,
    SplitAssignment,
)
from tasks.runtime.statistics import Statistics

CODE_VERSION = module_version(__name__)  # this module and what it imports directly


def _source(ctx) -> dict:
    """The fitted artifact (``ctx.fitted_from``: ``artifact_id``, ``path``, ``local`` (its folder here), ``split``)."""
    if ctx.fitted_from is None:
        raise DataError("the fitted nodes need an artifact to apply (prepflow apply ARTIFACT)")
    return ctx.fitted_from


def read_metadata(path: str | Path) -> dict:
    """The artifact's ``training_set_metadata.json`` without the ``__row__`` entry publish adds, read through
    ``storage.artifact_read`` (inside the folder, of the size and sha256 its manifest lists)."""
    meta_path = Path(path) / fitted_metadata.METADATA_FILE
    metadata = artifact_read.read_json(path, artifact_read.read_manifest(path), fitted_metadata.METADATA_FILE)
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


def run_split(ctx, ingest: Ingested):
    split_id = SPLIT_NAMES.index(_source(ctx)["split"])

    def compute(out: Path) -> Statistics:
        np.save(out / SPLIT_FILE, np.full(ingest.num_rows, split_id, dtype=np.int8))
        stats = Statistics()
        stats.counter(f"split.rows.{SPLIT_NAMES[split_id]}", ingest.num_rows)
        return stats

    return run_cached(ctx, "split", CODE_VERSION, [ingest.key], _slice(ctx), compute, SplitAssignment)


def run_missing(ctx, ingest: Ingested, split: SplitAssignment):
    def compute(out: Path) -> Statistics:
        metadata = read_metadata(_source(ctx)["local"])
        states = {f.name: feature_state(metadata[f.name]) for f in ctx.features}
        (out / MISSING_FILE).write_text(json.dumps(states, sort_keys=True, indent=1))
        return Statistics()

    return run_cached(ctx, "fill_missing", CODE_VERSION, [ingest.key, split.key], _slice(ctx), compute, MissingStates)


def run_balance(ctx, ingest: Ingested, split: SplitAssignment, missing: MissingStates):
    return run_cached(ctx, "balance", CODE_VERSION, [ingest.key, split.key, missing.key], _slice(ctx),
                      lambda out: Statistics(), Multiplicity)


def run_vocab(ctx, ingest: Ingested, split: SplitAssignment, missing: MissingStates):
    source = _source(ctx)

    def compute(out: Path) -> Statistics:
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

    # the missing states come from the same metadata: their key stands for it (and for the artifact's id)
    return run_cached(ctx, "vocab", CODE_VERSION, [missing.key], _slice(ctx), compute, Fitted)


SPLIT = Node("split", run_split, inputs=("ingest",), output=SplitAssignment, reads=_slice)
FILL_MISSING = Node("fill_missing", run_missing, inputs=("ingest", "split"), output=MissingStates, reads=_slice)
BALANCE = Node("balance", run_balance, inputs=("ingest", "split", "fill_missing"), output=Multiplicity, reads=_slice)
VOCAB = Node("vocab", run_vocab, inputs=("ingest", "split", "fill_missing"), output=Fitted, reads=_slice)
NODES = {n.name: n for n in (SPLIT, FILL_MISSING, BALANCE, VOCAB)}
