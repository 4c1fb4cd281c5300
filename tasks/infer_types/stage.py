"""infer_types: give every column without a declared ``type`` one, from a full pass over the data.

``run`` is the pipeline stage (after ingest, cached like the others): it infers the untyped
features only and writes ``types.json``; ``apply`` puts the types into the run's config, which
every later stage then reads. ``infer_dataset`` + ``render_config`` are ``prepflow infer``
(``--config``: the ``media_root`` to resolve against, kept in the printed config; ``--cache-dir``);
``infer_dataset`` also takes a pandas/Dask DataFrame, read as the pipeline's ingest reads one.


The profiles are ``tasks.infer_types.profile``, the rules ``tasks.infer_types.rules``.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import yaml
from dask import delayed

from core.code_version import module_version
from core.errors import ConfigError, DataError
from core.lazy import pandas as pd
from storage import media
from storage.fs import open_input
from tasks.config.loader import load_config
from tasks.config.schema import suggest
from tasks.dataset import csv_dialect
from tasks.features import resolve_preprocessing
from tasks.infer_types.profile import merge_profiles, profile_partition
from tasks.infer_types.rules import Inferred, MediaPlace, decide
from tasks.ingest import dataframe as ingest_frame
from tasks.ingest import stage as ingest
from tasks.ingest import stage as ingest_mod
from tasks.ingest.dataframe import _scalar_text
from tasks.runtime import frame
from tasks.runtime.context import run_cached
from tasks.runtime.statistics import Statistics

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)
TYPES_FILE = "types.json"
TYPES = ("binary", "number", "category", "text", "date", "image", "audio", "set", "vector", "timeseries")


def profile_columns(ingest_dir: str, columns: list[str], npartitions: int | None = None) -> dict[str, dict]:
    """Full pass over the ingested parts with Dask: merged profile per column."""


    parts = frame.partitions(ingest_dir, npartitions)
    partials = frame.compute([delayed(profile_partition)(p, columns) for p in parts])
    return {c: reduce(merge_profiles, [p[c] for p in partials]) for c in columns}


def dataset_columns(path: str, fmt: str, delimiter: str | None = None) -> list[str]:
    """The column names of a dataset, in file order (CSV/TSV: in the dialect sniffed from the file,
    ``delimiter``: the config's override)."""


    if fmt in ("csv", "tsv"):
        return csv_dialect.header(path, fmt, delimiter)[0]
    if fmt == "parquet":
        with open_input(path) as fh:
            return list(pq.ParquetFile(fh).schema_arrow.names)
    if fmt == "feather":
        with open_input(path) as fh:
            return list(feather.read_table(fh).column_names)
    if fmt == "excel":
        with open_input(path) as fh:
            return [str(c) for c in pd.read_excel(fh, nrows=0).columns]
    with open_input(path) as fh:
        data = fh.read().decode("utf-8", errors="replace")
    if fmt == "jsonl":
        records = [json.loads(line) for line in data.splitlines()[:1000] if line.strip()]
    else:
        loaded = json.loads(data)
        records = loaded[:1000] if isinstance(loaded, list) else [dict.fromkeys(loaded)]
    return list(dict.fromkeys(k for r in records if isinstance(r, dict) for k in r))


def infer_dataset(dataset, target: str | None = None, npartitions: int | None = None, config=None,
                  cache_dir: str | None = None) -> tuple[list[Inferred], int]:
    """Every column of the dataset typed (``prepflow infer``): read as strings, profiled, decided.
    ``dataset``: a path or URL, or a pandas/Dask DataFrame (columns converted to text the way the
    pipeline's ingest converts an untyped one). Media files are checked where the ``media_cache``
    stage would look for them: relative paths against the dataset's folder (the working directory
    for a DataFrame) or the ``media_root`` that ``config`` (a ``Config`` or a config file) gives the
    column's feature or its kind's ``defaults``; ``media-cache:`` references under ``cache_dir``.
    Returns the decisions (in column order) and the row count."""

    if isinstance(config, (str, os.PathLike)):
        config = load_config(config)
    in_memory = ingest_frame.is_frame(dataset)
    if in_memory:
        dataset = ingest_frame._pandas(dataset)
        by_name = {str(c): c for c in dataset.columns}
        columns, where = [c for c in by_name if c != ingest.ROW], ingest_frame.SOURCE
    else:
        fmt = ingest.detect_format(dataset)
        csv_options = config.preprocessing.csv if config is not None else None
        delimiter = csv_options.delimiter if csv_options else None
        columns, where = [c for c in dataset_columns(dataset, fmt, delimiter) if c != ingest.ROW], dataset
    if target is not None and target not in columns:
        raise ConfigError(f"--target: column {target!r} is not in {where}{suggest(target, columns)}")
    with tempfile.TemporaryDirectory(prefix="prepflow-infer-") as tmp:
        if in_memory:
            spec = ingest.IngestSpec(columns=dict.fromkeys(columns, "string"), format="dataframe")
            table = pa.table({c: _frame_text(dataset[by_name[c]], c) for c in columns})
            ingest.write_parts(table.to_batches(max_chunksize=ingest.PART_ROWS), spec, Path(tmp) / "data", where)
        else:
            spec = ingest.IngestSpec(columns=dict.fromkeys(columns, "string"), format=fmt, delimiter=delimiter)
            ingest.write_parts(ingest.read_batches(dataset, spec), spec, Path(tmp) / "data", dataset)
        profiles = profile_columns(str(Path(tmp) / "data"), columns, npartitions)
        rows = profiles[columns[0]]["rows"] if columns else 0
    base = media.dataset_dir(dataset)
    return [decide(c, profiles[c], c == target, media_place=MediaPlace(base, column_media_roots(config, c), cache_dir))
            for c in columns], rows


def _frame_text(values: pd.Series, column: str) -> pa.Array:
    """A DataFrame column as the pipeline's ingest reads an untyped one (``tasks.ingest.dataframe``)."""

    return pa.array([_scalar_text(v, i, column) for i, v in enumerate(values.tolist())], type=pa.string())


def media_roots(config, feature=None) -> dict[str, str]:
    """Per media kind (image, audio), the ``media_root`` the media stage would use for ``feature``
    (a ``FeatureConfig``) once it has that type: its own, else the kind's ``defaults``; kinds
    without one are left out. ``feature=None``: the defaults only."""
    roots = {}
    for kind in ("image", "audio"):
        defaults = config.defaults.get(kind)
        root = defaults.preprocessing.get("media_root") if defaults else None
        if feature is not None:
            root = feature.preprocessing.get("media_root", root)
        if root is not None:
            roots[kind] = root
    return roots


def column_media_roots(config, column: str) -> dict[str, str]:
    """``media_roots`` for the first feature of ``config`` reading ``column`` (the defaults when none
    does, or when there is no config: ``{}``)."""
    if config is None:
        return {}
    feature = next((f for f in config.features if f.source_column == column), None)
    return media_roots(config, feature)


def _yaml_scalar(value: str) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).removesuffix("\n...\n").strip()


