"""What a reader builds from an artifact's ``training_set_metadata.json``, checked before it is built.

An artifact is data; the feature ``type`` and the custom-stage ``uses`` it records name classes, and a
``pkg.module:Class`` (or an entry point) would import and run that module. ``feature_class`` builds only
prepflow's own feature types unless the caller trusts the artifact's plugins (``trust_plugins=True``, or
a collection of module names: ``core.plugins.trusted_module``); otherwise one ``DataError`` names the
feature and the module, and nothing is imported. ``check_stages`` does the same for the custom stages.

``check_sizes`` compares every size a feature type allocates by (``vocab_size``, ``char_vocab_size``) with
the vocabulary stored beside it (``idx2str``/``str2idx``, or the rows of its Parquet ``vocab_file``), and
``check_shapes`` every encoded column's row shape with the artifact's ``feature_spec.yaml``, and
``check_row_sizes`` with the ceiling of values per row (``storage.size_checks.MAX_ROW_ITEMS``): a mismatch is
one ``IntegrityError`` naming the file and the feature, before any array is allocated (docs/security.md).
"""

from __future__ import annotations

from core.errors import DataError, IntegrityError, quoted
from core.plugins import FEATURES_GROUP, STAGES_GROUP, ref_module, trusted_module
from storage.size_checks import MAX_ROW_ITEMS, check_row_items
from tasks.features import REGISTRY, load_feature_class

METADATA_FILE = "training_set_metadata.json"
PLAN_KEY = "custom_stages"
PREPFLOW_PACKAGES = ("core.", "storage.", "tasks.", "expectations.", "flows.", "prepflow.")


def _untrusted(where: str, what: str, ref: str, module: str | None) -> DataError:
    trust = f"trust_plugins=[{quoted(module)}]" if module else "trust_plugins=True"
    return DataError(f"{where}: {what} {quoted(ref)} is not one of prepflow's own and would import "
                     f"{'module ' + quoted(module) if module else 'plugin code'}; load the artifact with "
                     f"trust_plugins=True (or {trust}) only if you trust who made it (docs/security.md)")


def feature_class(name: str, meta: dict, trust) -> type:
    """The feature type class of one metadata entry (``meta["type"]``), a plugin only when trusted."""
    where = f"{METADATA_FILE}: feature {quoted(name)}"
    type_name = meta.get("type")
    if not isinstance(type_name, str):
        raise DataError(f"{where}: 'type' is {quoted(type_name)}, expected a feature type name")
    if type_name not in REGISTRY:
        module = ref_module(type_name, FEATURES_GROUP)
        if not trusted_module(module, trust) and not (module or "").startswith(PREPFLOW_PACKAGES):
            raise _untrusted(where, "feature type", type_name, module)
    return load_feature_class(type_name, where)


def check_stages(metadata: dict, trust) -> None:
    """Every custom stage the metadata's stage plan names is trusted (before ``serving_plan`` imports it)."""
    for name, meta in metadata.items():
        for item in meta.get(PLAN_KEY) or [] if isinstance(meta, dict) else []:
            uses = item.get("uses") if isinstance(item, dict) else None
            if not isinstance(uses, str):
                raise DataError(f"{METADATA_FILE}: feature {quoted(name)}: custom stage without 'uses'")
            module = ref_module(uses, STAGES_GROUP)
            if not trusted_module(module, trust) and not (module or "").startswith(PREPFLOW_PACKAGES):
                raise _untrusted(f"{METADATA_FILE}: feature {quoted(name)}", "custom stage", uses, module)


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_sizes(name: str, meta: dict) -> None:
    """``vocab_size`` (and ``char_vocab_size``) agree with the stored vocabulary (``meta`` resolved by
    ``storage.vocab_store.resolve``: a ``vocab_file`` carries its ``vocab_path``)."""
    where = f"{METADATA_FILE}: feature {quoted(name)}"
    for prefix in ("", "char_"):
        key = f"{prefix}vocab_size"
        if key not in meta:
            continue
        size = meta[key]
        if not _count(size):
            raise IntegrityError(f"{where}: {key} is {size!r}, expected a count >= 0")
        stored = [len(meta[k]) for k in (f"{prefix}idx2str", f"{prefix}str2idx") if isinstance(meta.get(k), (list, dict))]
        if stored and size not in stored:
            raise IntegrityError(f"{where}: {key} is {size}, its vocabulary holds {max(stored)} entries; the artifact "
                                 f"is damaged or was edited")
        if not stored and prefix == "" and "vocab_path" in meta:
            import pyarrow.parquet as pq  # the footer only

            try:
                rows = pq.ParquetFile(meta["vocab_path"]).metadata.num_rows
            except Exception as exc:  # noqa: BLE001  (any unreadable footer: one line naming the file)
                raise IntegrityError(f"{meta['vocab_path']}: feature {quoted(name)}: unreadable vocabulary ({exc})") from None
            if size > rows:
                raise IntegrityError(f"{where}: vocab_size is {size}, its vocabulary file {meta['vocab_file']['path']} "
                                     f"holds {rows} rows; the artifact is damaged or was edited")
        if not stored and "vocab_path" not in meta:
            bound = meta.get("cardinality", meta.get("hash_buckets"))
            if _count(bound) and size > bound + 1:
                raise IntegrityError(f"{where}: vocab_size is {size}, more than its {bound} ids (+1)")
    for key in ("max_sequence_length", "char_max_sequence_length", "max_set_size", "cardinality", "hash_buckets"):
        if key in meta and meta[key] is not None and not _count(meta[key]):
            raise IntegrityError(f"{where}: {key} is {meta[key]!r}, expected a count >= 0")
    for key in ("max_sequence_length", "char_max_sequence_length"):  # every row is padded to these
        if _count(meta.get(key)) and meta[key] > MAX_ROW_ITEMS:
            raise IntegrityError(f"{where}: {key} is {meta[key]}, more than prepflow reads ({MAX_ROW_ITEMS} values "
                                 f"per row, docs/security.md); the artifact is damaged or was edited")


def check_row_sizes(feature, meta: dict) -> None:
    """Every column ``feature`` encodes holds at most ``MAX_ROW_ITEMS`` values per row (``transform`` allocates
    ``n x`` its row shape)."""
    for column in feature.output_columns(meta):
        check_row_items(column.shape, f"{METADATA_FILE}: feature '{feature.name}': column '{column.name}'")


def check_shapes(features: list, metadata: dict, spec: dict, spec_file: str) -> None:
    """Every encoded column's row shape (``FeatureType.output_columns``) is the one ``feature_spec.yaml``
    records for it (which ``storage.artifact.Artifact.check_sizes`` holds against the files)."""
    recorded = spec.get("feature_spec") or {}
    for f in features:
        for column in f.output_columns(metadata[f.name]):
            info = recorded.get(column.name)
            if not isinstance(info, dict) or "shape" not in info:
                continue
            if list(info["shape"] or []) != list(column.shape):
                raise IntegrityError(f"{spec_file}: feature {quoted(f.name)}: column {quoted(column.name)} has row shape "
                                     f"{list(info['shape'] or [])}, its metadata gives {list(column.shape)}; the "
                                     f"artifact is damaged or was edited")
