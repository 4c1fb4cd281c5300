"""prepflow's public Python API (DESIGN section 5).

    from prepflow import Artifact, Preprocessor

``Artifact`` opens a published artifact (its splits, metadata, feature spec, batches of tensors);
``Preprocessor`` applies its fitted preprocessing to new rows. Nothing in prepflow imports this module:
it only names the public classes where they live (``storage.artifact``, ``tasks.serving.preprocessor``).
"""

from storage.artifact import Artifact
from tasks.serving.preprocessor import Preprocessor

__all__ = ["Artifact", "Preprocessor"]
