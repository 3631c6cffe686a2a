"""`--data.streaming true` through the CLI: a fit on Parquet shards, validated on held-out documents, that a
resume continues exactly."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tests.training.forked_ranks import logged_to, own_port
from tests.training.resume_runs import checkpoint, same_weights
from tetraformer.cli import main
from tetraformer.training.checkpointing.stream_loader import StreamLoader

STREAM = {"streaming": True, "val_documents": 4}


def documents(n: int) -> list[str]:
    """n short documents that differ."""
    return [f"{i}: {TEXT}" for i in range(n)]


def test_streamed_fit_on_parquet_shards_validates_held_out_documents(
    run_cli: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A glob of Parquet shards trains as a stream for max_steps, validates on its first documents, and its
    checkpoint holds the stream's position; the run tokenizer learned from the start of the stream; progress lines
    count steps against max_steps, with no epoch fraction (a stream has no length)."""
    texts = documents(30)
    for shard in range(3):
        pq.write_table(pa.table({"id": list(range(10)), "text": texts[shard::3]}), tmp_path / f"shard{shard}.parquet")
    caplog.set_level(logging.INFO, "tetraformer.training.callbacks.progress_lines")
    args = ["--trainer.max_steps", "6", "--run.progress_every_n_steps", "3"]
    run = run_cli("fit", *args, train_path=str(tmp_path / "*.parquet"), **STREAM)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert [line.split(" | ")[0] for line in lines] == ["step 3/6", "step 6/6"] and "epoch" not in lines[0]
    assert checkpoint(run)["global_step"] == 6
    position = checkpoint(run)["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["ranks"][0]
    assert position["taken"] == 6 and position["workers"] == 1
    assert (run / "tokenizer_corpus.txt").read_text(encoding="utf-8").startswith(texts[0])
    metrics = (next(run.rglob("metrics.csv"))).read_text(encoding="utf-8")
    assert "val/loss" in metrics


def test_streamed_run_resumed_ends_with_the_uninterrupted_weights(
    run_cli: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped at step 3 (mid shuffle window, two workers taking turns) and resumed with `--ckpt_path last`, a
    streamed run ends with the weights of the run that never stopped; the same resume of a copy that drops the
    stream's position (negative control) ends elsewhere."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents(40)), encoding="utf-8")
    options = {"train_path": str(corpus), "num_workers": 2, "shuffle_blocks": 5, **STREAM}
    straight = run_cli("fit", "--trainer.max_steps", "7", root=tmp_path / "straight", **options)
    resumed = run_cli("fit", "--trainer.max_steps", "3", root=tmp_path / "resumed", **options)
    dropped = Path(shutil.copytree(resumed, tmp_path / "dropped"))
    run_cli("fit", "--trainer.max_steps", "7", "--ckpt_path", "last", root=resumed, **options)
    monkeypatch.setattr(StreamLoader, "load_state_dict", lambda self, state: None)
    run_cli("fit", "--trainer.max_steps", "7", "--ckpt_path", "last", root=dropped, **options)
    assert checkpoint(resumed)["global_step"] == checkpoint(dropped)["global_step"] == 7
    assert same_weights(resumed, straight) and not same_weights(dropped, straight)


def test_a_stream_without_max_steps_is_one_line(
    run_cli: Callable[..., Path], text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Epochs of a stream cannot end: a fit bounded by max_epochs only says to set --trainer.max_steps."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", "--trainer.max_steps", "-1", "--trainer.max_epochs", "2", train_path=str(text_file), **STREAM)
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: --data.streaming true reads the training files as a stream") and line.endswith(
        "set --trainer.max_steps or --run.max_tokens"
    )


def test_a_token_budget_bounds_a_stream_and_sizes_its_decay(run_cli: Callable[..., Path], text_file: Path) -> None:
    """A stream with --run.max_tokens and no max_steps trains 3 steps of 8 blocks of 16 tokens (300 tokens) and
    its cosine rate ends there, at min_lr_ratio x lr."""
    cosine = ["--model.optim.schedule", "cosine", "--model.optim.warmup_steps", "1"]
    budget = ["--trainer.max_steps", "-1", "--run.max_tokens", "300", *cosine]
    run = run_cli("fit", *budget, train_path=str(text_file), documents="line", **STREAM)
    ckpt = checkpoint(run)
    assert ckpt["global_step"] == 3 and ckpt["callbacks"]["Throughput"]["tokens_seen"] == 3 * 8 * 16
    assert ckpt["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(3e-3 * 0.1)


@pytest.mark.distributed
def test_two_ddp_ranks_stream_their_own_shares_and_resume_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two gloo ranks on the CPU read disjoint shares (their positions differ) into one run (one tokenizer, trained
    by rank 0 and read by rank 1; one checkpoint holding both positions), the schedule's lines (6 steps are few) are
    logged once, by rank 0, and a run stopped at step 3 and resumed ends with the weights of the two-rank run that
    never stopped. The ranks are forked from this process (`ddp_fork`, tests/training/forked_ranks.py): each runs
    the trainer's data preparation, setup and steps as a rank the CLI's `ddp` launcher starts would."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents(40)), encoding="utf-8")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    own_port(monkeypatch)

    def fit(run: Path, *args: str) -> None:
        """`fit` of the stream config on two forked ranks, into `run`."""
        config = tmp_path / f"{run.name}.yaml"
        config.write_text(yaml.safe_dump(tiny_config(run, train_path=str(corpus), shuffle_blocks=5, **STREAM)))
        main(["fit", "-c", str(config), "--trainer.strategy", "ddp_fork", "--trainer.devices", "2", *args])

    with logged_to(tmp_path / "straight.log") as log:
        fit(tmp_path / "straight", "--trainer.max_steps", "6")
    said = log.read_text()
    assert said.count("schedule has 6 optimizer steps") == 1 and said.count("trained a char tokenizer") == 1, said
    assert checkpoint(tmp_path / "straight")["global_step"] == 6
    assert (tmp_path / "straight" / "tokenizer" / "tokenizer.json").is_file()
    fit(tmp_path / "resumed", "--trainer.max_steps", "3")
    fit(tmp_path / "resumed", "--trainer.max_steps", "6", "--ckpt_path", "last")
    ranks = checkpoint(tmp_path / "straight")["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["ranks"]
    assert [rank["taken"] for rank in ranks] == [6, 6] and ranks[0]["states"] != ranks[1]["states"]
    assert same_weights(tmp_path / "resumed", tmp_path / "straight")
