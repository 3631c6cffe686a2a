"""Exports, in fresh processes through the installed script: `convert to-hf` never writes over a user's files, and
the export of a LoRA-tuned Llama-family chat model replies in transformers exactly as `tetraformer generate` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from tests.processes import failing, tetraformer, write_yaml
from tests.promises.tasks import tiny_task_config
from tests.tasks.instruction_tuning.conftest import qwen2_folder
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


def test_lora_chat_export_replies_as_generate_does(tmp_path: Path) -> None:
    """LoRA on a Qwen2 folder, chat SFT; `generate --chat` from the adapters checkpoint; `convert to-hf`: transformers'
    `generate` on the export, with the export's own defaults and chat template, gives our reply's ids and stops
    where ours stops (at <|im_end|> or eos, which its generation_config.json names)."""
    src = qwen2_folder(tmp_path / "qwen2")
    lora = {"rank": 4, "alpha": 8, "targets": ["q", "k", "v", "o", "ff_in", "ff_out", "head"]}  # head: see below
    model = {"init_from": str(src), "lora": lora, "generation": {"max_new_tokens": REPLY_TOKENS, "do_sample": False}}
    config = tiny_task_config("instruction_tuning", tmp_path / "data", tmp_path / "run", model=model)
    cache = tmp_path / "cache"
    said = tetraformer("fit", "-c", write_yaml(tmp_path / "fit.yaml", config), cache_dir=cache).stderr
    # the folder's tokenizer lacks the chat tokens: their rows grow, said in one line; with `head` adapted, the
    # output projection's <|im_end|> row can move from the mean of the others, where it never wins a greedy choice
    assert f"grew 2 rows (<|im_start|>, <|im_end|>) of {src}'s" in said and "can never end" not in said, said
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    ours = tetraformer("generate", "--ckpt", ckpt, "--chat", "--prompt", QUESTION, cache_dir=cache).stdout
    tetraformer("convert", "to-hf", ckpt, tmp_path / "exported", cache_dir=cache)

    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "exported").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "exported")
    stops = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id]
    saved = json.loads((tmp_path / "exported" / "generation_config.json").read_text(encoding="utf-8"))
    assert saved["eos_token_id"] == stops and saved["do_sample"] is False, saved
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        theirs = exported.generate(**prompt)[0, prompt["input_ids"].shape[1] :].tolist()  # the export's defaults
    reply = ours.rstrip("\n")
    assert tokenizer.decode(theirs, skip_special_tokens=True) == reply
    ended = len(theirs) < REPLY_TOKENS or theirs[-1] in stops
    body = theirs[:-1] if ended and theirs[-1] in stops else theirs
    assert body == tokenizer(reply, add_special_tokens=False)["input_ids"]  # the same ids, not only the same text
    assert all(t not in stops for t in body)  # transformers stopped at the first end token, as ours does
