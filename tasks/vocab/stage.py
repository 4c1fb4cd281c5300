"""vocab (fit): vocabularies and statistics of every feature, fitted on the ``fit_on`` rows.

Each feature's fit is a combiner (``FeatureType.fit_combiner(missing_state)``, ``tasks.runtime.combine``):
per Dask partition ``create`` + ``add`` of its filled fit values (``combine.accumulate``, in the same
task as the category counts), then ``merge`` (exact, so the order does not matter) and ``extract``
into JSON metadata (``combine.merge_extract``). Category vocabularies are counted by
``tasks.vocab.category`` (a shuffle, for vocabularies no process holds). Output: ``training_set_metadata.json`` with Ludwig's
keys per feature plus ``type``, ``column`` and ``preprocessing`` (with ``computed_fill_value``), and its
summary without the inline vocabularies, which is what the flow process reads (``tasks.runtime.fitted_metadata``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from core.code_version import module_version
from core.errors import DataError
from storage import vocab_store
from tasks.custom import steps as custom_stages
from tasks.custom.prepared import filled_partitions
from tasks.fill_missing import stage as fill_missing
from tasks.ingest import stage as ingest_mod
from tasks.runtime import combine, fitted_metadata, frame
from tasks.runtime.context import run_cached
from tasks.runtime.statistics import Statistics
from tasks.split import stage as split_mod
from tasks.vocab import category as category_vocab

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)
METADATA_FILE = fitted_metadata.METADATA_FILE


def _accumulate(prepared, combiners, fit_on):
    """One partition's fit accumulators (``combine.accumulate`` of each feature's filled fit values)."""
    fit = frame.prepared_fit_rows(prepared, fit_on)
    rows = fit[frame.ROW].to_numpy()  # each value's input row position, for orders by first occurrence
    return combine.accumulate(combiners, {name: fit[name].set_axis(rows) for name in combiners})


def run(ctx, ingest, split, missing):
    fit_on = ctx.config.preprocessing.fit_on
    config_slice = {"features": ctx.features_slice(), "fit_on": fit_on}

    def compute(out: Path) -> Statistics:
        assign = split_mod.load(split)
        states = fill_missing.load(missing)
        # category columns as ingest stored them, dictionaries: each distinct value counted and looked up once
        parts = frame.partitions(ingest_mod.data_dir(ingest.path), ctx.npartitions,
                                 frame.dictionary_columns(ctx.features, bool(ctx.config.stages)))
        prepared = filled_partitions(parts, ctx.features, assign, states)
        counted = category_vocab.counted_features(ctx.features)  # category vocabularies: by a shuffle
        combiners = {f.name: f.fit_combiner(states[f.name]) for f in ctx.features if f not in counted}
        shared = frame.shared(combiners)
        tasks, reducers = category_vocab.fit_tasks(prepared, counted, fit_on, out / "_candidates", _accumulate,
                                                   (shared, fit_on))  # one task per partition
        tasks = combine.merged(shared, tasks)  # merged on the workers: this process receives one accumulator
        results = frame.compute(tasks + reducers)
        # a vocabulary that encoding looks partitions of this size up in by hash gets its index stored once
        partition_rows = frame.largest_partition_rows(ingest_mod.data_dir(ingest.path),
                                                      ingest_mod.num_rows(ingest.path), ctx.npartitions)
        fitted = {**combine.merge_extract(combiners, results[:len(tasks)]),
                  **category_vocab.extract(counted, results[len(tasks):], out, partition_rows)}
        metadata = {}
        stats = Statistics()
        for f in ctx.features:
            meta = fitted[f.name]
            feature_cfg = next(c for c in ctx.config.features if c.name == f.name)
            meta["type"] = feature_cfg.type
            meta["column"] = f.column
            meta["preprocessing"] = {**feature_cfg.preprocessing,
                                     "missing_value_strategy": states[f.name]["missing_value_strategy"],
                                     "computed_fill_value": states[f.name]["computed_fill_value"]}
            if "vocab_size" in meta:
                stats.counter(f"vocab.size.{f.name}", meta["vocab_size"])
            metadata[f.name] = meta
        custom_stages.annotate_metadata(metadata, states)  # features custom stages make carry the plan (serving)
        fitted_metadata.write(out, metadata)  # category vocabularies arrive serialized (fitted_metadata.Raw)
        return stats

    return run_cached(ctx, "vocab", CODE_VERSION, [ingest.key, split.key, missing.key], config_slice, compute)


def load(result) -> dict:
    """The fitted metadata without its inline vocabularies (``fitted_metadata.summary``): what the flow
    process needs (vocabulary sizes, Parquet vocabulary references, sequence lengths)."""
    return fitted_metadata.read_summary(result.path)


def load_full(path: str | Path, resolve_files: bool = False) -> dict:
    """The fitted metadata of the entry at ``path``, inline vocabularies included (for encoding, on the
    workers); ``resolve_files``: with the absolute ``vocab_path`` of each Parquet vocabulary (never for
    publishing)."""
    metadata = fitted_metadata.read_full(path)
    if resolve_files:
        metadata = vocab_store.resolve(metadata, str(path))
    return metadata


def copy_metadata(result, dest: Path) -> None:
    """Copy the entry's ``training_set_metadata.json`` into ``dest``. Its writers (this stage and
    media_cache, through ``fitted_metadata.write``) write the bytes of ``json.dumps(metadata, sort_keys=True,
    ensure_ascii=False)``, so the copy is what dumping the loaded metadata again would give, without the
    parse and the encoding (inline vocabularies of up to 100,000 ids each: ~5.5 MB at 2M Criteo-like rows)."""

    shutil.copyfile(Path(result.path) / METADATA_FILE, dest / METADATA_FILE)


def file_sources(result, metadata: dict) -> list[tuple[str, str]]:
    """``(absolute path in the stage entry, path in the artifact)`` of each Parquet vocabulary ``metadata``
    references; a DataError names one that is missing."""
    sources = []
    for rel in vocab_store.files(metadata):
        src = Path(result.path).absolute() / rel
        if not src.is_file():
            raise DataError(f"{src}: vocabulary file referenced by {METADATA_FILE} is missing")
        sources.append((str(src), rel))
    return sources


def copy_files(result, metadata: dict, dest: Path, link: bool = False) -> None:
    """Copy the Parquet vocabularies ``metadata`` references from the stage entry into ``dest``;
    ``link``: hard-link them where the file system allows (cache entries are never changed in place)."""
    for src, rel in file_sources(result, metadata):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if link:
            try:
                os.link(src, dest / rel)
                continue
            except OSError:  # another file system, or links not supported: copy
                pass
        shutil.copyfile(src, dest / rel)
