"""vocab for ``--extend``: the parent's fitted metadata, each category vocabulary extended.

Every statistic and fill value is the parent's. A category vocabulary keeps the parent's ``idx2str`` as an
exact prefix; the new files' values are counted over their fit rows by the vocab stage's own counting (its
fit with the thresholds lifted, so every value's count comes back), added to the parent's recorded counts
(``str2freq``: a value the parent left out below ``min_frequency`` has no recorded count, so only its new
rows count), and the values whose count reaches ``min_frequency`` are appended after the parent's last id
by count descending, then the value's UTF-8 bytes, until ``most_common`` values are kept. A value past that
cap is ``<UNK>``: the statistics count its rows (``vocab.unk_past_cap.<feature>``) and flag the feature
(``vocab.at_cap.<feature>``). A vocabulary the parent stored as a Parquet file (over the inline size) is
extended as Arrow arrays and stored as a file again, under the same name.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import ConfigError
from storage import artifact_read, vocab_store
from tasks.config.constants import ROW
from tasks.features.category_options import INLINE_MAX
from tasks.runtime import file_fits, fitted_metadata
from tasks.runtime.node import Node
from tasks.runtime.outputs import Fitted, Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics
from tasks.vocab import stage as vocab_stage
from tasks.vocab.category import VOCAB_DIR

UNBOUNDED = 2**31 - 2  # most_common with no cap: every counted value comes back with its count


def parent_metadata(path: str) -> dict:
    """The parent artifact's metadata (without ``__row__``), its vocabularies inline."""
    metadata = artifact_read.read_json(path, artifact_read.read_manifest(path), fitted_metadata.METADATA_FILE,
                                      "every feature's fitted metadata")
    return {name: meta for name, meta in metadata.items() if name != ROW}


def check(name: str, meta: dict) -> None:
    if meta.get("type") == "category" and meta.get("preprocessing", {}).get("symbols") == "ludwig":
        raise ConfigError(f"--extend: feature '{name}': Ludwig's symbols (preprocessing.symbols: ludwig) order ids by "
                          "first occurrence; extend needs prepflow's symbols")


def extendable(meta: dict) -> bool:
    """A category vocabulary this module extends: prepflow's symbols, not hashed, not pre-encoded."""
    return meta.get("type") == "category" and ("idx2str" in meta or "vocab_file" in meta) \
        and not meta.get("encoded") and "hash_buckets" not in meta \
        and meta.get("preprocessing", {}).get("symbols") != "ludwig"


def extend_arrays(values: pa.Array, counts: np.ndarray, specials: int, new_values: pa.Array, new_counts: np.ndarray,
                  min_frequency: int, most_common: int) -> tuple[pa.Array, np.ndarray, int, bool]:
    """The vocabulary ``values`` (id order, ``specials`` reserved ids first) with its ``counts`` grown by the new
    files' (``new_values``, distinct, no reserved value); the values the thresholds admit appended by count
    descending, then bytes, up to ``most_common``. Also the rows of values the cap refused, and whether the
    vocabulary is at its cap."""
    counts = np.asarray(counts, dtype=np.int64).copy()
    new_counts = np.asarray(new_counts, dtype=np.int64)
    at = pc.fill_null(pc.index_in(new_values, value_set=values), -1).to_numpy(zero_copy_only=False)
    known = at >= 0
    np.add.at(counts, at[known].astype(np.int64), new_counts[known])
    fresh = pa.table({"value": new_values.filter(pa.array(~known)), "count": new_counts[~known]})
    fresh = fresh.filter(pc.greater_equal(fresh["count"], min_frequency))
    fresh = fresh.sort_by([("count", "descending"), ("value", "ascending")])  # UTF-8 strings compare by bytes
    room = max(most_common - (len(values) - specials), 0)
    admitted = fresh.slice(0, room)
    past_cap = int(pc.sum(fresh["count"].slice(room)).as_py() or 0) if fresh.num_rows > room else 0
    grown = pa.concat_arrays([values.cast(pa.string()), admitted["value"].combine_chunks().cast(pa.string())])
    out_counts = np.concatenate([counts, admitted["count"].to_numpy()]).astype(np.int64)
    return grown, out_counts, past_cap, len(grown) - specials >= most_common


def extend_vocabulary(meta: dict, new_counts: dict[str, int], min_frequency: int, most_common: int
                      ) -> tuple[dict, int, bool]:
    """``extend_arrays`` of an inline vocabulary (``idx2str``, ``str2freq``) and the new values' counts."""
    specials = 1 + int(meta.get("num_oov_buckets", 0))
    names = meta["idx2str"]
    new = {v: n for v, n in new_counts.items() if v not in names[:specials]}
    values, counts, past_cap, at_cap = extend_arrays(
        pa.array(names, pa.string()), np.asarray([meta.get("str2freq", {}).get(v, 0) for v in names], np.int64),
        specials, pa.array(list(new), pa.string()), np.asarray(list(new.values()), np.int64), min_frequency,
        most_common)
    idx2str = values.to_pylist()
    return ({**meta, "idx2str": idx2str, "str2idx": {t: i for i, t in enumerate(idx2str)},
             "str2freq": dict(zip(idx2str, counts.tolist(), strict=True)), "vocab_size": len(idx2str)},
            past_cap, at_cap)


