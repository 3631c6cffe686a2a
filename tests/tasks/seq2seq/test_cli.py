"""End to end through the CLI, on the reference run (conftest `trained_run`): generation metrics and monitor, the
W&B translations table, predict, test, `generate` and the Hugging Face export from its checkpoint."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import lightning as L
import pytest
import sacrebleu
import torch
from transformers import AutoTokenizer, T5ForConditionalGeneration

from tasks.seq2seq.data import Seq2SeqData
from tasks.seq2seq.module import Seq2Seq
from tests.tasks.seq2seq.conftest import (
    ARCHS,
    GENERATION_METRICS,
    assert_hf_logits_equal,
    reversal_pairs,
    write_jsonl,
)
from tests.training.wandb_records import history_rows
from tetraformer.cli.commands import convert_command, generate_command
from tetraformer.core import TransformerConfig
from tetraformer.training.base.text_generation import TextGenerationConfig
from tetraformer.training.callbacks.spec_handover import DataSpecHandover
from tetraformer.training.checkpointing.loading import load_task_module


def logged(run: Path) -> list[dict[str, str]]:
    """Rows of the run's last metrics.csv."""
    with sorted(run.glob("logs/version_*/metrics.csv"))[-1].open() as f:
        return list(csv.DictReader(f))


def test_validation_logs_generation_metrics_and_monitors_bleu(trained_run: Path) -> None:
    """val/bleu, val/chrf and ROUGE sit beside val/loss; `--run.monitor val/bleu` (max) picks the best checkpoint."""
    rows = [r for r in logged(trained_run) if r.get("val/loss")]
    assert len(rows) == 2
    for key in (f"val/{name}" for name in GENERATION_METRICS):
        assert all(0.0 <= float(r[key]) <= 100.0 for r in rows), key
    assert (trained_run / "checkpoints" / "best.ckpt").is_file()


def test_wandb_run_holds_the_translations_table(trained_run: Path) -> None:
    """Each validation logs val/bleu and a W&B table of source / reference / hypothesis (offline run)."""
    (run_file,) = trained_run.glob("wandb/offline-run-*/run-*.wandb")
    rows = history_rows(run_file)
    assert any("val/translations/_type" in r for r in rows)
    assert any("val/bleu" in r for r in rows)


def test_generation_from_the_checkpoint_equals_the_in_memory_model(tmp_path: Path, pairs_file: Path) -> None:
    """The trained module, its checkpoint and `tetraformer generate --prompt-file` decode the same outputs."""
    L.seed_everything(0)
    arch = TransformerConfig(d_model=32, n_heads=2, n_layers=2, n_decoder_layers=2, d_ff=64, max_len=32, **ARCHS["t5"])
    generation = TextGenerationConfig(max_new_tokens=8, do_sample=False, num_beams=3)
    module = Seq2Seq(arch=arch, generation=generation, val_generate_batches=0)
    data = Seq2SeqData(train_path=str(pairs_file), tokenizer_type="char", vocab_size=100, source_prefix="rev: ")
    trainer = L.Trainer(
        max_steps=15,
        default_root_dir=tmp_path,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        callbacks=[DataSpecHandover(data)],
    )
    trainer.fit(module, datamodule=data)
    sources = [r["source"] for r in reversal_pairs(6, seed=3)]
    in_memory = module.generate(sources)
    trainer.save_checkpoint(tmp_path / "model.ckpt")
    loaded = load_task_module(tmp_path / "model.ckpt")
    assert loaded.source_prefix == "rev: "
    assert loaded.generate(sources) == in_memory
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(sources) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    generate_command(
        ["--ckpt", str(tmp_path / "model.ckpt"), "--prompt-file", str(prompts), "--output", str(out), "--device", "cpu"]
    )
    assert [json.loads(line)["generated"] for line in out.read_text().splitlines()] == in_memory
    greedy = loaded.generate(sources, TextGenerationConfig(max_new_tokens=8, do_sample=False))
    generate_command(
        [
            "--ckpt",
            str(tmp_path / "model.ckpt"),
            "--prompt-file",
            str(prompts),
            "--output",
            str(out),
            "--device",
            "cpu",
            "--num-beams",
            "1",
            "--greedy",
        ]
    )
    assert [json.loads(line)["generated"] for line in out.read_text().splitlines()] == greedy


def test_predict_keeps_fields_and_test_reports_generation_metrics(
    trained_run: Path, run_cli: Callable[..., Path], tmp_path: Path
) -> None:
    """predict writes each record with its generated text; test logs test/bleu equal to sacreBLEU on those outputs."""
    ckpt = str(trained_run / "checkpoints" / "last.ckpt")
    rows = [{**r, "id": i} for i, r in enumerate(reversal_pairs(20, seed=5))]
    test_file = write_jsonl(tmp_path / "test.jsonl", rows)
    out = tmp_path / "predictions.jsonl"
    run_cli("predict", "--ckpt_path", ckpt, "--predictions", str(out), predict_path=str(test_file))
    predicted = [json.loads(line) for line in out.read_text().splitlines()]
    assert [{k: p[k] for k in ("source", "target", "id")} for p in predicted] == rows
    assert all(isinstance(p["generated"], str) for p in predicted)
    evaluated = run_cli("test", "--ckpt_path", ckpt, test_path=str(test_file))
    tested = [r for r in logged(evaluated / "eval" / "test-1") if r.get("test/bleu")][-1]
    hypotheses, references = [p["generated"] for p in predicted], [r["target"] for r in rows]
    assert float(tested["test/chrf"]) == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score, abs=1e-3)
    assert float(tested["test/bleu"]) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score, abs=1e-3)


def test_generate_prompt_prints_the_output_alone(trained_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`generate --prompt` prints the encoder-decoder's output (not the prompt before it), as the module decodes."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    expected = load_task_module(ckpt).generate(["abcd"])[0]
    capsys.readouterr()
    generate_command(["--ckpt", str(ckpt), "--prompt", "abcd", "--device", "cpu"])
    assert capsys.readouterr().out == expected + "\n"


def test_t5_style_model_trained_from_scratch_exports_to_hf(trained_run: Path, tmp_path: Path) -> None:
    """The T5-style architecture the task ships, trained from scratch, is a T5ForConditionalGeneration."""
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    convert_command(["to-hf", str(ckpt), str(tmp_path / "exported")])
    module = load_task_module(ckpt)
    batch = module.tokenizer(["abc", "hgfedc"], padding=True, return_tensors="pt")
    assert_hf_logits_equal(module, tmp_path / "exported", batch, torch.tensor([[1, 5, 9, 7], [1, 8, 6, 6]]))
    hf = T5ForConditionalGeneration.from_pretrained(tmp_path / "exported").eval()  # config.json's token ids:
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "exported")
    sources = ["abc", "hgfedc", "dd"]
    greedy = TextGenerationConfig(max_new_tokens=8, do_sample=False, num_beams=1)
    for source, ours in zip(sources, module.generate(sources, greedy), strict=True):
        ids = hf.generate(**tokenizer([source], return_tensors="pt"), max_new_tokens=8, do_sample=False, num_beams=1)
        assert tokenizer.decode(ids[0], skip_special_tokens=True) == ours
