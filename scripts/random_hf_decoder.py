"""A random-weight Hugging Face decoder of a published shape, saved with a small BPE tokenizer of your text.

    python scripts/random_hf_decoder.py OUT_DIR --shape qwen2.5-0.5b --text configs/instruction_tuning/chat_tiny.jsonl

For measuring what fine-tuning a model of that size costs on a machine without downloading its weights: the
architecture, widths, head counts and vocabulary are the published ones; the weights are random (seed 0) and saved
in bf16, as the published checkpoints are. The tokenizer is trained on `--text` (its lines as plain text), so its
ids stay far below the vocabulary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import transformers

from tetraformer.data import train_tokenizer

SHAPES = {
    "qwen2.5-0.5b": lambda: transformers.Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1e6,
        tie_word_embeddings=True,
    ),
    "smollm2-135m": lambda: transformers.LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=8192,
        rope_theta=1e5,
        tie_word_embeddings=True,
    ),
}


def main() -> None:
    """Build the model and tokenizer and save them to OUT_DIR."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=list(SHAPES), default="qwen2.5-0.5b")
    parser.add_argument("--text", type=Path, required=True, help="a text or JSONL file to train the tokenizer on")
    parser.add_argument("--vocab-size", type=int, default=500)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = args.out / "tokenizer_corpus.txt"
    corpus.write_text(args.text.read_text(encoding="utf-8"), encoding="utf-8")
    train_tokenizer([corpus], "bpe", args.vocab_size, args.out)
    corpus.unlink()
    config = SHAPES[args.shape]()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.to(torch.bfloat16).save_pretrained(args.out)
    count = sum(p.numel() for p in model.parameters())
    print(f"{args.out}: {type(model).__name__}, {count / 1e6:.1f}M parameters (random, bf16)")


if __name__ == "__main__":
    main()
