"""An example prepflow plugin (DESIGN section 9): two custom stages and a custom feature type.

Installed with ``pip install --no-deps -e examples/plugin`` it registers the entry points
``prepflow.stages``: ``haversine``, ``frequency_encode`` and ``prepflow.features``: ``hashed_tokens``.
"""
