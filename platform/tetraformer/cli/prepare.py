"""`tetraformer prepare -c CONFIG [--section.key=value ...]`: build what the config's fit reads, then exit.

The run's tokenizer (trained when the config names none) and the stores of the fit's splits (token stores of
language modelling, row stores of the other text tasks) are built as `fit` would build them, so a CPU-only job
step (SLURM) can prepare data before the GPU job starts training at once.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger(__name__)


def prepare_command(argv: list[str]) -> None:
    """Build the config's data for `fit` (tokenizer, token stores) and say where each store is."""
    from tetraformer.cli.lightning_cli import build_cli, check_fit_options

    sys.argv = ["tetraformer prepare"]  # the prog in usage lines; the arguments go as `args`
    cli = build_cli(argv, "tetraformer prepare", args=[*argv, "--trainer.logger=false"], run=False)
    check_fit_options(cli.model)
    data = cli.datamodule
    data.trainer = cli.trainer  # what prepare_data and setup read (the run directory, the ranks)
    data.prepare_data()
    stores = data.stores("fit")
    if not stores:
        log.info("%s reads no stores: its tokenizer is prepared", type(data).__name__)
    for split, store in stores.items():
        sys.stdout.write(f"{split}: {store.path} ({store.summary()})\n")
