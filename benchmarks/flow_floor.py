"""The flow process's floor: what any Prefect flow that drives a Dask cluster costs, whatever it computes.

A Prefect flow with ``preprocess``'s parameters, a distributed Client of the cluster at ``--dask-address``,
and ``--tasks`` task runs, each one ``dask.compute`` of one trivial task: the same number of task runs and
computes as a prepflow run, none of its work. Run as its own process against the Prefect API in
``PREFECT_API_URL`` (``criteo_like.py`` passes prepflow's local server), its CPU seconds (read by the
caller from ``wait4``) are the part of the flow process's CPU that no change to prepflow can remove: the
imports of Prefect and ``distributed``, the flow and task runs' API calls, the Client.

    PREFECT_API_URL=http://127.0.0.1:4200/api python benchmarks/flow_floor.py --dask-address tcp://... --tasks 12
"""

from __future__ import annotations

import argparse

import dask
from distributed import Client
from prefect import flow, task


@task(name="stage", persist_result=False, cache_policy=None)
def stage(i: int) -> int:
    return dask.compute(dask.delayed(int)(i))[0]


@flow(name="floor")
def floor(config: str, dataset: str, output: str, cache_dir: str, npartitions: int | None, dask_address: str,
          tasks: int) -> list[int]:
    with Client(dask_address):
        return [stage.with_options(name=f"stage-{i}")(i) for i in range(tasks)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dask-address", required=True)
    parser.add_argument("--tasks", type=int, default=12, help="task runs (prepflow: its stages and the report)")
    args = parser.parse_args()
    floor("config.yaml", "data.parquet", "out", "cache", None, args.dask_address, args.tasks)


if __name__ == "__main__":
    main()
