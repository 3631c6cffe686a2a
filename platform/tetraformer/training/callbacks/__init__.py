"""Callbacks of a run (their order is stated once, in defaults.default_callbacks): numerics, throughput, maps."""
