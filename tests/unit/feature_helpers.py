"""Helpers for the feature-type unit tests: build a feature, fit it over random partitions, decode ids."""

from __future__ import annotations

import json
import random
import re
from functools import reduce

import pandas as pd
from hypothesis import strategies as st

from tasks.config.loader import parse_config
from tasks.features import build_all

# Characters the property tests draw from: ASCII letters/digits/punctuation, whitespace (incl. a
# Unicode space), and letters whose lower case is one character, so Python's str.lower() and
# Arrow's utf8_lower agree.
ALPHABET = "abcXYZ019_.,!?-'\" \t\n\u00a0éÉжЖ中"
texts = st.text(alphabet=ALPHABET, max_size=30)
nullable_texts = st.one_of(st.none(), texts)


def feature(type_name: str, **preprocessing):
    """One feature built the way the pipeline builds it (config validation + defaults)."""
    config = parse_config({"input_features": [{"name": "f", "type": type_name, "preprocessing": preprocessing}]})
    return build_all(config)[0]


def fit(feat, values, npartitions: int = 1, seed: int = 0) -> dict:
    """The fit combiner over ``npartitions`` contiguous chunks (create + add each), merged in a shuffled
    order, then extract.

    The metadata goes through JSON, as it does between the vocab and encode stages.
    """
    series = pd.Series(values, dtype="string") if not isinstance(values, pd.Series) else values
    bounds = sorted(random.Random(seed).sample(range(1, len(series)), min(npartitions - 1, max(len(series) - 1, 0))))
    edges = [0, *bounds, len(series)]
    combiner = feat.fit_combiner({})
    accs = [combiner.add(combiner.create(), series.iloc[a:b].reset_index(drop=True))
            for a, b in zip(edges, edges[1:], strict=False)]
    random.Random(seed + 1).shuffle(accs)
    return json.loads(json.dumps(combiner.extract(reduce(combiner.merge, accs)), sort_keys=True))


def fit_keeping_rows(feat, series: pd.Series, npartitions: int, seed: int) -> dict:
    """``fit``, but each chunk keeps the input row positions as its index (as the vocab stage hands them),
    for fits that order by first occurrence or by row."""
    bounds = sorted(random.Random(seed).sample(range(1, len(series)), min(npartitions - 1, len(series) - 1)))
    edges = [0, *bounds, len(series)]
    combiner = feat.fit_combiner({})
    accs = [combiner.add(combiner.create(), series.iloc[a:b]) for a, b in zip(edges, edges[1:], strict=False)]
    random.Random(seed + 1).shuffle(accs)
    return json.loads(json.dumps(combiner.extract(reduce(combiner.merge, accs)), sort_keys=True))


def decode_ids(row, idx2str: list[str], skip=("<PAD>", "<START>", "<STOP>")) -> list[str]:
    return [idx2str[i] for i in row if idx2str[i] not in skip]


def ref_tokens(text: str | None, tokenizer: str, lowercase: bool = False) -> list[str]:
    """The Python reference of each tokenizer (see tasks.features.tokenizers)."""
    if text is None:
        return []
    if lowercase:
        text = text.lower()
    if tokenizer == "space":
        return text.split()
    if tokenizer == "space_punct":
        return re.findall(r"\w+|[^\w\s]", text)
    if tokenizer == "characters":
        return list(text)
    if tokenizer == "comma":
        return [t.strip() for t in text.split(",") if t.strip()]
    raise ValueError(tokenizer)


def expected(tokens: list[str], idx2str: list[str]) -> list[str]:
    vocab = set(idx2str[2:]) - {"<START>", "<STOP>"}
    return [t if t in vocab else "<UNK>" for t in tokens]
