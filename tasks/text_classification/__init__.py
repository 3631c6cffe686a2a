"""Text classification (single-label, sentence pairs, multi-label) on an encoder, decoder or encoder-decoder."""
