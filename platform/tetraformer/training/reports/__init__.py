"""What a run writes: loggers (W&B, CSV), report tables, confusion matrices and attention pictures (matplotlib Agg)."""
