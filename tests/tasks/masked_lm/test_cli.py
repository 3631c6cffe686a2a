"""End to end through the CLI: the reference run's checkpoint alone tests, fills masks and exports to Hugging Face;
NSP runs; a Hugging Face BertForMaskedLM converts and starts a run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers

from tests.cli_runner import checkpoint_command, predictions
from tests.hf_folders import tiny_bert
from tests.tasks.masked_lm.conftest import MASKED_LM, fill_masks, metric_rows
from tetraformer.cli import main
from tetraformer.core import MaskedLM
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.training.checkpointing.loading import load_task_module


def test_the_run_validates_and_its_checkpoint_carries_the_tokenizer(
    trained_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """Validation logs masked loss and accuracy; the checkpoint stores the run's tokenizer; `test --ckpt_path`
    needs only it and reports masked loss and accuracy."""
    run, corpus = trained_run
    assert metric_rows(run, "val/mlm_accuracy") and metric_rows(run, "val/loss")
    ckpt = run / "checkpoints" / "last.ckpt"
    module = load_task_module(ckpt)
    assert isinstance(module.net, MaskedLM) and module.net.nsp is None
    assert module.tokenizer.get_vocab() == transformers.AutoTokenizer.from_pretrained(run / "tokenizer").get_vocab()
    tested = checkpoint_command("test", ckpt, tmp_path / "test", "--data.test_path", str(corpus))
    accuracy = metric_rows(tested, "test/mlm_accuracy")
    assert accuracy and 0.0 <= accuracy[-1] <= 1.0 and metric_rows(tested, "test/loss")


def test_predict_gives_candidates_for_each_mask_token(trained_run: tuple[Path, Path], tmp_path: Path) -> None:
    """`predict` gives, per line, the top-5 candidates of each mask token (BERT's `[MASK]` read as `<mask>`)."""
    fill_masks(trained_run[0] / "checkpoints" / "last.ckpt", tmp_path)


def test_predict_text_without_a_mask_is_one_error_line(
    trained_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fill-mask line with no mask token stops `predict` with one line naming the file and the text."""
    run, _ = trained_run
    texts = tmp_path / "unmasked.txt"
    texts.write_text("seven seven <mask> seven .\nnine nine nine .\n", encoding="utf-8")
    with pytest.raises(SystemExit) as ended:
        predictions(run / "checkpoints" / "last.ckpt", texts, tmp_path / "predict")
    assert ended.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: {texts}: text 2 ('nine nine nine .') has no mask token to fill in: write <mask>")


def test_export_gives_bert_for_masked_lm_with_our_logits(trained_run: tuple[Path, Path], tmp_path: Path) -> None:
    """`convert to-hf` writes a BertForMaskedLM whose logits equal ours on padded, two-segment input."""
    run, _ = trained_run
    ckpt = run / "checkpoints" / "last.ckpt"
    main(["convert", "to-hf", str(ckpt), str(tmp_path / "hf")])
    theirs = transformers.BertForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    ours = load_task_module(ckpt).net
    ids = torch.randint(5, ours.cfg.vocab_size, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    types = (torch.arange(12) >= 6).long().expand(3, -1)
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        torch.testing.assert_close(ours(ids, mask.bool(), types), expected, atol=1e-4, rtol=0)
    assert (tmp_path / "hf" / "tokenizer.json").is_file()


def test_next_sentence_run_logs_nsp_accuracy(run_cli: Callable[..., Path], corpus: Path) -> None:
    """`--model.next_sentence true` with whole-word masking trains on pairs and reports NSP accuracy."""
    run = run_cli("fit", "--trainer.max_steps", "10", next_sentence=True, train_path=str(corpus), whole_word_mask=True)
    nsp = metric_rows(run, "val/nsp_accuracy")
    assert nsp and 0.0 <= nsp[-1] <= 1.0
    assert metric_rows(run, "val/mlm_accuracy") and metric_rows(run, "train/nsp_loss")
    assert load_task_module(run / "checkpoints" / "last.ckpt").net.nsp is not None


def test_from_hf_bert_for_masked_lm_gives_a_checkpoint_test_accepts(
    run_cli: Callable[..., Path], corpus: Path, tmp_path: Path
) -> None:
    """A tiny random BertForMaskedLM converts to a masked_lm checkpoint with transformers' logits; `test` runs it."""
    src = tmp_path / "hf_bert"
    hf = tiny_bert(src, [corpus], transformers.BertForMaskedLM)
    ckpt = tmp_path / "bert.ckpt"
    main(["convert", "from-hf", str(src), str(ckpt)])
    assert read_checkpoint(ckpt)[PAYLOAD_KEY]["class_path"] == MASKED_LM
    ours = load_task_module(ckpt).net
    ids = torch.randint(5, hf.config.vocab_size, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(input_ids=ids).logits, atol=1e-4, rtol=0)
    run_cli("test", "--ckpt_path", str(ckpt), test_path=str(corpus))
    assert metric_rows(tmp_path / "run" / "eval" / "test-1", "test/loss")
    run_cli("validate", "--model.init_from", str(src), train_path=str(corpus), tokenizer=str(src))
    assert metric_rows(tmp_path / "run", "val/mlm_accuracy")  # init_from reads the HF directory itself
