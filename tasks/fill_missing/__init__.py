"""The fill_missing stage: each feature's missing-value state fitted on the ``fit_on`` rows."""
