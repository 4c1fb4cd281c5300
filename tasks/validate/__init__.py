"""The data-quality gates: validate_raw and validate_encoded."""
