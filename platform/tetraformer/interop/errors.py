"""The one error type of Hugging Face import/export."""


class InteropError(ValueError):
    """A checkpoint that cannot be converted: unsupported class, missing file, missing or mismatched tensor."""
