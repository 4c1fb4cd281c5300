"""The fitted metadata's two files in a stage entry (written by vocab and media_cache):

- ``training_set_metadata.json``: every feature's metadata, inline vocabularies included (Ludwig's
  ``idx2str``/``str2idx``/``str2freq``, up to ``category.INLINE_MAX`` ids per feature: megabytes for a
  wide table). Its bytes are ``json.dumps(metadata, sort_keys=True, ensure_ascii=False)``; publish
  copies it into the artifact as it is;
- ``metadata_summary.json``: the same without those vocabularies (``VOCABULARY_KEYS``); a feature that had
  some lists their names under ``"inline_vocabulary"``. This is what the flow process reads (the encoded
  gate, the feature spec, publish), so it never parses or holds every kept value (parsing, dumping and collecting that many objects
  would be a large share of the flow process's CPU).

The workers that build category vocabularies hand them over already serialized (``pack``: ``Raw`` JSON
text), so the flow process writes the full file without building their lists and dicts (``dumps``).
Whoever needs the vocabularies (encoding, on the workers; media_cache) reads the full file
(``read_full``).
"""

from __future__ import annotations

import json
from pathlib import Path

METADATA_FILE = "training_set_metadata.json"
SUMMARY_FILE = "metadata_summary.json"
VOCABULARY_KEYS = frozenset({"idx2str", "str2idx", "str2freq", "char_idx2str", "char_str2idx", "char_str2freq",
                             "str2idf"})
INLINE_KEY = "inline_vocabulary"  # in the summary: the vocabulary keys the feature has in the full file


class Raw(str):
    """A metadata value as JSON text, already serialized as ``dumps`` would (one string to pickle)."""


def _dumps(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def pack(meta: dict) -> dict:
    """``meta`` with its vocabulary keys' values serialized (``Raw``): what a worker returns."""
    return {k: Raw(_dumps(v)) if k in VOCABULARY_KEYS and not isinstance(v, Raw) else v for k, v in meta.items()}


def _holds_raw(value: dict) -> bool:
    return any(isinstance(v, Raw) or (isinstance(v, dict) and _holds_raw(v)) for v in value.values())


def dumps(value) -> str:
    """``json.dumps(value, sort_keys=True, ensure_ascii=False)`` of ``value`` with every ``Raw`` text in
    place of the value it was serialized from: the same bytes."""
    if isinstance(value, Raw):
        return str(value)
    if not isinstance(value, dict) or not _holds_raw(value):
        return _dumps(value)
    if not all(isinstance(k, str) for k in value):
        raise TypeError("metadata keys must be strings")
    # json's own layout: sorted keys, ", " and ": " separators, no indentation
    return "{" + ", ".join(f"{_dumps(k)}: {dumps(v)}" for k, v in sorted(value.items())) + "}"


def summary(metadata: dict) -> dict:
    """Every feature's metadata without its vocabulary keys (named under ``INLINE_KEY``)."""
    out = {}
    for name, meta in metadata.items():
        kept = {k: v for k, v in meta.items() if k not in VOCABULARY_KEYS}
        if inline := sorted(k for k in meta if k in VOCABULARY_KEYS):
            kept[INLINE_KEY] = inline
        out[name] = kept
    return out


def has_vocabulary(meta: dict) -> bool:
    """Whether the feature has an inline ``idx2str``, in the full metadata or in the summary."""
    return "idx2str" in meta or "idx2str" in meta.get(INLINE_KEY, ())


def write(folder: Path, metadata: dict) -> None:
    """Both files into ``folder`` (a stage entry being written)."""
    (folder / METADATA_FILE).write_text(dumps(metadata), encoding="utf-8")
    (folder / SUMMARY_FILE).write_text(_dumps(summary(metadata)), encoding="utf-8")


def read_full(folder: str | Path) -> dict:
    return json.loads((Path(folder) / METADATA_FILE).read_text(encoding="utf-8"))


def read_summary(folder: str | Path) -> dict:
    return json.loads((Path(folder) / SUMMARY_FILE).read_text(encoding="utf-8"))
