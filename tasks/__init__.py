"""Tetraformer tasks: one package per task, each a head, a LightningModule and a DataModule."""
