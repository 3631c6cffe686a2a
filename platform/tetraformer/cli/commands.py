"""Commands beside the Lightning subcommands: `generate`, `tokenizer train`, `convert`, `attention`, `compare`,
`prepare`, `vectors`, `demo-data`, `summary`, `evaluate`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import typing
from collections.abc import Callable
from functools import partial
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tetraformer.cli.chat import chat
from tetraformer.cli.option_errors import output_file
from tetraformer.cli.parser import CommandParser
from tetraformer.cli.prepare import prepare_command
from tetraformer.cli.task_loading import load_generative_task
from tetraformer.errors import ConfigError, OptionError
from tetraformer.safe_loading import add_trust_flag
from tetraformer.training.base.predictions import GENERATED

if TYPE_CHECKING:
    from tetraformer.training.base.text_generation import GenerativeTask, TextGenerationConfig

log = logging.getLogger(__name__)
TASK_ENTRY_POINTS = "tetraformer.tasks"  # pyproject.toml: `name = "package.module:TaskClass"` per task


def generate_command(argv: list[str]) -> None:
    """`tetraformer generate --ckpt PATH (--prompt TEXT | --prompt-file FILE | --chat) [--output OUT.jsonl]`."""
    parser = CommandParser(prog="tetraformer generate", description="Generate text from a checkpoint.")
    parser.add_argument("--ckpt", required=True, help="a Tetraformer .ckpt (it holds the model and tokenizer)")
    parser.add_argument("--tokenizer", help="tokenizer folder or tokenizer.json (default: the checkpoint's own)")
    parser.add_argument(
        "--chat",
        action="store_true",
        help="converse with an instruction-tuned checkpoint: --prompt is one user turn, else each stdin line is one",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--prompt", help="one prompt; without --output, sampled or greedy output streams to the terminal"
    )
    source.add_argument("--prompt-file", type=Path, help="one prompt per line (or JSONL with a 'prompt' field)")
    parser.add_argument(
        "--output",
        type=Path,
        help="JSONL file of {prompt, generated} per prompt (default: --prompt streams to the "
        "terminal, --prompt-file writes JSONL to stdout)",
    )
    add_generation_flags(parser)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    add_trust_flag(parser)
    args = parser.parse_args(argv)
    if args.chat and (args.prompt_file is not None or args.output is not None):
        raise ConfigError(
            "--chat reads user turns from --prompt or stdin and writes replies to stdout: drop "
            "--prompt-file and --output"
        )
    if not args.chat and args.prompt is None and args.prompt_file is None:
        raise ConfigError("one of --prompt, --prompt-file or --chat is required")
    if args.batch_size < 1:
        raise ConfigError(f"--batch-size {args.batch_size}: must be 1 or more")
    if args.output is not None:
        output_file(args.output, "--output")  # before the checkpoint loads: a mistake shows at once

    task = load_generative_task(args.ckpt, args.tokenizer, args.device)
    config = generation_config(task.generation, generation_options(args))
    if args.chat:
        chat(task, args.ckpt, config, args.prompt)
        return
    if args.prompt is not None and args.output is None:
        stream_generation(task, args.prompt, config)
        return
    prompts = [args.prompt] if args.prompt is not None else read_prompts(args.prompt_file)
    out = args.output.open("w", encoding="utf-8") if args.output else sys.stdout
    try:
        for start in range(0, len(prompts), args.batch_size):
            chunk = prompts[start : start + args.batch_size]
            for prompt, text in zip(chunk, task.generate(chunk, config), strict=True):
                out.write(json.dumps({"prompt": prompt, GENERATED: text}, ensure_ascii=False) + "\n")
    finally:
        if args.output:
            out.close()
            log.info("wrote %d generations to %s", len(prompts), args.output)


def stream_generation(task: GenerativeTask, prompt: str, config: TextGenerationConfig) -> None:
    """Write one prompt's generation to the terminal as it is decoded (a decoder's continues the prompt)."""
    if not hasattr(task.net, "encode"):  # an encoder-decoder's output stands alone
        sys.stdout.write(prompt)
    task.generate([prompt], config, on_text=_write_stdout)
    sys.stdout.write("\n")


def add_generation_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per TextGenerationConfig field (`max_new_tokens` -> `--max-new-tokens`); unset flags stay unset."""
    from tetraformer.training.base.text_generation import TextGenerationConfig

    group = parser.add_argument_group(
        "decoding", "unset options keep the checkpoint's `model.generation` settings (defaults shown)"
    )
    hints = typing.get_type_hints(TextGenerationConfig)
    for option in dataclasses.fields(TextGenerationConfig):
        default = option.default_factory() if option.default is dataclasses.MISSING else option.default
        name, kind = option.name.replace("_", "-"), hints[option.name]
        kwargs: dict[str, Any] = {"dest": option.name, "default": argparse.SUPPRESS}
        if kind is bool:  # a switch to the value other than the default
            flag = option.metadata.get("flag", f"--{'no-' if default else ''}{name}")
            group.add_argument(flag, action="store_const", const=not default, help=option.metadata["help"], **kwargs)
            continue
        if typing.get_origin(kind) is list:
            kwargs.update(action="append", type=_unescape)
        else:
            kwargs["type"] = (typing.get_args(kind) or (kind,))[0]  # `int | None` -> int
        group.add_argument(f"--{name}", help=f"{option.metadata['help']} (default: {default!r})", **kwargs)


