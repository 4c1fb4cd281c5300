"""The plugins a config uses: custom stages and feature types (see ``core.plugins`` for how
they are found), and the code of each for cache keys and the artifact id.

A plugin package registers names in the entry-point groups ``prepflow.stages`` and
``prepflow.features``, so a config can say ``uses: haversine`` or ``type: hashed_tokens``.
"""

from __future__ import annotations

from core.plugins import (
    FEATURES_GROUP,
    STAGES_GROUP,
    PluginNotFound,
    code_version,
    entry_points,
    load_object,
    load_subclass,
)
from tasks.features import feature_code, is_builtin_feature

__all__ = ["FEATURES_GROUP", "STAGES_GROUP", "PluginNotFound", "code_key", "code_version", "entry_points",
           "feature_code", "is_builtin_feature", "load_object", "load_subclass"]


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
