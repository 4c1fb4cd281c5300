"""publish for ``--extend``: the child artifact, the parent's shards linked and the new rows added.

Each split of the child lists the parent's Parquet shards first, hard-linked into the child's folder (a
copy where the filesystem refuses a link), never read or rewritten, with the sha256 and size the parent's
manifest lists; then the new rows' shards, cut as a run cuts them (``shards.shard_plan``) from the encoded
parts, their ``__row__`` numbered after the parent's last. With ``--window`` a parent shard holding rows of
a dropped file is rewritten without them (one holding only such rows is left out). The metadata is the
extended vocabularies', the manifest names the ``parent`` and ``mode: extend``, and lists every input file
with its fingerprint (the sha256 of its bytes), rows and row range, and the files the window dropped.

The child's id hashes the parent's id, the new files' fingerprints, the window's drops, the config and the
code versions: the same extend on any partitioning publishes the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from dask import delayed

from core.pause import pause_point
from storage.artifact_read import listed_file, read_manifest
from storage.hashing import stable_hash
from storage.tmpdirs import TempFolder
from tasks.config.constants import ROW, SPLIT_NAMES
from tasks.publish import rows as published_rows
from tasks.publish import shards
from tasks.publish.stage import (
    MANIFEST,
    PREPFLOW_VERSION,
    _describe_rest,
    artifact_id,
    channel_spec,
    column_specs,
    find_existing,
    manifest_fields,
    normalized_config,
    sweep_output,
    write_latest,
)
from tasks.runtime import dask_run, progress
from tasks.runtime.fitted_metadata import METADATA_FILE
from tasks.runtime.node import Node
from tasks.runtime.outputs import Drifted, GateResult, Published, StageResult
from tasks.runtime.statistics import merged

FEATURE_SPEC = "feature_spec.yaml"


def write_new_shard(groups: list[list[shards.Piece]], path: str, rel: str, dictionary: list[str], offset: int
                    ) -> dict[str, dict]:
    """One shard of new rows (as ``shards.write_parquet_shard``), ``__row__`` moved past the parent's."""
    writer = None
    try:
        for group in groups:
            table = shards.read_pieces(group)
            i = table.schema.get_field_index(ROW)
            rows = pa.array(table.column(ROW).to_numpy() + np.int64(offset), type=pa.int64())
            table = table.set_column(i, table.schema.field(i), rows)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd", use_dictionary=dictionary)
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
    finally:
        if writer is not None:
            writer.close()
    return shards.describe(Path(path), rel)


