"""publish: write the artifact (DESIGN section 5) atomically.

The artifact is built in a private staging folder next to its final place and renamed into
``<output>/<artifact_id>`` only when complete (manifest.json last); then ``<output>/LATEST`` is
replaced atomically. An artifact that already exists with a valid manifest and every listed file at its
listed size is reused, so a rerun never rewrites it; a damaged one (a file deleted or cut short) is set
aside and published again (``find_existing``): a rerun repairs a damaged artifact rather than trusting or refusing it. The staging folder, the ``.LATEST.*`` rewrite and the report's temporary file are
locked for their writer's life (``storage.tmpdirs``), so a publish first removes the ones that killed
runs left in the same output (``sweep_output``). A remote output (``s3://...``) has its row files
written straight to the store by the Dask tasks that make them; only the small rest is staged
locally (``run``, ``storage.remote``).

Determinism: shards hold ``shard_rows`` rows (row groups of ``row_group_rows``) regardless of how
the encode stage was partitioned, so the bytes depend only on data + config. ``created_at`` is the
only time in the artifact; set ``SOURCE_DATE_EPOCH`` to pin it (reproducible-builds convention).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml
from dask import delayed

from core.errors import ConfigError
from core.pause import pause_point
from storage import media, remote, split_binary
from storage.artifact_files import size_problems
from storage.cache import list_files, sha256_files
from storage.fs import strip_file_scheme
from storage.hashing import stable_hash
from storage.tmpdirs import TempFile, TempFolder, sweep
from tasks.config import plugins
from tasks.config.constants import REPORT_TEMP_NAME, ROW, SPLIT_NAMES
from tasks.config.suites import suites_key
from tasks.publish import rows as published_rows
from tasks.publish import shards
from tasks.publish import split_binary as publish_split_binary
from tasks.runtime import dask_run, progress
from tasks.runtime.fitted_metadata import METADATA_FILE
from tasks.runtime.node import Node
from tasks.runtime.outputs import Encoded, Fitted, GateResult, Published, StageResult
from tasks.runtime.statistics import merged

SCHEMA_VERSION = 1
ENCODING_VERSION = "1"
PREPFLOW_VERSION = "0.1.0"
MANIFEST = "manifest.json"
log = logging.getLogger("prepflow.publish")
LATEST = "LATEST"


def artifact_id(fingerprint: str, config_json: dict, code_versions: dict[str, str]) -> str:
    """A hash of the dataset fingerprint, the normalized config, the encoding version, the code versions
    of the stages whose output the artifact holds (``tasks.graph.artifact_code_versions``) and of the
    feature types the config uses (``tasks.config.plugins``). The manifest
    holds validation results: a changed user suite makes a new artifact; an edited plugin (custom stage or
    feature type) too."""
    return stable_hash({"fingerprint": fingerprint, "config": config_json, "encoding": ENCODING_VERSION,
                        "code": code_versions, **plugins.builtin_feature_code(config_json), **suites_key(config_json),
                        **plugins.code_key(config_json)}, 24)


def reusable(output: str, fingerprint: str, config, code_versions: dict[str, str]) -> dict | None:
    """The published artifact for these inputs, if it exists with a manifest and intact file sizes."""
    art_id = artifact_id(fingerprint, normalized_config(config), code_versions)
    path = Path(output) / art_id
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    for rel, info in manifest["files"].items():
        f = path / rel
        if not f.is_file() or f.stat().st_size != info["bytes"]:
            return None
    rows = {name: manifest["rows"][name] for name in SPLIT_NAMES if name in manifest["rows"]}
    return {"artifact_path": str(path), "artifact_id": art_id, "rows": rows, "reused": True}


def published_splits(ctx, layout=None) -> list[str]:
    """The splits an artifact lists: all three for a run; for ``prepflow apply`` the applied split alone, plus
    the train and test mappings that NVIDIA's split_binary spec always names when that layout is published."""
    if not ctx.fitted_from:
        return list(SPLIT_NAMES)
    wanted = {ctx.fitted_from["split"]} | ({"train", "test"} if layout is not None else set())
    return [name for name in SPLIT_NAMES if name in wanted]


def normalized_config(config) -> dict:
    return config.model_dump(mode="json", exclude_none=True)


