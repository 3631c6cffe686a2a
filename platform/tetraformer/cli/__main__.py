"""`python -m tetraformer.cli ARGS` (torchrun, SLURM and the compare runner launch this)."""

from tetraformer.cli import main

main()
