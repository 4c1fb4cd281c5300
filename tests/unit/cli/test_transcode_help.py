"""``prepflow transcode --help`` names every chunk type transcode reads (storage.featurespec.CHUNK_TYPES)."""

from __future__ import annotations

import re

import pytest

from flows.cli import build_parser
from storage.featurespec_spec import CHUNK_TYPES


def test_transcode_help_lists_every_chunk_type_it_reads(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["transcode", "--help"])
    out = capsys.readouterr().out
    text = " ".join(out[out.index("positional arguments:"):out.index("options:")].split())  # feature_spec's help
    for chunk_type in CHUNK_TYPES:
        assert re.search(rf"\b{chunk_type}\b", text), chunk_type
