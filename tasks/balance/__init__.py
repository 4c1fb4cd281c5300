"""The balance stage: oversampling or undersampling of the training split."""
