"""generation_config.json of an export: transformers' `generate` on it decodes and stops as ours does."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
import transformers

from tetraformer.core.config import TransformerConfig
from tetraformer.core.models import CausalLM
from tetraformer.data import train_tokenizer
from tetraformer.data.chat import chat_ready, end_of_turn_id, render_prompt
from tetraformer.interop.convert import export_network
from tetraformer.interop.generation import hf_generation_config
from tetraformer.training.base.text_generation import TextGenerationConfig, generate_text


def chat_tokenizer(tmp_path: Path) -> Any:
    """A char tokenizer with the default chat template and its two tokens."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("user assistant hello tiny world\n" * 5, encoding="utf-8")
    return chat_ready(train_tokenizer([corpus], "char", 100, tmp_path / "tokenizer"))


def always_ending(vocab_size: int, end: int) -> CausalLM:
    """A Llama-shaped decoder whose greedy choice is `end` at every step: the residual stream is the embedding
    (attention and feed-forward write nothing), whose dimension 0 is 1 for every token; the final norm keeps only
    that dimension, and only `end`'s output row reads it."""
    cfg = TransformerConfig.preset(
        "tiny", position="rotary", norm="rmsnorm", activation="swiglu", bias=False, tie_embeddings=False
    )
    net = CausalLM(cfg.replace(vocab_size=vocab_size, n_layers=1)).eval()
    with torch.no_grad():
        net.decoder.layers[0].self_attn.out.weight.zero_()
        net.decoder.layers[0].ffn.down.weight.zero_()
        net.embed.tokens.weight[:, 0] = 1.0
        net.decoder.final_norm.weight.zero_()[0] = 1.0
        net.lm_head.proj.weight.zero_()[end, 0] = 1.0
    return net


def test_transformers_stops_at_the_end_of_turn_as_ours_does(tmp_path: Path) -> None:
    """A chat model that ends its turn at once: ours gives an empty reply; transformers, with only the export's
    defaults, generates <|im_end|> and stops (without generation_config.json it ran on to max_new_tokens)."""
    tokenizer = chat_tokenizer(tmp_path)
    end, eos = end_of_turn_id(tokenizer), tokenizer.eos_token_id
    net = always_ending(len(tokenizer), end)
    decoding = TextGenerationConfig(max_new_tokens=8, do_sample=False)
    prompt = render_prompt(tokenizer, [{"role": "user", "content": "hello"}])
    assert generate_text(net, tokenizer, [prompt], decoding, eos_token_id=(end, eos)) == [""]
    generation = hf_generation_config(dataclasses.asdict(decoding), (end, eos), tokenizer)
    out = export_network(net, tokenizer, tmp_path / "exported", generation=generation)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = transformers.AutoTokenizer.from_pretrained(out)(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        new = theirs.generate(**ids)[0, ids["input_ids"].shape[1] :]
    assert new.tolist() == [end]


def test_sampling_settings_are_written_only_when_sampling() -> None:
    """Greedy: no temperature/top-k/top-p (transformers warns on them); sampling: all three, top_k 0 included
    (transformers' default is 50, ours keeps every token); beams only with beams; one stop id stays an int."""

    class Tokenizer:
        pad_token_id, bos_token_id = 0, 2

    greedy = hf_generation_config(dataclasses.asdict(TextGenerationConfig(do_sample=False)), (3,), Tokenizer())
    assert greedy == {"max_new_tokens": 64, "do_sample": False, "eos_token_id": 3, "pad_token_id": 0, "bos_token_id": 2}
    sampled = hf_generation_config(dataclasses.asdict(TextGenerationConfig()), (5, 3, 5), Tokenizer())
    assert (sampled["temperature"], sampled["top_k"], sampled["top_p"]) == (0.8, 0, 1.0)
    assert sampled["eos_token_id"] == [5, 3] and "num_beams" not in sampled
    beams = hf_generation_config(
        dataclasses.asdict(TextGenerationConfig(do_sample=False, num_beams=3)), (), Tokenizer()
    )
    assert beams["num_beams"] == 3 and "eos_token_id" not in beams
