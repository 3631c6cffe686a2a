"""`generate`: flags built from TextGenerationConfig, the checkpoint's settings as defaults, beams printed."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from tests.lazy_imports import NOT_FOR_GENERATE, loaded_after_each
from tests.tasks.language_modeling.silent import SilentLanguageModel
from tetraformer.cli import main
from tetraformer.cli.commands import add_generation_flags, generation_options
from tetraformer.training.base.text_generation import GenerativeTask, TextGenerationConfig
from tetraformer.training.checkpointing.loading import load_task_module


def parse(*argv: str) -> dict:
    """The decoding options a generate command line sets."""
    parser = argparse.ArgumentParser()
    add_generation_flags(parser)
    return generation_options(parser.parse_args(argv))


def test_every_field_has_a_flag() -> None:
    """Each TextGenerationConfig field is a flag whose dest is the field (so nothing is listed twice)."""
    parser = argparse.ArgumentParser()
    add_generation_flags(parser)
    dests = {action.dest for action in parser._actions}
    assert {f.name for f in dataclasses.fields(TextGenerationConfig)} <= dests
    assert "--max-new-tokens" in parser._option_string_actions and "--greedy" in parser._option_string_actions


def test_flags_parse_into_fields() -> None:
    """Typed values, --greedy switches do_sample off (one beam unless given), repeatable --stop; unset stays unset."""
    assert parse() == {}
    assert parse("--max-new-tokens", "5", "--top-p", "0.5", "--greedy", "--stop", r"\n\n", "--stop", "x") == {
        "max_new_tokens": 5,
        "top_p": 0.5,
        "do_sample": False,
        "num_beams": 1,
        "stop": ["\n\n", "x"],
    }
    assert parse("--greedy", "--num-beams", "4") == {"do_sample": False, "num_beams": 4}
    with pytest.raises(SystemExit):
        parse("--num-beams", "two")


def test_protocol() -> None:
    """LanguageModeling is a GenerativeTask; a task without generate is not."""
    from tasks.language_modeling.module import LanguageModeling

    assert isinstance(LanguageModeling(), GenerativeTask)
    assert not isinstance(SilentLanguageModel(), GenerativeTask)


def test_beams_of_one_prompt_are_printed(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--num-beams 3` prints the prompt and then the best beam, the one the task returns."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    main(["generate", "--ckpt", str(ckpt), "--prompt", "First", "--num-beams", "3", "--max-new-tokens", "6"])
    printed = capsys.readouterr().out
    module = load_task_module(ckpt)
    best = module.generate(["First"], dataclasses.replace(module.generation, num_beams=3, max_new_tokens=6))[0]
    assert best and printed == "First" + best + "\n"


def test_unset_flags_keep_the_checkpoint_settings(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --max-new-tokens the checkpoint's model.generation (8 new tokens here) applies; greedy streams."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    main(["generate", "--ckpt", str(ckpt), "--prompt", "First", "--greedy"])
    printed = capsys.readouterr().out
    module = load_task_module(ckpt)
    assert module.generation.max_new_tokens == 8
    expected = module.generate(["First"], dataclasses.replace(module.generation, do_sample=False))[0]
    assert printed == "First" + expected + "\n" and 0 < len(expected) <= 8


def test_one_prompt_goes_to_output(trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--prompt X --output F` writes F as `--prompt-file` does (one {prompt, generated} line), not the terminal."""
    ckpt = str(trained_run / "checkpoints" / "last.ckpt")
    prompts, from_file, from_prompt = tmp_path / "prompts.txt", tmp_path / "file.jsonl", tmp_path / "prompt.jsonl"
    prompts.write_text("First\n", encoding="utf-8")
    greedy = ["--greedy", "--max-new-tokens", "6"]
    main(["generate", "--ckpt", ckpt, "--prompt-file", str(prompts), "--output", str(from_file), *greedy])
    main(["generate", "--ckpt", ckpt, "--prompt", "First", "--output", str(from_prompt), *greedy])
    records = [json.loads(line) for line in from_prompt.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 1 and records[0]["prompt"] == "First" and records[0]["generated"]
    assert from_prompt.read_text(encoding="utf-8") == from_file.read_text(encoding="utf-8")
    assert capsys.readouterr().out == ""


def test_generate_loads_no_data_or_wandb_stack(trained_run: Path) -> None:
    """A whole `tetraformer generate` on a checkpoint, in a fresh interpreter, then the CLI's other modules
    (`tetraformer --help` loads them) and each generating task's module (what a checkpoint names): no `datasets`,
    W&B, Hugging Face interop or lm-eval (`generate` reads no data file, `evaluate` imports lm-eval when it runs).
    Then, in the same interpreter, reading a text file brings `datasets` in: the probe sees a lazy import when it
    happens."""
    argv = ["generate", "--ckpt", str(trained_run / "checkpoints" / "last.ckpt"), "--prompt", "First"]
    generate = f"from tetraformer.cli import main\nmain({argv + ['--max-new-tokens', '2']!r})"
    modules = (
        "import tetraformer.cli.app, tetraformer.cli.commands, tetraformer.cli.task_loading, tetraformer.cli.evaluate\n"
        "import tetraformer.evaluation.harness, tetraformer.evaluation.scores\n"
        "import tasks.language_modeling.module, tasks.seq2seq.module\n"
        "import tetraformer.training.checkpointing.loading"
    )
    read = (
        "import tempfile, pathlib\nfrom tetraformer.data import read_text\n"
        "path = pathlib.Path(tempfile.mkdtemp()) / 'a.txt'\npath.write_text('some text\\n')\n"
        "read_text(path, cache_dir=path.parent / 'cache')"
    )
    after_generate, after_modules, after_reading = loaded_after_each([generate, modules, read], NOT_FOR_GENERATE)
    assert after_generate == [] and after_modules == []
    assert "datasets" in after_reading
