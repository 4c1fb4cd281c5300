"""The publish stage: the artifact written atomically."""
