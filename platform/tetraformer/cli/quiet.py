"""What third-party libraries print that tells a Tetraformer user nothing, kept out of the output in one place.

Each entry says why it goes. Nothing here hides an error, or a warning about the user's data, config or files:
messages are matched by their exact start, and every other line of the same loggers and warning kinds still shows.
Environment variables the user set win over the defaults set here.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

# Lightning's `rank_zero_info` lines start with these; they reach the user through these loggers
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
QUIET_LOGS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        RANK_ZERO_LOGGERS,
        (
            "💡 Tip:",  # advertisements for litlogger and litmodels, on every run
            # kept: "GPU available: ..., used: ...", the one line that says a run (accelerator auto) fell back to
            # the CPU, e.g. on a GPU node whose CUDA is broken
            "TPU available: False",  # no TPU: nothing to say (a machine that has one still says so)
        ),
    ),
    # each rank's CUDA_VISIBLE_DEVICES, one line per process: the variable the user (or the launcher) set
    "lightning.pytorch.accelerators.cuda": ("LOCAL_RANK: ",),
}
# (start of the message, category) of warnings that are about Lightning's internals or advice that does not fit
QUIET_WARNINGS: tuple[tuple[str, type[Warning]], ...] = (
    # Lightning's own use of a torch API torch deprecated: nothing the user can change
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated", FutureWarning),
    # the platform reads token stores memory-mapped and collates cheaply; Lightning advises every CPU core as a
    # worker for every loader (`--data.num_workers N` is there where decoding is the bottleneck, e.g. images)
    (r"The '\w+' does not have many workers which may be a bottleneck", UserWarning),
    # validate/test/predict on a fit's checkpoint: the fit's own callbacks (checkpoints, the non-finite guard) are
    # training-only by design (training/callbacks/defaults.py); the user has nothing to add
    (r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be provided", UserWarning),
    # a command with no seed in its config: Lightning's next line, "Seed set to 0", says the same
    (r"No seed found, seed set to ", UserWarning),
)
# Lightning's WeightAveraging (EMA, SWA) warns whenever the module overrides `configure_model` (the platform's
# builds the network there) that its averaged copy is not sharded; where the strategy shards nothing (one device,
# DDP) the copy is whole like the weights, so the line says nothing. Under FSDP or model parallelism it stays.
UNSHARDED_AVERAGING = r"You're using the WeightAveraging callback with a model that overrides the configure_model"
QUIET_ENVIRONMENT = {
    "WANDB_QUIET": "true",  # W&B's run history and summary panels (~30 lines): metrics.csv and the log lines hold them
}
FILE_ENVIRONMENT = {
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",  # `datasets` bars redraw with carriage returns: noise in a file
}


class MessageStartFilter(logging.Filter):
    """Drops the records whose message starts with one of `starts`."""

    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep the record unless its message starts with a quiet one."""
        return not record.getMessage().startswith(self.starts)


FILTERS = {name: MessageStartFilter(starts) for name, starts in QUIET_LOGS.items()}


def quiet_third_party() -> None:
    """Install the filters (again is harmless) and the environment defaults; call before Lightning or `datasets`
    load, so the variables they read at import take effect."""
    for name, message_filter in FILTERS.items():
        logging.getLogger(name).addFilter(message_filter)  # the same object twice is added once
    for message, category in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    defaults = QUIET_ENVIRONMENT if sys.stderr.isatty() else {**QUIET_ENVIRONMENT, **FILE_ENVIRONMENT}
    for variable, value in defaults.items():
        os.environ.setdefault(variable, value)


def quiet_unsharded_averaging(strategy: object) -> None:
    """Drop WeightAveraging's sharding warning where `strategy` (a Trainer's) shards nothing: one device or DDP."""
    from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

    if isinstance(strategy, DDPStrategy | SingleDeviceStrategy):
        warnings.filterwarnings("ignore", message=UNSHARDED_AVERAGING, category=UserWarning)
