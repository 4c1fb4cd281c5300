"""Publish's Parquet writer against other writer options: CPU seconds and bytes of one row group of the
Criteo-shaped encoded table of ``parquet_dictionary.py`` (with publish's dictionary columns), the options
alternated over ``--repeat`` rounds.

    .venv/bin/python benchmarks/parquet_writer_options.py [--rows 1048576] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parquet_dictionary import cpu, table, table_arguments  # noqa: E402

from tasks.publish import shards as publish_shards  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    table_arguments(parser, repeat=3)
    args = parser.parse_args()
    data, specs = table(args.rows, args.cap)
    dictionary = publish_shards.dictionary_columns(specs)
    options = {  # publish_shards._write_shard's writer first
        "publish": {"compression": "zstd", "use_dictionary": dictionary},
        "no statistics": {"compression": "zstd", "use_dictionary": dictionary, "write_statistics": False},
        "data pages 4 MiB": {"compression": "zstd", "use_dictionary": dictionary, "data_page_size": 4 << 20},
        "v1 data pages": {"compression": "zstd", "use_dictionary": dictionary, "data_page_version": "1.0"},
        "zstd level -1": {"compression": "zstd", "compression_level": -1, "use_dictionary": dictionary},
        "lz4": {"compression": "lz4", "use_dictionary": dictionary},
    }
    for round_ in range(args.repeat):
        for name, kwargs in options.items():
            sink = io.BytesIO()
            start = cpu()
            writer = pq.ParquetWriter(sink, data.schema, **kwargs)
            writer.write_table(data, row_group_size=data.num_rows)
            writer.close()
            print(json.dumps({"round": round_, "writer": name, "cpu_s": round(cpu() - start, 3),
                              "mib": round(sink.tell() / 2**20, 1)}), flush=True)


if __name__ == "__main__":
    main()
