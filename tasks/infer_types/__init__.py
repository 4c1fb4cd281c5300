"""The infer_types stage: a type for every column the config leaves untyped, from a full pass over the data."""
