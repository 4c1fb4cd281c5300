"""The ingest stage: the dataset read into the stage cache as Arrow IPC parts with a global row number."""
