"""A value an option does not allow ends `tetraformer` with ONE `error:` line naming the option, exit code 2.

The tables are unit tests of the checks themselves: each row's section (trainer, model, data, run) is parsed as the
CLI parses it (jsonargparse on the section's class, over the task's tiny test config) and built by its class, with the
platform's one-line wording (config_errors.one_line, option_errors.instantiation_error / check_trainer_ranges /
trainer_option_error). One row per path (parse, instantiate, Trainer construction) goes through `main` end to end.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonargparse import Namespace

from tests.option_refusals import Refusals
from tetraformer.cli import main
from tetraformer.cli.commands import generation_config
from tetraformer.cli.option_errors import (
    check_init_from,
    instantiation_error,
    run_folder,
    trainer_option_error,
)
from tetraformer.errors import ConfigError, OptionError
from tetraformer.training.base.text_generation import TextGenerationConfig

PRECISIONS = ("auto", "32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true")


def row(option: str, value: str, *words: str, extra: tuple[str, ...] = ()) -> Any:
    """One table row: `OPTION VALUE` (and `extra` arguments) is refused in a line naming OPTION and these words."""
    return pytest.param([*extra, option, value], option, words, id=f"{option}={value}")


TEXT_CLASSIFICATION = [
    # --- the Trainer: Lightning's own checks, and the ranges Lightning takes without a word ----------------------
    row("--trainer.max_steps", "-5", "-5", "non-negative integer or -1"),
    row("--trainer.max_steps", "many", "'many' is not a valid int"),
    row("--trainer.max_epochs", "-3", "non-negative integer or -1"),
    row("--trainer.max_epochs", "2.5", "'2.5' is not a valid int"),
    row("--trainer.min_epochs", "-1", "0 or more"),
    row("--trainer.min_steps", "-4", "0 or more"),
    row("--trainer.max_time", "abc", "'abc'", "DD:HH:MM:SS"),
    row("--trainer.limit_train_batches", "-1", "[0.0, 1.0] or an int"),
    row("--trainer.limit_train_batches", "1.5", "[0.0, 1.0] or an int"),
    row("--trainer.limit_val_batches", "-0.5", "[0.0, 1.0] or an int"),
    row("--trainer.limit_test_batches", "-2", "[0.0, 1.0] or an int"),
    row("--trainer.limit_predict_batches", "-1", "[0.0, 1.0] or an int"),
    row("--trainer.overfit_batches", "-1", "[0.0, 1.0] or an int"),
    row("--trainer.val_check_interval", "0", "more than 0"),
    row("--trainer.val_check_interval", "1.5", "[0.0, 1.0] or an int"),
    row(
        "--trainer.val_check_interval",
        "0.5",
        "check_val_every_n_epoch",
        extra=("--trainer.check_val_every_n_epoch", "null"),
    ),
    row("--trainer.check_val_every_n_epoch", "0", "1 or more, or null"),
    row("--trainer.num_sanity_val_steps", "-2", "-1 (every validation batch)"),
    row("--trainer.log_every_n_steps", "-1", "0 or more"),
    row("--trainer.accumulate_grad_batches", "0", "1 or more"),
    row("--trainer.gradient_clip_val", "-1", "0 or more"),
    row("--trainer.gradient_clip_algorithm", "foo", "value", "norm"),
    row("--trainer.precision", "bf17", "'bf17' is not one of", *PRECISIONS),
    row("--trainer.precision", "8", "is not one of", *PRECISIONS),
    # --- LoRA: options without a rank, a rank without a base ------------------------------------------------------
    row("--model.lora.alpha", "32", "--model.lora.rank is 0", "--model.lora.rank 8"),
    row("--model.lora.targets", "[q, v]", "--model.lora.rank is 0", "--model.lora.rank 8"),
    row("--model.lora.rank", "8", "--model.init_from is not set", "--model.lora.save merged"),
    row("--model.lora.dora", "true", "--model.lora.rank is 0", "--model.lora.rank 8"),
    row("--model.lora.adapters", "peft_dir", "adapts the model it was trained on", "--model.init_from"),
    row("--trainer.devices", "0", "not a valid input"),
    row("--trainer.devices", "-2", "int > 0"),
    row("--trainer.num_nodes", "0", "positive integer"),
    row("--trainer.accelerator", "tpuu", "'tpuu'", "cpu", "cuda"),
    row("--trainer.strategy", "foo", "'foo'", "ddp"),
    row("--trainer.fast_dev_run", "-1", ">= 0"),
    row("--trainer.fast_dev_run", "x", "not a valid int or bool"),
    row("--trainer.deterministic", "maybe", "warn", "bool"),
    row("--trainer.enable_checkpointing", "maybe", "'maybe'"),
    row("--trainer.reload_dataloaders_every_n_epochs", "-1", ">= 0"),
    # --- the architecture (TransformerConfig) ------------------------------------------------------------------
    row("--model.arch.n_heads", "5", "must divide d_model=32", "d_head"),
    row("--model.arch.n_heads", "0", "1 or more"),
    row("--model.arch.d_model", "0", "1 or more"),
    row("--model.arch.d_model", "wide", "not a valid int"),
    row("--model.arch.n_layers", "0", "1 or more"),
    row("--model.arch.d_ff", "-1", "1 or more"),
    row("--model.arch.d_head", "0", "1 or more"),
    row("--model.arch.max_len", "0", "1 or more"),
    row("--model.arch.vocab_size", "-1", "0 or more"),
    row("--model.arch.type_vocab_size", "-1", "0 or more"),
    row("--model.arch.n_decoder_layers", "-1", "0 or more"),
    row("--model.arch.dropout", "1.5", "0 or more and less than 1"),
    row("--model.arch.attn_dropout", "-0.1", "0 or more and less than 1"),
    row("--model.arch.ffn_dropout", "1", "0 or more and less than 1"),
    row("--model.arch.norm_eps", "0", "more than 0"),
    row("--model.arch.rope_base", "0", "more than 0"),
    row("--model.arch.rope_fraction", "2", "more than 0 and at most 1"),
    row("--model.arch.n_kv_heads", "3", "must divide n_heads=2"),
    row("--model.arch.n_kv_heads", "0", "1 or more"),
    row("--model.arch.sliding_window", "0", "1 or more"),
    row(
        "--model.arch.rope_scaling", '{"rope_type": "dynamic", "factor": 2}', "needs rope_type one of", "llama3", "yarn"
    ),
    row("--model.arch.rope_scaling", '{"rope_type": "llama3", "factor": 8}', "needs", "low_freq_factor"),
    row("--model.arch.relative_buckets", "0", "1 or more"),
    row("--model.arch.init_std", "-1", "0 or more"),
    row("--model.arch.n_channels", "0", "1 or more"),
    row("--model.arch.image_size", "30", "multiple of patch_size=8", extra=("--model.arch.patch_size", "8")),
    row("--model.arch.position", "bogus", "'bogus' is not one of", "rotary", "alibi"),
    row("--model.arch.activation", "bogus", "swiglu"),
    # --- the optimizer -----------------------------------------------------------------------------------------
    row("--model.optim.lr", "-1", "0 or more"),
    row("--model.optim.lr", "fast", "not a valid float"),
    row("--model.optim.eps", "0", "more than 0"),
    row("--model.optim.weight_decay", "-1", "0 or more"),
    row("--model.optim.warmup_steps", "-1", "0 or more"),
    row("--model.optim.min_lr_ratio", "2", "from 0 to 1"),
    row("--model.optim.warmup_fraction", "1", "0 or more and less than 1"),
    row(
        "--model.optim.warmup_fraction",
        "0.1",
        "must be 0 when warmup_steps is set",
        extra=("--model.optim.warmup_steps", "5"),
    ),
    row("--model.optim.betas", "[1.5,0.9]", "each 0 or more and less than 1"),
    row("--model.optim.schedule", "sometimes", "cosine", "noam"),
    # --- the task module ---------------------------------------------------------------------------------------
    row("--model.label_smoothing", "1.5", "0 or more and less than 1"),
    row("--model.threshold", "0", "more than 0 and less than 1"),
    row("--model.threshold", "2", "more than 0 and less than 1"),
    row("--model.top_k", "0", "1 or more"),
    row("--model.class_weights", "[1,-1]", "more than 0"),
    row("--model.pooling", "bogus", "'bogus' is not one of", "cls", "mean"),
    row(
        "--model.pooling", "cls", "does not fit a decoder backbone", "last, mean", extra=("--model.backbone", "decoder")
    ),
    row("--model.backbone", "bogus", "encoder_decoder"),
    # --- the data ----------------------------------------------------------------------------------------------
    row("--data.batch_size", "0", "1 or more"),
    row("--data.batch_size", "-1", "1 or more"),
    row("--data.batch_size", "two", "not a valid int"),
    row("--data.num_workers", "-1", "0 or more"),
    row("--data.val_fraction", "0", "more than 0 and less than 1"),
    row("--data.val_fraction", "1.5", "more than 0 and less than 1"),
    row("--data.vocab_size", "0", "1 or more"),
    row("--data.max_length", "0", "1 or more"),
    row("--data.encoding", "klingon", "an encoding Python knows"),
    row("--data.tokenizer_type", "bogus", "wordpiece", "char"),
    row(
        "--data.tokenize_chinese_chars",
        "false",
        "needs tokenizer_type wordpiece",
        extra=("--data.tokenizer_type", "bpe"),
    ),
    row("--data.format", "xml", "csv", "jsonl"),
    # --- the run section ---------------------------------------------------------------------------------------
    row("--run.early_stopping_patience", "-1", "0 or more"),
    row("--run.max_tokens", "0", "1 or more"),
    row("--run.collective_timeout_s", "0", "more than 0"),
    row("--run.save_every_n_steps", "0", "1 or more"),
    row("--run.keep_every_n_steps", "0", "1 or more"),
    row("--run.save_every_minutes", "-1", "more than 0"),
    row("--run.peak_tflops", "0", "more than 0"),
    row("--run.peak_tflops", "fast", "auto", "float"),
    row("--run.monitor_mode", "up", "min, max"),
    row("--run.wandb", "maybe", "offline", "disabled"),
    row("--run.on_nonfinite", "ignore", "stop, skip"),
]

OTHER_TASKS = [
    ("language_modeling", row("--data.block_size", "0", "1 or more")),
    ("language_modeling", row("--model.arch.n_decoder_layers", "2", "must be 0", "decoder-only")),
    ("language_modeling", row("--model.generation.max_new_tokens", "0", "1 or more")),
    ("language_modeling", row("--model.generation.temperature", "0", "more than 0")),
    ("language_modeling", row("--model.generation.top_p", "0", "more than 0 and at most 1")),
    ("language_modeling", row("--model.generation.num_beams", "0", "1 or more")),
    ("language_modeling", row("--data.documents", "sentence", "file, paragraph, line")),
    ("masked_lm", row("--data.max_length", "3", "4 or more")),
    ("masked_lm", row("--data.mlm_probability", "1", "more than 0 and less than 1")),
    ("masked_lm", row("--model.top_k", "0", "1 or more")),
    ("seq2seq", row("--model.arch.n_decoder_layers", "0", "1 or more", "encoder-decoder")),
    ("seq2seq", row("--data.max_source_length", "0", "1 or more")),
    ("seq2seq", row("--data.max_target_length", "-1", "1 or more")),
    ("seq2seq", row("--data.noise_density", "1", "more than 0 and less than 1")),
    ("seq2seq", row("--data.mean_span_length", "0.5", "1 or more")),
    ("seq2seq", row("--data.extra_ids", "-1", "0 or more")),
    ("seq2seq", row("--model.val_generate_batches", "-1", "0 or more")),
    ("seq2seq", row("--model.table_rows", "-1", "0 or more")),
    ("token_classification", row("--data.max_length", "2", "3 or more")),
    ("token_classification", row("--data.stride", "-1", "less than max_length=48")),
    ("token_classification", row("--data.stride", "48", "less than max_length=48")),
    ("token_classification", row("--data.context", "-1", "0 or more")),
    ("token_classification", row("--data.mention_copies", "-1", "0 or more")),
    ("token_classification", row("--data.mention_replace_prob", "0", "in (0, 1]")),
    ("token_classification", row("--data.tag_scheme", "IOB9", "IOB2", "BIOES")),
    ("token_classification", row("--model.decode", "bogus", "argmax, constrained")),
    ("image_classification", row("--data.image_size", "0", "1 or more")),
    ("image_classification", row("--data.mean", "[0.5,0.5,0.5]", "needs 1 value(s), one per channel")),
    ("image_classification", row("--data.std", "[0]", "more than 0")),
    ("image_classification", row("--data.std", "[0.5]", "goes with mean")),
    ("image_classification", row("--data.crop_padding", "-1", "0 or more")),
    ("image_classification", row("--data.resized_crop_scale", "2", "from 0 to 1")),
    ("image_classification", row("--data.erase_prob", "1.5", "from 0 to 1")),
    ("image_classification", row("--data.mixup_alpha", "-1", "0 or more")),
    ("image_classification", row("--data.channels", "2", "1, 3")),
    ("image_classification", row("--model.top_k", "0", "1 or more")),
    ("image_classification", row("--model.attention_images", "-1", "0 or more")),
]


@pytest.fixture(scope="module")
def refusal(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, list[str], str], str]:
    """`refusal(TASK, ARGS, OPTION)`: the one line refusing ARGS over TASK's tiny config (option_refusals); fails the
    test if they are accepted."""
    refusals = Refusals(tmp_path_factory.mktemp("options"))

    def line(task: str, args: list[str], option: str) -> str:
        told = refusals.line(task, args, option)
        if told is None:
            pytest.fail(f"{task}: {' '.join(args)} was accepted")
        return told

    return line


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI expecting exit code 2; stderr's one `error:` line, its last, with no traceback before it."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], lines
    assert not any(line.startswith("Traceback") for line in lines)
    return lines[-1]


def task_config(tmp_path: Path, task: str) -> Path:
    """The task's tiny test config over a one-line training file (never read: every mistake comes first)."""
    train = tmp_path / "train.txt"
    train.write_text("one line\n", encoding="utf-8")
    tiny_config = importlib.import_module(f"tests.tasks.{task}.conftest").tiny_config
    config = tmp_path / f"{task}.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path / "run", train_path=str(train))))
    return config


