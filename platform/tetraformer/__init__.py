"""Tetraformer: four Transformer families from one from-scratch core."""

__version__ = "0.1.0"
