"""drift: each feature's distribution where data meets a fitted state, against the fitted one.

* In a run (skew): the validation and test splits against the train split (``skew`` in ``drift.json``).
  The train split's references (``tasks.drift.measures``) go into the artifact's manifest statistics
  (``drift.reference.<feature>``), so a later ``prepflow apply`` compares with them without reading the
  train split again.
* In ``prepflow apply``: the applied split against the fitted artifact's references (read from the
  train split of the fitted artifact when it predates them), plus the change in the missing rate (the
  share of values fill_missing filled, against the fitted artifact's).

Each feature's entry is its worst check: ``{statistic, value, noise, threshold, status}`` (``ok | warn | fail``;
the value is judged by how far it passes its sampling noise, ``tasks.drift.noise``)
with ``checks`` (every statistic measured) and ``fitted``/``new`` (the bin or top-id fractions, for the
report). Thresholds are ``validation.drift`` (``tasks.config.schema.DriftConfig``); with ``action: fail``
a ``fail`` status stops the run here, before publish: nothing is published.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
from dask import delayed

from core.errors import ConfigError, ValidationFailed
from core.task_tree import tree
from storage.artifact_files import arrow_to_numpy
from tasks.config.constants import SPLIT_NAMES
from tasks.config.schema import DriftConfig, DriftThreshold
from tasks.drift import measures, noise
from tasks.runtime import dask_run
from tasks.runtime.frame import ipc_num_rows
from tasks.runtime.node import Node
from tasks.runtime.outputs import Drifted, Encoded, Fitted
from tasks.runtime.statistics import Statistics

log = logging.getLogger("prepflow.drift")
MAIN = {"number": "psi", "category": "linf"}
LEVELS = {"psi": "number", "linf": "category", "oov_rate": "oov_rate", "missing_rate": "missing_rate"}
RANK = {"ok": 0, "warn": 1, "fail": 2}
NUMBER_SAMPLE = 1_000_000  # train rows a number's deciles are taken from, at most (every step-th row)
GROUP_ROWS = 1 << 22  # rows of encoded parts one task counts (``_groups``)


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


def _primitive(column: pa.ChunkedArray) -> bool:
    """Whether the column's chunks read as numpy without a copy (primitive, no nulls, not boolean)."""
    return column.null_count == 0 and pa.types.is_primitive(column.type) and not pa.types.is_boolean(column.type)


def _numpy(column: pa.ChunkedArray) -> np.ndarray:
    """A column as numpy: a primitive column without nulls (encode's parts) without going through pandas."""
    if column.num_chunks and _primitive(column):
        chunks = [c.to_numpy(zero_copy_only=True) for c in column.chunks]
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    return arrow_to_numpy(column)


Spec = list[tuple[str, str, int]]  # (feature, type, vocab size) of each measured feature


def _spec(ctx, metadata: dict) -> Spec:
    return [(n, t, int(metadata[n].get("vocab_size") or 0)) for n, t in _measured(ctx, metadata)]


class _PartColumns(Mapping):
    """The measured columns of consecutive encoded parts (memory-mapped), each one array of the parts' rows in
    order, made when asked for: a task holds one concatenated column at a time."""

    def __init__(self, paths: list[str], spec: Spec):
        self.tables = [pa.ipc.open_file(pa.memory_map(p)).read_all() for p in paths]
        self.names = [n for n, _t, _v in spec if any(n in t.column_names for t in self.tables)]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.names:
            raise KeyError(name)
        columns = [t.column(name) for t in self.tables if name in t.column_names]
        if all(_primitive(c) for c in columns):  # the parts' record batches copied once, into one array
            chunks = [chunk.to_numpy(zero_copy_only=True) for c in columns for chunk in c.chunks]
        else:
            chunks = [arrow_to_numpy(c) for c in columns]
        if not chunks:  # parts without record batches
            return _numpy(columns[0])
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def _groups(paths: list[Path]) -> list[tuple[list[str], int]]:
    """A split's parts in consecutive groups of at least ``GROUP_ROWS`` rows (the last may hold fewer), each with
    the position of its first row in the split. A group is one task, which counts each id column once: a count
    array per feature per group, not per part (a vocabulary of a million ids makes a count array of 8 MB)."""
    groups: list[tuple[list[str], int]] = []
    current: list[str] = []
    start = rows = 0
    for path in paths:
        if not current:
            start = rows
        current.append(str(path))
        rows += ipc_num_rows(str(path))
        if rows - start >= GROUP_ROWS:
            groups.append((current, start))
            current = []
    if current:
        groups.append((current, start))
    return groups


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(b) > len(a):
        a, b = b, a
    out = a.copy()
    out[:len(b)] += b
    return out


