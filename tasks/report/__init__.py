"""The data report: one self-contained HTML page per artifact."""
