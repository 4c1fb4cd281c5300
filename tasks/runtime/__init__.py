"""What every stage runs on: the run context and cache step, Dask execution, mergeable fits, statistics, progress, the ingested table's partitions."""
