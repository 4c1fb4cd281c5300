"""``prepflow infer``: every column of a dataset typed, with the reason, printed as a config.

The dataset goes through the stage graph's own ``ingest`` and ``infer_types`` stages (``tasks.graph``,
in a temporary stage cache), with a config that declares every column as an untyped feature (the
``--target`` column as an output): so a column is read, profiled and decided exactly as in ``prepflow run``
for a feature left untyped.
"""

from __future__ import annotations

import os
import tempfile

import yaml

from core.errors import ConfigError, DataError
from core.options import suggest
from storage.cache import StageCache
from tasks.config.constants import ROW
from tasks.config.loader import load_config, parse_config
from tasks.dataset.files import as_dataset, dataset_files, label
from tasks.dataset.info import column_names, detect_format
from tasks.graph import run_graph
from tasks.infer_types.rules import Inferred
from tasks.infer_types.stage import column_media_roots
from tasks.ingest.dataframe import SOURCE, is_frame
from tasks.ingest.nested import file_schema, nested_fields
from tasks.ingest.nested import why as nested_why
from tasks.runtime.context import RunContext


def infer_dataset(dataset, target: str | None = None, npartitions: int | None = None, config=None,
                  cache_dir: str | None = None) -> tuple[list[Inferred], int]:
    """Every column of the dataset typed: the decisions (in column order) and the row count. ``dataset``:
    a path or URL, or a pandas/Dask DataFrame. Media files are checked where the ``media_cache`` stage
    would look for them: relative paths against the dataset's folder (the working directory for a
    DataFrame) or the ``media_root`` that ``config`` (a ``Config`` or a config file) gives the column's
    feature or its kind's ``defaults``; ``media-cache:`` references under ``cache_dir``. Nothing is cached:
    the files are checked again on every call (a run's infer_types stage keeps its decisions in its entry)."""

    if isinstance(config, (str, os.PathLike)):
        config = load_config(config)
    dataset = as_dataset(dataset)
    first = fmt = None
    if is_frame(dataset):
        columns, where = [str(c) for c in dataset.columns if str(c) != ROW], SOURCE
    else:
        csv_options = config.preprocessing.csv if config is not None else None
        delimiter = csv_options.delimiter if csv_options else None
        # a folder's, glob's or list's first file tells the columns (and the nested ones)
        first, fmt = dataset_files(dataset)[0], detect_format(dataset)
        columns, where = [c for c in column_names(first, fmt, delimiter) if c != ROW], label(dataset)
    if target is not None and target not in columns:
        raise ConfigError(f"--target: column {target!r} is not in {where}{suggest(target, columns)}")
    nested = {} if first is None else _nested_columns(first, fmt, columns)
    if target in nested:
        raise DataError(f"{label(dataset)}: --target: {nested_why(target, nested[target])}")
    every, columns = columns, [c for c in columns if c not in nested]
    untyped = parse_config(_all_untyped(columns, target, config), "inferred config")
    with tempfile.TemporaryDirectory(prefix="prepflow-infer-") as tmp:
        ctx = RunContext(untyped, dataset, StageCache(tmp), npartitions, media_dir=cache_dir)
        results = run_graph(ctx, until="infer_types", retype=False)
        decisions = results["infer_types"].types()
        rows = results["ingest"].num_rows
    decided = {c: Inferred(**decisions[c]) for c in columns}
    decided.update({c: Inferred(c, c, None, f"excluded: {nested_why(c, t)}") for c, t in nested.items()})
    return [decided[c] for c in every], rows


def _nested_columns(first: str, fmt: str, columns: list[str]) -> dict:
    """The dataset's nested columns (a struct, a map: ``tasks.ingest.nested``), from its ``first`` file's schema:
    excluded with the reason, never profiled as the text of their printed form."""
    schema = file_schema(first, fmt)
    return nested_fields(schema, columns) if schema is not None else {}


def _all_untyped(columns: list[str], target: str | None, config) -> dict:
    """A config declaring every column an untyped feature (the target an output), keeping what of ``config``
    decides where media resolve (``defaults``, a feature's ``media_root``) and how the file is read."""
    base = config.model_dump(mode="json", exclude_none=True) if config is not None else {}
    own = {}  # the media_root of the config's feature reading each column, where it gives one
    for f in (config.features if config is not None else []):
        if "media_root" in f.preprocessing:
            own.setdefault(f.source_column, f.preprocessing["media_root"])
    features = [{"name": c, "preprocessing": {"media_root": own[c]} if c in own else {}} for c in columns]
    kept = {k: base[k] for k in ("defaults",) if k in base}
    csv = (base.get("preprocessing") or {}).get("csv")
    return {**kept, **({"preprocessing": {"csv": csv}} if csv else {}),
            "input_features": [f for f in features if f["name"] != target],
            "output_features": [f for f in features if f["name"] == target]}


def _yaml_scalar(value: str) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).removesuffix("\n...\n").strip()


def render_config(inferred: list[Inferred], dataset, rows: int, config=None) -> str:
    """A config YAML with a comment per column saying why it got its type (excluded columns as
    comments, ready to uncomment with a type). ``config``: the one inference read ``media_root``
    from; an image/audio feature whose files were found under one keeps it."""
    lines = [f"# prepflow infer {label(dataset)}: {rows} rows, {len(inferred)} columns (full pass).",
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
