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
from tasks.config.constants import ROW
from tasks.custom import apply as custom_apply
from tasks.custom.prepared import filled_partitions
from tasks.runtime import combine, dask_run, file_fits, fitted_metadata, frame
from tasks.runtime.node import FILLED, Node
from tasks.runtime.outputs import Fitted, Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics
from tasks.vocab import category as category_vocab
from tasks.vocab import category_files


def _accumulate(prepared, combiners, fit_on):
    """One partition's fit accumulators (``combiner.accumulate`` of each feature's filled fit values)."""
    fit = frame.prepared_fit_rows(prepared, fit_on)
    rows = fit[ROW].to_numpy()  # each value's input row position, for orders by first occurrence
    return combiner.accumulate(combiners, {name: fit[name].set_axis(rows) for name in combiners})


def _fills_at_extract(f, states: dict) -> bool:
    return hasattr(f, "fills_at_extract") and f.fills_at_extract(states[f.name])


def _fill_dependent(features: list, states: dict) -> dict:
    """The fill states a feature's fit accumulator depends on: not a number taking its fill in extract, nor a
    category reading a missing value as its ``<UNK>``, nor a ``drop_row`` feature (nothing filled)."""
    return {f.name: states[f.name] for f in features
            if not (_fills_at_extract(f, states) or states[f.name]["missing_value_strategy"] == "drop_row"
                    or (states[f.name]["missing_value_strategy"] == "fill_with_const" and f.reads_missing_as_fill()))}


def _fit_by_file(ctx, ingest: Ingested, assign, states: dict, prepare_states: dict, counted: list, combiners: dict,
                 dictionaries: tuple, out: Path, partition_rows: int) -> dict:
    """The fit of a folder's files one by one (``tasks.runtime.file_fits``): each file's accumulators and
    category counts a cache entry (``tasks.vocab.category_files``), merged here; the vocabularies reduced from
    the files' counts."""
    fit_on = ctx.config.preprocessing.fit_on
    key_slice = {**config_slice(ctx), "fills": _fill_dependent(ctx.features, states),
                 "dictionaries": list(dictionaries)}

    def fit_file(parts: list, folder: str):
        prepared = filled_partitions(frame.partitions(parts, None, dictionaries), ctx.features, assign, prepare_states)
        return category_files.file_fit(prepared, counted, fit_on, folder, _accumulate, combiners)

    by_file = file_fits.fit_files(ctx, ingest, assign, key_slice, fit_file)
    reducers = category_files.reduce_files([str(entry / category_files.COUNTS_FILE) for _acc, entry in by_file],
                                           counted, out / "_candidates")
    return {**combiner.merge_extract(combiners, [acc for acc, _entry in by_file]),
            **category_vocab.extract(counted, dask_run.compute(reducers), out, partition_rows)}


def config_slice(ctx) -> dict:
    return {"features": ctx.features_slice(), "fit_on": ctx.config.preprocessing.fit_on}


def compute(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates) -> Statistics:
    fit_on = ctx.config.preprocessing.fit_on
    assign = split.assignment()
    states = missing.states()
    counted = category_vocab.counted_features(ctx.features)  # category vocabularies: by a shuffle
    combiners = {f.name: f.fit_combiner(states[f.name]) for f in ctx.features if f not in counted}
    # a number whose fill is a constant takes its fill in extract: its accumulator does not depend on it
    prepare_states = {f.name: {**states[f.name], "missing_value_strategy": "keep"} if _fills_at_extract(f, states)
                      else states[f.name] for f in ctx.features}
    prepare_states.update({k: v for k, v in states.items() if k not in prepare_states})
    # category columns as ingest stored them, dictionaries: each distinct value counted and looked up once
    dictionaries = frame.dictionary_columns(ctx.features, bool(ctx.config.stages))
    # a vocabulary that encoding looks partitions of this size up in by hash gets its index stored once
    partition_rows = frame.largest_partition_rows(ingest.parts, ingest.num_rows, ctx.npartitions)
    if file_fits.applicable(ctx, ingest, states) and file_fits.storable(*(c.create() for c in combiners.values())):
        fitted = _fit_by_file(ctx, ingest, assign, states, prepare_states, counted, combiners, dictionaries, out,
                              partition_rows)
    else:
        parts = frame.partitions(ingest.parts, ctx.npartitions, dictionaries)
        prepared = filled_partitions(parts, ctx.features, assign, prepare_states)
        shared = dask_run.shared(combiners)
        tasks, reducers = category_vocab.fit_tasks(prepared, counted, fit_on, out / "_candidates", _accumulate,
                                                   (shared, fit_on))  # one task per partition
        tasks = combine.merged(shared, tasks)  # merged on the workers: this process receives one accumulator
        results = dask_run.compute(tasks + reducers)
        fitted = {**combiner.merge_extract(combiners, results[:len(tasks)]),
                  **category_vocab.extract(counted, results[len(tasks):], out, partition_rows)}
    metadata = {}
    stats = Statistics()
    for f in ctx.features:
        meta = fitted[f.name]
        feature_cfg = next(c for c in ctx.config.features if c.name == f.name)
        meta["type"] = feature_cfg.type
        meta["column"] = f.column
        # the config's options, under the feature type's own record of what it fitted (e.g. a hashed
        # category's buckets), with the fill state
        meta["preprocessing"] = {**feature_cfg.preprocessing, **meta.get("preprocessing", {}),
                                 "missing_value_strategy": states[f.name]["missing_value_strategy"],
                                 "computed_fill_value": states[f.name]["computed_fill_value"]}
        if "vocab_size" in meta:
            stats.counter(f"vocab.size.{f.name}", meta["vocab_size"])
        metadata[f.name] = meta
    custom_apply.annotate_metadata(metadata, states)  # features custom stages make carry the plan (serving)
    fitted_metadata.write(out, metadata)  # category vocabularies arrive serialized (fitted_metadata.Raw)
    return stats


NODE = Node("vocab", compute, inputs=("ingest", "split", FILLED), output=Fitted, reads=config_slice, per_file=True)
