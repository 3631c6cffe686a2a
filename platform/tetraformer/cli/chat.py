"""`tetraformer generate --chat`: a conversation with a chat checkpoint (instruction or preference tuning), from
--prompt or stdin."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from tetraformer.errors import TetraformerError


def chat(task: Any, ckpt: str, config: Any, prompt: str | None, stdin: TextIO | None = None) -> None:
    """Answer one user turn (`prompt`), or each line of stdin as the next user turn of one conversation; replies
    stream to stdout, each on its own line, the history rendered with the checkpoint's chat template."""
    if not callable(getattr(task, "chat", None)):
        raise TetraformerError(
            f"{ckpt}'s task ({type(task).__name__}) does not chat: --chat needs a chat checkpoint (instruction "
            "or preference tuning); drop --chat to continue text"
        )
    turns = [prompt] if prompt is not None else _user_turns(stdin or sys.stdin)
    history: list[dict[str, str]] = []
    for turn in turns:
        history.append({"role": "user", "content": turn})
        reply = task.chat(history, config, on_text=_write)
        sys.stdout.write("\n")
        sys.stdout.flush()
        history.append({"role": "assistant", "content": reply})


def _user_turns(stream: TextIO) -> Any:
    """Non-empty lines of the stream, without their line ends (a prompt shows when it is a terminal)."""
    interactive = stream.isatty()
    prompt: Callable[[], None] = (lambda: sys.stderr.write("> ")) if interactive else (lambda: None)
    prompt()
    for line in stream:
        text = line.rstrip("\r\n")
        if text.strip():
            yield text
        prompt()


def _write(text: str) -> None:
    """Write a piece of a reply as it comes."""
    sys.stdout.write(text)
    sys.stdout.flush()
