"""generation_config.json of an export: the decoding defaults and stop tokens `tetraformer generate` uses, in
Hugging Face's names, so transformers' `generate` on the export stops and decodes as ours does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import GenerationConfig


def hf_generation_config(
    decoding: Mapping[str, Any], stop_ids: Sequence[int], tokenizer: Any, decoder_start: int | None = None
) -> dict[str, Any]:
    """generation_config.json entries from a task's decoding options (TextGenerationConfig's fields) and the ids
    its replies end at (a chat model's end-of-turn token and eos).

    Only what transformers reads the same way is written: sampling settings only when sampling (top_k always:
    transformers' default 50 is not our 0, all tokens), beam settings only with beams; the seed and stop strings
    have no counterpart that works without the tokenizer at generate time.
    """
    config: dict[str, Any] = {"max_new_tokens": decoding["max_new_tokens"], "do_sample": decoding["do_sample"]}
    if decoding["do_sample"]:
        config |= {k: decoding[k] for k in ("temperature", "top_k", "top_p")}
    if decoding["num_beams"] > 1:
        config |= {k: decoding[k] for k in ("num_beams", "length_penalty")}
    ids = list(dict.fromkeys(stop_ids))
    if ids:
        config["eos_token_id"] = ids[0] if len(ids) == 1 else ids
    for name in ("pad_token_id", "bos_token_id"):
        if getattr(tokenizer, name, None) is not None:
            config[name] = getattr(tokenizer, name)
    if decoder_start is not None:
        config["decoder_start_token_id"] = decoder_start
    return config


def write_generation_config(out_dir: str | Path, config: Mapping[str, Any]) -> None:
    """Write generation_config.json through transformers' own class (which checks the settings agree)."""
    GenerationConfig(**config).save_pretrained(out_dir)
