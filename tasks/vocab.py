"""vocab (fit): vocabularies and statistics of every feature, fitted on the ``fit_on`` rows.

Two steps, NVTabular style: each Dask partition returns a partial per feature
(``FeatureType.fit_partial``), the partials are merged (``merge``; exact, so the order does not
matter) and finalized into JSON metadata. Output: ``training_set_metadata.json`` with Ludwig's
keys per feature plus ``type``, ``column`` and ``preprocessing`` (with ``computed_fill_value``).
"""

from __future__ import annotations

import json
from functools import reduce
from pathlib import Path

from dask import delayed

from tasks import custom_stages, fill_missing, frame
from tasks import ingest as ingest_mod
from tasks import split as split_mod
from tasks.statistics import Statistics

CODE_VERSION = "vocab-1"
METADATA_FILE = "training_set_metadata.json"


def _partial(prepared, features, fit_on):
    fit = frame.fit_rows(prepared.frame, fit_on)
    return {f.name: f.fit_partial(fit[f.name]) for f in features}


def run(ctx, ingest, split, missing):
    from tasks.context import run_cached

    fit_on = ctx.config.preprocessing.fit_on
    config_slice = {"features": ctx.features_slice(), "fit_on": fit_on}

    def compute(out: Path) -> Statistics:
        assign = split_mod.load(split)
        states = fill_missing.load(missing)
        parts = frame.partitions(ingest_mod.data_dir(ingest.path), ctx.npartitions)
        prepared = frame.filled_partitions(parts, ctx.features, assign, states)
        f = frame.shared(ctx.features)
        partials = frame.compute([delayed(_partial)(p, f, fit_on) for p in prepared])
        metadata = {}
        stats = Statistics()
        for f in ctx.features:
            merged = reduce(f.merge, [p[f.name] for p in partials])
            meta = f.finalize(merged, states[f.name])
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
        (out / METADATA_FILE).write_text(json.dumps(metadata, sort_keys=True, ensure_ascii=False))
        return stats

    return run_cached(ctx, "vocab", CODE_VERSION, [ingest.key, split.key, missing.key], config_slice, compute)


def load(result) -> dict:
    return json.loads((Path(result.path) / METADATA_FILE).read_text())
