"""prepflow's public Python API (DESIGN section 5).

    from prepflow import Artifact, Preprocessor, apply, run

``run`` runs the pipeline (``prepflow run`` from Python: a path, URL, pandas or Dask DataFrame in, the
``--json`` summary out); ``Artifact`` opens a published artifact (its splits, metadata, feature spec,
batches of tensors); ``Preprocessor`` applies its fitted preprocessing to new rows; ``apply`` encodes a whole dataset with it
(``prepflow apply``). Nothing in prepflow
imports this module: it only names the public names where they live (``flows.api``, ``storage.artifact``,
``tasks.serving.preprocessor``).
"""

from flows.api import apply, run
from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor

__all__ = ["Artifact", "Preprocessor", "apply", "run"]
