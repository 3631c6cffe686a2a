"""Causal language modelling with a GPT-style decoder."""
