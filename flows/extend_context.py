"""The context of an extend (``prepflow run --extend``): the parent artifact opened and checked, the
dataset's files matched against the files the parent holds, and the run context that names both.

Before any data is read: the parent is OUT's ``LATEST`` unless ``parent`` names one; its config must equal
the given one except ``validation:`` (else one line naming the first key that differs, exit 2); every file
the parent holds (name and bytes, its manifest's ``dataset_files``) must still be in the dataset with the
same bytes (a rewrite is not an append); what is left are the new files, in name order. ``window``: only
the newest N files by name stay; the parent's files that leave it are dropped (their rows are not in
the child). The new rows are numbered after the parent's last ``__row__``.
"""

from __future__ import annotations

import os
from pathlib import Path

from core.errors import ConfigError, DataError
from storage.artifact import Artifact
from storage.artifact_files import size_problems
from storage.cache import StageCache
from tasks.config.loader import load_config, parse_config
from tasks.config.schema import Config
from tasks.dataset import fingerprint as dataset_fingerprint
from tasks.dataset.files import as_dataset
from tasks.runtime.context import RunContext

# the features whose fitted state an extend can carry: their statistics unchanged, categories' vocabularies
# extended (a set's or bag's multi-hot width is its vocabulary's size, so its published column would change
# shape; text and sequence token vocabularies are not extended yet; a time series window reads the rows
# before it, which an extend does not ingest)
EXTENDABLE_TYPES = ("number", "numerical", "binary", "category", "date", "vector")


def parent_of(output: str, parent: str | None):
    """The parent artifact: ``parent``, else OUT's ``LATEST``."""
    if "://" in str(parent or output) and not str(parent or output).startswith("file://"):
        raise ConfigError(f"--extend: {parent or output} is on an object store; extend links the parent's shards "
                          "and supports local outputs only in this version (run a refit there)")
    where = parent if parent is not None else output
    if parent is None and not (Path(output) / "LATEST").is_file():
        raise ConfigError(f"--extend: {output} has no LATEST artifact to extend; run once without --extend first "
                          "or name one with --parent")
    try:
        art = Artifact.open(where)
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(f"--extend: {where}: not a complete prepflow artifact ({exc})") from None
    problems = size_problems(art.path, art.manifest)
    if problems or "config" not in art.manifest:
        raise DataError(f"--extend: {art.path}: not a complete prepflow artifact: "
                        + "; ".join(problems[:5] or ["no config in its manifest"]))
    return art


def first_difference(a, b, path: str = "") -> str | None:
    """The first key (dotted path) where two config values differ, None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else (path or "<config>")


def extend_config(config, parent_manifest: dict, parent_path: str):
    """The parent's config with the given config's ``validation:`` section; any other difference refused."""
    if isinstance(config, Config):  # parsed once by ``prepflow run``
        parsed = config
    else:
        parsed = parse_config(config, "config") if isinstance(config, dict) else load_config(config)
    fitted = dict(parent_manifest["config"])
    given = _typed_as(parsed.model_dump(mode="json", exclude_none=True), fitted, parent_path)
    key = first_difference({k: v for k, v in given.items() if k != "validation"},
                           {k: v for k, v in fitted.items() if k != "validation"})
    if key is not None:
        raise ConfigError(f"--extend: the config differs from the parent artifact's ({parent_path}) at '{key}'; an "
                          "extend keeps the parent's fit and may change only 'validation:' (run without --extend to "
                          "refit)")
    fitted["validation"] = given.get("validation") or {}
    out = parse_config(fitted, f"{parent_path}: config")
    _check_supported(out)
    return out


def _typed_as(given: dict, fitted: dict, parent_path: str) -> dict:
    """``given`` with the types the parent inferred for its untyped features, resolved again (each type's
    defaults), so that an untyped config compares equal to the typed config the parent recorded."""
    types = {f["name"]: f.get("type") for key in ("input_features", "output_features") for f in fitted.get(key, [])}
    untyped = False
    for key in ("input_features", "output_features"):
        for f in given.get(key, []):
            if not f.get("type") and types.get(f.get("name")):
                f["type"], untyped = types[f["name"]], True
    if not untyped:
        return given
    return parse_config(given, f"config (typed as {parent_path})").model_dump(mode="json", exclude_none=True)


def _check_supported(config) -> None:
    for f in config.features:
        if f.type not in EXTENDABLE_TYPES:
            raise ConfigError(f"--extend: feature '{f.name}' is of type {f.type}; extend supports "
                              f"{', '.join(EXTENDABLE_TYPES)} features in this version (run without --extend)")
    if set(config.publish.formats) - {"parquet"}:
        raise ConfigError(f"--extend: publish.formats {list(config.publish.formats)}: extend links the parent's "
                          "Parquet shards and publishes the parquet format only")
    if config.stages:
        raise ConfigError("--extend: the config has custom stages; extend does not replay them yet")
    pre = config.preprocessing
    if pre.split.type not in ("random", "hash", "fixed"):
        raise ConfigError(f"preprocessing.split.type: '{pre.split.type}': extend assigns new rows by random, hash or "
                          "fixed splits only in this version (run without --extend)")
    if pre.sample_ratio < 1.0 or pre.sample_size is not None:
        raise ConfigError("preprocessing.sample_ratio/sample_size: extend does not sample new rows (run without "
                          "--extend)")
    balance = pre.balance
    if balance.oversample_minority is not None or balance.undersample_majority is not None:
        raise ConfigError("preprocessing.balance: extend does not balance new rows in this version (run without "
                          "--extend)")


def row_ranges(dataset_files: list[dict]) -> list[dict]:
    """The parent's files with their ``row_range`` (a refit numbers rows across its files in name order)."""
    out, start = [], 0
    for f in dataset_files:
        lo, hi = f.get("row_range", (start, start + f["rows"]))
        out.append({**f, "row_range": [int(lo), int(hi)]})
        start = int(hi)
    return out


