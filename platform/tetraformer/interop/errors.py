"""The one error type of Hugging Face import/export."""

from tetraformer.errors import TetraformerError


class InteropError(TetraformerError):
    """A checkpoint that cannot be converted: unsupported class, missing file, missing or mismatched tensor."""
