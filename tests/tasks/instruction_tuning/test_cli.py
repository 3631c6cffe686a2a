"""Instruction tuning end to end: fit on the packaged chats, validate on responses, chat with the checkpoint."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runner import last_metrics
from tests.tasks.instruction_tuning.conftest import CHATS
from tetraformer.cli import main
from tetraformer.data.chat import DEFAULT_CHAT_TEMPLATE
from tetraformer.training.checkpointing.loading import load_task_module


def test_fit_validates_on_responses_and_keeps_the_template(trained_run: Path) -> None:
    """Validation logs loss and perplexity; the checkpoint's tokenizer renders chats with the run's template and the
    sample prompts are the held-out conversations' last user turns."""
    metrics = last_metrics(trained_run)
    assert {"val/loss", "val/ppl"} <= set(metrics)
    module = load_task_module(trained_run / "checkpoints" / "last.ckpt")
    assert module.tokenizer.chat_template == DEFAULT_CHAT_TEMPLATE
    users = [m["content"] for line in CHATS.read_text().splitlines() for m in chat_turns(json.loads(line))]
    assert module.sample_prompts and set(module.sample_prompts) <= set(users)


def chat_turns(row: dict) -> list[dict[str, str]]:
    """The user turns of a packaged record."""
    messages = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
    return [m for m in messages if m["role"] == "user"]


def test_generate_chat_answers_one_turn(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`generate --chat --prompt` prints the reply the task gives to that one user turn, on one line."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    main(["generate", "--ckpt", str(ckpt), "--chat", "--prompt", "What is the opposite of hot?"])
    printed = capsys.readouterr().out
    module = load_task_module(ckpt)
    turn = [{"role": "user", "content": "What is the opposite of hot?"}]
    expected = module.chat(turn, dataclasses.replace(module.generation, do_sample=False))
    assert printed == expected + "\n" and "<|im_" not in printed


def test_generate_chat_reads_user_turns_from_stdin(
    trained_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each non-empty stdin line is the next user turn; the second reply sees the first exchange."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    monkeypatch.setattr("sys.stdin", io.StringIO("What is the opposite of up?\n\nWhat colour is the sky?\n"))
    main(["generate", "--ckpt", str(ckpt), "--chat"])
    replies = capsys.readouterr().out.split("\n")
    module = load_task_module(ckpt)
    first = module.chat([{"role": "user", "content": "What is the opposite of up?"}])
    history = [
        {"role": "user", "content": "What is the opposite of up?"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "What colour is the sky?"},
    ]
    assert replies == [first, module.chat(history), ""]


def test_chat_refuses_a_prompt_file(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--chat with --prompt-file is one line on stderr, exit code 2."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    with pytest.raises(SystemExit) as exit_info:
        main(["generate", "--ckpt", str(ckpt), "--chat", "--prompt-file", str(CHATS)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: --chat reads user turns")


def test_a_bad_record_is_one_line(
    run_cli: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record whose messages end with the user is one error line naming file and line (padded batches fit:
    test_llama_lora_chat.py)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "response": "b"}\n{"messages": [{"role": "user", "content": "a"}]}\n')
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", root=tmp_path / "bad", train_path=str(bad))
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"error: {bad}:2: the messages end with a 'user' turn: the last must be 'assistant'"


def test_chat_needs_a_task_that_chats(capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint whose task cannot chat (a language model) is refused with what --chat needs."""
    from tetraformer.cli.chat import chat
    from tetraformer.errors import TetraformerError

    with pytest.raises(TetraformerError, match="--chat needs a chat checkpoint"):
        chat(object(), "lm.ckpt", None, "hi")
    assert capsys.readouterr().out == ""
