"""Binary ``strings: ludwig`` (issue 20) and the ``str2bool`` Ludwig needs for on/off.

The reference follows ``ludwig/features/binary_feature.py`` (``get_feature_meta``: ``fallback_true_label`` =
``sorted(distinct)[0]``, each value through ``strings_utils.str2bool(v, fallback_true_label)``, ``bool2str`` the
values sorted by their bool) and ``ludwig/utils/strings_utils.py`` (its true/false sets: no on/off, -1 is false).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.feature_helpers import feature

LUDWIG_TRUE = {"yes", "y", "true", "t", "1", "1.0"}
LUDWIG_FALSE = {"no", "n", "false", "f", "0", "0.0", "-1", "-1.0"}


def ludwig_meta(values: list[str]) -> dict:
    distinct = list(dict.fromkeys(values))  # drop_duplicates: first-occurrence order
    label = sorted(distinct)[0]

    def str2bool(v):
        low = v.lower()
        return True if low in LUDWIG_TRUE else False if low in LUDWIG_FALSE else v == label

    s2b = {v: str2bool(v) for v in distinct}
    return {"str2bool": s2b, "bool2str": [k for k, _ in sorted(s2b.items(), key=lambda kv: kv[1])],
            "fallback_true_label": label}


def fitted(feat, values: list[str]) -> tuple[dict, dict, list]:
    series = feat.cast(pd.Series(values, dtype="string"), np.arange(len(values)))
    mc = feat.missing_combiner()
    state = mc.extract(mc.add(mc.create(), series))
    mapped = feat.normalize(series, state, np.arange(len(values)))
    return state, feat.extract(None, state), mapped.tolist()


@settings(max_examples=100, deadline=None)
@given(pair=st.lists(st.sampled_from(["pass", "fail", "on", "off", "Yes", "maybe", "-1", "B", "a"]), min_size=2,
                     max_size=2, unique=True), picks=st.lists(st.integers(0, 1), min_size=1, max_size=12))
def test_two_strings_map_as_ludwig_maps_them(pair, picks):
    values = [pair[i] for i in picks]
    _, meta, mapped = fitted(feature("binary", strings="ludwig"), values)
    ref = ludwig_meta(values)
    assert mapped == [ref["str2bool"][v] for v in values]
    if any(v.lower() not in LUDWIG_TRUE | LUDWIG_FALSE for v in values):  # else Ludwig maps them by itself
        assert meta["str2bool"] == ref["str2bool"]
        if len(set(ref["str2bool"].values())) == 2:  # (two values of one bool: Ludwig lists both in bool2str)
            assert meta["bool2str"] == ref["bool2str"] and meta["fallback_true_label"] == ref["fallback_true_label"]


def test_prepflows_default_keeps_the_larger_string_true_and_on_off_as_booleans():
    _, meta, mapped = fitted(feature("binary"), ["pass", "fail", "pass"])
    assert mapped == [True, False, True] and meta["bool2str"] == ["fail", "pass"]
    _, ludwig, mapped = fitted(feature("binary", strings="ludwig"), ["pass", "fail", "pass"])
    assert mapped == [False, True, False] and ludwig["fallback_true_label"] == "fail"


def test_on_off_get_a_str2bool_ludwig_can_read():
    _, meta, mapped = fitted(feature("binary"), ["on", "off", "on"])
    assert mapped == [True, False, True]
    assert meta["str2bool"] == {"on": True, "off": False} and meta["bool2str"] == ["off", "on"]
    _, meta, mapped = fitted(feature("binary", strings="ludwig"), ["on", "off", "on"])
    assert mapped == [False, True, False] and meta["str2bool"] == {"on": False, "off": True}  # Ludwig's own fit
    _, meta, _ = fitted(feature("binary"), ["yes", "no"])
    assert meta == {}  # Ludwig's own strings: it maps them itself, the metadata is as before
