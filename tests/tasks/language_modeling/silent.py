"""A task that trains like LanguageModeling but does not generate text (for the `generate` protocol check)."""

from __future__ import annotations

from tasks.language_modeling.module import LanguageModeling


class SilentLanguageModel(LanguageModeling):
    """LanguageModeling without `generate`, so it is not a GenerativeTask."""

    generate = None  # type: ignore[assignment]
