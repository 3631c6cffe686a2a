"""Epoch-level metrics as torchmetrics objects: per-stage copies, perplexity, entity F1, BLEU/chrF/ROUGE."""
