"""Exports, in fresh processes through the installed script: `convert from-hf` makes a checkpoint of a Hugging Face
GPT-2 folder, and `convert to-hf` never writes over a user's files. (Every task's export loading in transformers with
our outputs, and a LoRA chat model's export replying as `generate --chat` does: tests/promises/
test_checkpoint_commands.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from tests.processes import failing, tetraformer
from tetraformer.data import train_tokenizer

pytestmark = pytest.mark.slow  # every test starts the installed script (seconds of imports on 2 cores)
QUESTION = "What is the opposite of hot?"
REPLY_TOKENS = 24  # the chat run's decoding budget: both sides use it from the checkpoint / the export's defaults


@pytest.fixture(scope="module")
def gpt2_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A language-modelling checkpoint converted from a tiny random GPT-2 folder (no fit needed)."""
    root = tmp_path_factory.mktemp("gpt2")
    corpus = root / "corpus.txt"
    corpus.write_text("hello tiny world of tokens\n" * 10, encoding="utf-8")
    tokenizer = train_tokenizer([corpus], "char", 100, root / "hf")
    config = transformers.GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=16, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(root / "hf")
    tetraformer("convert", "from-hf", root / "hf", root / "gpt2.ckpt", cache_dir=root / "cache")
    return root / "gpt2.ckpt"


def test_to_hf_refuses_a_folder_of_the_users_files(gpt2_ckpt: Path, tmp_path: Path) -> None:
    """A non-empty folder that is no export (even one holding a config.json) is refused in one line, untouched."""
    mine = tmp_path / "here" / "mine"
    mine.mkdir(parents=True)
    files = {"config.json": '{"mine": true}', "notes.txt": "keep me"}
    for name, text in files.items():
        (mine / name).write_text(text, encoding="utf-8")
    said = failing("convert", "to-hf", gpt2_ckpt, mine, cache_dir=tmp_path / "cache")
    assert "is not empty and not a previous export" in said and "notes.txt" in said, said
    assert {p.name: p.read_text(encoding="utf-8") for p in mine.iterdir()} == files
    assert [p.name for p in mine.parent.iterdir()] == ["mine"]  # no temporary folder left beside it


def test_to_hf_writes_a_new_folder_and_replaces_a_previous_export(gpt2_ckpt: Path, tmp_path: Path) -> None:
    """A new folder is written whole; exporting into it again replaces it (and a killed export's leftovers go)."""
    out = tmp_path / "here" / "exported"
    tetraformer("convert", "to-hf", gpt2_ckpt, out, cache_dir=tmp_path / "cache")
    first = sorted(p.name for p in out.iterdir())
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"} <= set(first)
    stale = out.parent / ".exported.partial-999999999-x"  # a pid no process has: an export killed mid-way
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half")
    tetraformer("convert", "to-hf", gpt2_ckpt, out, cache_dir=tmp_path / "cache")
    assert sorted(p.name for p in out.iterdir()) == first
    assert [p.name for p in out.parent.iterdir()] == ["exported"]
    transformers.AutoModelForCausalLM.from_pretrained(out)
