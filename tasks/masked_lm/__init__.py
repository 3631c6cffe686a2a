"""Masked-LM pretraining of a BERT-style encoder (optionally with next-sentence prediction)."""
