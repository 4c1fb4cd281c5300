"""Names shared by the stages, the publisher and the report, in a module that imports nothing but ``re``.

``BUILTIN_STAGES`` is the built-in stages' run order, declared once: the config's custom stages are placed
after them (``tasks.custom.dag``, below the stages) and ``tasks.graph`` lists its nodes in this order
(checking that it names every node). Each stage's code version derives from its source (``core.code_version``).
"""

import re

SPLIT_NAMES = ("train", "validation", "test")  # split ids 0, 1, 2
ROW = "__row__"  # every ingested and published row's 0-based position in the input
SPLIT = "__split__"  # every row's split id (0, 1, 2) in the stages' frames (tasks.runtime.frame)
# Column names prepflow adds to the rows it processes: a dataset column or a feature of the config with one of
# these names (or a name starting with one of RESERVED_PREFIXES) is an error naming it (config load, ingest),
# never silently dropped or doubled. __first__: validate's views; __window__<name>: timeseries windows.
RESERVED_COLUMNS = (ROW, SPLIT, "__first__")
RESERVED_PREFIXES = ("__window__",)


def reserved_column(name: object) -> bool:
    return isinstance(name, str) and (name in RESERVED_COLUMNS or name.startswith(RESERVED_PREFIXES))
BUILTIN_STAGES = ("ingest", "infer_types", "validate_raw", "split", "fill_missing", "balance", "vocab", "encode",
                  "media_cache", "validate_encoded", "drift", "publish")
REPORT_SUFFIX = ".report.html"  # <output>/<artifact_id>.report.html
REPORT_TEMP_NAME = re.compile(r"\..+" + re.escape(REPORT_SUFFIX) + r"\.[0-9a-f]+")  # a report being written