def render_config(inferred: list[Inferred], dataset: str, rows: int, config=None) -> str:
    """A config YAML with a comment per column saying why it got its type (excluded columns as
    comments, ready to uncomment with a type). ``config``: the one inference read ``media_root``
    from; an image/audio feature whose files were found under one keeps it."""
    lines = [f"# prepflow infer {dataset}: {rows} rows, {len(inferred)} columns (full pass).",
             "# Each type comes with the reason it was chosen; edit freely."]

    def block(title: str, items: list[Inferred]) -> None:
        if not items:
            return
        lines.append(f"{title}:")
        for item in items:
            lines.append(f"  - name: {_yaml_scalar(item.name)}")
            lines.append(f"    type: {item.type}  # {item.reason}")
            options = dict(item.preprocessing)
            root = column_media_roots(config, item.column).get(item.type)
            if root is not None:
                options["media_root"] = root
            if options:
                pairs = ", ".join(f"{key}: {_yaml_scalar(str(value))}" for key, value in options.items())
                lines.append(f"    preprocessing: {{{pairs}}}")

    block("input_features", [i for i in inferred if i.type and not i.output])
    block("output_features", [i for i in inferred if i.type and i.output])
    if not any(i.type and not i.output for i in inferred):
        lines.append("input_features: []  # no column could be typed as an input; see the excluded columns")
    excluded = [i for i in inferred if not i.type]
    if excluded:
        lines.append("# Excluded (give a column a type to use it anyway):")
        for item in excluded:
            lines.append(f"#  - name: {_yaml_scalar(item.name)}  # {item.reason.removeprefix('excluded: ')}")
    return "\n".join(lines) + "\n"


def untyped(config) -> list[dict]:
    """The features without a type; ``media_root``: per media kind, the feature's own or the kind's
    ``defaults`` (where its paths would resolve once typed)."""
    return [{"name": f.name, "column": f.source_column, "output": config.is_output(f.name),
             "media_root": media_roots(config, f)} for f in config.features if f.type is None]


def run(ctx, ingest):
    """Stage entry point: infer the untyped features from the ingested data; writes ``types.json``."""

    todo = untyped(ctx.config)

    def compute(out: Path) -> Statistics:
        stats = Statistics()
        decisions = {}
        if todo:
            columns = sorted({t["column"] for t in todo})
            profiles = profile_columns(ingest_mod.data_dir(ingest.path), columns, ctx.npartitions)
            base = media.dataset_dir(ctx.dataset)
            for t in todo:
                place = MediaPlace(base, t["media_root"], str(ctx.cache.root))
                item = decide(t["name"], profiles[t["column"]], t["output"], t["column"], place)
                decisions[t["name"]] = item.to_json()
                stats.counter(f"infer_types.{item.type or 'excluded'}", 1)
        (out / TYPES_FILE).write_text(json.dumps({"features": decisions}, sort_keys=True, indent=1))
        return stats

    return run_cached(ctx, "infer_types", CODE_VERSION, [ingest.key], {"untyped": todo}, compute)


def load(result_or_path) -> dict[str, dict]:
    path = Path(getattr(result_or_path, "path", result_or_path))
    return json.loads((path / TYPES_FILE).read_text())["features"]


def apply(ctx, result_or_path):
    """The run's context with a new config in which every untyped feature has its inferred type (the
    given context and its config are unchanged)."""

    decisions = load(result_or_path)
    if all(f.type is not None for f in ctx.config.features):
        return ctx
    config = ctx.config.model_copy(deep=True)
    for f in config.features:
        if f.type is not None:
            continue
        item = decisions.get(f.name)
        if item is None:
            raise DataError(f"feature '{f.name}' has no type and no inferred type; rerun the infer_types stage")
        if item["type"] is None:
            raise DataError(f"feature '{f.name}' (column '{f.source_column}') has no type and inference would "
                            f"exclude it: {item['reason'].removeprefix('excluded: ')}; give it a 'type' in the "
                            "config or remove it")
        f.type = item["type"]
        for key, value in (item.get("preprocessing") or {}).items():  # e.g. the true label inference chose
            f.preprocessing.setdefault(key, value)  # the user's own options win
    resolve_preprocessing(config, "inferred config")
    return ctx.with_config(config)
