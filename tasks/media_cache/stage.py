"""media_cache: decode, resize and convert images/audio once (DESIGN section 4), keyed by content.

Runs after encode, which wrote each media row's raw value (a path, or a ``media-cache:`` reference
to an in-memory value ingest stored). For every media feature this stage

1. resolves each distinct value to a source (``storage.media.resolve``: relative paths against the
   dataset's folder or ``media_root``) and hashes every source's bytes in a thread pool;
2. keys its entry on the encode and vocab keys, the media features' config and that content hash
   (plus the sources themselves in lazy modes, whose artifacts hold them): a file changed in place
   misses the cache, and the artifact id covers the same hash (``fingerprint``), so a changed image
   is never served from an old artifact or memmap (Ludwig names its memmap by shape only);
3. finalizes the feature's metadata from the fit rows' sources in input order
   (``MediaFeature.finalize_media``: image size/channels, audio sampling rate) into its ``Codec``;
4. decodes every source once, in a thread pool with a bounded window (memory O(window)), reporting
   progress, and applies ``on_decode_error`` the same way in every mode: ``fail`` raises DataError
   naming the input row (0-based, `__row__`) and the path (files that cannot be read or escape ``media_root``
   are found before any decoding, at the first input row naming one; a decode failure stops the
   run where it is met), ``skip_row`` drops the rows, ``fill`` uses the codec's fill tensor.
   Statistics: ``media_cache.decode_failures.<f>`` (distinct sources),
   ``media_cache.rows_skipped.<f>`` / ``rows_filled.<f>`` (encoded rows), ``media_cache.sources.<f>``,
   and for audio the length histogram and truncations;
5. rewrites the encoded parts (at most ``rewriting.CHUNK_ROWS`` rows each) with each media column as:
   ``eager``: the tensors; ``lazy``/``lazy_cached``: an int64 slot into the split's media table
   ``<split>/<f>.media.parquet`` (slots in first-appearance order; see ``storage.media``). For
   ``lazy_cached`` the split's decoded memmap is written straight to ``<output>/media/`` (content-
   named, ``.done`` sentinel); ``ensure_memmaps`` after publish rebuilds any that are missing.

The entry has encode's layout (``<split>/part-*.arrow``, ``rows-*.npy``, ``encode.json``) plus the
finalized ``training_set_metadata.json`` and the Parquet vocabularies it references (``vocab/*.parquet``,
hard-linked from vocab's entry); ``outputs`` hands it to validate(encoded) and publish in
place of encode's and vocab's. Without media features the stage passes encode's result through.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from core.code_version import module_version
from storage import media
from tasks.config.constants import SPLIT_NAMES
from tasks.media_cache.decoding import SplitSlots, decode_all, split_slots
from tasks.media_cache.hashing import content_hash, hash_all
from tasks.media_cache.rewriting import rewrite_parts, write_tables
from tasks.media_cache.sources import Part, Sources, check_fail_early, collect, resolve
from tasks.runtime import fitted_metadata, progress
from tasks.runtime.node import Node, Prepared
from tasks.runtime.outputs import Encoded, Fitted, MediaCached
from tasks.runtime.statistics import Statistics


def config_slice(ctx) -> dict:
    """The media features' options and ``fit_on`` (the media content's hash joins the key in ``run``)."""
    return {"features": ctx.features_slice([f.name for f in ctx.media_features()]),
            "fit_on": ctx.config.preprocessing.fit_on}


def prepare(ctx, fitted: Fitted, encoded: Encoded) -> Prepared:
    """Every media source read and hashed, on a cache hit too: their content joins the key. Without media
    features encode's entry is this node's output."""
    features = ctx.media_features()
    if not features:  # nothing to decode: encode's result is this stage's
        return Prepared(result=MediaCached.passing(fitted, encoded))
    with progress.stage("media_cache"):
        parts, by_name = collect(encoded, features)
        all_sources = list(by_name.values())
        for src in all_sources:
            resolve(ctx, src)
        hash_all(all_sources)
    check_fail_early(parts, all_sources)
    content = content_hash(all_sources)
    return Prepared(key={"content": content}, value=(parts, all_sources, content))


def compute(ctx, out: Path, prepared: tuple, fitted: Fitted, encoded: Encoded) -> Statistics:
    parts, all_sources, content = prepared
    return _compute(ctx, out, fitted, encoded, parts, all_sources, content, ctx.config.preprocessing.fit_on)


def _fit_sids(parts: list[Part], src: Sources, fit_on: str) -> list[int]:
    """Distinct readable sources of the fit rows, in input-row order."""
    chosen = [p for p in parts if fit_on == "all" or p.split_id == 0]
    if not chosen:
        return []
    rows = np.concatenate([p.rows for p in chosen])
    sids = np.concatenate([src.sid_of_uid[p.uids[src.feature.name]] for p in chosen])
    sids = sids[np.argsort(rows, kind="stable")]
    _, first = np.unique(sids, return_index=True)
    return [int(s) for s in sids[np.sort(first)] if src.error[s] is None]


def _sample(parts, src: Sources, fit_on: str):
    for sid in _fit_sids(parts, src, fit_on):
        try:
            yield media.read_bytes(src.sources[sid])
        except media.MediaError:
            continue


def _compute(ctx, out: Path, fitted: Fitted, encoded: Encoded, parts: list[Part], all_sources: list[Sources], content: str,
             fit_on: str) -> Statistics:
    metadata = Fitted.read_full(fitted.path)  # rewritten below, inline vocabularies included
    stats = Statistics()
    codecs = {}
    for src in all_sources:
        f = src.feature
        update = f.finalize_media(_sample(parts, src, fit_on))
        meta = metadata[f.name]
        meta["preprocessing"].update(update.pop("preprocessing", {}))
        meta.update(update)
        codecs[f.name] = f.codec(meta)

    scratch = out / "_scratch"
    media_dir = media.output_media_dir(ctx.output)
    writers: list[media.MemmapWriter] = []
    slots: dict[tuple[str, int], SplitSlots] = {}
    try:
        for src in all_sources:
            for split_id in range(len(SPLIT_NAMES)):
                slots[(src.feature.name, split_id)] = split_slots(parts, src, split_id)
        decode_all(parts, all_sources, codecs, slots, scratch, media_dir, writers, stats)
        for w in writers:
            w.commit()
        writers.clear()
        counts = rewrite_parts(out, parts, all_sources, codecs, slots, stats)
        write_tables(out, all_sources, codecs, slots)
    finally:
        for w in writers:
            w.abort()
        slots.clear()
        shutil.rmtree(scratch, ignore_errors=True)
    fitted_metadata.write(out, metadata)
    fitted.copy_files(metadata, out, link=True)  # Parquet vocabularies: publish reads them from this entry
    Encoded.write_info(out, counts, len(parts))
    # the decoding code joins the artifact's dataset fingerprint (MediaCached.fingerprint)
    MediaCached.write_state(out, {"content": content, "code_version": module_version(__name__),
                                  "features": [s.feature.name for s in all_sources],
                                  "encode_statistics": encoded.statistics})
    return stats


# ---- what later stages read ----------------------------------------------------------------------


NODE = Node("media_cache", compute, inputs=("vocab", "encode"), output=MediaCached, reads=config_slice,
            prepare=prepare, in_artifact=False)  # its content hash joins the artifact id through the dataset fingerprint
