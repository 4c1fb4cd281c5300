"""Names shared by the stages, the publisher and the report, in a module that imports nothing but ``re``.

The stages are declared in ``tasks.graph``; ``BUILTIN_STAGES`` are their names for the config's custom
stages to be placed after (``tasks.custom.dag``), which sit below the stages: tests/unit/test_code_version.py
checks the two agree. Each stage's code version derives from its source (``core.code_version``).
"""

import re

SPLIT_NAMES = ("train", "validation", "test")  # split ids 0, 1, 2
ROW = "__row__"  # every ingested and published row's 0-based position in the input
BUILTIN_STAGES = ("ingest", "infer_types", "validate_raw", "split", "fill_missing", "balance", "vocab", "encode",
                  "media_cache", "validate_encoded", "drift", "publish")
REPORT_SUFFIX = ".report.html"  # <output>/<artifact_id>.report.html
REPORT_TEMP_NAME = re.compile(r"\..+" + re.escape(REPORT_SUFFIX) + r"\.[0-9a-f]+")  # a report being written
