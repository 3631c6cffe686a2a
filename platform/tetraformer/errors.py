"""TetraformerError: the base of every error in the user's input or setup (data, configs, checkpoints)."""


class TetraformerError(ValueError):
    """A problem the user can fix; the CLI prints its message on one line, without a traceback."""

    exit_code = 2  # the command's exit status: 2 for a mistake in the input, as argparse's usage errors


class ConfigError(TetraformerError):
    """A bad option value, an unknown key or a missing config file."""


class RunsFailed(TetraformerError):
    """Some or all runs of a command that starts several (compare) failed; their report is written."""

    exit_code = 1