def generation_options(args: argparse.Namespace) -> dict[str, Any]:
    """The decoding options set on the command line, by TextGenerationConfig field name."""
    from tetraformer.training.base.text_generation import TextGenerationConfig

    options = {f.name: getattr(args, f.name) for f in dataclasses.fields(TextGenerationConfig) if hasattr(args, f.name)}
    if options.get("do_sample") is False:  # --greedy: one beam, whatever beam width the checkpoint decodes with
        options.setdefault("num_beams", 1)
    return options


def generation_config(defaults: Any, options: dict[str, Any]) -> Any:
    """The task's decoding settings with the flags' values; a value it refuses names the flag (`--max-new-tokens`)."""
    try:
        return dataclasses.replace(defaults, **options)
    except OptionError as err:
        raise ConfigError(f"--{err.option.replace('_', '-')} {err.value!r}: {err.allowed}") from None


def read_prompts(path: Path) -> list[str]:
    """Prompts from a text file (one per line) or JSONL (a 'prompt' string per line); errors name the line."""
    from tetraformer.data import DataError, iter_lines, iter_records
    from tetraformer.data.records import json_type

    if not path.is_file():
        raise DataError("prompt file not found", path)
    if path.suffix != ".jsonl":
        prompts = [line.rstrip("\r\n") for _, line in iter_lines(path) if line.strip()]
        if not prompts:
            raise DataError("the file holds no prompts", path)
        return prompts
    prompts = []
    for record in iter_records(path, "jsonl", ["prompt"]):
        if not isinstance(record.data["prompt"], str):
            raise record.error(f"field 'prompt' must be a string, got {json_type(record.data['prompt'])}")
        prompts.append(record.data["prompt"])
    return prompts


def tokenizer_command(argv: list[str]) -> None:
    """`tetraformer tokenizer train --input FILES --type bpe|wordpiece|unigram|char --vocab-size N --output DIR`
    (a --vocab-size the text cannot support is capped, with one warning line; --no-vocab-cap keeps it)."""
    parser = CommandParser(prog="tetraformer tokenizer", description="Tokenizer tools.")
    sub = parser.add_subparsers(dest="action", required=True)
    train = sub.add_parser("train", help="train a tokenizer on your text files")
    train.add_argument("--input", nargs="+", required=True, help="files, directories or globs")
    train.add_argument("--type", choices=["bpe", "wordpiece", "unigram", "char"], default="bpe")
    train.add_argument("--vocab-size", type=int, default=8000)
    train.add_argument("--lowercase", action="store_true")
    train.add_argument(
        "--no-vocab-cap", action="store_true", help="keep --vocab-size even where the text supports fewer pieces"
    )
    train.add_argument(
        "--no-tokenize-chinese-chars",
        action="store_true",
        help="wordpiece: keep CJK ideographs inside their words (text split into words, e.g. Japanese morphemes)",
    )
    train.add_argument(
        "--zero-digits", action="store_true", help="read every digit as 0, so numbers share pieces by their length"
    )
    train.add_argument(
        "--min-count", type=int, help="times the text must show a piece for the cap to count it (default: MIN_COUNT, 5)"
    )
    train.add_argument("--output", type=Path, required=True, help="directory for tokenizer.json and HF files")
    args = parser.parse_args(argv)
    if args.no_tokenize_chinese_chars and args.type != "wordpiece":
        parser.error(f"--no-tokenize-chinese-chars needs --type wordpiece, not {args.type}")
    chinese_chars = not args.no_tokenize_chinese_chars

    from tetraformer.data import resolve_files, train_tokenizer
    from tetraformer.data.tokenizer import SPECIAL_VOCAB, training_texts
    from tetraformer.data.vocab_cap import cap_vocab_size

    files = [f for spec in args.input for f in resolve_files(spec)]
    size = args.vocab_size
    if not args.no_vocab_cap:
        texts = partial(training_texts, files, "text", "utf-8")  # read afresh by each count
        options = {"option": "--vocab-size", "opt_out": "--no-vocab-cap", "chinese_chars": chinese_chars}
        options["zero_digits"] = args.zero_digits
        if args.min_count is not None:  # else the cap's own MIN_COUNT
            options["min_count"] = args.min_count
        size = cap_vocab_size(texts, args.type, size, len(SPECIAL_VOCAB), args.lowercase, **options)
    settings = {"chinese_chars": chinese_chars, "zero_digits": args.zero_digits}
    tokenizer = train_tokenizer(files, args.type, size, args.output, args.lowercase, **settings)
    log.info(
        "trained a %s tokenizer with %d tokens on %d files -> %s",
        args.type,
        len(tokenizer),
        len(files),
        args.output,
    )