def manifest_fields(art_id: str, fingerprint: str, config_json: dict, rows: dict, files: dict) -> dict:
    """What every manifest says, whichever graph published it (a run, an apply, an extend): the schema, the id,
    the dataset's fingerprint, the config and its hash, the versions, the rows per split and the files."""
    return {"schema_version": SCHEMA_VERSION, "artifact_id": art_id, "dataset_fingerprint": fingerprint,
            "config_hash": stable_hash(config_json), "encoding_version": ENCODING_VERSION,
            "prepflow_version": PREPFLOW_VERSION, "created_at": created_at(), "rows": rows, "config": config_json,
            "files": files}


def created_at() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc) if epoch else dt.datetime.now(dt.timezone.utc)
    return when.replace(microsecond=0).isoformat()


# ---- feature spec ------------------------------------------------------------------------------

TORCH_DTYPES = {"float32": "torch.float32", "float64": "torch.float64", "int32": "torch.int32",
                "int64": "torch.int64", "int8": "torch.int8", "uint8": "torch.uint8", "bool": "torch.bool"}


def default_channels(ctx) -> dict[str, list[str]]:
    channels: dict[str, list[str]] = {"numerical": [], "categorical": [], "label": []}
    for f in ctx.config.features:
        if ctx.config.is_output(f.name):
            channels["label"].append(f.name)
        elif f.type in ("number", "numerical", "binary"):
            channels["numerical"].append(f.name)
        elif f.type == "category":
            channels["categorical"].append(f.name)
        else:
            channels[f.name] = [f.name]
    return {k: v for k, v in channels.items() if v}


# the feature types whose published column each NVIDIA channel accepts (``storage.split_binary.plan``)
SPLIT_BINARY_TYPES = {"label": ("binary",), "numerical": ("number", "numerical", "binary"), "categorical": ("category",)}


def check_split_binary(ctx) -> None:
    """What ``split_binary.plan`` refuses at publish, known from the config's feature types before any
    data is read (preflight); plan still checks the published columns (cardinality, dtype, shape).
    A feature whose type is still to be inferred is checked at publish only."""
    if "split_binary" not in ctx.config.publish.formats:
        return
    where = "publish.formats: split_binary (NVIDIA DLRM layout)"
    channels = ctx.config.publish.channels or default_channels(ctx)
    types = {f.name: f.type for f in ctx.config.features}
    if len(channels.get("label") or []) != 1:
        raise ConfigError(f"{where} needs exactly one column in the 'label' channel (the output feature), "
                          f"got {list(channels.get('label') or [])}; set publish.channels.label")
    if not channels.get("numerical"):
        raise ConfigError(f"{where} needs at least one column in the 'numerical' channel (NVIDIA's loaders index "
                          f"its first feature); set publish.channels.numerical")
    seen: set[str] = set()
    for channel, allowed in SPLIT_BINARY_TYPES.items():
        for name in channels.get(channel) or []:
            if name in seen:
                raise ConfigError(f"{where}: feature '{name}' is in two of the label/numerical/categorical channels")
            seen.add(name)
            if types.get(name) is not None and types[name] not in allowed:
                raise ConfigError(f"{where}: the '{channel}' channel takes {' or '.join(allowed)} features; "
                                  f"'{name}' is {types[name]}")


def column_specs(ctx, metadata: dict) -> dict[str, dict]:
    specs = {}
    for f in ctx.features:
        for col in f.output_columns(metadata[f.name]):
            spec = {"dtype": TORCH_DTYPES[col.dtype], "shape": list(col.shape), "feature": f.name}
            if col.dtype.startswith("int") and "vocab_size" in metadata[f.name] and not col.shape:
                spec["cardinality"] = metadata[f.name]["vocab_size"]
            specs[col.name] = spec
    specs[ROW] = dict(published_rows.COLUMN_SPEC)  # each row's input position, every split
    return specs


def channel_spec(ctx, columns: dict[str, dict]) -> dict[str, list[str]]:
    configured = ctx.config.publish.channels
    channels = configured if configured else default_channels(ctx)
    out = {}
    for channel, names in channels.items():
        expanded = []
        for name in names:
            expanded.extend(c for c, spec in columns.items() if spec["feature"] == name)
        out[channel] = expanded
    return out


# ---- writers -------------------------------------------------------------------------------------

