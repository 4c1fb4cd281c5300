"""What can be known of an input dataset before ingest reads it: its format, files, header, CSV dialect and fingerprint."""
