"""TetraformerError: the base of every error in the user's input or setup (data, configs, checkpoints)."""


class TetraformerError(ValueError):
    """A problem the user can fix; the CLI prints its message on one line, without a traceback."""


class ConfigError(TetraformerError):
    """A bad option value, an unknown key or a missing config file."""
