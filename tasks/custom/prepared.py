"""The partitions every stage after fill_missing reads (balance, vocab, encode): typed, split-tagged,
rows dropped, values filled, with the custom stages' transforms applied inside when the fill states
hold a stage plan (``tasks.custom.steps``). Timeseries forecasting windows, which read other rows, are
added to the raw partitions first (``tasks.runtime.timeseries_windows``)."""

from __future__ import annotations

import numpy as np

from tasks.custom import apply as custom_apply
from tasks.custom.plan import STATES_KEY
from tasks.features.base import FeatureType
from tasks.runtime import frame, timeseries_windows

# a dispatcher: the stages that import it are versioned with the modules it dispatches to (core.code_version)
CODE_VERSION_FOLLOWS_IMPORTS = True


def filled_partitions(parts: list, features: list[FeatureType], assign: np.ndarray, states: dict) -> list:
    """Delayed ``frame.Prepared`` partitions of the ingested ``parts``."""
    parts, features = timeseries_windows.add_windows(parts, features, states)
    if STATES_KEY in states:
        return custom_apply.filled_partitions(parts, features, assign, states)
    return frame.filled_partitions(parts, features, assign, states)