def _split_tasks(split_name: str, parts: list[Path], folder: Path, columns: dict[str, dict], n_rows: int,
                 pub, layout=None, url: str | None = None) -> tuple[list[dict], list]:
    """A split's ``source_spec`` chunks and the Dask tasks that write its row files (each returns the
    description of the files it wrote, ``tasks.publish.shards``). Nothing here reads a row. With
    ``url`` (the split's folder on a store, a remote output) the tasks write their objects there from
    the workers, and nothing is created in ``folder``."""

    chunks: list[dict] = []
    tasks: list = []
    if layout is not None:  # NVIDIA's split_binary layout: its files are made even for an empty split
        chunks, tasks = publish_split_binary.split_tasks(split_name, parts, folder, n_rows, layout, url)
    if not parts:
        return chunks, tasks
    sizes = shards.part_sizes(parts)

    def target(name: str) -> str:
        return f"{url}/{name}" if url is not None else str(folder / name)

    if "parquet" in pub.formats:
        plan = shards.shard_plan(n_rows, pub.shard_rows, pub.row_group_rows)
        names = [f"part-{k:05d}.parquet" for k in range(max(len(plan), 1))]
        dictionary = shards.dictionary_columns(columns)
        for name, groups in zip(names, plan, strict=False):
            tasks.append(delayed(shards.write_parquet_shard, pure=False)(
                [shards.pieces(parts, sizes, lo, hi) for lo, hi in groups], target(name),
                f"{split_name}/{name}", dictionary))
        if not plan:  # an empty split: one empty shard that still carries the schema
            tasks.append(delayed(shards.write_empty_shard, pure=False)(
                str(parts[0]), target(names[0]), f"{split_name}/{names[0]}"))
        chunks.append({"type": "parquet", "features": list(columns),
                       "files": [f"{split_name}/{f}" for f in names]})
    if "npy" in pub.formats and url is not None:  # no offset writes on a store: one task per column
        kept = [str(part) for part, size in zip(parts, sizes, strict=True) if size]
        for name, spec in columns.items():
            tasks.append(delayed(shards.stream_npy, pure=False)(
                kept, name, shards.npy_dtype(spec).str, (n_rows, *spec["shape"]), target(f"{name}.npy"),
                f"{split_name}/{name}.npy"))
            chunks.append({"type": "npy", "features": [name], "files": [f"{split_name}/{name}.npy"]})
    elif "npy" in pub.formats:
        targets = {}
        for name, spec in columns.items():
            dtype = shards.npy_dtype(spec)
            path = folder / f"{name}.npy"
            start = shards.create_npy(path, dtype, (n_rows, *spec["shape"]))
            row_bytes = dtype.itemsize * int(np.prod(spec["shape"], dtype=np.int64))
            targets[name] = (str(path), dtype.str, start, row_bytes)
        offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
        writes = [delayed(shards.write_npy_rows, pure=False)(str(part), offsets[i], targets)
                  for i, (part, size) in enumerate(zip(parts, sizes, strict=True)) if size]
        for name in columns:
            tasks.append(delayed(shards.hash_file, pure=False)(targets[name][0], f"{split_name}/{name}.npy", writes))
            chunks.append({"type": "npy", "features": [name], "files": [f"{split_name}/{name}.npy"]})
    return chunks, tasks


# ---- publish -------------------------------------------------------------------------------------

def _describe_rest(staging: Path, described: dict[str, dict]) -> dict[str, dict]:
    """Every staged file's description: the row files' from their writers, the small rest hashed here."""

    rest = [rel for rel in list_files(staging) if rel not in described]
    digests = sha256_files([str(staging / rel) for rel in rest])
    files = {rel: {"sha256": d, "bytes": (staging / rel).stat().st_size} for rel, d in zip(rest, digests, strict=True)}
    return dict(sorted({**described, **files}.items()))


def find_existing(output: Path, art_id: str) -> Path | None:
    """The published artifact ``art_id`` if its manifest is there and every file it lists is there at its size
    (one ``stat`` each, ``size_problems``); a damaged one is set aside and removed (logged), so the caller
    publishes it again instead of returning it as good."""
    path = output / art_id
    if not (path / MANIFEST).is_file():
        return None
    try:
        problems = size_problems(path, json.loads((path / MANIFEST).read_text()))
    except (OSError, ValueError) as exc:
        problems = [f"{MANIFEST}: unreadable ({exc})"]
    if not problems:
        return path
    log.warning("%s: the published artifact is damaged and is published again: %s", path, "; ".join(problems[:5]))
    aside = output / f".corrupt-{art_id}-{os.urandom(4).hex()}"
    try:
        os.rename(path, aside)
    except OSError:
        return None  # another run set it aside first
    shutil.rmtree(aside, ignore_errors=True)
    return None


def write_latest(output: Path, art_id: str) -> None:
    with TempFile(output, f".{LATEST}.") as tmp:  # locked while it exists
        tmp.write_text(art_id + "\n")
        os.replace(tmp, output / LATEST)