def match_files(dataset, parent_files: list[dict], window: int | None) -> dict:
    """The dataset's files against the parent's: ``new`` (name, path, fingerprint), ``kept`` and ``dropped``
    (the parent's entries). A parent file missing or changed is refused."""
    found = dataset_fingerprint.files(dataset)  # (name, path, fingerprint) in name order
    by_name = {name: (path, digest) for name, path, digest in found}
    for f in parent_files:
        if f["name"] not in by_name:
            raise ConfigError(f"--extend: {f['name']}: a file of the parent artifact is not in the dataset; extend "
                              "only appends files (run without --extend to refit)")
        if by_name[f["name"]][1] != f["fingerprint"]:
            raise ConfigError(f"--extend: {f['name']}: the file's bytes changed since the parent artifact; a rewrite "
                              "is not an append (run without --extend to refit)")
    held = {f["name"] for f in parent_files}
    new = [{"name": n, "path": p, "fingerprint": d} for n, p, d in found if n not in held]
    names = sorted(by_name)
    if window is not None:
        if window < 1:
            raise ConfigError(f"--window must be at least 1, got {window}")
        inside = set(names[-window:])
        new = [f for f in new if f["name"] in inside]
    else:
        inside = set(names)
    return {"new": new, "kept": [f for f in parent_files if f["name"] in inside],
            "dropped": [f for f in parent_files if f["name"] not in inside]}


def extend_context(config, dataset, output: str, parent: str | None = None, window: int | None = None,
                   cache_dir: str = ".prepflow-cache", npartitions: int | None = None) -> RunContext | dict:
    """The run context of an extend, or the parent's summary when there is nothing to add."""
    if npartitions is not None and npartitions < 1:
        raise ConfigError(f"npartitions must be at least 1, got {npartitions}")
    dataset = as_dataset(dataset)  # the CLI's list of one entry: the folder or glob it names
    art = parent_of(str(output), parent)
    manifest = art.manifest
    parsed = extend_config(config, manifest, str(art.path))
    if not manifest.get("dataset_files"):
        raise ConfigError(f"--extend: {art.path} lists no dataset files (a single file or a DataFrame); extend needs "
                          "a folder, glob or list of files")
    files = row_ranges(manifest["dataset_files"])
    matched = match_files(dataset, files, window)
    if not matched["new"]:  # nothing to add: the parent is the result (a window moves with the next file)
        return {"artifact_path": str(art.path), "artifact_id": art.artifact_id, "rows": dict(manifest["rows"]),
                "stages": [], "mode": "extend", "extended": False,
                "files": {"total": len(files), "new": 0}}
    cache = cache_dir if "://" in str(cache_dir) else os.path.abspath(cache_dir)
    path = str(Path(art.path).resolve())
    offset = max(f["row_range"][1] for f in files)
    ctx = RunContext(parsed, as_dataset([f["path"] for f in matched["new"]]), StageCache(cache), npartitions, str(output),
                     fitted_from={"artifact_id": art.artifact_id, "path": path, "local": path, "split": "train"})
    ctx.extend = {"parent": {"artifact_id": art.artifact_id, "path": path}, "row_offset": offset,
                  "new": [{k: f[k] for k in ("name", "fingerprint")} for f in matched["new"]],
                  "kept": matched["kept"], "dropped": matched["dropped"]}
    return ctx


def summary_of(ctx: RunContext, summary: dict, art: dict) -> dict:
    """A run's summary of an extend (``summary``, of its published ``art``) with ``mode``, ``parent``,
    ``new_rows``, ``refit_advised`` and its files (``total``, ``new``, ``dropped``)."""
    return {**summary, "mode": "extend", "extended": True, "parent": art["parent"], "new_rows": art["new_rows"],
            "refit_advised": art["refit_advised"],
            "files": {"total": len(ctx.extend["kept"]) + len(ctx.extend["new"]), "new": len(ctx.extend["new"]),
                      "dropped": [f["name"] for f in ctx.extend["dropped"]]}}
