"""The vocab (fit) stage: vocabularies and statistics of every feature."""
