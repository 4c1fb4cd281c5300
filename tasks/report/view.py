"""What the data report reads from an artifact and the values its sections show: the artifact's three
small files (``ArtifactView``, opened by ``tasks.report.page.open_view``), its merged statistics by name
and kind, features in the config's order, class counts, fitted values, missing-value accounting, top
tokens, published columns and a few of its rows for media samples. Nothing here writes HTML
(``tasks.report.markup`` does)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from storage import artifact_read, npy
from storage.artifact_files import arrow_to_numpy
from storage.media import open_media_columns
from tasks.config.constants import SPLIT_NAMES
from tasks.report.markup import fmt
from tasks.runtime import fitted_metadata

ROW_COLUMN = "__row__"  # every split's input row positions (tasks.publish.rows)
TOP_TOKENS = 20
SPLITS = SPLIT_NAMES


@dataclass
class ArtifactView:
    """What a report reads: the artifact's three small files, and the artifact for media samples."""

    location: str  # folder or URL of the artifact
    manifest: dict
    metadata: dict
    feature_spec: dict
    artifact: Any = None  # storage.artifact.Artifact for local artifacts (media samples); None for URLs

    @property
    def artifact_id(self) -> str:
        return self.manifest["artifact_id"]

    @property
    def statistics(self) -> dict:
        return self.manifest.get("statistics") or {}



# ---- statistics by name ------------------------------------------------------------------------------

def counter(stats: dict, name: str) -> int | None:
    item = stats.get(name)
    return None if item is None or item.get("kind") != "counter" else int(item["count"])


def histogram(stats: dict, name: str) -> dict | None:
    item = stats.get(name)
    return item if item is not None and item.get("kind") == "histogram" else None


def length_stat(stats: dict, feature: str) -> tuple[dict, int | None] | None:
    """``<stage>.length.<feature>`` (encode for sequences and text, media_cache for audio)."""
    for stage in ("encode", "media_cache"):
        hist = histogram(stats, f"{stage}.length.{feature}")
        if hist is not None:
            return hist, counter(stats, f"{stage}.truncated.{feature}")
    return None


def features_in_order(view: ArtifactView) -> list[tuple[str, bool]]:
    """(name, is_output) in the config's order."""
    config = view.manifest.get("config") or {}
    out = [(f["name"], False) for f in config.get("input_features", [])]
    out += [(f["name"], True) for f in config.get("output_features", [])]
    known = {n for n, _o in out}
    return [(n, o) for n, o in out if n in view.metadata] + [(n, False) for n in view.metadata if n not in known]


