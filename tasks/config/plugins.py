"""The code a config's feature types and custom stages run, for the artifact id: each plugin class's
(``core.plugins.code_version``: a declared version, else its module's source) and each built-in feature
type's (``core.code_version.class_version``: its classes' modules and what they import). A change in a
feature type's code gives a new artifact id, as a change in a stage's does (``tasks.graph``).

A plugin package registers names in the entry-point groups ``prepflow.stages`` and
``prepflow.features``, so a config can say ``uses: haversine`` or ``type: hashed_tokens``.
"""

from __future__ import annotations

from core.code_version import class_version
from core.plugins import STAGES_GROUP, code_version, load_object
from tasks.features import REGISTRY, feature_code


def code_key(config_json: dict) -> dict:
    """The code of every plugin class a (normalized) config uses, for the artifact id; ``{}`` when it
    uses none, so artifact ids of plugin-free configs do not change. (The stage plan has checked each
    stage class when the run started.)"""
    codes: dict[str, str] = {}
    for spec in config_json.get("stages") or []:
        codes[f"stage:{spec['uses']}"] = code_version(load_object(spec["uses"], STAGES_GROUP))
    for section in ("input_features", "output_features"):
        for feature in config_json.get(section) or []:
            code = feature_code(feature.get("type"))
            if code is not None:
                codes[f"feature:{feature['type']}"] = code
    return {"plugins": codes} if codes else {}


def builtin_feature_code(config_json: dict) -> dict:
    """The code version of each built-in feature type a (normalized) config uses, by type name."""
    types = {f.get("type") for section in ("input_features", "output_features") for f in config_json.get(section) or []}
    return {"feature_code": {t: class_version(REGISTRY[t]) for t in sorted(t for t in types if t in REGISTRY)}}