@pytest.mark.parametrize(("args", "option", "words"), TEXT_CLASSIFICATION)
def test_text_classification_value_mistakes(
    args: list[str], option: str, words: tuple[str, ...], refusal: Callable[[str, list[str], str], str]
) -> None:
    """A wrong type, a negative, a zero or an impossible combination: one line naming the option and what it takes."""
    line = refusal("text_classification", args, option)
    assert option in line and all(word in line for word in words), line


@pytest.mark.parametrize(
    ("task", "args", "option", "words"), [pytest.param(task, *p.values, id=f"{task}:{p.id}") for task, p in OTHER_TASKS]
)
def test_task_value_mistakes(
    task: str, args: list[str], option: str, words: tuple[str, ...], refusal: Callable[[str, list[str], str], str]
) -> None:
    """Each task's own options are checked the same way, before any training."""
    line = refusal(task, args, option)
    assert option in line and all(word in line for word in words), line


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ["--model.arch.d_model", "wide"],
            "error: --model.arch.d_model: 'wide' is not a valid int (see tetraformer fit --help)",
            id="parse",
        ),
        pytest.param(
            ["--model.arch.n_heads", "5"],
            "error: --model.arch.n_heads 5: must divide d_model=32 (or set d_head)",
            id="instantiate",
        ),
        pytest.param(
            ["--trainer.max_steps", "-5"],
            "error: --trainer.max_steps -5: max_steps must be a non-negative integer or -1 (infinite steps). "
            "You passed in -5.",
            id="trainer",
        ),
    ],
)
def test_each_path_ends_the_command_in_one_line(
    args: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end, one row per path the tables check at the unit level: refused while parsing, while building the
    config's classes, and while building the Trainer; each the command's one `error:` line, exit code 2."""
    assert error_line(capsys, ["fit", "-c", str(task_config(tmp_path, "text_classification")), *args]) == line


def test_run_directory_under_a_file_ends_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fit` with default_root_dir under a regular file: one line with the option and the reason."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file\n")
    config = task_config(tmp_path, "text_classification")
    line = error_line(capsys, ["fit", "-c", str(config), "--trainer.default_root_dir", str(blocker / "run")])
    reason = f"{blocker} is a file, not a folder; give a folder that can be created"
    assert line == f"error: --trainer.default_root_dir {blocker / 'run'}: {reason}"


def test_run_directory_where_nothing_can_be_created() -> None:
    """default_root_dir where nothing can be created (under /proc): the option and the reason."""
    if not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    root = Path("/proc/tetraformer-run")
    with pytest.raises(ConfigError) as err:
        run_folder(root, "--trainer.default_root_dir")
    assert str(err.value).startswith(f"--trainer.default_root_dir {root}: cannot create ")


def test_yaml_syntax_error_names_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config that is not YAML: its path and the line of the problem, not jsonargparse's unnamed string."""
    config = tmp_path / "broken.yaml"
    config.write_text("trainer:\n  max_steps: 2\n  devices: [1\nmodel: {}\n", encoding="utf-8")
    line = error_line(capsys, ["fit", "-c", str(config)])
    assert line.startswith(f"error: {config}:4: not valid YAML: ") and "line 3" in line


@pytest.mark.parametrize("where", ["under_a_file", "a_folder"])
def test_generate_output_that_cannot_be_written(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`generate --output` under a regular file, or naming a folder: refused before the checkpoint is read."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello\n")
    output = prompts / "out.jsonl" if where == "under_a_file" else tmp_path
    argv = ["generate", "--ckpt", str(tmp_path / "absent.ckpt"), "--prompt-file", str(prompts), "--output", str(output)]
    line = error_line(capsys, argv)
    assert line.startswith(f"error: --output {output}: ")
    assert (f"{prompts} is a file, not a folder" if where == "under_a_file" else "is a folder") in line


def test_generate_flags_are_named_in_their_errors() -> None:
    """A decoding value the config refuses is told with its flag's spelling."""
    with pytest.raises(ValueError, match="^--max-new-tokens 0: must be 1 or more$"):
        generation_config(TextGenerationConfig(), {"max_new_tokens": 0})
    assert generation_config(TextGenerationConfig(), {"top_k": 5}).top_k == 5


def test_a_missing_init_from_names_the_option(tmp_path: Path) -> None:
    """A fit's --model.init_from that is not there: one line with the option and the path (not "checkpoint not
    found"), checked before the data is read; a file or folder that is there passes."""
    missing = tmp_path / "pretrained"
    with pytest.raises(ConfigError) as err:
        check_init_from(str(missing))
    assert str(err.value).startswith(f"--model.init_from {missing}: no such file or folder"), err.value
    missing.mkdir()
    check_init_from(str(missing))
    check_init_from(None)


def test_a_bug_keeps_its_traceback() -> None:
    """Errors that are not the user's (no TetraformerError behind them, no Trainer option named) are left alone."""
    config = Namespace(model=Namespace(init_args=Namespace(top_k=3)))
    assert instantiation_error(ValueError("index out of range"), config) is None
    assert trainer_option_error(TypeError("unsupported operand"), {"max_steps": 5}) is None
    assert trainer_option_error(ValueError("max_steps broke"), {"max_steps": -1}) is None  # -1: the default, not set


def test_the_option_is_found_in_the_owners_section() -> None:
    """Two options of one name: the one in the section whose keys are the raising class's parameters is named."""

    class Data:
        def __init__(self, vocab_size: int, batch_size: int) -> None: ...

    config = Namespace(
        model=Namespace(init_args=Namespace(arch=Namespace(vocab_size=0, d_model=8))),
        data=Namespace(init_args=Namespace(vocab_size=0, batch_size=4)),
    )
    wrapped = ValueError("jsonargparse's report")
    wrapped.__cause__ = OptionError(Data, "vocab_size", 0, "must be 1 or more")
    assert str(instantiation_error(wrapped, config)) == "--data.vocab_size 0: must be 1 or more"


def test_an_internal_error_in_a_class_is_not_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain ValueError raised while a config class is built (a bug) still ends in its traceback."""
    from tetraformer.training.base.optim import OptimizerConfig

    def broken(self: OptimizerConfig) -> None:
        raise ValueError("a bug in the optimizer config")

    monkeypatch.setattr(OptimizerConfig, "__post_init__", broken)
    with pytest.raises(ValueError, match="Does not validate|a bug in the optimizer config"):
        main(["fit", "-c", str(task_config(tmp_path, "text_classification"))])
    assert "error:" not in capsys.readouterr().err
