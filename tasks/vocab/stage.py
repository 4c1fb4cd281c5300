"""vocab (fit): vocabularies and statistics of every feature, fitted on the ``fit_on`` rows.

Each feature's fit is a combiner (``FeatureType.fit_combiner(missing_state)``, ``tasks.runtime.combine``):
per Dask partition ``create`` + ``add`` of its filled fit values (``combiner.accumulate``, in the same
task as the category counts), then ``merge`` (exact, so the order does not matter) and ``extract``
into JSON metadata (``combiner.merge_extract``). Category vocabularies are counted by
``tasks.vocab.category`` (a shuffle, for vocabularies no process holds). Output: ``training_set_metadata.json`` with Ludwig's
keys per feature plus ``type``, ``column`` and ``preprocessing`` (with ``computed_fill_value``), and its
summary without the inline vocabularies, which is what the flow process reads (``tasks.runtime.fitted_metadata``).
"""

from __future__ import annotations

from pathlib import Path

from core import combiner
from core.code_version import module_version
from tasks.config.constants import ROW
from tasks.custom import apply as custom_apply
from tasks.custom.prepared import filled_partitions
from tasks.runtime import combine, dask_run, fitted_metadata, frame
from tasks.runtime.context import run_cached
from tasks.runtime.node import FILLED, Node
from tasks.runtime.outputs import Fitted, Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics
from tasks.vocab import category as category_vocab

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)


def _accumulate(prepared, combiners, fit_on):
    """One partition's fit accumulators (``combiner.accumulate`` of each feature's filled fit values)."""
    fit = frame.prepared_fit_rows(prepared, fit_on)
    rows = fit[ROW].to_numpy()  # each value's input row position, for orders by first occurrence
    return combiner.accumulate(combiners, {name: fit[name].set_axis(rows) for name in combiners})


def config_slice(ctx) -> dict:
    return {"features": ctx.features_slice(), "fit_on": ctx.config.preprocessing.fit_on}


def run(ctx, ingest: Ingested, split: SplitAssignment, missing: MissingStates):
    fit_on = ctx.config.preprocessing.fit_on

    def compute(out: Path) -> Statistics:
        assign = split.assignment()
        states = missing.states()
        # category columns as ingest stored them, dictionaries: each distinct value counted and looked up once
        parts = frame.partitions(ingest.parts, ctx.npartitions,
                                 frame.dictionary_columns(ctx.features, bool(ctx.config.stages)))
        prepared = filled_partitions(parts, ctx.features, assign, states)
        counted = category_vocab.counted_features(ctx.features)  # category vocabularies: by a shuffle
        combiners = {f.name: f.fit_combiner(states[f.name]) for f in ctx.features if f not in counted}
        shared = dask_run.shared(combiners)
        tasks, reducers = category_vocab.fit_tasks(prepared, counted, fit_on, out / "_candidates", _accumulate,
                                                   (shared, fit_on))  # one task per partition
        tasks = combine.merged(shared, tasks)  # merged on the workers: this process receives one accumulator
        results = dask_run.compute(tasks + reducers)
        # a vocabulary that encoding looks partitions of this size up in by hash gets its index stored once
        partition_rows = frame.largest_partition_rows(ingest.parts, ingest.num_rows, ctx.npartitions)
        fitted = {**combiner.merge_extract(combiners, results[:len(tasks)]),
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
        custom_apply.annotate_metadata(metadata, states)  # features custom stages make carry the plan (serving)
        fitted_metadata.write(out, metadata)  # category vocabularies arrive serialized (fitted_metadata.Raw)
        return stats

    return run_cached(ctx, "vocab", CODE_VERSION, [ingest.key, split.key, missing.key], config_slice(ctx), compute,
                      Fitted)


NODE = Node("vocab", run, inputs=("ingest", "split", FILLED), output=Fitted, reads=config_slice)