def _relaxed(ctx, names: list[str]):
    """The config with only the named category features, their thresholds lifted."""
    def lift(features):
        return [f.model_copy(update={"preprocessing": {**f.preprocessing, "min_frequency": 1,
                                                       "most_common": UNBOUNDED}})
                for f in features if f.name in names]
    cfg = ctx.config
    return ctx.with_config(cfg.model_copy(update={"input_features": lift(cfg.input_features),
                                                  "output_features": lift(cfg.output_features)}))


def _table(meta: dict, folder: str | Path) -> tuple[pa.Array, np.ndarray]:
    """A category's vocabulary as (values, counts) in id order: inline, or its Parquet file under ``folder``."""
    if "vocab_file" in meta:
        table = vocab_store.read(Path(folder) / meta["vocab_file"]["path"], meta["vocab_file"].get("sha256"))
        return table["value"].combine_chunks().cast(pa.string()), table["count"].to_numpy().astype(np.int64)
    names = meta["idx2str"]
    return pa.array(names, pa.string()), np.asarray([meta.get("str2freq", {}).get(v, 0) for v in names], np.int64)


def new_counts(ctx, ingest: Ingested, split: SplitAssignment, missing: MissingStates, names: list[str]
               ) -> dict[str, tuple[pa.Array, np.ndarray]]:
    """Every value's count in the new files' fit rows, per named feature (the vocab stage's counting), without
    the reserved values."""
    if not names:
        return {}
    ctx.cache.root.mkdir(parents=True, exist_ok=True)
    out = {}
    # the vocab stage's per-file entries (its own keys: each new file counted once, cached)
    with tempfile.TemporaryDirectory(dir=ctx.cache.root) as tmp, file_fits.declared(vocab_stage.NODE):
        vocab_stage.compute(_relaxed(ctx, names), Path(tmp), ingest, split, missing)
        counted = fitted_metadata.read_full(tmp)
        for name in names:
            values, counts = _table(counted[name], tmp)
            specials = 1 + int(counted[name].get("num_oov_buckets", 0))
            out[name] = values.slice(specials), counts[specials:]
    return out


def compute(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates) -> Statistics:
    parent = ctx.extend["parent"]["path"]
    metadata = parent_metadata(parent)
    for name, meta in metadata.items():
        check(name, meta)
    names = [name for name, meta in metadata.items() if extendable(meta)]
    counts = new_counts(ctx, ingest, split, missing, names)
    stats = Statistics()
    for name in names:
        options = ctx.feature(name).options
        meta = metadata[name]
        values, grown_counts, past_cap, at_cap = extend_arrays(
            *_table(meta, parent), 1 + int(meta.get("num_oov_buckets", 0)), *counts[name], options.min_frequency,
            options.most_common)
        grown = {k: v for k, v in meta.items() if k not in ("idx2str", "str2idx", "str2freq", "vocab_file")}
        grown["vocab_size"] = len(values)
        if "vocab_file" in meta or len(values) > INLINE_MAX:  # as the vocab stage stores one of this size
            rel = meta["vocab_file"]["path"] if "vocab_file" in meta else f"{VOCAB_DIR}/{name}.parquet"
            grown["vocab_file"] = {"path": rel, **vocab_store.write(out / rel, values, grown_counts)}
        else:
            idx2str = values.to_pylist()
            grown.update(idx2str=idx2str, str2idx={t: i for i, t in enumerate(idx2str)},
                         str2freq=dict(zip(idx2str, grown_counts.tolist(), strict=True)))
        stats.counter(f"vocab.added.{name}", len(values) - meta["vocab_size"])
        stats.counter(f"vocab.unk_past_cap.{name}", past_cap)
        if at_cap:
            stats.counter(f"vocab.at_cap.{name}", 1)
        metadata[name] = grown
    for name, meta in metadata.items():
        if "vocab_size" in meta:
            stats.counter(f"vocab.size.{name}", meta["vocab_size"])
        if "vocab_file" in meta and not (out / meta["vocab_file"]["path"]).is_file():  # a hashed one, unchanged
            (out / meta["vocab_file"]["path"]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(parent) / meta["vocab_file"]["path"], out / meta["vocab_file"]["path"])
    fitted_metadata.write(out, metadata)
    return stats


def config_slice(ctx) -> dict:
    return {"features": ctx.features_slice(), "fit_on": ctx.config.preprocessing.fit_on,
            "parent": ctx.extend["parent"]["artifact_id"]}


NODE = Node("vocab", compute, inputs=("ingest", "split", "fill_missing"), output=Fitted, reads=config_slice)
