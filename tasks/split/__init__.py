"""The split stage: each input row assigned to train, validation or test."""
