"""Local lm-eval tasks for the evaluation tests (task YAMLs over JSONL files), and a tiny causal-LM checkpoint.

The tasks: CHOICE, 20 four-way multiple-choice questions (loglikelihood); TEXT, documents scored whole (rolling
loglikelihood, some longer than the model's 64 positions, so they take several windows); CONTINUE, prompts continued
greedily up to a newline (generation). The checkpoint is a random Llama-shaped core CausalLM (weights drawn large
enough for clear winners between choices) with a character tokenizer, written by make_checkpoint: no fit.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import torch
import yaml

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.data import train_tokenizer
from tetraformer.payload import make_checkpoint, save_checkpoint

CHOICE, TEXT, CONTINUE = "tiny_choice", "tiny_text", "tiny_continue"
LANGUAGE_MODELING = "tasks.language_modeling.module.LanguageModeling"
WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "far", "away", "red", "blue", "sun", "moon", "tree"]
MAX_LEN = 64
ARCH: dict[str, Any] = dict(
    d_model=32, n_heads=2, n_layers=2, d_ff=64, max_len=MAX_LEN, dropout=0.0, attn_dropout=0.0, position="rotary"
)
ARCH |= dict(norm="rmsnorm", activation="swiglu", bias=False)  # exported as a LlamaForCausalLM
NEW_TOKENS = 8  # the generation task's max_gen_toks
FIELDS: dict[str, dict[str, Any]] = {  # each task's YAML fields beside its data and metrics
    CHOICE: {"output_type": "multiple_choice", "doc_to_text": "{{question}}", "doc_to_choice": "choices"},
    TEXT: {"output_type": "loglikelihood_rolling", "doc_to_text": "", "doc_to_target": "{{text}}"},
    CONTINUE: {"output_type": "generate_until", "doc_to_text": "{{prompt}}", "doc_to_target": "{{target}}"},
}
FIELDS[CHOICE]["doc_to_target"] = "answer"
FIELDS[CONTINUE]["generation_kwargs"] = {"until": ["\n"], "do_sample": False, "max_gen_toks": NEW_TOKENS}
METRICS: dict[str, dict[str, tuple[str, bool]]] = {  # each task's metrics: (aggregation, higher is better)
    CHOICE: {"acc": ("mean", True), "acc_norm": ("mean", True)},
    TEXT: {
        "word_perplexity": ("weighted_perplexity", False),
        "byte_perplexity": ("weighted_perplexity", False),
        "bits_per_byte": ("bits_per_byte", False),
    },
    CONTINUE: {"exact_match": ("mean", True)},
}


def sentence(rng: random.Random, words: int) -> str:
    """Words of WORDS, space-separated."""
    return " ".join(rng.choice(WORDS) for _ in range(words))


def task_rows(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Each task's documents."""
    questions = [
        {"question": sentence(rng, 3) + "?", "choices": [" " + sentence(rng, 1 + i % 3) for i in range(4)]}
        for _ in range(20)
    ]
    for number, row in enumerate(questions):
        row["answer"] = number % 4
    texts = [{"text": sentence(rng, n)} for n in (3, 8, 20, 30)]  # 20 and 30 words: over 64 characters
    prompts = [{"prompt": sentence(rng, 2), "target": " the"} for _ in range(6)]
    return {CHOICE: questions, TEXT: texts, CONTINUE: prompts}


def write_tasks(root: Path) -> Path:
    """The three task YAMLs and their JSONL files under `root` (the --include_path folder), their datasets cached
    under root/hf_cache; `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in task_rows(random.Random(0)).items():
        data = root / f"{name}.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        spec = {"task": name, "dataset_path": "json", "test_split": "test", **FIELDS[name]}
        spec["dataset_kwargs"] = {"data_files": {"test": str(data)}, "cache_dir": str(root / "hf_cache")}
        spec["metric_list"] = [
            {"metric": metric, "aggregation": how, "higher_is_better": higher}
            for metric, (how, higher) in METRICS[name].items()
        ]
        (root / f"{name}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return root


def tiny_checkpoint(root: Path) -> Path:
    """A language-modelling checkpoint of a random Llama-shaped CausalLM with a character tokenizer of WORDS."""
    corpus = root / "corpus.txt"
    corpus.write_text(" ".join(WORDS) + " ?\n", encoding="utf-8")
    tokenizer = train_tokenizer([corpus], "char", 100, root / "tokenizer")
    net = CausalLM(TransformerConfig.preset("tiny", vocab_size=len(tokenizer), **ARCH))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return save_checkpoint(make_checkpoint(net, LANGUAGE_MODELING, tokenizer), root / "lm.ckpt")
