"""Tests for tetraformer.data."""
