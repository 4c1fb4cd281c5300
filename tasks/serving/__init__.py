"""Serving: the fitted preprocessing applied to new rows (``Preprocessor``), above the feature types it replays."""