def sweep_output(output: Path) -> list[str]:
    """Remove what killed runs left in an output folder (``storage.tmpdirs.sweep``): staging folders
    (``.tmp-*``), ``LATEST`` rewrites (``.LATEST.*``) and reports (``REPORT_TEMP_NAME``)."""

    try:
        names = os.listdir(output)
    except OSError:
        return []
    return sorted(sweep(output, (".tmp-", f".{LATEST}."), names) + sweep(output, REPORT_TEMP_NAME, names))


def run(ctx, code_versions: dict[str, str], *inputs: StageResult) -> StageResult:
    """The publish stage: every stage's output is its input (their statistics merge into the manifest).
    Its result's ``key`` is the artifact id, ``path`` the artifact's folder, ``artifact`` what ``publish``
    returned."""
    start = time.perf_counter()
    progress.started("publish")  # publish has no cache entry: its progress lines are said here
    by_stage = {r.stage: r for r in inputs}
    media_cached = by_stage["media_cache"]  # the fitted metadata and encoded rows, media decoded
    fitted, encoded = media_cached.fitted(), media_cached.encoded()
    fingerprint = media_cached.fingerprint(by_stage["ingest"].fingerprint)  # media content joins the id
    if ctx.fitted_from:  # prepflow apply: the fitted artifact joins the id too
        fingerprint = stable_hash([fingerprint, ctx.fitted_from["artifact_id"]], 64)
    dataset_files = [{k: f[k] for k in ("name", "fingerprint", "rows")} for f in by_stage["ingest"].files]
    validation = {}
    for gate in (r for r in inputs if isinstance(r, GateResult)):
        data = gate.results()
        validation[data["gate"]] = data
    art = publish(ctx, code_versions, fingerprint, encoded, fitted, merged(inputs), validation, dataset_files)
    ensure_memmaps(ctx, art)
    result = Published("publish", art["artifact_id"], art["artifact_path"], art["reused"],
                       time.perf_counter() - start, artifact=art)
    progress.finished("publish", result.seconds, result.cached, {})
    return result


def publish(ctx, code_versions: dict[str, str], fingerprint: str, encoded: Encoded, fitted: Fitted,
            stage_stats: dict, validation: dict | None = None, dataset_files: list[dict] | None = None) -> dict:
    """Publish and return ``{"artifact_path", "artifact_id", "rows", "reused"}``.

    An fsspec URL output (``s3://bucket/prefix``): the row files (Parquet shards, ``.npy`` columns,
    split_binary files) are written straight to the store by the Dask tasks that make them (the
    workers of a cluster), which return their names, sizes and sha256; the small rest (metadata,
    vocabularies, feature specs, media tables) is staged locally and uploaded by the flow process,
    then the manifest, then ``LATEST`` (``storage.remote.publish``). ``dataset_files``: a folder's or
    glob's files (name, fingerprint, rows), the manifest's lineage.
    """

    if remote.is_remote(ctx.output):
        art_id = artifact_id(fingerprint, normalized_config(ctx.config), code_versions)
        return remote.publish(str(ctx.output), art_id,
                              lambda root, art_url: _publish(ctx, root, code_versions, fingerprint, encoded, fitted,
                                                             stage_stats, validation, dataset_files, art_url))
    return _publish(ctx, Path(strip_file_scheme(str(ctx.output))), code_versions, fingerprint, encoded, fitted,
                    stage_stats, validation, dataset_files)