def slugs(names: list[str]) -> dict[str, str]:
    """HTML-id-safe, unique names per feature."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "feature"
        slug, i = base, 2
        while slug in used:
            slug, i = f"{base}-{i}", i + 1
        used.add(slug)
        out[name] = slug
    return out


def class_names(meta: dict) -> list[str]:
    if meta.get("type") == "binary":
        return [str(x) for x in meta.get("bool2str") or ["false", "true"]]
    return [str(x) for x in meta.get("idx2str", [])]


def class_counts(stats: dict, feature: str, meta: dict) -> dict[str, list[int]]:
    """Published rows per class id and split, and the training split before balancing when it ran."""
    n = len(class_names(meta))
    series: dict[str, list[int]] = {}
    before = {k.split(".", 2)[2]: v["count"] for k, v in stats.items() if k.startswith("balance.class_count_before.")}
    if before:
        if meta.get("type") == "binary":
            series["train before balancing"] = [int(before.get("False", 0)), int(before.get("True", 0))]
        else:
            ids = meta.get("str2idx", {})
            counts = [0] * n
            for label, c in before.items():
                counts[ids.get(label, 0)] += int(c)
            series["train before balancing"] = counts
    for split in SPLITS:
        hist = histogram(stats, f"encode.classes.{split}.{feature}")
        if hist is not None:
            label = "train (published)" if split == "train" and before else split
            series[label] = [int(c) for c in hist["counts"][1:1 + n]]
    return series



SKIP_META = fitted_metadata.VOCABULARY_KEYS | {"preprocessing", "type", "column", "codec", "str2bool"}


def fitted_values(meta: dict) -> list[list[Any]]:
    rows = []
    for key in sorted(meta):
        value = meta[key]
        if key in SKIP_META:
            continue
        if isinstance(value, list):
            if len(value) > 12:
                continue
            value = ", ".join(fmt(v) for v in value)
        elif isinstance(value, dict):
            continue
        rows.append([key, fmt(value)])
    return rows


def missing_text(view: ArtifactView, name: str, meta: dict) -> str:
    stats = view.statistics
    pre = meta.get("preprocessing") or {}
    strategy = pre.get("missing_value_strategy") or "?"
    fill = pre.get("computed_fill_value")
    missing_fit = counter(stats, f"fill_missing.missing_in_fit_rows.{name}")
    filled = counter(stats, f"fill_missing.filled.{name}")
    dropped = counter(stats, f"fill_missing.rows_dropped.{name}")
    fit_on = ((view.manifest.get("config") or {}).get("preprocessing") or {}).get("fit_on", "train")
    fit_rows = counter(stats, "split.rows.train") if fit_on == "train" else counter(stats, "ingest.rows_out")
    shown = json.dumps(fill, ensure_ascii=False) if isinstance(fill, str) else fmt(fill)
    how = f"strategy {strategy}" + (f" = {shown}" if fill is not None else "")
    if strategy == "drop_row":  # nothing is filled: rows with a missing value are left out
        if not dropped:
            return "none (strategy drop_row: a row missing this value would be dropped)"
        share = f" ({dropped / rows_in:.1%} of {rows_in} input rows)" if (rows_in := counter(stats, "ingest.rows_out")) else ""
        return f"{dropped} rows dropped{share}: strategy drop_row leaves out every row missing this value"
    if not missing_fit and not filled and not dropped:
        return f"none in the published rows ({how} would fill them)"
    parts = []
    if missing_fit is not None:
        share = f" ({missing_fit / fit_rows:.1%})" if fit_rows else ""
        parts.append(f"{missing_fit} missing in the {fit_rows if fit_rows is not None else '?'} rows the fill was "
                     f"fitted on (fit_on: {fit_on}){share}")
    if filled is not None:
        parts.append(f"{filled} values filled in all rows, {how}")
    else:
        parts.append(how)
    if dropped:
        parts.append(f"{dropped} rows dropped")
    return "; ".join(parts)



def top_tokens(meta: dict) -> tuple[list[tuple[str, int]], int]:
    freq = meta.get("str2freq") or {}
    order = meta.get("idx2str") or sorted(freq, key=lambda t: -freq[t])
    # The counts in vocabulary order, one array: the sort of a vocabulary of 10^5 tokens runs in numpy
    raw = np.fromiter((freq.get(t, 0) for t in order), dtype=np.float64, count=len(order))
    kept = np.flatnonzero(raw > 0)
    top = kept[np.argsort(-np.trunc(raw[kept]), kind="stable")[:TOP_TOKENS]]  # stable: vocabulary order
    return [(order[i], int(freq[order[i]])) for i in top], max(len(kept) - TOP_TOKENS, 0)


def published_columns(feature_spec: dict) -> dict[str, dict]:
    """Each published column's dtype and shape as a reader gets it: a lazy or lazy_cached media column
    (an int64 slot as stored) as its decoded items, from its ``media`` chunk, with that chunk's ``mode``
    (what ``storage.media.item_specs`` gives the loader)."""
    columns = dict(feature_spec.get("feature_spec") or {})
    for chunks in (feature_spec.get("source_spec") or {}).values():
        for chunk in chunks:
            for column in chunk["features"] if chunk.get("type") == "media" else []:
                if column in columns:
                    columns[column] = {**columns[column], "dtype": chunk["dtype"], "shape": list(chunk["shape"]),
                                       "mode": chunk.get("mode")}
    return columns



def sample_rows(view: ArtifactView, name: str, limit: int):
    """Up to ``limit`` rows of column ``name`` from the first non-empty split, read from the artifact's
    files (``.npy`` memory-mapped, else the first Parquet row group); a lazy media column's slots are
    decoded through ``storage.media`` (no torch import, unlike the loader)."""

    art = view.artifact
    for split in SPLITS:
        if int((view.manifest.get("rows") or {}).get(split, 0)) == 0:
            continue
        chunks = art.chunks(split)
        artifact_read.check_chunks(art.path, view.manifest["files"], chunks)  # listed, inside, of their size
        npy_files = {f: file for c in chunks if c["type"] == "npy"
                     for f, file in zip(c["features"], c["files"], strict=True)}
        if name in npy_files:
            column = np.asarray(npy.load(art.path / npy_files[name], mmap_mode="r")[:limit])
        else:
            first = next(c for c in chunks if c["type"] == "parquet")["files"][0]
            table_ = pq.ParquetFile(art.path / first).read_row_group(0, columns=[name])
            column = arrow_to_numpy(table_.column(name))[:limit]
        media = next((c for c in chunks if c["type"] == "media" and name in c["features"]), None)
        if media is not None:
            column = open_media_columns(art.path, {name: media}, {name: column})[name][:]
        return split, column
    return None, None


