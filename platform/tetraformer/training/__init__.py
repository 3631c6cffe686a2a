"""The training layer, by role: base modules, callbacks, checkpointing, distributed, metrics, reports."""
