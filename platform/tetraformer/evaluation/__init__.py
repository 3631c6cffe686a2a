"""Downstream evaluation of checkpoints through EleutherAI's lm-evaluation-harness (an optional dependency).

`harness` runs lm-eval on a checkpoint's own network (`checkpoint_lm.CheckpointLM`); `scores` reads and writes the
results file `tetraformer evaluate` leaves, which `compare` reads too. Only `checkpoint_lm` and the functions of
`harness` that run lm-eval import it.
"""