def _publish(ctx, output: Path, code_versions: dict[str, str], fingerprint: str, encoded: Encoded, fitted: Fitted,
             stage_stats: dict, validation: dict | None = None, dataset_files: list[dict] | None = None,
             art_url: str | None = None) -> dict:
    """Build the artifact under ``output``; with ``art_url`` (a remote output) its row files are
    written there by the Dask tasks instead, and only the small rest is staged in ``output``."""

    output.mkdir(parents=True, exist_ok=True)
    sweep_output(output)  # leftovers of killed runs (a live run's are locked, so kept)
    config_json = normalized_config(ctx.config)
    art_id = artifact_id(fingerprint, config_json, code_versions)
    metadata = fitted.metadata()
    columns = column_specs(ctx, metadata)
    pub = ctx.config.publish
    layout = split_binary.plan(columns, channel_spec(ctx, columns)) if "split_binary" in pub.formats else None
    splits = published_splits(ctx, layout)
    rows = {name: count for name, count in encoded.row_counts().items() if name in splits}
    existing = find_existing(output, art_id)
    if existing is not None:
        write_latest(output, art_id)
        return {"artifact_path": str(existing), "artifact_id": art_id, "rows": rows, "reused": True}

    staging_folder = TempFolder(output, f".tmp-{art_id}-")  # locked beside it until close()
    staging = staging_folder.path
    try:
        # Every split's row files are written by Dask tasks (the workers of a cluster), each shard or
        # part by one task: the flow process plans row ranges and gathers the files' descriptions.
        source_spec: dict[str, list] = {}
        tasks: list = []
        for split_name in splits:
            (staging / split_name).mkdir()
            chunks, split_tasks = _split_tasks(split_name, encoded.split_parts(split_name),
                                               staging.absolute() / split_name,  # workers have their own cwd
                                               columns, rows[split_name], pub, layout,
                                               f"{art_url}/{split_name}" if art_url else None)
            source_spec[split_name] = chunks
            tasks.extend(split_tasks)
        # the Parquet vocabularies beside the metadata (in the manifest), copied by Dask tasks too
        tasks.extend(delayed(shards.copy_file, pure=False)(src, f"{art_url}/{rel}" if art_url else
                                                           str(staging.absolute() / rel), rel)
                     for src, rel in fitted.file_sources(metadata))
        described: dict[str, dict] = {}
        for files in dask_run.compute(tasks):
            described.update(files)
        for split_name in splits:
            source_spec[split_name].extend(publish_media_tables(encoded, split_name, staging / split_name))
        fitted.copy_metadata(staging)  # the same bytes as json.dumps(metadata, sort_keys=True, ...)
        published_rows.add_to_metadata(staging / METADATA_FILE)  # + the __row__ column's entry
        feature_spec = {
            "feature_spec": {name: {k: v for k, v in spec.items() if k != "feature"} for name, spec in columns.items()},
            "source_spec": source_spec,
            "channel_spec": channel_spec(ctx, columns),
            "metadata": {"artifact_id": art_id, "prepflow_version": PREPFLOW_VERSION,
                         "rows": rows, "training_set_metadata": METADATA_FILE,
                         "row_id": {"column": ROW, "description": published_rows.DESCRIPTION}},
        }
        for file_name, spec in split_binary.artifact_specs(feature_spec, layout, rows).items():
            (staging / file_name).write_text(yaml.safe_dump(spec, sort_keys=False))
        manifest = {
            **manifest_fields(art_id, fingerprint, config_json, rows, _describe_rest(staging, described)),
            **({"dataset_files": dataset_files} if dataset_files else {}),
            "mode": "apply" if ctx.fitted_from else "refit",  # an extend's manifest says extend (tasks.publish.extend)
            "statistics": stage_stats,
            "validation": validation or {},
            **({"fitted_from": {k: ctx.fitted_from[k] for k in ("artifact_id", "path")}} if ctx.fitted_from else {}),
        }

        pause_point("publish")  # crash tests: every file staged, no manifest yet
        (staging / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1))
        final = output / art_id
        try:
            os.rename(staging, final)
        except OSError:
            if find_existing(output, art_id) is None:
                raise
        write_latest(output, art_id)
        return {"artifact_path": str(final), "artifact_id": art_id, "rows": rows, "reused": False}
    finally:
        staging_folder.close()


def publish_media_tables(encoded, split_name: str, folder: Path) -> list[dict]:
    """Copy the split's media tables into the artifact; their ``source_spec`` chunks."""

    chunks = []
    for table in sorted((Path(encoded.path) / split_name).glob(f"*{media.TABLE_SUFFIX}")):
        meta = json.loads(pq.read_schema(table).metadata[media.TABLE_META])
        codec = media.codec_from_json(meta["codec"])
        shutil.copyfile(table, folder / table.name)
        chunk = {"type": "media", "features": [meta["feature"]], "files": [f"{split_name}/{table.name}"],
                 "mode": meta["mode"], "dtype": f"torch.{codec.dtype.name}", "shape": list(codec.shape)}
        if meta.get("memmap"):
            chunk["memmap"] = meta["memmap"]
        chunks.append(chunk)
    return chunks


def ensure_memmaps(ctx, artifact: dict) -> None:
    """After publish: build any lazy_cached memmap of the artifact that is missing (local outputs)."""
    if media.output_media_dir(ctx.output) is None or not any(f.mode == "lazy_cached" for f in ctx.media_features()):
        return
    media.ensure_memmaps(artifact["artifact_path"])


# Its inputs are every stage before it and its argument the artifact's code versions: ``tasks.graph`` fills in
# both. It writes the artifact, not a cache entry.
NODE = Node("publish", run, output=Published, preflight=lambda ctx, local: check_split_binary(ctx), cached=False)
