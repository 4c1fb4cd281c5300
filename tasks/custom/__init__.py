"""Custom stages (DESIGN section 9): the ``Stage`` API, the DAG of a config's stages, their cached fit steps and the prepared partitions that run them."""
