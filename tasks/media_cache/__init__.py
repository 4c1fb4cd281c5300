"""The media_cache stage: images and audio decoded, resized and converted once, keyed by content."""
