"""Core tests run tiny models on one intra-op thread (tests/threads.py)."""

from tests.threads import single_thread

__all__ = ["single_thread"]
