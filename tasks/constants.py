"""Names the stages and the publisher share, in a module that imports nothing: a rerun whose artifact is
already published computes the artifact id and reports its rows without importing the stages (pandas,
Dask: about half of a 1 s rerun).

``CODE_VERSIONS``: each stage's code version, part of its cache key and (``ARTIFACT_STAGES``) of the
artifact id (``tasks.publish.artifact_id``). Bump a stage's version when a change alters what it writes.
"""

SPLIT_NAMES = ("train", "validation", "test")  # split ids 0, 1, 2

CODE_VERSIONS = {
    "ingest": "ingest-1",
    "infer_types": "infer_types-2",  # 2: image/audio need every value a media path and the sampled files
    "split": "split-1",
    "fill_missing": "fill_missing-1",
    "balance": "balance-1",
    "vocab": "vocab-2",  # 2: category vocabularies by a shuffle; over 100k ids as Parquet (vocab/*.parquet)
    "encode": "encode-3",  # 2: rows-NNNNN.npy beside each part (the encoded gate reads them); 3: report stats
    "media_cache": "media_cache-2",  # 2: the entry holds vocab's Parquet vocabularies (vocab/*.parquet) too
    "validate": "validate-1",
    "custom_stage": "custom_stage-1",
}
# the stages whose versions join the artifact id
ARTIFACT_STAGES = ("ingest", "split", "fill_missing", "balance", "vocab", "encode", "validate")
