"""Commands beside the Lightning subcommands: `generate`, `tokenizer train` and `convert`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

log = logging.getLogger(__name__)
TASK_ENTRY_POINTS = "tetraformer.tasks"  # pyproject.toml: `name = "package.module:TaskClass"` per task


def generate_command(argv: list[str]) -> None:
    """`tetraformer generate --ckpt PATH (--prompt TEXT | --prompt-file FILE --output OUT.jsonl)`."""
    parser = argparse.ArgumentParser(
        prog="tetraformer generate", description="Generate text from a checkpoint."
    )
    parser.add_argument(
        "--ckpt", required=True, help="a Tetraformer .ckpt (it holds the model and tokenizer)"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="one prompt; the output streams to the terminal")
    source.add_argument(
        "--prompt-file", type=Path, help="one prompt per line (or JSONL with a 'prompt' field)"
    )
    parser.add_argument("--output", type=Path, help="JSONL file for --prompt-file results (default: stdout)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--num-beams", type=int, default=1)
    parser.add_argument("--length-penalty", type=float, default=1.0)
    parser.add_argument("--greedy", action="store_true", help="pick the most likely token (no sampling)")
    parser.add_argument(
        "--stop", action="append", default=[], help=r"stop string, \n and \t escapes allowed (repeatable)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    args = parser.parse_args(argv)

    from tetraformer.training.checkpoint import load_task_module
    from tetraformer.training.text_generation import TextGenerationConfig

    module = load_task_module(args.ckpt, map_location=args.device)
    config = TextGenerationConfig(
        max_new_tokens=args.max_new_tokens, do_sample=not args.greedy and args.num_beams == 1,
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, num_beams=args.num_beams,
        length_penalty=args.length_penalty, seed=args.seed, stop=[_unescape(s) for s in args.stop],
    )  # fmt: skip
    if args.prompt is not None:
        sys.stdout.write(args.prompt)
        module.generate([args.prompt], config, on_text=_write_stdout)
        sys.stdout.write("\n")
        return
    prompts = read_prompts(args.prompt_file)
    out = args.output.open("w", encoding="utf-8") if args.output else sys.stdout
    try:
        for start in range(0, len(prompts), args.batch_size):
            chunk = prompts[start : start + args.batch_size]
            for prompt, text in zip(chunk, module.generate(chunk, config), strict=True):
                out.write(json.dumps({"prompt": prompt, "generated": text}, ensure_ascii=False) + "\n")
    finally:
        if args.output:
            out.close()
            log.info("wrote %d generations to %s", len(prompts), args.output)


def read_prompts(path: Path) -> list[str]:
    """Prompts from a text file (one per line) or JSONL (a 'prompt' field per line); errors name the line."""
    if not path.is_file():
        raise SystemExit(f"error: prompt file not found: {path}")
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                prompts.append(json.loads(line)["prompt"])
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise SystemExit(
                    f"error: {path}:{number}: expected a JSON object with a 'prompt' field ({err})"
                ) from err
        else:
            prompts.append(line)
    if not prompts:
        raise SystemExit(f"error: {path} holds no prompts")
    return prompts


def tokenizer_command(argv: list[str]) -> None:
    """`tetraformer tokenizer train --input FILES --type bpe|wordpiece|unigram|char --vocab-size N --output DIR`."""
    parser = argparse.ArgumentParser(prog="tetraformer tokenizer", description="Tokenizer tools.")
    sub = parser.add_subparsers(dest="action", required=True)
    train = sub.add_parser("train", help="train a tokenizer on your text files")
    train.add_argument("--input", nargs="+", required=True, help="files, directories or globs")
    train.add_argument("--type", choices=["bpe", "wordpiece", "unigram", "char"], default="bpe")
    train.add_argument("--vocab-size", type=int, default=8000)
    train.add_argument("--lowercase", action="store_true")
    train.add_argument("--output", type=Path, required=True, help="directory for tokenizer.json and HF files")
    args = parser.parse_args(argv)

    from tetraformer.data import DataError, resolve_files, train_tokenizer

    try:
        files = [f for spec in args.input for f in resolve_files(spec)]
        tokenizer = train_tokenizer(files, args.type, args.vocab_size, args.output, lowercase=args.lowercase)
    except DataError as err:
        raise SystemExit(f"error: {err}") from err
    log.info(
        "trained a %s tokenizer with %d tokens on %d files -> %s",
        args.type,
        len(tokenizer),
        len(files),
        args.output,
    )


def convert_command(argv: list[str]) -> None:
    """`tetraformer convert from-hf SRC_DIR OUT_CKPT` and `tetraformer convert to-hf CKPT OUT_DIR`."""
    parser = argparse.ArgumentParser(
        prog="tetraformer convert", description="Hugging Face checkpoints in and out."
    )
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
    to_hf.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)

    from tetraformer.interop import load_hf
    from tetraformer.interop.convert import export_network, import_checkpoint
    from tetraformer.interop.files import read_config
    from tetraformer.payload import save_checkpoint

    if args.direction == "from-hf":
        architecture = (read_config(args.src_dir).get("architectures") or [""])[0]
        task = args.task or task_for_architecture(architecture)
        save_checkpoint(import_checkpoint(args.src_dir, task, args.tokenizer), args.out_ckpt)
        log.info("%s (%s) -> %s (task: %s)", args.src_dir, architecture, args.out_ckpt,
                 task or "none; use it as --model.init_from")  # fmt: skip
    else:
        from tetraformer.training.checkpoint import load_network

        net, tokenizer = load_network(args.ckpt)
        out = export_network(net, tokenizer, args.out_dir)
        log.info("%s -> %s (%s)", args.ckpt, out, load_hf(out).architecture)


def task_for_architecture(architecture: str) -> str | None:
    """Class path of the task that declares it serves a Hugging Face architecture (`hf_architectures`).

    Tasks are found through the `tetraformer.tasks` entry-point group, so the platform names none of them.
    """
    for entry in entry_points(group=TASK_ENTRY_POINTS):
        task = entry.load()
        if architecture in getattr(task, "hf_architectures", ()):
            return f"{task.__module__}.{task.__qualname__}"
    return None


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
}