def _reference_part(columns: Mapping[str, np.ndarray], spec: Spec, offset: int, step: int) -> tuple[dict, dict]:
    """One train part's (or group's) share of the references: its numbers' sampled values (every ``step``-th row
    of the split, by position: ``offset`` is the part's first row) and its id counts."""
    numbers, ids = {}, {}
    for name, ftype, vocab in spec:
        if name not in columns:
            continue
        if measures.kind(ftype) == "number":
            numbers[name] = np.array(columns[name][(-offset) % step::step])  # a copy: not the memory map
        else:
            ids[name] = measures.id_counts(ftype, columns[name], vocab)
    return numbers, ids


def _reference_of_group(paths: list[str], spec: Spec, offset: int, step: int) -> tuple[dict, dict]:
    return _reference_part(_PartColumns(paths, spec), spec, offset, step)


def _merge_references(*shares: tuple[dict, dict]) -> tuple[dict, dict]:
    """Parts' shares as one (associative: the gathering tree merges consecutive parts)."""
    numbers: dict[str, list] = {}
    ids: dict[str, np.ndarray] = {}
    for nums, counts in shares:
        for name, values in nums.items():
            numbers.setdefault(name, []).append(values)
        for name, c in counts.items():
            ids[name] = c if name not in ids else _add(ids[name], c)
    return {n: np.concatenate(v) for n, v in numbers.items()}, ids


def _reference_stats(share: tuple[dict, dict] | None) -> dict:
    """The references of the merged shares, as statistics JSON (what the flow process receives)."""
    stats = Statistics()
    numbers, ids = share or ({}, {})
    for name, values in numbers.items():
        stats.add(measures.number_reference(name, values))
    for name, counts in ids.items():
        hist, tail = measures.category_reference(name, counts)
        stats.add(hist)
        stats.add(tail)
    return stats.to_json()


