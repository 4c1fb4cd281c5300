"""vocab for ``--extend``: the parent's fitted metadata, each category vocabulary extended.

Every statistic and fill value is the parent's. A category vocabulary keeps the parent's ``idx2str`` as an
exact prefix; the new files' values are counted over their fit rows by the vocab stage's own counting (its
fit with the thresholds lifted, so every value's count comes back), added to the parent's recorded counts
(``str2freq``: a value the parent left out below ``min_frequency`` has no recorded count, so only its new
rows count), and the values whose count reaches ``min_frequency`` are appended after the parent's last id
by count descending, then the value's UTF-8 bytes, until ``most_common`` values are kept. A value past that
cap is ``<UNK>``: the statistics count its rows (``vocab.unk_past_cap.<feature>``) and flag the feature
(``vocab.at_cap.<feature>``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from core.errors import ConfigError
from storage import artifact_read
from tasks.config.constants import ROW
from tasks.features.category_options import UNK, oov_name
from tasks.runtime import file_fits, fitted_metadata
from tasks.runtime.node import Node
from tasks.runtime.outputs import Fitted, Ingested, MissingStates, SplitAssignment
from tasks.runtime.statistics import Statistics
from tasks.vocab import stage as vocab_stage

UNBOUNDED = 2**31 - 2  # most_common with no cap: every counted value comes back with its count


def parent_metadata(path: str) -> dict:
    """The parent artifact's metadata (without ``__row__``), its vocabularies inline."""
    metadata = artifact_read.read_json(path, artifact_read.read_manifest(path), fitted_metadata.METADATA_FILE)
    return {name: meta for name, meta in metadata.items() if name != ROW}


def extendable(meta: dict) -> bool:
    """A category vocabulary this module extends: inline ids, prepflow's symbols (not hashed, not pre-encoded)."""
    return meta.get("type") == "category" and "idx2str" in meta and not meta.get("encoded") \
        and "hash_buckets" not in meta


def check(name: str, meta: dict) -> None:
    if meta.get("type") == "category" and "vocab_file" in meta:
        raise ConfigError(f"--extend: feature '{name}': its vocabulary is stored as a file (over the inline size); "
                          "extend extends inline vocabularies only in this version (run without --extend)")
    if meta.get("type") == "category" and meta.get("preprocessing", {}).get("symbols") == "ludwig":
        raise ConfigError(f"--extend: feature '{name}': Ludwig's symbols (preprocessing.symbols: ludwig) order ids by "
                          "first occurrence; extend needs prepflow's symbols")


def extend_vocabulary(meta: dict, new_counts: dict[str, int], min_frequency: int, most_common: int
                      ) -> tuple[dict, int, bool]:
    """``meta`` (a category's parent metadata) with the admitted new values appended; also the rows of new
    values refused by the cap and whether the vocabulary is at its cap."""
    buckets = int(meta.get("num_oov_buckets", 0))
    specials = {UNK, *(oov_name(b) for b in range(buckets))}
    idx2str = list(meta["idx2str"])
    known = set(idx2str)
    freq = {k: int(v) for k, v in meta.get("str2freq", {}).items()}
    for value, count in new_counts.items():
        if value not in specials:
            freq[value] = freq.get(value, 0) + int(count)
    candidates = sorted((v for v in new_counts if v not in known and v not in specials and freq[v] >= min_frequency),
                        key=lambda v: (-freq[v], v.encode("utf-8")))
    room = max(most_common - (len(idx2str) - 1 - buckets), 0)
    admitted, refused = candidates[:room], candidates[room:]
    idx2str.extend(admitted)
    extended = {**meta, "idx2str": idx2str, "str2idx": {t: i for i, t in enumerate(idx2str)},
                "str2freq": {t: freq.get(t, 0) for t in idx2str}, "vocab_size": len(idx2str)}
    return extended, sum(freq[v] for v in refused), len(idx2str) - 1 - buckets >= most_common


def _relaxed(ctx, names: list[str]):
    """The config with only the named category features, their thresholds lifted."""
    def lift(features):
        return [f.model_copy(update={"preprocessing": {**f.preprocessing, "min_frequency": 1,
                                                       "most_common": UNBOUNDED}})
                for f in features if f.name in names]
    cfg = ctx.config
    return ctx.with_config(cfg.model_copy(update={"input_features": lift(cfg.input_features),
                                                  "output_features": lift(cfg.output_features)}))


def new_counts(ctx, ingest: Ingested, split: SplitAssignment, missing: MissingStates, names: list[str]
               ) -> dict[str, dict[str, int]]:
    """Every value's count in the new files' fit rows, per named feature (the vocab stage's counting)."""
    if not names:
        return {}
    ctx.cache.root.mkdir(parents=True, exist_ok=True)
    # the vocab stage's per-file entries (its own keys: each new file counted once, cached)
    with tempfile.TemporaryDirectory(dir=ctx.cache.root) as tmp, file_fits.declared(vocab_stage.NODE):
        vocab_stage.compute(_relaxed(ctx, names), Path(tmp), ingest, split, missing)
        counted = fitted_metadata.read_full(tmp)
    for name in names:
        if "str2freq" not in counted[name]:
            raise ConfigError(f"--extend: feature '{name}': the new files hold more distinct values than an inline "
                              "vocabulary; extend them with a refit (run without --extend)")
    return {name: counted[name]["str2freq"] for name in names}


def compute(ctx, out: Path, ingest: Ingested, split: SplitAssignment, missing: MissingStates) -> Statistics:
    metadata = parent_metadata(ctx.extend["parent"]["path"])
    for name, meta in metadata.items():
        check(name, meta)
    names = [name for name, meta in metadata.items() if extendable(meta)]
    counts = new_counts(ctx, ingest, split, missing, names)
    stats = Statistics()
    for name in names:
        options = ctx.feature(name).options
        grown, past_cap, at_cap = extend_vocabulary(metadata[name], counts[name], options.min_frequency,
                                                    options.most_common)
        stats.counter(f"vocab.added.{name}", grown["vocab_size"] - metadata[name]["vocab_size"])
        stats.counter(f"vocab.unk_past_cap.{name}", past_cap)
        if at_cap:
            stats.counter(f"vocab.at_cap.{name}", 1)
        metadata[name] = grown
    for name, meta in metadata.items():
        if "vocab_size" in meta:
            stats.counter(f"vocab.size.{name}", meta["vocab_size"])
    fitted_metadata.write(out, metadata)
    return stats


def config_slice(ctx) -> dict:
    return {"features": ctx.features_slice(), "fit_on": ctx.config.preprocessing.fit_on,
            "parent": ctx.extend["parent"]["artifact_id"]}


NODE = Node("vocab", compute, inputs=("ingest", "split", "fill_missing"), output=Fitted, reads=config_slice)
