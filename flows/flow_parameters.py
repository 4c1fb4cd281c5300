"""The ``preprocess`` flow's parameters as command-line options, shared by ``prepflow run`` and
``prepflow serve`` (its own module so that neither CLI module imports the other)."""

from __future__ import annotations

import argparse


def add_flow_parameters(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="config YAML")
    p.add_argument("--dataset", required=True, nargs="+", metavar="PATH_OR_URL",
                   help="dataset: a file, folder or glob (path or fsspec URL), or several files")
    p.add_argument("--output", required=True, help="artifact root folder or URL")
    p.add_argument("--cache-dir", default=".prepflow-cache", help="stage cache folder (default .prepflow-cache)")
    p.add_argument("--npartitions", type=int, default=None, help="Dask partitions (default: one per 256k rows)")
    p.add_argument("--dask-address", default=None, help="Dask scheduler, e.g. tcp://host:8786")