def _step(rows: int) -> int:
    return max(1, -(-rows // NUMBER_SAMPLE))


def references(ctx, metadata: dict, parts: Iterable[dict[str, np.ndarray]], rows: int = 0) -> Statistics:
    """The references of the measured features from their train columns held here (``parts``: per part,
    name -> column; ``rows``: how many rows they have). A number's deciles are those of every ``step``-th
    train row (at most ``NUMBER_SAMPLE`` rows), counted by row position, so the sample does not depend on
    the partitioning."""
    spec, step, offset, shares = _spec(ctx, metadata), _step(rows), 0, []
    for columns in parts:
        shares.append(_reference_part(columns, spec, offset, step))
        offset += max((len(c) for c in columns.values()), default=0)
    return Statistics.from_json(_reference_stats(_merge_references(*shares) if shares else None))


def _split_references(spec: Spec, paths: list[Path], rows: int) -> Statistics:
    """``references`` of a split's encoded parts, computed on the Dask workers: each group of parts' share is a
    task, the shares merge in a tree and the references are made there; this process receives their JSON."""
    step, s = _step(rows), dask_run.shared(spec)
    tasks = [delayed(_reference_of_group)(group, s, offset, step) for group, offset in _groups(paths)]
    merged = tree(tasks, _merge_references)
    [stats] = dask_run.compute([delayed(_reference_stats)(merged)])
    return Statistics.from_json(stats)


def _count_group(paths: list[str], spec: Spec, starts: dict[str, list]) -> dict[str, np.ndarray]:
    """A group of parts' counts per feature: a number's over the reference bins (``starts``), ids by id."""
    columns = _PartColumns(paths, spec)
    return {name: measures.number_counts(starts[name], columns[name]) if measures.kind(ftype) == "number"
            else measures.id_counts(ftype, columns[name], vocab)
            for name, ftype, vocab in spec if name in columns}


def _sum_counts(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for counts in parts:
        for name, c in counts.items():
            out[name] = c if name not in out else _add(out[name], c)
    return out


def _split_counts(spec: Spec, reference: Statistics, paths: list[Path]) -> dict[str, np.ndarray]:
    """The counts of a split's encoded parts (``_count_group`` per group of parts on the workers, summed in a
    tree)."""
    spec = [(n, t, v) for n, t, v in spec if reference.items.get(measures.REFERENCE + n) is not None]
    starts = {n: list(reference.items[measures.REFERENCE + n].starts) for n, t, _v in spec
              if measures.kind(t) == "number"}
    s, b = dask_run.shared(spec), dask_run.shared(starts)
    tasks = [delayed(_count_group)(group, s, b) for group, _offset in _groups(paths)]
    return dask_run.compute([tree(tasks, _sum_counts)])[0] if tasks else {}


def _fractions(counts, top: int = 10) -> list[float]:
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    return [round(float(v), 4) for v in (counts / total if total else counts)[:top]]


def compare(ctx, metadata: dict, reference: Statistics, counted: dict[str, np.ndarray],
            missing: dict[str, tuple[float, float]] | None = None) -> dict[str, dict]:
    """Each measured feature's entry (its worst check first); ``counted``: the new data's counts per feature
    (``_split_counts``); ``missing``: feature -> (fitted, new) rate, optionally followed by the two row counts
    (their noise is 0 without them). Each check is judged past its sampling noise (``tasks.drift.noise``)."""
    cfg = drift_config(ctx)
    measured = [(n, t) for n, t in _measured(ctx, metadata) if reference.items.get(measures.REFERENCE + n) is not None]
    entries = {}
    for name, ftype in measured:
        ref = reference.items[measures.REFERENCE + name]
        if name not in counted:
            continue
        kind = measures.kind(ftype)
        new = counted[name]
        values: dict[str, tuple[float, float]] = {}  # statistic -> (value, its noise at these sizes)
        unk = measures.unk_id(ftype)
        if kind == "number":
            values["psi"] = (measures.psi(ref.counts, new), noise.psi(ref.counts, new))
        else:
            tail = reference.items.get(measures.TAIL_IDS + name)
            values["linf"] = (measures.linf(ref, tail.count if tail is not None else 0, new, unk),
                              noise.linf(ref.counts, new, unk))
            oov = measures.oov_rate(ref, unk, new)
            if oov is not None:
                values["oov_rate"] = (oov, noise.oov(ref.counts, unk, new))
        if missing and name in missing:
            before, after, *sizes = missing[name]
            n1, n2 = sizes or (0, 0)
            values["missing_rate"] = (after - before, noise.proportion(before * n1, n1, after * n2, n2))
        checks = []
        for statistic, (value, level) in values.items():
            warn, fail = thresholds(cfg, statistic, name)
            state, threshold = measures.status(noise.judged(value, level), warn, fail)
            checks.append({"statistic": statistic, "value": round(value, 6), "noise": round(level, 6),
                           "threshold": threshold, "status": state})
        worst = max(checks, key=lambda c: RANK[c["status"]])  # the first (main) one among equals
        new_counts = new if kind == "number" else np.append(new[:len(ref.counts) - 1], new[len(ref.counts) - 1:].sum())
        entries[name] = {**worst, "checks": checks, "fitted": _fractions(ref.counts), "new": _fractions(new_counts),
                         "bins": measures.bin_labels(ref, ftype, metadata[name], len(_fractions(ref.counts)))}
    return entries


def _rows_in(stats: dict) -> int:
    return stats.get("encode.rows_in", {}).get("count", 0)


def _missing_rates(stats: dict) -> dict[str, float]:
    rows = _rows_in(stats)
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


def compute(ctx, out: Path, encoded: Encoded, fitted: Fitted) -> Statistics:
    metadata = fitted.metadata()
    names = [n for n, _t in _measured(ctx, metadata)]
    if ctx.fitted_from:  # prepflow apply: the applied split against the fitted artifact
        split = ctx.fitted_from["split"]
        reference = _fitted_reference(ctx, metadata)
        fitted_manifest = json.loads((Path(ctx.fitted_from["local"]) / "manifest.json").read_text())
        before = _missing_rates(fitted_manifest.get("statistics") or {})
        after = _missing_rates(encoded.statistics)
        sizes = (_rows_in(fitted_manifest.get("statistics") or {}), _rows_in(encoded.statistics))
        missing = {n: (before.get(n, 0.0), after.get(n, 0.0), *sizes) for n in names if n in before or n in after}
        counted = _split_counts(_spec(ctx, metadata), reference, encoded.split_parts(split))
        result = {"mode": "apply", "split": split, "drift": compare(ctx, metadata, reference, counted, missing)}
        stats = Statistics(reference.items.values())  # the applied artifact keeps the references
    else:  # a run: the validation and test splits against the train split (skew)
        rows, spec = encoded.row_counts(), _spec(ctx, metadata)
        reference = _split_references(spec, encoded.split_parts("train"), rows.get("train", 0))
        result = {"mode": "run", "skew": {
            split: compare(ctx, metadata, reference, _split_counts(spec, reference, encoded.split_parts(split)))
            for split in SPLIT_NAMES[1:] if rows.get(split) and rows.get("train")}}
        stats = reference
    Drifted.write(out, result)
    return stats


def enforce(ctx, result: Drifted) -> None:
    """With ``action: fail``, a ``fail`` status raises (nothing published); warn and fail statuses are logged."""
    flagged = [(f, e) for f, e in result.entries().items() if e["status"] != "ok"]
    if not flagged:
        return
    text = "; ".join(f"{f}: {e['statistic']} {e['value']:.4g} > {e['threshold']} + noise {e.get('noise', 0):.3g} "
                     f"({e['status']}"
                     + (f", {e['split']} split" if "split" in e else "") + ")" for f, e in flagged)
    if drift_config(ctx).action == "fail" and any(e["status"] == "fail" for _f, e in flagged):
        raise ValidationFailed(f"drift gate failed (validation.drift.action: fail); nothing was published: {text}",
                               gate="drift", report=result.results())
    log.warning("drift: %s", text)


NODE = Node("drift", compute, inputs=("encode", "vocab"), output=Drifted, reads=config_slice, preflight=preflight,
            enforce=enforce)
