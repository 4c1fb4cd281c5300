"""The encode stage: every feature of every row as fixed-dtype columns, per split."""