def convert_command(argv: list[str]) -> None:
    """`tetraformer convert from-hf SRC_DIR OUT_CKPT`, `convert to-hf CKPT OUT_DIR`, `convert to-peft CKPT OUT_DIR`."""
    parser = argparse.ArgumentParser(prog="tetraformer convert", description="Hugging Face checkpoints in and out.")
    sub = parser.add_subparsers(dest="direction", required=True)
    from_hf = sub.add_parser("from-hf", help="a Hugging Face model directory -> a Tetraformer checkpoint")
    from_hf.add_argument("src_dir", type=Path)
    from_hf.add_argument("out_ckpt", type=Path)
    from_hf.add_argument(
        "--task",
        help="task class path the checkpoint serves (default: the task that declares the architecture)",
    )
    from_hf.add_argument(
        "--tokenizer",
        type=Path,
        help="tokenizer directory or tokenizer.json to store (default: SRC_DIR's own)",
    )
    to_hf = sub.add_parser("to-hf", help="a Tetraformer checkpoint -> a Hugging Face model directory")
    to_hf.add_argument("ckpt", type=Path)
    to_hf.add_argument("out_dir", type=Path, help="a new or empty folder, or a previous export (replaced whole)")
    to_peft = sub.add_parser("to-peft", help="a LoRA checkpoint's adapters -> a PEFT adapter folder")
    to_peft.add_argument("ckpt", type=Path)
    to_peft.add_argument("out_dir", type=Path, help="a new or empty folder, or a previous export (replaced whole)")
    to_peft.add_argument("--base", help="its base_model_name_or_path (default: the base's path the checkpoint records)")
    for direction in (from_hf, to_hf, to_peft):
        add_trust_flag(direction)
    args = parser.parse_args(argv)

    if args.direction in ("to-hf", "to-peft"):
        from tetraformer.cli.export import export_adapters, export_checkpoint

        if args.direction == "to-peft":
            export_adapters(args.ckpt, args.out_dir, args.base)
        else:
            export_checkpoint(args.ckpt, args.out_dir)
        return
    from tetraformer.interop.convert import import_checkpoint
    from tetraformer.interop.files import read_config
    from tetraformer.payload import save_checkpoint

    architecture = (read_config(args.src_dir).get("architectures") or [""])[0]
    task = args.task or task_for_architecture(architecture)
    save_checkpoint(import_checkpoint(args.src_dir, task, args.tokenizer), args.out_ckpt)
    log.info(
        "%s (%s) -> %s (task: %s)",
        args.src_dir,
        architecture,
        args.out_ckpt,
        task or "none; use it as --model.init_from",
    )


def task_for_architecture(architecture: str) -> str | None:
    """Class path of the task that declares it serves a Hugging Face architecture (`hf_architectures`).

    Tasks are found through the `tetraformer.tasks` entry-point group, so the platform names none of them.
    """
    for entry in entry_points(group=TASK_ENTRY_POINTS):
        task = entry.load()
        if architecture in getattr(task, "hf_architectures", ()):
            return f"{task.__module__}.{task.__qualname__}"
    return None


def attention_command(argv: list[str]) -> None:
    """`tetraformer attention ...`: attention maps of any checkpoint (tetraformer.cli.attention)."""
    from tetraformer.cli.attention import draw_attention

    draw_attention(argv)


def compare_command(argv: list[str]) -> None:
    """`tetraformer compare -c COMPARISON.yaml ...`: variants side by side on equal budgets (tetraformer.compare)."""
    from tetraformer.cli.compare import compare_main

    compare_main(argv)


def vectors_command(argv: list[str]) -> None:
    """`tetraformer vectors --input FILES --output DIR`: word vectors counted from text (tetraformer.cli.vectors)."""
    from tetraformer.cli.vectors import count_vectors_main

    count_vectors_main(argv)


def evaluate_command(argv: list[str]) -> None:
    """`tetraformer evaluate --ckpt CKPT --tasks NAMES ...`: lm-evaluation-harness scores (tetraformer.cli.evaluate)."""
    from tetraformer.cli.evaluate import evaluate_main

    evaluate_main(argv)


def _unescape(text: str) -> str:
    """Turn the \\n and \\t a shell passes literally into newline and tab."""
    return text.replace("\\n", "\n").replace("\\t", "\t")


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


COMMANDS: dict[str, Callable[[list[str]], None]] = {
    "generate": generate_command,
    "tokenizer": tokenizer_command,
    "convert": convert_command,
    "attention": attention_command,
    "compare": compare_command,
    "prepare": prepare_command,
    "vectors": vectors_command,
    "evaluate": evaluate_command,
}
