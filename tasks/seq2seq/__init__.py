"""Sequence-to-sequence with an encoder-decoder: translation, summarisation, any text-to-text."""
