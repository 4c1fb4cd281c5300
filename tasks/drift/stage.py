"""drift: each feature's distribution where data meets a fitted state, against the fitted one.

* In a run (skew): the validation and test splits against the train split (``skew`` in ``drift.json``).
  The train split's references (``tasks.drift.measures``) go into the artifact's manifest statistics
  (``drift.reference.<feature>``), so a later ``prepflow apply`` compares with them without reading the
  train split again.
* In ``prepflow apply``: the applied split against the fitted artifact's references (read from the
  train split of the fitted artifact when it predates them), plus the change in the missing rate (the
  share of values fill_missing filled, against the fitted artifact's).

Each feature's entry is its worst check: ``{statistic, value, threshold, status}`` (``ok | warn | fail``)
with ``checks`` (every statistic measured) and ``fitted``/``new`` (the bin or top-id fractions, for the
report). Thresholds are ``validation.drift`` (``tasks.config.schema.DriftConfig``); with ``action: fail``
a ``fail`` status stops the run here, before publish: nothing is published.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from core.code_version import module_version
from core.errors import ConfigError, ValidationFailed
from storage.artifact_files import arrow_to_numpy
from tasks.config.constants import SPLIT_NAMES
from tasks.config.schema import DriftConfig, DriftThreshold
from tasks.drift import measures
from tasks.runtime.context import run_cached
from tasks.runtime.node import Node
from tasks.runtime.outputs import DRIFT_FILE, Drifted, Encoded, Fitted
from tasks.runtime.statistics import Histogram, Statistics

CODE_VERSION = module_version(__name__)  # this module and what it imports directly (core.code_version)
log = logging.getLogger("prepflow.drift")
MAIN = {"number": "psi", "category": "linf"}
LEVELS = {"psi": "number", "linf": "category", "oov_rate": "oov_rate", "missing_rate": "missing_rate"}
RANK = {"ok": 0, "warn": 1, "fail": 2}
NUMBER_SAMPLE = 1_000_000  # train rows a number's deciles are taken from, at most (every step-th row)


def drift_config(ctx) -> DriftConfig:
    return ctx.config.validation.drift or DriftConfig()


def thresholds(cfg: DriftConfig, statistic: str, feature: str) -> tuple[float | None, float | None]:
    """``(warn, fail)`` of a statistic: the defaults, the config's levels, then the feature's override
    (which applies to its main statistic, PSI or L-infinity)."""
    level = LEVELS[statistic]
    default: DriftThreshold = DriftConfig.model_fields[level].default_factory()
    given: DriftThreshold = getattr(cfg, level)
    warn, fail = default.warn, default.fail
    for chosen in (given, cfg.features.get(feature) if statistic in ("psi", "linf") else None):
        if chosen is not None:
            warn = chosen.warn if "warn" in chosen.model_fields_set else warn
            fail = chosen.fail if "fail" in chosen.model_fields_set else fail
    return warn, fail


def _measured(ctx, metadata: dict) -> list[tuple[str, str]]:
    """``(feature, type)`` of every feature drift measures."""
    return [(f.name, metadata[f.name]["type"]) for f in ctx.features
            if f.name in metadata and measures.kind(metadata[f.name].get("type", "")) is not None]


def _numpy(column: pa.ChunkedArray) -> np.ndarray:
    """A column as numpy: a primitive column without nulls (encode's parts) without going through pandas."""
    if column.num_chunks and column.null_count == 0 and pa.types.is_primitive(column.type) \
            and not pa.types.is_boolean(column.type):
        chunks = [c.to_numpy(zero_copy_only=True) for c in column.chunks]
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    return arrow_to_numpy(column)


def _parts(encoded: Encoded, split: str, names: list[str]) -> Iterator[dict[str, np.ndarray]]:
    """The named encoded columns of a split, part by part (memory-mapped): counts add up over parts, so no
    split is concatenated except a train split's number columns (their deciles)."""
    for part in encoded.split_parts(split):
        table = pa.ipc.open_file(pa.memory_map(str(part))).read_all()
        yield {n: _numpy(table.column(n)) for n in names if n in table.column_names}


def _counts(kind: str, ftype: str, column: np.ndarray, meta: dict, reference: Histogram | None) -> np.ndarray:
    if kind == "number":
        return measures.number_counts(reference.starts, column)
    return measures.id_counts(ftype, column, int(meta.get("vocab_size") or 0))


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(b) > len(a):
        a, b = b.copy(), a
    a[:len(b)] += b
    return a


def references(ctx, metadata: dict, parts: Iterable[dict[str, np.ndarray]], rows: int = 0) -> Statistics:
    """The references of the measured features from their train columns (``parts``: per part, name -> column;
    ``rows``: how many rows they have). A number's deciles are those of every ``step``-th train row (at most
    ``NUMBER_SAMPLE`` rows), counted by row position, so the sample does not depend on the partitioning."""
    measured = _measured(ctx, metadata)
    step = max(1, -(-rows // NUMBER_SAMPLE))
    numbers: dict[str, list[np.ndarray]] = {}
    ids: dict[str, np.ndarray] = {}
    offset = 0
    for columns in parts:
        length = 0
        for name, ftype in measured:
            if name not in columns:
                continue
            length = len(columns[name])
            if measures.kind(ftype) == "number":
                numbers.setdefault(name, []).append(columns[name][(-offset) % step::step])
            else:
                counts = measures.id_counts(ftype, columns[name], int(metadata[name].get("vocab_size") or 0))
                ids[name] = counts if name not in ids else _add(ids[name], counts)
        offset += length
    stats = Statistics()
    for name, pieces in numbers.items():
        stats.add(measures.number_reference(name, np.concatenate(pieces)))
    for name, counts in ids.items():
        hist, tail = measures.category_reference(name, counts)
        stats.add(hist)
        stats.add(tail)
    return stats


def _fractions(counts, top: int = 10) -> list[float]:
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    return [round(float(v), 4) for v in (counts / total if total else counts)[:top]]


def compare(ctx, metadata: dict, reference: Statistics, parts: Iterable[dict[str, np.ndarray]],
            missing: dict[str, tuple[float, float]] | None = None) -> dict[str, dict]:
    """Each measured feature's entry (its worst check first); ``parts``: the new data's columns per part;
    ``missing``: feature -> (fitted, new) rate."""
    cfg = drift_config(ctx)
    measured = [(n, t) for n, t in _measured(ctx, metadata) if reference.items.get(measures.REFERENCE + n) is not None]
    counted: dict[str, np.ndarray] = {}
    for columns in parts:  # counts add up part by part
        for name, ftype in measured:
            if name in columns:
                c = _counts(measures.kind(ftype), ftype, columns[name], metadata[name],
                            reference.items[measures.REFERENCE + name])
                counted[name] = c if name not in counted else _add(counted[name], c)
    entries = {}
    for name, ftype in measured:
        ref = reference.items[measures.REFERENCE + name]
        if name not in counted:
            continue
        kind = measures.kind(ftype)
        new = counted[name]
        values: dict[str, float] = {}
        if kind == "number":
            values["psi"] = measures.psi(ref.counts, new)
        else:
            tail = reference.items.get(measures.TAIL_IDS + name)
            values["linf"] = measures.linf(ref, tail.count if tail is not None else 0, new, measures.unk_id(ftype))
            oov = measures.oov_rate(ref, measures.unk_id(ftype), new)
            if oov is not None:
                values["oov_rate"] = oov
        if missing and name in missing:
            values["missing_rate"] = missing[name][1] - missing[name][0]
        checks = []
        for statistic, value in values.items():
            warn, fail = thresholds(cfg, statistic, name)
            state, threshold = measures.status(value, warn, fail)
            checks.append({"statistic": statistic, "value": round(value, 6), "threshold": threshold,
                           "status": state})
        worst = max(checks, key=lambda c: RANK[c["status"]])  # the first (main) one among equals
        new_counts = new if kind == "number" else np.append(new[:len(ref.counts) - 1], new[len(ref.counts) - 1:].sum())
        entries[name] = {**worst, "checks": checks, "fitted": _fractions(ref.counts), "new": _fractions(new_counts)}
    return entries


def _missing_rates(stats: dict) -> dict[str, float]:
    rows = stats.get("encode.rows_in", {}).get("count", 0)
    prefix = "fill_missing.filled."
    return {k[len(prefix):]: v["count"] / rows for k, v in stats.items() if k.startswith(prefix) and rows}


def _fitted_reference(ctx, metadata: dict) -> Statistics:
    """The fitted artifact's references: from its manifest, else the ones made from its train split
    (``ctx.fitted_from["reference"]``, by ``flows.apply`` for an artifact that predates them)."""
    source = ctx.fitted_from
    manifest = json.loads((Path(source["local"]) / "manifest.json").read_text())
    stats = Statistics.from_json({k: v for k, v in (manifest.get("statistics") or {}).items()
                                  if k.startswith((measures.REFERENCE, measures.TAIL_IDS))})
    return stats.merge(Statistics.from_json(source.get("reference") or {}))


def missing_references(ctx, manifest: dict) -> list[str]:
    """The measured features whose reference the fitted artifact's manifest lacks."""
    stats = manifest.get("statistics") or {}
    return [f.name for f in ctx.features if measures.kind(_type(ctx, f.name)) is not None
            and measures.REFERENCE + f.name not in stats]


def _type(ctx, name: str) -> str:
    return next((f.type for f in ctx.config.features if f.name == name), None) or ""


def config_slice(ctx) -> dict:
    source = ctx.fitted_from
    return {"drift": drift_config(ctx).model_dump(mode="json"),
            "fitted_from": source["artifact_id"] if source else None, "features": ctx.features_slice()}


def preflight(ctx, local: bool) -> None:
    unknown = sorted(set(drift_config(ctx).features) - {f.name for f in ctx.config.features})
    if unknown:
        raise ConfigError(f"validation.drift.features: {unknown} not feature(s) of the config "
                          f"({[f.name for f in ctx.config.features]})")


def run(ctx, encoded: Encoded, fitted: Fitted) -> Drifted:
    def compute(out: Path) -> Statistics:
        metadata = fitted.metadata()
        names = [n for n, _t in _measured(ctx, metadata)]
        if ctx.fitted_from:  # prepflow apply: the applied split against the fitted artifact
            split = ctx.fitted_from["split"]
            reference = _fitted_reference(ctx, metadata)
            fitted_manifest = json.loads((Path(ctx.fitted_from["local"]) / "manifest.json").read_text())
            before = _missing_rates(fitted_manifest.get("statistics") or {})
            after = _missing_rates(encoded.statistics)
            missing = {n: (before.get(n, 0.0), after.get(n, 0.0)) for n in names if n in before or n in after}
            result = {"mode": "apply", "split": split,
                      "drift": compare(ctx, metadata, reference, _parts(encoded, split, names), missing)}
            stats = Statistics(reference.items.values())  # the applied artifact keeps the references
        else:  # a run: the validation and test splits against the train split (skew)
            rows = encoded.row_counts()
            reference = references(ctx, metadata, _parts(encoded, "train", names), rows.get("train", 0))
            result = {"mode": "run", "skew": {split: compare(ctx, metadata, reference, _parts(encoded, split, names))
                                              for split in SPLIT_NAMES[1:] if rows.get(split) and rows.get("train")}}
            stats = reference
        (out / DRIFT_FILE).write_text(json.dumps(result, sort_keys=True, indent=1))
        return stats

    result = run_cached(ctx, "drift", CODE_VERSION, [encoded.key, fitted.key], config_slice(ctx), compute, Drifted)
    enforce(ctx, result)
    return result


def enforce(ctx, result: Drifted) -> None:
    """With ``action: fail``, a ``fail`` status raises (nothing published); warn and fail statuses are logged."""
    flagged = [(f, e) for f, e in result.entries().items() if e["status"] != "ok"]
    if not flagged:
        return
    text = "; ".join(f"{f}: {e['statistic']} {e['value']:.4g} > {e['threshold']} ({e['status']}"
                     + (f", {e['split']} split" if "split" in e else "") + ")" for f, e in flagged)
    if drift_config(ctx).action == "fail" and any(e["status"] == "fail" for _f, e in flagged):
        raise ValidationFailed(f"drift gate failed (validation.drift.action: fail); nothing was published: {text}",
                               gate="drift", report=result.results())
    log.warning("drift: %s", text)


NODE = Node("drift", run, inputs=("encode", "vocab"), output=Drifted, reads=config_slice, preflight=preflight)