def link(source: Path, target: Path) -> None:
    """``target`` as a hard link of ``source``, or a copy where the filesystem refuses one."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def without_rows(source: Path, target: Path, rel: str, ranges: list[list[int]]) -> dict[str, dict] | None:
    """A parent shard without the rows in ``ranges`` (``[lo, hi)`` of ``__row__``); None when none is left."""
    table = pq.read_table(source)
    rows = table.column(ROW).to_numpy()
    drop = np.zeros(len(rows), dtype=bool)
    for lo, hi in ranges:
        drop |= (rows >= lo) & (rows < hi)
    if drop.all():
        return None
    meta = pq.ParquetFile(source).metadata
    group = max(meta.row_group(0).num_rows, 1) if meta.num_row_groups else 1
    pq.write_table(table.filter(pa.array(~drop)), target, compression="zstd", row_group_size=group)
    return shards.describe(target, rel)


def _parent_shards(parent: Path, manifest: dict, spec: dict, staging: Path, dropped: list[list[int]]
                   ) -> tuple[dict[str, list[str]], dict[str, dict], dict[str, int]]:
    """The parent's shards in the child: per split the files kept (linked, or rewritten without the dropped
    rows), their descriptions and the rows each split keeps."""
    files, described, kept_rows = {}, {}, {}
    for split in SPLIT_NAMES:
        names, count = [], 0
        for chunk in spec["source_spec"].get(split, []):
            if chunk["type"] != "parquet":
                continue
            for rel in chunk["files"]:
                source = listed_file(parent, manifest["files"], rel)
                target = staging / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                rows = pq.ParquetFile(source).metadata.num_rows
                if not rows and names:
                    continue  # an empty split's schema shard: new rows carry the schema
                if dropped and rows:
                    desc = without_rows(source, target, rel, dropped)
                    if desc is None:
                        continue
                    count += pq.ParquetFile(target).metadata.num_rows
                    described.update(desc)
                else:
                    link(source, target)
                    described[rel] = dict(manifest["files"][rel])
                    count += rows
                names.append(rel)
        files[split], kept_rows[split] = names, count
    return files, described, kept_rows


def _next_index(names: list[str]) -> int:
    indices = [int(Path(n).stem.split("-")[-1]) for n in names]
    return max(indices) + 1 if indices else 0


def refit_advice(stats: dict, drifted: Drifted | None) -> list[str]:
    """Why a refit is advised: drift or OOV past its fail threshold, a vocabulary at its cap."""
    reasons = [f"{k.removeprefix('vocab.at_cap.')}: vocabulary at its cap (most_common); new values are <UNK>"
               for k in sorted(stats) if k.startswith("vocab.at_cap.")]
    if drifted is not None:
        for name, entry in sorted(drifted.entries().items()):
            for check in entry.get("checks", [entry]):
                if check.get("status") == "fail":
                    reasons.append(f"{name}: {check['statistic']} {check['value']:.4g} past its fail threshold "
                                   f"{check['threshold']}")
    return reasons


def run(ctx, code_versions: dict[str, str], *inputs: StageResult) -> StageResult:
    start = time.perf_counter()
    progress.started("publish")
    by_stage = {r.stage: r for r in inputs}
    media_cached = by_stage["media_cache"]
    fitted, encoded = media_cached.fitted(), media_cached.encoded()
    ext = ctx.extend
    parent = Path(ext["parent"]["path"])
    parent_manifest = read_manifest(parent)
    spec = yaml.safe_load(listed_file(parent, parent_manifest["files"], FEATURE_SPEC).read_text())
    dropped_ranges = [f["row_range"] for f in ext["dropped"]]
    fingerprint = stable_hash({"parent": ext["parent"]["artifact_id"], "new": ext["new"],
                               "dropped": [f["name"] for f in ext["dropped"]]}, 64)
    config_json = normalized_config(ctx.config)
    art_id = artifact_id(fingerprint, config_json, code_versions)
    stats = merged(inputs)
    advice = refit_advice(stats, by_stage.get("drift"))
    output = Path(ctx.output)
    output.mkdir(parents=True, exist_ok=True)
    sweep_output(output)
    new_rows = encoded.row_counts()
    existing = find_existing(output, art_id)
    if existing is None:
        _publish(ctx, output, art_id, fingerprint, parent, parent_manifest, spec, dropped_ranges, fitted, encoded,
                 config_json, stats, inputs, advice)
    write_latest(output, art_id)
    manifest = read_manifest(output / art_id)
    art = {"artifact_path": str(output / art_id), "artifact_id": art_id, "rows": manifest["rows"],
           "reused": existing is not None, "mode": "extend", "parent": ext["parent"],
           "new_rows": {k: int(v) for k, v in new_rows.items()}, "refit_advised": manifest["refit_advised"]}
    result = Published("publish", art_id, art["artifact_path"], existing is not None, time.perf_counter() - start,
                       artifact=art)
    progress.finished("publish", result.seconds, result.cached, {})
    return result


def _publish(ctx, output: Path, art_id: str, fingerprint: str, parent: Path, parent_manifest: dict, spec: dict,
             dropped: list[list[int]], fitted, encoded, config_json: dict, stats: dict, inputs, advice: list[str]
             ) -> None:
    ext = ctx.extend
    metadata = fitted.metadata()
    columns = column_specs(ctx, metadata)
    pub = ctx.config.publish
    staging_folder = TempFolder(output, f".tmp-{art_id}-")
    staging = staging_folder.path
    try:
        files, described, rows = _parent_shards(parent, parent_manifest, spec, staging, dropped)
        tasks = []
        dictionary = shards.dictionary_columns(columns)
        for split in SPLIT_NAMES:
            parts = encoded.split_parts(split)
            sizes = shards.part_sizes(parts) if parts else []
            n = int(sum(sizes))
            first = _next_index(files[split])
            for k, groups in enumerate(shards.shard_plan(n, pub.shard_rows, pub.row_group_rows)):
                rel = f"{split}/part-{first + k:05d}.parquet"
                (staging / split).mkdir(parents=True, exist_ok=True)
                tasks.append(delayed(write_new_shard, pure=False)(
                    [shards.pieces(parts, sizes, lo, hi) for lo, hi in groups], str(staging.absolute() / rel), rel,
                    dictionary, int(ext["row_offset"])))
                files[split].append(rel)
            rows[split] += n
        for result in dask_run.compute(tasks):
            described.update(result)
        fitted.copy_metadata(staging)
        fitted.copy_files(metadata, staging, link=True)  # the Parquet vocabularies (the extended ones)
        published_rows.add_to_metadata(staging / METADATA_FILE)
        source_spec = {split: [{"type": "parquet", "features": list(columns), "files": files[split]}]
                       for split in SPLIT_NAMES}
        feature_spec = {
            "feature_spec": {name: {k: v for k, v in s.items() if k != "feature"} for name, s in columns.items()},
            "source_spec": source_spec,
            "channel_spec": channel_spec(ctx, columns),
            "metadata": {"artifact_id": art_id, "prepflow_version": PREPFLOW_VERSION, "rows": rows,
                         "training_set_metadata": METADATA_FILE,
                         "row_id": {"column": ROW, "description": published_rows.DESCRIPTION}},
        }
        (staging / FEATURE_SPEC).write_text(yaml.safe_dump(feature_spec, sort_keys=False))
        manifest = {
            **manifest_fields(art_id, fingerprint, config_json, rows, _describe_rest(staging, described)),
            "dataset_files": _dataset_files(ext, inputs),
            "dropped_files": [{k: f[k] for k in ("name", "fingerprint", "rows", "row_range")} for f in ext["dropped"]],
            "parent": dict(ext["parent"]),
            "mode": "extend",
            "refit_advised": advice,
            "statistics": stats,
            "validation": {g.results()["gate"]: g.results() for g in inputs if isinstance(g, GateResult)},
        }
        pause_point("publish")
        (staging / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1))
        try:
            os.rename(staging, output / art_id)
        except OSError:
            if find_existing(output, art_id) is None:
                raise
    finally:
        staging_folder.close()


def _dataset_files(ext: dict, inputs) -> list[dict]:
    """Every input file of the child: the parent's kept, then the new ones with their row ranges."""
    ingested = next(r for r in inputs if r.stage == "ingest")
    # a single new file is ingested as one file (no per-file list): all its rows are that file's
    rows = {f["fingerprint"]: int(f["rows"]) for f in ingested.files} or {ext["new"][0]["fingerprint"]: ingested.num_rows}
    out = [{k: f[k] for k in ("name", "fingerprint", "rows", "row_range")} for f in ext["kept"]]
    start = int(ext["row_offset"])
    for f in ext["new"]:
        n = rows[f["fingerprint"]]
        out.append({"name": f["name"], "fingerprint": f["fingerprint"], "rows": n, "row_range": [start, start + n]})
        start += n
    return out


NODE = Node("publish", run, output=Published, cached=False)
